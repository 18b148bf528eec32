# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one check every input format uses for names, verbs, tokens, resource names and paths.

A value passes only when it is a string, its length is within the bound, it holds no control character
(C0, C1, line and paragraph separators, format characters such as the bidi overrides, lone surrogates) and
the *whole* string matches the pattern. ``re.match`` with a ``$`` is not enough: ``$`` also matches before a
final newline, so ``"nvidia.com/gpu\\n"`` (a YAML block scalar, a vaulted value read from a file) would pass.
"""

from __future__ import annotations

import unicodedata

# Unicode categories that never belong in a name or a line of output: Cc (C0 and C1 controls, DEL), Cf (format:
# bidi overrides such as U+202E, zero-width joiners), Cs (lone surrogates), Zl and Zp (line and paragraph
# separators, which str.splitlines() splits on).
_CONTROL_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def has_control(text):
    """Whether ``text`` holds a character of a category above."""
    if text.isascii():
        return not text.isprintable()
    return any(unicodedata.category(char) in _CONTROL_CATEGORIES for char in text)


def well_formed(value, pattern, maximum):
    """Whether ``value`` is a string of 1 to ``maximum`` characters, without a control character, that
    ``pattern`` (a compiled regular expression) matches whole."""
    return (isinstance(value, str) and 0 < len(value) <= maximum and not has_control(value)
            and pattern.fullmatch(value) is not None)


def one_line(text, maximum):
    """``text`` made safe to print as part of one line: every control character (a line break, a bidi override,
    a lone surrogate) becomes U+FFFD, and at most ``maximum`` characters are kept (with "..." when cut).

    For text a program outside this collection wrote (an extender's reasons, a host's output) that is shown,
    never for a check: a check refuses such text with ``well_formed``.
    """
    if not isinstance(text, str):
        text = str(text)
    cut = len(text) > maximum
    text = text[:maximum]
    if has_control(text):
        text = "".join("\ufffd" if unicodedata.category(char) in _CONTROL_CATEGORIES else char for char in text)
    return text[:max(0, maximum - 3)] + "..." if cut else text
