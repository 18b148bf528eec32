# -*- coding: utf-8 -*-
"""The one check for names, verbs, tokens and resource names: whole string, bounded, no control character."""

from __future__ import annotations

import re

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, one_line, well_formed

NAME = re.compile(r"[a-z][a-z0-9.-]*")

# Every kind of character a name must never hold, at the end (where "$" let a newline through) and inside.
CONTROLS = ["\n", "\r", "\r\n", "\t", "\x00", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\u202e", "\u200b",
            "\ufeff", "\ud800"]


@pytest.mark.parametrize("control", CONTROLS)
def test_a_control_character_anywhere_is_refused(control):
    assert has_control("a" + control)
    assert not well_formed("name" + control, NAME, 64)
    assert not well_formed("na" + control + "me", NAME, 64)


def test_the_whole_string_must_match_and_the_length_is_bounded():
    assert well_formed("nvidia.com", NAME, 64)
    assert not well_formed("nvidia.com ", NAME, 64)
    assert not well_formed("", NAME, 64)
    assert not well_formed("a" * 65, NAME, 64)
    assert well_formed("a" * 64, NAME, 64)
    assert not well_formed(b"name", NAME, 64)
    assert not well_formed(None, NAME, 64)


def test_one_line_replaces_controls_and_bounds_the_length():
    assert one_line("node\u202e refused\nforged", 100) == "node\ufffd refused\ufffdforged"
    assert one_line("lone \ud800 surrogate", 100).encode("utf-8")
    assert one_line("x" * 50, 10) == "xxxxxxx..."
    assert one_line("plain", 10) == "plain"
