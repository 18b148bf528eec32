# -*- coding: utf-8 -*-
"""scale_report and waiting_lines: what playbooks/scale.yml returns and shows, and the down-host lines of site.yml,
rebalance.yml and scale.yml."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.scale_report import scale_report
from ansible_collections.gangplank.platform.plugins.filter.waiting_lines import waiting_lines

NODES = {"n1": {"worker-1": {"service": "worker", "ordinal": 1, "node": "n1", "gpus": [{"uuid": "GPU-1"}]},
                "db-0": {"service": "db", "ordinal": 0, "node": "n1"}},
         "n2": {"worker-0": {"service": "worker", "ordinal": 0, "node": "n2"}},
         "n3": {"worker-2": {"service": "worker", "ordinal": 2, "node": "n3"}}}
SERVICES = {"worker": {"ports": [8080]}, "db": {}}


def test_the_service_instances_on_live_hosts_by_ordinal_with_their_addresses():
    hostvars = {"n1": {"gangplank_publish_address": "10.0.0.1", "ansible_host": "h1"},
                "n2": {"gangplank_publish_address": "", "ansible_host": "h2"}, "n3": {}}
    report = scale_report(NODES, "worker", ["n1", "n2"], hostvars, SERVICES)
    assert report["instances"] == [
        {"instance": "worker-0", "node": "n2", "ordinal": 0, "address": "h2", "ports": [8080], "gpus": []},
        {"instance": "worker-1", "node": "n1", "ordinal": 1, "address": "10.0.0.1", "ports": [8080], "gpus": ["GPU-1"]}]
    assert report["line"] == "worker: 2 instance(s): worker-0@h2, worker-1@10.0.0.1"
    report = scale_report(NODES, "worker", ["n3"], {}, SERVICES)
    assert report["instances"][0]["address"] == "n3" and report["line"] == "worker: 1 instance(s): worker-2@n3"
    assert scale_report(NODES, "db", [], {}, SERVICES) == {"instances": [], "line": "db: 0 instance(s): "}
    assert scale_report(NODES, "db", ["n1"], {}, SERVICES)["instances"][0]["ports"] == []


def test_scale_report_refuses_what_is_not_a_mapping():
    with pytest.raises(AnsibleFilterError, match="scale_report: hostvars: expected a mapping, got list"):
        scale_report(NODES, "worker", [], [], SERVICES)


def test_waiting_lines_take_the_separator_and_refuse_a_list():
    waiting = {"n3": ["worker-2", "db-1"]}
    assert waiting_lines(waiting) == ["n3 is down; waiting for it: worker-2, db-1"]
    assert waiting_lines(waiting, ": waiting ") == ["n3: waiting worker-2, db-1"]
    assert waiting_lines({}) == []
    with pytest.raises(AnsibleFilterError, match="waiting_lines: expected a mapping of host"):
        waiting_lines(["n3"])
