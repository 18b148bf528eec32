# -*- coding: utf-8 -*-
"""Write the docs site's guides: docs/docsite/rst/<name>.rst from each docs/<name>.md.

The guides are written in Markdown (docs/*.md, read on GitHub and in the tarball); antsibull-docs and the
Ansible docsite read a collection's extra docs only as RST under docs/docsite/rst/, listed in
docs/docsite/extra-docs.yml. This script converts each guide with pandoc (the pypandoc-binary wheel, pinned in
requirements-test.txt and scripts/docs-requirements.txt, so every machine writes the same bytes), gives it the
label antsibull-docs asks for (ansible_collections.gangplank.platform.docsite.<name>), and turns every mention of
another guide (docs/<name>.md) into a link to it.

    python scripts/docs_guides.py           write docs/docsite/rst/*.rst (and remove those whose .md is gone)
    python scripts/docs_guides.py --check   exit 1, naming them, when a written file differs from what would be written,
                                            or when a guide is missing from docs/docsite/extra-docs.yml

scripts/docs.sh runs the first; scripts/test.sh (step docs) the second.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
RST = os.path.join(DOCS, "docsite", "rst")
EXTRA_DOCS = os.path.join(DOCS, "docsite", "extra-docs.yml")
PREFIX = "ansible_collections.gangplank.platform.docsite."
GUIDE = re.compile(r"docs/([A-Za-z0-9_-]+)\.md")


def label(name: str) -> str:
    return PREFIX + name.replace("-", "_")


def pandoc() -> str:
    try:
        import pypandoc  # pylint: disable=import-outside-toplevel
    except ImportError:
        sys.exit("docs_guides.py: pypandoc-binary is missing (pip install -r requirements-test.txt)")
    return pypandoc.get_pandoc_path()


def link_guides(markdown: str, names: set[str]) -> str:
    """Every mention of docs/<name>.md outside code blocks (fenced, or indented by eight spaces as a code block in a
    list item is) becomes a raw RST :ref: to that guide (pandoc's raw_attribute), so that pandoc sizes table cells with
    the link in them."""
    def ref(match):
        name = re.match(r"`?docs/([A-Za-z0-9_-]+)", match.group(0)).group(1)
        if name not in names:
            return match.group(0)
        return "`` :ref:`docs/%s.md <%s>` ``{=rst}" % (name, label(name))

    out = []
    fence = None
    for line in markdown.split("\n"):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        elif fence is None and not line.startswith(" " * 8):
            line = re.sub(r"`docs/[A-Za-z0-9_-]+\.md`|(?<![`/\w])docs/[A-Za-z0-9_-]+\.md(?![`\w])", ref, line)
        out.append(line)
    return "\n".join(out)


TIGHT_BEFORE = re.compile(r"""(?<=[(\[{"']) (?=:ref:`)""")
TIGHT_AFTER = re.compile(r"(?<=>`) (?=[,.;:!?)\]}\"'])")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _tight(text: str, start_indent: int | None) -> str:
    text = TIGHT_AFTER.sub("", TIGHT_BEFORE.sub("", text))
    # A line that pandoc wrapped just before a link starts with the link's space: one column deeper than its
    # paragraph, which RST reads as a block quote.
    if start_indent is not None and text.startswith(" " * (start_indent + 1) + ":ref:`"):
        text = text[1:]
    return text


def tighten(rst: str) -> str:
    """pandoc puts a space on each side of a raw RST link; take it away next to punctuation and at the start of a
    line. In a grid table row each cell keeps its width (the spaces go to the cell's end)."""
    lines = rst.split("\n")
    for number, line in enumerate(lines):
        if ":ref:`" not in line:
            continue
        if line.startswith("|"):
            cells = line.split("|")
            for index, cell in enumerate(cells):
                tight = _tight(cell, 1 if cell.startswith("  :ref:`") else None).rstrip()
                if tight != cell.rstrip():
                    cells[index] = tight + " " * (len(cell) - len(tight))
            lines[number] = "|".join(cells)
        else:
            previous = lines[number - 1] if number else ""
            lines[number] = _tight(line, _indent(previous) if previous.strip() else None)
    return "\n".join(lines)


CODE = re.compile(r"^( *)\.\. code:: (json|yaml)$")


def code_languages(rst: str) -> str:
    """A json or yaml example that is not whole (``...`` for a value, a vault tag) is highlighted as
    javascript or YAML+Jinja, which rstcheck does not parse; a mermaid diagram is shown as its text (the site
    loads no script)."""
    lines = rst.split("\n")
    for number, line in enumerate(lines):
        match = CODE.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        body = []
        for following in lines[number + 1:]:
            if following.strip() and _indent(following) <= indent:
                break
            body.append(following[indent + 3:])
        text = "\n".join(body)
        try:
            if match.group(2) == "json":
                json.loads(text)
            else:
                yaml.safe_load(text)
        except ValueError:
            lines[number] = line.replace(match.group(2), "javascript" if match.group(2) == "json" else "yaml+jinja")
        except yaml.YAMLError:
            lines[number] = line.replace("yaml", "yaml+jinja")
    return "\n".join(lines).replace(".. code:: mermaid\n", ".. code:: text\n")


def convert(binary: str, name: str, names: set[str]) -> str:
    with open(os.path.join(DOCS, name + ".md"), encoding="utf-8") as handle:
        markdown = link_guides(handle.read(), names)
    # gfm without auto_identifiers: pandoc would give every heading a label of its own, which antsibull-docs
    # refuses (every label of a collection's docs starts with its prefix) and which nothing links to.
    rst = subprocess.run([binary, "--from", "gfm-gfm_auto_identifiers+raw_attribute", "--to", "rst", "--columns",
                          "110"], input=markdown, check=True, capture_output=True, text=True).stdout
    rst = code_languages(tighten(rst))
    header = (".. Written by scripts/docs_guides.py from docs/%s.md: edit that file, then run scripts/docs.sh.\n\n"
              ".. _%s:\n\n" % (name, label(name)))
    return header + rst.rstrip("\n") + "\n"


def guides() -> list[str]:
    return sorted(name[:-3] for name in os.listdir(DOCS) if name.endswith(".md"))


def listed_guides() -> set[str]:
    with open(EXTRA_DOCS, encoding="utf-8") as handle:
        extra = yaml.safe_load(handle) or {}
    return {entry for section in extra.get("sections") or [] for entry in section.get("toctree") or []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a guide is stale")
    args = parser.parse_args()
    binary = pandoc()
    names = guides()
    wanted = {name + ".rst": convert(binary, name, set(names)) for name in names}
    present = set(os.listdir(RST)) if os.path.isdir(RST) else set()
    problems = []
    unlisted = sorted(set(names) - listed_guides())
    if unlisted:
        problems.append("docs/docsite/extra-docs.yml does not list %s" % ", ".join(unlisted))
    for name in sorted(present - set(wanted)):
        if name.endswith(".rst"):
            if args.check:
                problems.append("docs/docsite/rst/%s has no docs/%s.md" % (name, name[:-4]))
            else:
                os.remove(os.path.join(RST, name))
    for name, text in sorted(wanted.items()):
        path = os.path.join(RST, name)
        old = None
        if name in present:
            with open(path, encoding="utf-8") as handle:
                old = handle.read()
        if old == text:
            continue
        if args.check:
            problems.append("docs/docsite/rst/%s is not what docs/%s.md gives" % (name, name[:-4]))
        else:
            os.makedirs(RST, exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            print("docs_guides.py: wrote docs/docsite/rst/%s" % name)
    for problem in problems:
        print("docs_guides.py: %s" % problem, file=sys.stderr)
    if problems and args.check:
        print("docs_guides.py: run scripts/docs.sh (or scripts/docs_guides.py) and commit docs/docsite/",
              file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
