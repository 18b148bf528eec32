# -*- coding: utf-8 -*-
"""Write each role's README.md from its meta/argument_specs.yml (one source: the README cannot drift), and copy the
shared settings of the base role into the argument spec of each role that depends on it.

    python scripts/role_readme.py           rewrite roles/*/README.md and the copies
    python scripts/role_readme.py --check   exit 1 naming each README or copy that differs from what it would write

The base role gangplank.platform.cluster has no entry point main: its settings (entry point "settings") are copied
into the main entry point of every role that depends on it, between two marker comments, so that Ansible's own check
of that role covers them, and no check of the base role itself runs once per host (Ansible adds one to a dependency
with a main spec, and a play cannot turn it off: day 2 at 30 hosts, docs/deploy.md). The source is the base role's
file; the copies are written here.

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


BASE_ROLE = "cluster"
SHARED_ENTRY = "settings"
SHARED_BEGIN = ("      # Begin of the shared settings of the gangplank.platform.cluster role, which this role depends on: copied\n"
                "      # from its argument spec (entry point settings) by scripts/role_readme.py. Edit them there.\n")
SHARED_END = "      # End of the shared settings of the gangplank.platform.cluster role.\n"


def shared_options_text(base_text):
    """The option lines of the base role's entry point "settings", as they stand in its file (6-space indented)."""
    lines = base_text.splitlines(keepends=True)
    start = lines.index("  %s:\n" % SHARED_ENTRY)
    begin = next(i for i in range(start + 1, len(lines)) if lines[i] == "    options:\n") + 1
    end = next((i for i in range(begin, len(lines)) if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= 4),
               len(lines))
    return "".join(lines[begin:end])


def with_shared_options(text, shared):
    """A dependent role's argument spec text with the base role's settings copied at the end of its main options."""
    if SHARED_BEGIN in text:
        head, rest = text.split(SHARED_BEGIN, 1)
        return head + SHARED_BEGIN + shared + SHARED_END + rest.split(SHARED_END, 1)[1]
    lines = text.splitlines(keepends=True)
    main = lines.index("  main:\n")
    end = next((i for i in range(main + 1, len(lines)) if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= 2),
               len(lines))
    return "".join(lines[:end]) + SHARED_BEGIN + shared + SHARED_END + "".join(lines[end:])


def depends_on_base(root, role):
    try:
        with open(os.path.join(root, "roles", role, "meta", "main.yml"), encoding="utf-8") as handle:
            meta = yaml.safe_load(handle) or {}
    except FileNotFoundError:
        return False
    names = [entry.get("role") if isinstance(entry, dict) else entry for entry in meta.get("dependencies") or []]
    return "gangplank.platform.%s" % BASE_ROLE in names


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


def render(role, specs, shared=()):
    """The README of role `role` (its folder name) from the parsed argument_specs.yml; `shared` names the base role's
    settings its spec copies, which the README points to instead of listing."""
    entry_points = (specs or {}).get("argument_specs") or {}
    main = entry_points.get("main") or entry_points.get(SHARED_ENTRY) or {}
    out = [HEADER, "", "# gangplank.platform.%s" % role, ""]
    if main.get("short_description"):
        out += [markdown(main["short_description"]) + ".", ""]
    if main.get("description"):
        out += [paragraphs(main["description"]), ""]
    out += ["## Variables", ""]
    rows = options_table({name: spec for name, spec in (main.get("options") or {}).items() if name not in shared})
    if rows:
        out += ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"] + rows + [""]
    else:
        out += ["None.", ""]
    if shared:
        out += ["And the shared settings of the base role gangplank.platform.%s, which this role depends on "
                "([roles/%s/README.md](../%s/README.md)): its argument spec holds a copy of them, so that Ansible's "
                "check of this role covers them." % (BASE_ROLE, BASE_ROLE, BASE_ROLE), ""]
    for name, entry in entry_points.items():
        if name in ("main", SHARED_ENTRY):
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
    base_file = os.path.join(args.root, "roles", BASE_ROLE, "meta", "argument_specs.yml")
    try:
        with open(base_file, encoding="utf-8") as handle:
            shared_text = shared_options_text(handle.read())
        shared = list(yaml.safe_load("options:\n" + shared_text)["options"])
    except (OSError, ValueError, StopIteration, yaml.YAMLError, KeyError, TypeError) as error:
        print("role_readme: %s: no entry point %s with options (%s)" % (base_file, SHARED_ENTRY, error), file=sys.stderr)
        return 2
    for role, spec_file, readme in roles(args.root):
        copies = role != BASE_ROLE and depends_on_base(args.root, role)
        try:
            with open(spec_file, encoding="utf-8") as handle:
                spec_text = handle.read()
            if copies:
                wanted = with_shared_options(spec_text, shared_text)
                if wanted != spec_text:
                    stale.append(os.path.relpath(spec_file, args.root))
                    if not args.check:
                        with open(spec_file, "w", encoding="utf-8") as handle:
                            handle.write(wanted)
                spec_text = wanted
            text = render(role, yaml.safe_load(spec_text), shared if copies else ())
        except (OSError, ValueError, yaml.YAMLError) as error:
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
        verb = "differ from what scripts/role_readme.py writes (run it)" if args.check else "written"
        print("role_readme: %s %s" % (", ".join(stale), verb), file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
