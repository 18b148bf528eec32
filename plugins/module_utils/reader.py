# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validator every input format uses: ``Reader`` reads values at paths and records what is wrong instead of
stopping, so one run names every mistake; ``ProblemError`` carries them, each as (path, message).

Used by the scheduler's problem parser (scheduler/problem.py), the catalog's (catalog.py), profiles and extenders
(scheduler/profiles.py, scheduler/extender.py) and scale requests (scale.py). Plain Python that imports nothing
above module_utils' plain files, so the scheduler core and the catalog may both import it.
"""

from __future__ import annotations

import difflib
import math

from ansible_collections.gangplank.platform.plugins.module_utils.messages import printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_ENTRIES, MAX_ERRORS, MAX_ITEMS
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, one_line

_TEXT_EXPECTED = "text without lone surrogates (valid Unicode, as UTF-8 can hold it)"
# Names, keys, paths and label values are one line of visible text: a control character (a final newline from a YAML
# block scalar, a tab, NUL, U+0085, U+2028, a bidi override such as U+202E, a lone surrogate) is refused, not stripped.
_CONTROL_EXPECTED = "text without control characters (line breaks, tabs, NUL, U+0085, U+2028, bidi overrides, lone surrogates)"
_MAX_LABEL_DIGITS = 64          # an integer label value longer than this is not a label but a mistake


class ProblemError(ValueError):
    """The problem is malformed. ``errors`` is a list of (path, message)."""

    def __init__(self, errors):
        self.errors = [(str(path), message) for path, message in errors]
        super().__init__(self.__str__())

    def __str__(self):
        return "\n".join("%s: %s" % (path, message) for path, message in self.errors)


def join_path(path, key):
    """The path to ``key`` inside ``path``: ``services.infer.resources``, ``nodes.a.gpus[0]``. Joined into text only
    when an error names it (str()); most paths of a valid problem never are, and a problem has thousands."""
    return _Path(path, key)


_SUGGEST_LENGTH = 64         # keys longer than this get no suggestion (difflib's work grows with the product)


def unknown_key(key, keys):
    """The message for ``key``, which is not one of ``keys``: the close one when there is one (``replica``: did you mean
    replicas?), else every allowed key."""
    if len(key) <= _SUGGEST_LENGTH:
        close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.75)
        if close:
            return "unknown key; did you mean %s?" % close[0]
    return "unknown key; expected one of: %s" % ", ".join(keys)


class _Path:
    __slots__ = ("parent", "key")

    def __init__(self, parent, key):
        self.parent = parent
        self.key = key

    def __str__(self):
        if isinstance(self.key, int):
            return "%s[%d]" % (self.parent, self.key)
        # A key with a newline (or a huge one) is quoted, so that each error stays one short line.
        key = printable(self.key)
        parent = str(self.parent)
        return "%s.%s" % (parent, key) if parent else key

    __repr__ = __str__


def _not_text(value):
    """Whether a string cannot be written as UTF-8: a lone surrogate (JSON's "\\ud800") would pass every check,
    then break the exact solver's names, the table and the HTML page when they are written out."""
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class Reader:
    """Reads values at paths, recording what is wrong instead of stopping."""

    def __init__(self):
        self.errors = []
        self.entries = 0

    def error(self, path, message):
        if has_control(message):
            # A name shown as is in a message (a node's, a quota's): each error stays one line.
            message = one_line(message, len(message))
        self.errors.append((str(path), message))
        if len(self.errors) >= MAX_ERRORS:
            raise ProblemError(self.errors + [("problem", "reading stopped after %d mistakes" % MAX_ERRORS)])

    def _count(self, value, path):
        """Count what is read: a document of YAML aliases may expand to far more than its text."""
        self.entries += len(value)
        if self.entries > MAX_ENTRIES:
            raise ProblemError(self.errors + [(path, "the problem has more than %d list items and mapping entries in "
                                                     "all; reading stopped here" % MAX_ENTRIES)])

    def bad(self, path, value, expected):
        self.error(path, "got %s; expected %s" % (show(value), expected))

    def mapping(self, value, path, keys=None, required=(), optional_none=True, maximum=MAX_ITEMS):
        if value is None and optional_none:
            return {}
        if not isinstance(value, dict):
            self.bad(path, value, "a mapping")
            return {}
        if len(value) > maximum:
            self.error(path, "has %d entries; expected at most %d" % (len(value), maximum))
            return {}
        self._count(value, path)
        for key in value:
            if not isinstance(key, str):
                self.bad(join_path(path, printable(key)), key, "a string key")
            elif _not_text(key):
                self.bad(join_path(path, key), key, _TEXT_EXPECTED)
            elif has_control(key):
                self.bad(join_path(path, key), key, "a key of " + _CONTROL_EXPECTED)
            elif keys is not None and key not in keys:
                self.error(join_path(path, key), unknown_key(key, keys))
        for key in required:
            if key not in value:
                self.error(join_path(path, key), "is required")
        return value

    def sequence(self, value, path, maximum=MAX_ITEMS):
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(path, value, "a list")
            return []
        if len(value) > maximum:
            self.error(path, "has %d items; expected at most %d" % (len(value), maximum))
            return []
        self._count(value, path)
        return value

    def string(self, value, path, expected="a non-empty string"):
        if not isinstance(value, str) or not value:
            self.bad(path, value, expected)
            return None
        if _not_text(value):
            self.bad(path, value, _TEXT_EXPECTED)
            return None
        if has_control(value):
            self.bad(path, value, _CONTROL_EXPECTED)
            return None
        return value

    def label_value(self, value, path, single_line=True):
        """A label (taint, selector) value as text; ``single_line`` False for free text whose caller checks the
        characters it cannot carry (a command's arguments, catalog.py)."""
        # YAML turns `gpu: true` and `rack: 3` into bool and int; labels are strings.
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            if _not_text(value):
                self.bad(path, value, _TEXT_EXPECTED)
                return None
            if single_line and has_control(value):
                self.bad(path, value, _CONTROL_EXPECTED)
                return None
            return value
        if isinstance(value, int):
            if value.bit_length() <= _MAX_LABEL_DIGITS * 3 and len(str(value)) <= _MAX_LABEL_DIGITS:
                return str(value)
            self.bad(path, value, "a string, boolean or number, of at most %d digits" % _MAX_LABEL_DIGITS)
            return None
        # `version: 1.5` is the text 1.5; repr() is the shortest text that reads back as the same float.
        if isinstance(value, float):
            if math.isfinite(value):
                return repr(value)
            self.bad(path, value, "a string, boolean or finite number")
            return None
        self.bad(path, value, "a string, number or boolean")
        return None

    def labels(self, value, path):
        result = {}
        for key, item in sorted(self.mapping(value, path).items(), key=lambda kv: str(kv[0])):
            if key == "":
                # Refused, not dropped: the label the user meant would silently be missing from the plan.
                self.error(path, 'got the key ""; expected non-empty label keys')
            elif isinstance(key, str):
                converted = self.label_value(item, join_path(path, key))
                if converted is not None:
                    result[key] = converted
        return result

    def boolean(self, value, path, default=False):
        if value is None:
            return default
        if not isinstance(value, bool):
            self.bad(path, value, "true or false")
            return default
        return value

    def integer(self, value, path, minimum=0, maximum=None, default=None, limit=None):
        """An integer from ``minimum`` to ``maximum``; ``limit`` is a documented bound, named only when exceeded."""
        if value is None and default is not None:
            return default
        expected = "an integer >= %d" % minimum
        if maximum is not None:
            expected = "an integer from %d to %d" % (minimum, maximum)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
                maximum is not None and value > maximum):
            self.bad(path, value, expected)
            return None
        if limit is not None and value > limit:
            self.bad(path, value, "%s, at most %d" % (expected, limit))
            return None
        return value

    def names(self, value, path):
        """A list of distinct non-empty strings."""
        result, seen = [], set()
        for position, item in enumerate(self.sequence(value, path)):
            name = self.string(item, join_path(path, position))
            if name is None:
                continue
            if name in seen:
                self.bad(join_path(path, position), item, "no duplicates")
                continue
            seen.add(name)
            result.append(name)
        return tuple(result)
