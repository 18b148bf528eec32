# -*- coding: utf-8 -*-
"""The status report's decisions (plugins/module_utils/status.py): which probes run, the GPUs read from the stored
hardware facts, which recorded instances wait for a down host, and the lines that name the down hosts."""

from __future__ import annotations

import base64
import json

from ansible_collections.gangplank.platform.plugins.module_utils.status import (
    down_instances, hardware_gpus, host_status, status_probes, status_report, waiting_lines,
)

GPU = {"index": 0, "uuid": "GPU-0", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * 1024 ** 3}


def encoded(content):
    return base64.b64encode(json.dumps(content).encode()).decode()


def container(name, probe=None, rank=0):
    return {"name": name, "instance": name.split("-", 1)[1], "service": "web", "rank": rank, "ports": ["80"],
            "probe": probe}


def test_only_containers_with_a_probe_are_probed_once_quickly():
    probe = {"name": "h-web-0", "type": "tcp", "port": 80, "retries": 30, "interval": 2}
    assert status_probes([container("h-web-0", probe), container("h-web-1")]) == [
        dict(probe, retries=2, interval=0.5)]
    assert status_probes([]) == []


def test_gpus_come_from_the_stored_hardware_facts_and_an_unreadable_file_gives_none():
    assert hardware_gpus(encoded({"version": 1, "facts": {"gangplank_gpus": [GPU]}})) == [GPU]
    assert hardware_gpus("") == [] and hardware_gpus(None) == []
    assert hardware_gpus(encoded({"facts": {}})) == [] and hardware_gpus(encoded([1])) == []
    assert hardware_gpus(encoded({"facts": {"gangplank_gpus": "x"}})) == []
    assert hardware_gpus("not base64!") == [] and hardware_gpus(base64.b64encode(b"{").decode()) == []


def test_a_host_status_holds_rows_bindings_and_gpus_never_a_spec():
    probe = {"name": "h-web-0", "type": "tcp", "port": 80}
    existing = [{"Name": "h-web-0", "State": {"Running": True}, "Config": {"Labels": {}}}]
    status = host_status("h", [dict(container("h-web-0", probe), env={"TOKEN": "secret"})], existing,
                         {"h-web-0": {"healthy": True}}, {"web-0": {"service": "web"}}, "")
    assert status["bound"] == {"web-0": {"service": "web"}} and status["gpus"] == []
    assert [(row["container"], row["state"], row["health"]) for row in status["rows"]] == [
        ("h-web-0", "running", "healthy")]
    assert "secret" not in json.dumps(status)


def test_down_instances_are_the_recorded_ones_on_inventory_hosts_that_are_not_live_by_host():
    record = {"placement": {
        "web-2": {"node": "zeta"}, "db-0": {"node": "gone"}, "web-0": {"node": "live"},
        "web-1": {"node": "gone"}, "old-0": {"node": "removed"}, "bad-0": "not a mapping", "bad-1": {"node": 3}}}
    assert down_instances(record, ["live"], ["live", "gone", "zeta"]) == {
        "gone": {"db-0": {"node": "gone"}, "web-1": {"node": "gone"}}, "zeta": {"web-2": {"node": "zeta"}}}
    assert list(down_instances(record, ["live"], ["zeta", "gone", "live"])) == ["gone", "zeta"]
    assert down_instances({}, ["live"], ["live", "gone"]) == {}
    assert down_instances(None, [], ["gone"]) == {} and down_instances({"placement": None}, [], []) == {}


def test_waiting_lines_name_each_down_host_and_what_waits_in_the_order_given():
    waiting = {"b": ["db-0", "web-1"], "a": ["web-0"]}
    assert waiting_lines(waiting) == ["b is down; waiting for it: db-0, web-1", "a is down; waiting for it: web-0"]
    assert waiting_lines(waiting, ": waiting ") == ["b: waiting db-0, web-1", "a: waiting web-0"]
    assert waiting_lines({"gone": {"db-0": {}, "web-1": {}}}) == ["gone is down; waiting for it: db-0, web-1"]
    assert waiting_lines({}) == [] and waiting_lines(None) == []


def test_the_report_is_the_table_then_the_down_hosts_and_the_picture_only_when_asked():
    row = {"node": "live", "rank": 0, "instance": "web-0", "container": "live-web-0", "service": "web",
           "state": "running", "health": "healthy", "ports": "80"}
    statuses = {"live": {"rows": [row], "bound": {"web-0": {"service": "web", "ordinal": 0, "rank": 0}},
                         "gpus": [GPU]}}
    down = {"gone": {"db-0": {"service": "db", "ordinal": 0, "node": "gone"}}}
    report = status_report(["live"], statuses, down)
    assert report["lines"][-2:] == ["1 of 1 container(s) running and healthy", "gone is down; waiting for it: db-0"]
    assert report["down"] == down and "html" not in report
    html = status_report(["live"], statuses, down, picture=True)["html"]
    assert "gangplank status: 1 host(s)" in html and "down: gone" in html
    assert "db-0 (db), waiting: host down" in html and "GPU0 A100-SXM4-80GB 0/80Gi" in html
