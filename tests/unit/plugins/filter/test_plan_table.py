# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.plan_table import FilterModule
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, service, solve


def test_filter_renders_lines_and_rejects_non_plans():
    plan_table = FilterModule().filters()["plan_table"]
    lines = plan_table(solve({"a": node()}, {"web": service()}))
    assert lines[0].startswith("NODE") and any("web-0" in line for line in lines)
    with pytest.raises(AnsibleFilterError, match="expects a plan result"):
        plan_table(["x"])
    with pytest.raises(AnsibleFilterError, match="incomplete"):
        plan_table({"feasible": True})
