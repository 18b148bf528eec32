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


def _dual_socket_facts():
    """gangplank_gpus and gangplank_gpu_links of a PCIe server: GPUs 0-1 NVLinked on NUMA node 0, GPUs 2-3 on node 1."""
    gpus = [{"index": index, "uuid": "GPU-%d" % index, "model": "A100", "memory_total": 80 << 30, "numa_node": index // 2}
            for index in range(4)]
    links = [{"gpus": [a, b], "level": "nvlink" if (a, b) in ((0, 1), (2, 3)) else "system" if a // 2 != b // 2
              else "host_bridge", "nvlinks": 4 if (a, b) in ((0, 1), (2, 3)) else 0}
             for a in range(4) for b in range(a + 1, 4)]
    return gpus, links


def test_status_mode_draws_a_hosts_gpus_in_their_link_groups_from_its_links():
    gpus, links = _dual_socket_facts()
    bindings = {"g": {"train-0": {"service": "train", "gpus": [{"index": 0, "uuid": "GPU-0", "memory": 80 << 30}]}}}
    page = plan_html(bindings, status=True, gpus={"g": gpus}, gpu_links={"g": links})
    assert page.count("NVLink \u00d74") == 2 and "NUMA node 0" in page and "NUMA node 1" in page
    plain = plan_html(bindings, status=True, gpus={"g": gpus})
    assert "NVLink" not in plain and "NUMA node" not in plain


@pytest.mark.parametrize("change, message", [
    (lambda links: links[0].update(level="bogus"), r"plan_html: gpu_links\.g\[0\]\.level: got \"bogus\"; expected one of nvlink"),
    (lambda links: links.extend(links * 500), r"plan_html: gpu_links\.g: got \[.*; expected a list of at most 2016 pairs"),
])
def test_status_mode_refuses_links_that_are_not_what_the_facts_modules_write(change, message):
    gpus, links = _dual_socket_facts()
    change(links)
    with pytest.raises(AnsibleFilterError, match=message) as raised:
        plan_html({"g": {}}, status=True, gpus={"g": gpus}, gpu_links={"g": links})
    assert "Traceback" not in str(raised.value)
    with pytest.raises(AnsibleFilterError, match="must be mappings of host"):
        plan_html({"g": {}}, status=True, gpus={"g": gpus}, gpu_links=[links])


def test_status_mode_renders_nested_and_huge_values_in_bounded_time_and_errors_on_one_line():
    deep, laughs = [], ["lol"] * 9
    for _level in range(5000):
        deep = [deep]
    for _level in range(9):             # 9^9 leaves if rendered whole, as YAML aliases can make them
        laughs = [laughs] * 9
    bindings = {"g": {"train-0": {"service": laughs, "gpus": [{"index": deep, "uuid": deep, "memory": 1 << 30}]}}}
    page = plan_html(bindings, status=True, health={"train-0": laughs})
    assert page.startswith("<!DOCTYPE html>") and len(page) < 100000
    with pytest.raises(AnsibleFilterError, match="got True; expected a whole number") as raised:
        plan_html({"a\nb": {"x": {"gpus": [{"memory": True}]}}}, status=True)
    assert "\n" not in str(raised.value)
    gpus, links = _dual_socket_facts()
    gpus[0]["uuid"] = "a\nb"
    with pytest.raises(AnsibleFilterError, match=r"gpus\.g and gpu_links\.g are not what the facts modules write: gpus\[0\]\.uuid") as raised:
        plan_html({"g": {}}, status=True, gpus={"g": gpus}, gpu_links={"g": links})
    assert "\n" not in str(raised.value)
