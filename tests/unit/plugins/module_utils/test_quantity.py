# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.quantity import (
    format_cpu, format_size, parse_cpu, parse_size,
)


@pytest.mark.parametrize("text, expected", [
    (1024, 1024), ("1Ki", 1024), ("1.5Gi", 3 * 2 ** 29), ("16Gi", 16 * 2 ** 30), ("2T", 2 * 10 ** 12),
    ("500M", 500 * 10 ** 6), ("1k", 1000), ("0", 0), (0.5, 1), ("3576Gi", 3576 * 2 ** 30), (" 2Mi ", 2 * 2 ** 20),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["10Gx", "-1", -5, "1 Gi", "Gi", "", True, None, [1], "1e3", "1GiB"])
def test_bad_sizes(text):
    with pytest.raises(ValueError, match="expected|size"):
        parse_size(text)


@pytest.mark.parametrize("text, expected", [
    (4, 4000), (0.5, 500), ("500m", 500), ("2", 2000), ("1.25", 1250), ("0.0001", 1), (0, 0),
])
def test_cpu(text, expected):
    assert parse_cpu(text) == expected


@pytest.mark.parametrize("text", ["-1", -0.5, "5mm", "1k", False, "", None])
def test_bad_cpu(text):
    with pytest.raises(ValueError):
        parse_cpu(text)


def test_formatting():
    assert format_size(80 * 2 ** 30) == "80Gi"
    assert format_size(int(1.5 * 2 ** 40)) == "1.5Ti"
    assert format_size(0) == "0"
    assert format_size(512) == "512"
    # Past a float's exact digits the whole number of units; a size no float holds is no OverflowError.
    assert format_size(3 * 10 ** 15 * 2 ** 50 + 1) == "3000000000000000Pi"
    assert format_size(10 ** 400) == "%dPi" % (10 ** 400 // 2 ** 50)
    assert format_cpu(4000) == "4"
    assert format_cpu(500) == "500m"
