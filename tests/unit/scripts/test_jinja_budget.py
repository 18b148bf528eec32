# -*- coding: utf-8 -*-
"""The Jinja budget: selection logic belongs in tested Python, so no Jinja expression in roles/,
playbooks/ or awx/ is longer than 120 characters or applies more than three filters.

An expression is every ``{{ ... }}`` and ``{% ... %}`` in any string, and every bare condition (``when``,
``failed_when``, ``changed_when``, ``until``, an assert's ``that``). Filters are counted on Jinja's own parse
tree. ``ALLOWED`` names the few tasks that may stay over budget, each with the reason its logic cannot move
to Python; an entry that no longer matches anything fails the test, so the list only shrinks.

Run as a script to print every expression over budget, with its length and filter count, and totals::

    python tests/unit/scripts/test_jinja_budget.py
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

import jinja2
import yaml
from jinja2 import nodes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCANNED = ("roles", "playbooks", "awx")
MAX_LENGTH = 120
MAX_FILTERS = 3

# Keys whose value Ansible evaluates as a bare Jinja expression (no braces).
CONDITION_KEYS = frozenset({"when", "failed_when", "changed_when", "until"})
ASSERT_MODULES = frozenset({"assert", "ansible.builtin.assert", "ansible.legacy.assert"})
# Keys whose list items are tasks (or plays, at the top of a playbook).
TASK_LIST_KEYS = frozenset({"tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"})

# (file, task name) -> why that logic cannot move to Python. Keep it short; a stale entry fails the test.
ALLOWED: dict[tuple[str, str], str] = {
    ("roles/deploy/molecule/default/verify.yml",
     "Check both containers run with their labels, the sidecar in the instance's network"): (
        "a molecule verify reads the engine's inspect output itself: a check hidden in a plugin would test the plugin"),
}

_ENV = jinja2.Environment()


@dataclass(frozen=True)
class Expression:
    path: str           # relative to the repository root
    task: str           # the task's (or play's) name, or the variable's key path outside tasks
    text: str           # the expression, whitespace runs collapsed to one space
    length: int
    filters: int

    @property
    def over_budget(self) -> bool:
        return self.length > MAX_LENGTH or self.filters > MAX_FILTERS

    def describe(self) -> str:
        head = self.text if len(self.text) <= 70 else self.text[:67] + "..."
        return f"{self.path}: {self.task!r}: {self.length} chars, {self.filters} filters: {head}"


class _Loader(yaml.SafeLoader):
    """Reads Ansible's tags: ``!unsafe`` strings are never templated, ``!vault`` ones are ciphertext."""


_UNTEMPLATED = object()
_Loader.add_constructor("!unsafe", lambda loader, node: _UNTEMPLATED)
_Loader.add_constructor("!vault", lambda loader, node: _UNTEMPLATED)


def count_filters(source: str) -> int:
    """Filter applications in a template, counted on Jinja's parse tree (``a | b(c | d)`` is three)."""
    with warnings.catch_warnings():
        # Jinja warns of escapes such as '\S' in a regex literal; Ansible reads them the same way.
        warnings.simplefilter("ignore", DeprecationWarning)
        return sum(1 for _node in _ENV.parse(source).find_all(nodes.Filter))


def _collapse(text: str) -> str:
    return " ".join(text.split())


def template_expressions(value: str) -> list[str]:
    """Each ``{{ ... }}`` and ``{% ... %}`` of a template string, delimiters included, as written."""
    found, current, closing = [], None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tokens = list(_ENV.lex(value))
    for _lineno, kind, token in tokens:
        if kind in ("variable_begin", "block_begin"):
            current, closing = [token], kind.replace("_begin", "_end")
        elif current is not None:
            current.append(token)
            if kind == closing:
                found.append("".join(current))
                current = None
    return found


def _expression(path, task, source, template):
    text = _collapse(source)
    inner = text
    for opening, closing in (("{{", "}}"), ("{%", "%}")):
        if text.startswith(opening) and text.endswith(closing):
            inner = text[2:-2].strip(" -+")
    try:
        filters = count_filters(template)
    except jinja2.TemplateSyntaxError as error:
        raise AssertionError(f"{path}: {task!r}: not valid Jinja ({error.message}): {text[:80]}") from None
    return Expression(path, task, text, len(inner), filters)


def _string_expressions(path, task, value):
    if "{{" not in value and "{%" not in value:
        return []
    try:
        parts = template_expressions(value)
    except jinja2.TemplateSyntaxError as error:
        raise AssertionError(f"{path}: {task!r}: not valid Jinja ({error.message}): {_collapse(value)[:80]}") from None
    # A {% %} tag alone is not a template; count its filters inside the string it belongs to.
    return [_expression(path, task, part, part if part.startswith("{{") else value) for part in parts]


def _condition_expressions(path, task, value):
    conditions = value if isinstance(value, list) else [value]
    found = []
    for condition in conditions:
        if not isinstance(condition, str):
            continue
        if "{{" in condition or "{%" in condition:
            found.extend(_string_expressions(path, task, condition))
        else:
            found.append(_expression(path, task, condition, "{{ " + condition + " }}"))
    return found


def _task_label(task: dict) -> str:
    name = task.get("name")
    if isinstance(name, str):
        return name
    action = next((key for key in task if key not in ("when", "vars", "tags", "loop", "register")), "?")
    return f"(unnamed {action})"


def _walk(path, node, label, parent_key=None):
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITION_KEYS or (key == "that" and parent_key in ASSERT_MODULES):
                found.extend(_condition_expressions(path, label, value))
            else:
                found.extend(_walk(path, value, label, key))
    elif isinstance(node, list):
        is_task_list = parent_key is None or parent_key in TASK_LIST_KEYS
        for item in node:
            item_label = _task_label(item) if is_task_list and isinstance(item, dict) else label
            found.extend(_walk(path, item, item_label, parent_key if not is_task_list else None))
    elif isinstance(node, str):
        found.extend(_string_expressions(path, label, node))
    return found


def _top_level(path, document):
    if isinstance(document, list):
        return _walk(path, document, "(file)")
    if isinstance(document, dict):       # a vars file, defaults or a spec: label each expression by its key
        return [expression for key, value in document.items() for expression in _walk(path, value, str(key), key)]
    return []


def yaml_files(root: str = ROOT) -> list[str]:
    files = []
    for top in SCANNED:
        for directory, subdirectories, names in os.walk(os.path.join(root, top)):
            subdirectories.sort()
            files.extend(os.path.join(directory, name) for name in sorted(names) if name.endswith((".yml", ".yaml")))
    return files


def expressions_in(file: str, root: str = ROOT) -> list[Expression]:
    path = os.path.relpath(file, root)
    with open(file, encoding="utf-8") as handle:
        try:
            documents = list(yaml.load_all(handle, Loader=_Loader))     # noqa: S506 (a SafeLoader subclass)
        except yaml.YAMLError as error:
            raise AssertionError(f"{path}: not valid YAML: {error}")
    return [expression for document in documents for expression in _top_level(path, document)]


def all_expressions(root: str = ROOT) -> list[Expression]:
    return [expression for file in yaml_files(root) for expression in expressions_in(file, root)]


def over_budget(root: str = ROOT) -> list[Expression]:
    return [expression for expression in all_expressions(root) if expression.over_budget]


# ---------------------------------------------------------------------------------------------- the tests


def test_every_expression_is_within_budget_or_allowed():
    offenders = [expression for expression in over_budget() if (expression.path, expression.task) not in ALLOWED]
    assert not offenders, (f"Jinja over budget (> {MAX_LENGTH} chars or > {MAX_FILTERS} filters): move the logic "
                           "to a filter, action or module_utils function:\n"
                           + "\n".join(expression.describe() for expression in offenders))


def test_every_exemption_still_matches_an_expression_over_budget():
    matched = {(expression.path, expression.task) for expression in over_budget()}
    stale = sorted(set(ALLOWED) - matched)
    assert not stale, f"exemptions that match nothing over budget any more (remove them): {stale}"


def test_every_allowed_entry_gives_a_one_line_reason():
    assert len(ALLOWED) <= 5, "the allow-list is for the exception, not the rule"
    for entry, reason in ALLOWED.items():
        assert reason.strip() and "\n" not in reason, entry


def test_the_scan_finds_the_scanned_trees_files():
    files = {os.path.relpath(file, ROOT) for file in yaml_files()}
    assert "playbooks/site.yml" in files and "roles/deploy/tasks/status.yml" in files


def test_filters_are_counted_on_the_parse_tree_not_by_pipes():
    assert count_filters("{{ a | b | c(d | e) | f }}") == 4
    assert count_filters("{{ 'a | b | c | d' }}") == 0        # pipes inside a string are not filters
    assert count_filters("{{ a or b }}") == 0
    assert count_filters("{% for x in y | sort %}{{ x | e }}{% endfor %}") == 2


def test_template_expressions_keep_braces_inside_strings_whole():
    assert template_expressions("x {{ '}}' ~ a }} y {% if b %}z{% endif %}") == [
        "{{ '}}' ~ a }}", "{% if b %}", "{% endif %}"]


def _write(tmp_path, relative, text):
    file = tmp_path / relative
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def test_a_long_or_filter_heavy_expression_is_reported_with_file_task_and_head(tmp_path):
    long_expression = " or ".join(f"variable_{index}" for index in range(12))
    _write(tmp_path, "roles/r/tasks/main.yml", f"""
- name: Block
  block:
    - name: Short
      ansible.builtin.debug:
        msg: "{{{{ a | b }}}}"
    - name: Too many filters
      ansible.builtin.set_fact:
        name: "{{{{ x | a | b | c | d }}}}"
    - name: Too long
      ansible.builtin.debug:
        msg: ok
      when: {long_expression}
    - name: Assert
      ansible.builtin.assert:
        that:
          - y | a | b | c | d
""")
    _write(tmp_path, "playbooks/p.yml", "- name: Play\n  hosts: all\n  vars:\n    v: !unsafe '{{ a|b|c|d|e }}'\n")
    found = [(expression.path, expression.task, expression.length, expression.filters)
             for expression in over_budget(str(tmp_path))]
    assert found == [
        ("roles/r/tasks/main.yml", "Too many filters", len("x | a | b | c | d"), 4),
        ("roles/r/tasks/main.yml", "Too long", len(long_expression), 0),
        ("roles/r/tasks/main.yml", "Assert", len("y | a | b | c | d"), 4),
    ]
    assert f"roles/r/tasks/main.yml: 'Too long': {len(long_expression)} chars, 0 filters: variable_0 or" in over_budget(str(tmp_path))[
        1].describe()


def test_a_vars_file_labels_expressions_by_their_key(tmp_path):
    _write(tmp_path, "roles/r/defaults/main.yml", "r_value: '{{ a | b | c | d | e | f }}'\nr_plain: 3\n")
    assert [(expression.task, expression.filters) for expression in over_budget(str(tmp_path))] == [("r_value", 5)]


def test_broken_yaml_or_jinja_names_the_file(tmp_path):
    _write(tmp_path, "roles/r/tasks/main.yml", "- name: Broken\n  debug:\n    msg: '{{ a | }}'\n")
    try:
        over_budget(str(tmp_path))
    except AssertionError as error:
        assert "roles/r/tasks/main.yml: 'Broken': not valid Jinja" in str(error)
    else:
        raise AssertionError("a broken expression passed the scan")


def report(root: str = ROOT) -> int:
    """Print every expression over budget and the totals per file; the exit status is 1 when any is."""
    expressions = all_expressions(root)
    offenders = [expression for expression in expressions if expression.over_budget]
    per_file: dict[str, list[Expression]] = {}
    for expression in offenders:
        per_file.setdefault(expression.path, []).append(expression)
    for path, found in per_file.items():
        long_ones = sum(1 for expression in found if expression.length > MAX_LENGTH)
        heavy = sum(1 for expression in found if expression.filters > MAX_FILTERS)
        print(f"{path}: {long_ones} over {MAX_LENGTH} chars, {heavy} over {MAX_FILTERS} filters, "
              f"longest {max(expression.length for expression in found)}")
        for expression in found:
            entry = (expression.path, expression.task)
            mark = " [allowed]" if entry in ALLOWED else ""
            print(f"  {expression.length:4d} chars {expression.filters:2d} filters  {expression.task}{mark}: "
                  f"{expression.text[:60]}")
    longest = max(expressions, key=lambda expression: expression.length, default=None)
    print(f"total: {len(expressions)} expressions in {len(yaml_files(root))} files; "
          f"{sum(1 for expression in offenders if expression.length > MAX_LENGTH)} over {MAX_LENGTH} chars, "
          f"{sum(1 for expression in offenders if expression.filters > MAX_FILTERS)} over {MAX_FILTERS} filters, "
          f"{sum(1 for expression in offenders if (expression.path, expression.task) not in ALLOWED)} not allowed"
          + (f"; longest {longest.length} ({longest.path}: {longest.task!r})" if longest else ""))
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(report())
