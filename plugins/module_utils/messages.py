# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wording shared by this collection's error messages ("<path>: got <value>; expected ...")."""

from __future__ import annotations

import json
import math

SHOW_LIMIT = 80
_DEPTH_LIMIT = 20
# Python refuses str() of integers with more than 4300 digits; a value this large is shown by its size.
_INTEGER_BITS_SHOWN = 256


def show(value):
    """Render a value the way the user wrote it, briefly: JSON where possible, at most 80 characters.

    Only as much of the value is rendered as the 80 characters need, so a huge or deeply nested value
    (a YAML billion-laughs document, a number with thousands of digits) costs no more than a small one.
    """
    parts = []
    _render(value, parts, [SHOW_LIMIT + 1], 0)
    text = "".join(parts)
    return text if len(text) <= SHOW_LIMIT else text[:SHOW_LIMIT - 3] + "..."


def _emit(parts, budget, text):
    parts.append(text[:budget[0]])
    budget[0] -= len(text)


def _render(value, parts, budget, depth):  # noqa: C901 (one case per JSON type)
    if budget[0] <= 0:
        return
    if depth > _DEPTH_LIMIT:
        _emit(parts, budget, "..." * (SHOW_LIMIT // 3 + 1))
    elif value is None or isinstance(value, bool):
        _emit(parts, budget, json.dumps(value))
    elif isinstance(value, int):
        if value.bit_length() > _INTEGER_BITS_SHOWN:
            _emit(parts, budget, "%s integer of about %d digits" % ("a negative" if value < 0 else "an",
                                                                    int(value.bit_length() * math.log10(2)) + 1))
        else:
            _emit(parts, budget, str(value))
    elif isinstance(value, float):
        _emit(parts, budget, json.dumps(value))
    elif isinstance(value, str):
        _emit(parts, budget, json.dumps(value[:budget[0] + 1]))
    elif isinstance(value, (list, tuple)):
        _render_items(value, parts, budget, depth, "[", "]", lambda item: (None, item))
    elif isinstance(value, dict):
        keys = list(value) if len(value) > 1000 or not all(isinstance(key, str) for key in value) else sorted(value)
        _render_items(keys, parts, budget, depth, "{", "}", lambda key: (key, value[key]))
    else:
        _emit(parts, budget, json.dumps(str(value)[:budget[0] + 1]))


def _render_items(items, parts, budget, depth, opening, closing, split):
    _emit(parts, budget, opening)
    for position, item in enumerate(items):
        if budget[0] <= 0:
            return
        if position:
            _emit(parts, budget, ", ")
        key, item = split(item)
        if opening == "{":
            _render(key, parts, budget, depth + 1)
            _emit(parts, budget, ": ")
        _render(item, parts, budget, depth + 1)
    _emit(parts, budget, closing)


def printable(text):
    """``text`` as is when it is a short, printable string, else shown briefly: one error stays one short line."""
    if isinstance(text, str) and text.isprintable() and len(text) <= SHOW_LIMIT:
        return text
    return show(text)


def describe(value):
    """What ``value`` is, never what it holds: "a string of 23 characters", "an integer of 5001 digits", "a mapping of
    2 entries". For a mistake in a place that may hold a secret (a secret's name, variable or value, an env value):
    the error names the path and the value's type and size, never the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        # Python refuses str() of an integer of more than 4,300 digits: the size from its bits for large ones.
        digits = len(str(abs(value))) if value.bit_length() <= _INTEGER_BITS_SHOWN else \
            "about %d" % (int(value.bit_length() * math.log10(2)) + 1)
        return "an integer of %s digit%s" % (digits, "" if digits == 1 else "s")
    if isinstance(value, float):
        return "a number (a float)"
    if isinstance(value, str):
        return "a string of %d character%s" % (len(value), "" if len(value) == 1 else "s")
    if isinstance(value, (list, tuple)):
        return "a list of %d item%s" % (len(value), "" if len(value) == 1 else "s")
    if isinstance(value, dict):
        return "a mapping of %d entr%s" % (len(value), "y" if len(value) == 1 else "ies")
    return "a value of type %s" % printable(type(value).__name__)
