# -*- coding: utf-8 -*-
"""The guides and READMEs as Galaxy's Documentation tab renders them: galaxy-importer converts Markdown with
Python-Markdown and its `extra` extensions, which reads lists more strictly than GitHub does (a nested item needs
four spaces, a fenced block inside a list item is not a code block). Each file must keep every list item and every
ordered list it has in the source, and no fence may leak into the text."""

from __future__ import annotations

import glob
import html.parser
import os
import re

import markdown  # requirements-test.txt: the range galaxy-importer uses
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PATTERNS = ("docs/*.md", "README.md", "CHANGELOG.md", "roles/*/README.md")
FILES = sorted(os.path.relpath(path, ROOT) for pattern in PATTERNS for path in glob.glob(os.path.join(ROOT, pattern)))


class _Rendered(html.parser.HTMLParser):
    """Counts list items and ordered lists, and gathers the text outside code."""

    def __init__(self):
        super().__init__()
        self.items = 0
        self.nested_items = 0
        self.ordered_lists = 0
        self.depth = 0
        self.in_code = 0
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.items += tag == "li"
        self.nested_items += tag == "li" and self.depth > 1
        self.ordered_lists += tag == "ol"
        self.depth += tag in ("ol", "ul")
        self.in_code += tag in ("code", "pre")

    def handle_endtag(self, tag):
        self.depth -= tag in ("ol", "ul")
        self.in_code -= tag in ("code", "pre")

    def lists(self):
        return self.items, self.nested_items, self.ordered_lists

    def handle_data(self, data):
        if not self.in_code:
            self.text.append(data)


def _source_lists(text):
    """(list items, nested ones, ordered lists) in the Markdown source, outside fenced blocks: an item is nested when
    indented; an ordered list starts at `1.`."""
    items = nested = ordered = 0
    fenced = False
    for line in text.splitlines():
        if re.match(r"\s*```", line):
            fenced = not fenced
            continue
        if fenced:
            continue
        item = re.match(r"(\s*)([-*+]|\d+\.)\s", line)
        items += bool(item)
        nested += bool(item and item.group(1))
        ordered += bool(re.match(r"\s*1\.\s", line))
    return items, nested, ordered


def _inline_code_blocks(html_text):
    """Inline code spans that hold a line break: a fenced block Python-Markdown did not see as one."""
    return [span for span in re.findall(r"<p><code>(.*?)</code>", html_text, re.S) if "\n" in span]


@pytest.mark.parametrize("name", FILES)
def test_galaxy_renders_every_list_and_code_block(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        text = handle.read()
    rendered_html = markdown.markdown(text, extensions=["extra"])
    rendered = _Rendered()
    rendered.feed(rendered_html)
    assert rendered.lists() == _source_lists(text), (
        "%s: Python-Markdown renders (list items, nested items, ordered lists) %r, the source has %r (a nested item "
        "needs four spaces; a list item holding a fenced block breaks the list)"
        % (name, rendered.lists(), _source_lists(text)))
    assert "```" not in "".join(rendered.text), name
    assert not _inline_code_blocks(rendered_html), name


def test_the_check_sees_the_two_ways_a_list_breaks():
    nested = "- one\n  - nested\n- two\n"
    fenced = "1. first\n\n   ```sh\n   run\n   ```\n\n2. second\n"
    for text in (nested, fenced):
        rendered = _Rendered()
        rendered_html = markdown.markdown(text, extensions=["extra"])
        rendered.feed(rendered_html)
        assert rendered.lists() != _source_lists(text) or _inline_code_blocks(rendered_html), text
