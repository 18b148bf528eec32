# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes-style quantities: CPU in cores or millicores, sizes in bytes."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal

_SIZE_UNITS = {
    "": 1,
    "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
    "k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15,
}
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?$")
_CPU = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m)?$")

SIZE_EXPECTED = "a size: bytes, or a number with Ki, Mi, Gi, Ti, Pi, K, M, G, T or P (e.g. 16Gi)"
CPU_EXPECTED = "a CPU amount: cores (e.g. 4 or 0.5) or millicores (e.g. 500m)"


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_size(value):
    """Return a size in bytes (int, rounded up) or raise ValueError."""
    if _is_number(value):
        amount = Decimal(str(value))
    elif isinstance(value, str) and _SIZE.match(value.strip()):
        number, unit = _SIZE.match(value.strip()).groups()
        amount = Decimal(number) * _SIZE_UNITS[unit or ""]
    else:
        raise ValueError(SIZE_EXPECTED)
    if amount < 0 or not amount.is_finite():
        raise ValueError(SIZE_EXPECTED + ", not negative")
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def parse_cpu(value):
    """Return a CPU amount in millicores (int, rounded up) or raise ValueError."""
    if _is_number(value):
        cores = Decimal(str(value))
    elif isinstance(value, str) and _CPU.match(value.strip()):
        number, milli = _CPU.match(value.strip()).groups()
        cores = Decimal(number) / 1000 if milli else Decimal(number)
    else:
        raise ValueError(CPU_EXPECTED)
    if cores < 0 or not cores.is_finite():
        raise ValueError(CPU_EXPECTED + ", not negative")
    return int((cores * 1000).to_integral_value(rounding=ROUND_CEILING))


def format_size(size):
    """Short binary rendering for tables: 0, 512Mi, 80Gi, 1.5Ti."""
    if size == 0:
        return "0"
    for unit in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        scale = _SIZE_UNITS[unit]
        if size >= scale:
            text = ("%.1f" % (size / scale)).rstrip("0").rstrip(".")
            return text + unit
    return str(size)


def format_cpu(millicores):
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return "%dm" % millicores
