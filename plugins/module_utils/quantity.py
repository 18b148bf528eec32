# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes-style quantities: CPU in cores or millicores, sizes in bytes; and Linux cpulists ("0-15,32-47")."""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_CPU_ID, MAX_CPULIST

_SIZE_UNITS = {
    "": 1,
    "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
    "k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15,
}
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?")
_CPU = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m)?")
# A quantity may come with blanks around it (" 2Mi ", "4\n" from a form or a block scalar): ASCII spaces, tabs and line
# breaks only. str.strip() would also take U+0085, U+2028 and other separators; anything else is refused.
BLANKS = " \t\r\n"

SIZE_EXPECTED = "a size: bytes, or a number with Ki, Mi, Gi, Ti, Pi, K, M, G, T or P (e.g. 16Gi)"
CPU_EXPECTED = "a CPU amount: cores (e.g. 4 or 0.5) or millicores (e.g. 500m)"

# Upper bounds (docs/problem-format.md, "Bounds"): far above any real machine, and low enough that
# every sum the scheduler and the exact solver form stays a float-safe, 64-bit integer.
MAX_SIZE = 2 ** 50                  # 1 PiB: one node's memory, one device, one request
MAX_CPU = 1000000 * 1000            # a million cores, in millicores
_MAX_TEXT = 64                      # characters of a quantity string: no Decimal of a million digits
# A cpulist as the kernel writes it (sysfs cpulist, cpuset.cpus): CPU ids and ranges low-high, comma-separated; no blanks,
# no leading zeros, no sign. Each id is checked against MAX_CPU_ID before a range is expanded.
_CPU_ID = r"(?:0|[1-9][0-9]{0,3})"
_CPULIST = re.compile(r"%s(?:-%s)?(?:,%s(?:-%s)?)*" % ((_CPU_ID,) * 4))
CPULIST_EXPECTED = ("a Linux cpulist such as \"0-15,32-47\" (CPU ids from 0 to %d, ranges low-high, no blanks)"
                    % MAX_CPU_ID)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _decimal(value, pattern, expected, maximum, shown_maximum):
    """(number, suffix) of a quantity as a finite Decimal, or ValueError; numbers above ``maximum`` are refused
    before they are converted, so neither a huge integer nor infinity reaches Decimal or float arithmetic."""
    if _is_number(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(expected + ", not %s" % ("NaN" if math.isnan(value) else "infinite"))
        if value < 0:
            raise ValueError(expected + ", not negative")
        if value > maximum:
            raise ValueError(expected + ", at most %s" % shown_maximum)
        return Decimal(repr(value) if isinstance(value, float) else value), None
    match = pattern.fullmatch(value.strip(BLANKS)) if isinstance(value, str) and len(value) <= _MAX_TEXT else None
    if match:
        number, suffix = match.groups()
        return Decimal(number), suffix
    raise ValueError(expected)


def _bounded(amount, expected, maximum, shown_maximum):
    if amount > maximum:
        raise ValueError(expected + ", at most %s" % shown_maximum)
    return amount


def parse_size(value):
    """Return a size in bytes (int, rounded up, at most MAX_SIZE) or raise ValueError."""
    number, unit = _decimal(value, _SIZE, SIZE_EXPECTED, MAX_SIZE, "1Pi")
    amount = int((number * _SIZE_UNITS[unit or ""]).to_integral_value(rounding=ROUND_CEILING))
    return _bounded(amount, SIZE_EXPECTED, MAX_SIZE, "1Pi")


def parse_cpu(value):
    """Return a CPU amount in millicores (int, rounded up, at most MAX_CPU) or raise ValueError."""
    number, milli = _decimal(value, _CPU, CPU_EXPECTED, MAX_CPU // 1000, "1000000 cores")
    cores = number / 1000 if milli else number
    amount = int((cores * 1000).to_integral_value(rounding=ROUND_CEILING))
    return _bounded(amount, CPU_EXPECTED, MAX_CPU, "1000000 cores")


def format_size(size):
    """Short binary rendering for tables: 0, 512Mi, 80Gi, 1.5Ti."""
    if size == 0:
        return "0"
    for unit in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        scale = _SIZE_UNITS[unit]
        if size >= scale:
            whole = size // scale
            if whole >= 10 ** 15:
                # Past a float's exact digits (and, far above, past what a float holds): the whole number of units.
                return "%d%s" % (whole, unit)
            text = ("%.1f" % (size / scale)).rstrip("0").rstrip(".")
            return text + unit
    return str(size)


def format_cpu(millicores):
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return "%dm" % millicores


def parse_cpulist(text):
    """The CPU ids of a Linux cpulist ("0-15,32-47") as a frozenset, or ValueError (CPULIST_EXPECTED): checked whole, no
    blanks or line breaks around it, ids at most MAX_CPU_ID, every range low <= high, at most MAX_CPULIST characters,
    its ranges holding at most MAX_CPU_ID + 1 CPUs in all (as listed, before overlaps are merged)."""
    ranges = cpu_ranges(text, _CPULIST, MAX_CPULIST, MAX_CPU_ID)
    if ranges is None:
        raise ValueError(CPULIST_EXPECTED)
    if ranges is TOO_MANY_CPUS:
        raise ValueError(CPULIST_EXPECTED + "; its ranges hold more than %d CPUs in all" % (MAX_CPU_ID + 1))
    return frozenset(cpu for low, high in ranges for cpu in range(low, high + 1))


# cpu_ranges' answer for a cpulist whose ranges, as listed, hold more CPUs than there may be.
TOO_MANY_CPUS = ()


def cpu_ranges(text, pattern, max_length, max_id):
    """A cpulist's CPUs as ascending, disjoint, non-adjacent ranges [(low, high), ...]; None when it is not a cpulist:
    ``text`` matched whole by ``pattern`` (ids and ranges low-high, comma-separated), at most ``max_length`` characters,
    every range low <= high and its ids at most ``max_id``; TOO_MANY_CPUS (empty, so false) when its ranges as listed
    hold more than ``max_id`` + 1 CPUs in all: a cpulist names each CPU once, and so no list of ranges costs more work
    than the CPUs there may be (a range is never expanded here; the ranges are sorted and merged)."""
    if not isinstance(text, str) or len(text) > max_length or not pattern.fullmatch(text):
        return None
    listed = []
    total = 0
    for part in text.split(","):
        low, _sep, high = part.partition("-")
        low, high = int(low), int(high or low)
        if high > max_id or low > high:
            return None
        total += high - low + 1
        if total > max_id + 1:
            return TOO_MANY_CPUS
        listed.append((low, high))
    listed.sort()
    merged = [list(listed[0])]
    for low, high in listed[1:]:
        if low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return [tuple(pair) for pair in merged]


def format_ranges(ranges):
    """cpu_ranges' ranges as a canonical cpulist: "0-15,32-47"; "" for none."""
    return ",".join(str(low) if low == high else "%d-%d" % (low, high) for low, high in ranges)


def format_cpulist(cpus):
    """CPU ids as a canonical cpulist: ascending ranges, "0-15,32-47"; "" for none."""
    parts = []
    start = previous = None
    for cpu in sorted(cpus):
        if previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == previous else "%d-%d" % (start, previous))
        start = previous = cpu
    if start is not None:
        parts.append(str(start) if start == previous else "%d-%d" % (start, previous))
    return ",".join(parts)
