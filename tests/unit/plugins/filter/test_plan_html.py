# -*- coding: utf-8 -*-
"""The plan_html filter: a thin adapter over placement_html.render_html with Ansible errors."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.plan_html import FilterModule
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan

plan_html = FilterModule().filters()["plan_html"]


def test_renders_a_plan_with_title_health_and_notes():
    result = plan({"nodes": {"a": {"cpu": 1, "memory": "1Gi"}}, "services": {"web": {"resources": {"cpu": "100m"}}}})
    page = plan_html(result, title="cluster <1>", health={"web-0": "unhealthy"}, notes=["gain: 1 node"])
    assert "<title>cluster &lt;1&gt;</title>" in page and "web-0 (web), unhealthy" in page and "gain: 1 node" in page


@pytest.mark.parametrize("value, message", [
    ("text", "expects a plan result"),
    ({"feasible": True, "usage": []}, "result.usage: got list; expected a mapping"),
])
def test_bad_input_is_an_ansible_error_naming_the_part(value, message):
    with pytest.raises(AnsibleFilterError, match=message.replace(".", r"\.")):
        plan_html(value)


def test_bad_options_are_refused():
    with pytest.raises(AnsibleFilterError, match="health must be a mapping"):
        plan_html({"feasible": False}, health="x")


def test_status_bindings_and_status_rows():
    bindings = {"a": {"web-0": {"service": "web", "ordinal": 0, "node": "a", "gpus": [], "nvme": None, "sidecars": ["log"]}}}
    rows = [{"instance": "web-0", "service": "web", "state": "running", "health": "healthy"},
            {"instance": "web-0", "service": "log", "state": "missing", "health": "no probe"}]
    page = plan_html(bindings, status=True, health=rows)
    assert "1 instance(s) on 1 node(s), as bound on the nodes" in page and "web-0 (web), missing" in page
    with pytest.raises(AnsibleFilterError, match=r"rows\[0\]: got str"):
        plan_html(bindings, status=True, health=["x"])
