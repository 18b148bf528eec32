# -*- coding: utf-8 -*-
"""Write each role's README.md from its meta/argument_specs.yml (one source: the README cannot drift).

    python scripts/role_readme.py           rewrite roles/*/README.md
    python scripts/role_readme.py --check   exit 1 naming each README that differs from what it would write

The README holds the main entry point's description (its paragraphs; one starting "1. " is a numbered step),
a table of its options (type, default, meaning) and the same for every other entry point. Ansible's
documentation markup is turned into Markdown: C(x), V(x), O(x), RV(x), E(x), M(x), P(x#type) become code,
I(x) italics, B(x) bold, U(url) and L(text,url) links. Standard library and PyYAML only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = "<!-- Written by scripts/role_readme.py from meta/argument_specs.yml: edit that file, then run the script. -->"
CODE_MARKUP = re.compile(r"\b(?:C|V|O|RV|E|M)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
PLUGIN_MARKUP = re.compile(r"\bP\(([^()#]*)#[a-z_]+\)")


def markdown(text):
    """Ansible documentation markup in one description line, as Markdown."""
    text = " ".join(str(text).split())
    text = re.sub(r"\bL\(([^(),]*),\s*([^()]*)\)", r"[\1](\2)", text)
    text = re.sub(r"\bU\(([^()]*)\)", r"<\1>", text)
    text = PLUGIN_MARKUP.sub(r"`\1`", text)
    text = CODE_MARKUP.sub(r"`\1`", text)
    text = re.sub(r"\bI\(([^()]*)\)", r"*\1*", text)
    text = re.sub(r"\bB\(([^()]*)\)", r"**\1**", text)
    return text


def lines_of(description):
    if description is None:
        return []
    return description if isinstance(description, list) else [description]


def paragraphs(description):
    """The description as Markdown: one paragraph per line, consecutive numbered steps as one list."""
    out = []
    for line in lines_of(description):
        text = markdown(line)
        numbered = re.match(r"^\d+\. ", text) is not None
        if out and not (numbered and re.match(r"^\d+\. ", out[-1].splitlines()[-1])):
            out.append("")
        if out and numbered and out[-1] != "":
            out[-1] += "\n" + text
        else:
            out.append(text)
    return "\n".join(out).replace("\n\n\n", "\n\n")


def cell(text):
    return markdown(text).replace("|", "\\|")


def default_of(spec):
    if "default" not in spec:
        return "see meaning"
    value = spec["default"]
    shown = yaml.safe_dump(value, default_flow_style=True, width=10 ** 6).strip()
    if shown.endswith("\n...") or shown.endswith(" ..."):
        shown = shown.rsplit("...", 1)[0].strip()
    return "`%s`" % shown.replace("|", "\\|")


def type_of(spec):
    kind = spec.get("type", "str")
    if kind == "list" and spec.get("elements"):
        kind = "list of %s" % spec["elements"]
    if spec.get("choices"):
        kind += " (%s)" % ", ".join("`%s`" % choice for choice in spec["choices"])
    if spec.get("required"):
        kind += ", required"
    return kind


def options_table(options, prefix=""):
    rows = []
    for name, spec in (options or {}).items():
        spec = spec or {}
        meaning = " ".join(cell(line) for line in lines_of(spec.get("description")))
        rows.append("| `%s%s` | %s | %s | %s |" % (prefix, name, type_of(spec), default_of(spec), meaning))
        if spec.get("options"):
            rows.extend(options_table(spec["options"], prefix="%s%s." % (prefix, name)))
    return rows


def render(role, specs):
    """The README of role `role` (its folder name) from the parsed argument_specs.yml."""
    entry_points = (specs or {}).get("argument_specs") or {}
    main = entry_points.get("main") or {}
    out = [HEADER, "", "# gangplank.platform.%s" % role, ""]
    if main.get("short_description"):
        out += [markdown(main["short_description"]) + ".", ""]
    if main.get("description"):
        out += [paragraphs(main["description"]), ""]
    out += ["## Variables", ""]
    rows = options_table(main.get("options"))
    if rows:
        out += ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"] + rows + [""]
    else:
        out += ["None.", ""]
    for name, entry in entry_points.items():
        if name == "main":
            continue
        entry = entry or {}
        out += ["## Entry point `%s` (`tasks_from: %s.yml`)" % (name, name), ""]
        if entry.get("short_description"):
            out += [markdown(entry["short_description"]) + ".", ""]
        if entry.get("description"):
            out += [paragraphs(entry["description"]), ""]
        rows = options_table(entry.get("options"))
        if rows:
            out += ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"] + rows + [""]
    out += ["## Example", "", "```yaml", "- hosts: all", "  gather_facts: false", "  roles:",
            "    - role: gangplank.platform.%s" % role, "```", ""]
    return "\n".join(out)


def roles(root):
    base = os.path.join(root, "roles")
    for role in sorted(os.listdir(base)):
        spec_file = os.path.join(base, role, "meta", "argument_specs.yml")
        if os.path.isfile(spec_file):
            yield role, spec_file, os.path.join(base, role, "README.md")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a README is not what it would write")
    parser.add_argument("--root", default=ROOT, help="the collection's folder (default: this script's)")
    args = parser.parse_args(argv)
    stale = []
    for role, spec_file, readme in roles(args.root):
        try:
            with open(spec_file, encoding="utf-8") as handle:
                text = render(role, yaml.safe_load(handle))
        except (OSError, yaml.YAMLError) as error:
            print("role_readme: %s: %s" % (spec_file, error), file=sys.stderr)
            return 2
        try:
            with open(readme, encoding="utf-8") as handle:
                current = handle.read()
        except FileNotFoundError:
            current = None
        if current == text:
            continue
        stale.append(os.path.relpath(readme, args.root))
        if not args.check:
            with open(readme, "w", encoding="utf-8") as handle:
                handle.write(text)
    if stale:
        verb = "differ from their argument_specs.yml (run scripts/role_readme.py)" if args.check else "written"
        print("role_readme: %s %s" % (", ".join(stale), verb), file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
