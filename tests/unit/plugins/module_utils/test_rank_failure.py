# -*- coding: utf-8 -*-
"""The report that stops a rollout: the same text as the Jinja template it replaces (fixtures/rank_failure_template.j2,
rendered as ansible.builtin.template renders it) on each of its branches, and the filter's checks."""

from __future__ import annotations

import os

import jinja2
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.rank_failure import rank_failure as rank_failure_filter
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.rank_failure import rank_failure

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "rank_failure_template.j2")
CONTAINERS = {
    "h1-api-0": {"instance": "api-0", "probe": {"type": "http", "url": "http://127.0.0.1:8080/health"}},
    "h1-api-1": {"instance": "api-1", "probe": {"type": "tcp", "host": "127.0.0.1", "port": 8081}},
    "h1-job-0": {"instance": "job-0", "probe": {"type": "exec", "argv": ["check", "--fast"]}},
}
HEALTH = {"probes": {
    "h1-job-0": {"healthy": False, "attempts": 3, "seconds": 9, "last_output": "exit 1"},
    "h1-api-0": {"healthy": False, "attempts": 5, "seconds": 30, "last_output": "HTTP 503"},
    "h1-api-1": {"healthy": False, "attempts": 1, "seconds": 2, "last_output": "connection refused"},
    "h1-ok-0": {"healthy": True, "attempts": 1, "seconds": 1, "last_output": ""},
}}
LOGS = [{"item": {"key": "h1-api-0"}, "stdout_lines": ["starting", "bind failed"], "stderr_lines": ["oops"]},
        {"item": {"key": "h1-api-1"}, "stdout_lines": [], "stderr_lines": []}]
RANKS = [["db"], ["api", "job"]]


def template_text(**variables):
    environment = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    with open(TEMPLATE, encoding="utf-8") as handle:
        return environment.from_string(handle.read()).render(inventory_hostname="h1", deploy_log_lines=20,
                                                             deploy__ranks=RANKS, **variables)


CASES = {
    "kept, unhealthy here": dict(rank=None, health=HEALTH, logs=LOGS, failed={"msg": "probe failed"}),
    "kept, unhealthy elsewhere": dict(rank=None, health={"probes": {}}, failed=None),
    "kept, no probes, a message": dict(rank=None, health={}, failed={"msg": "boom"}),
    "rank, stopped by another host": dict(rank=1, waves={"1": 1}, health={}, failed=None),
    "rolling rank, stopped by another host": dict(rank=1, waves={"1": 3}, health={}, failed=None),
    "rank failed, probes": dict(rank=1, waves={"1": 1}, health=HEALTH, logs=LOGS, failed={"msg": "x"}),
    "rolling rank failed in wave 2": dict(rank=1, waves={"1": 3}, in_wave=1, health=HEALTH, logs=LOGS, failed={"msg": "x"}),
    "rank failed, no probes": dict(rank=1, waves={"1": 1}, health={}, failed={"msg": "h1-api-0: image not found"}),
    "rank failed, no message": dict(rank=0, waves={"0": 1}, health={}, failed={"changed": False}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_report_is_the_templates_text(case):
    given = CASES[case]
    variables = {"deploy__rank": given["rank"], "deploy__waves": {"waves": given.get("waves", {})},
                 "deploy__in_wave": given.get("in_wave", 0), "deploy__rank_containers": CONTAINERS,
                 "deploy__health": given["health"], "deploy__logs": {"results": given.get("logs", [])}}
    if given["failed"] is not None:
        variables["ansible_failed_result"] = given["failed"]
    expected = template_text(**variables).rstrip("\n")
    got = rank_failure_filter(given["health"], {
        "host": "h1", "rank": given["rank"], "ranks": RANKS, "waves": given.get("waves", {}), "in_wave": given.get("in_wave", 0),
        "containers": CONTAINERS, "logs": given.get("logs", []), "log_lines": 20, "failed": given["failed"]})
    assert got == expected


def test_the_report_names_each_unhealthy_container_in_order_with_its_logs():
    text = rank_failure("h1", 1, ["api", "job"], {"1": 1}, 0, CONTAINERS, HEALTH, LOGS, 20, {"msg": "x"})
    assert text.splitlines()[0] == "Rank 1 (api, job) failed on h1; later ranks were not started."
    assert "h1-ok-0" not in text and text.index("h1-api-0 (") < text.index("h1-api-1 (") < text.index("h1-job-0 (")
    assert "  probe: tcp 127.0.0.1:8081, 1 attempt(s) over 2s" in text and "    oops" in text
    assert "h1-api-1 (instance api-1 on h1):\n  probe: tcp 127.0.0.1:8081, 1 attempt(s) over 2s\n" in text
    assert text.endswith("  last 20 log lines:") and "\n    (none)" in text


def test_the_filter_refuses_what_is_not_a_mapping_and_a_rank_it_does_not_know():
    with pytest.raises(AnsibleFilterError, match="^rank_failure: containers: expected a mapping, got list$"):
        rank_failure_filter({}, {"host": "h1", "rank": 0, "ranks": RANKS, "containers": []})
    with pytest.raises(AnsibleFilterError, match="^rank_failure: "):
        rank_failure_filter({}, {"host": "h1", "rank": 5, "ranks": RANKS})
    with pytest.raises(AnsibleFilterError, match="^rank_failure: expected a mapping of what the report reads, got str$"):
        rank_failure_filter({}, "h1")
