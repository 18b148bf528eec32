# -*- coding: utf-8 -*-
"""The status report's decisions (plugins/module_utils/deploy/status.py): which probes run, the GPUs read from the stored
hardware facts, which recorded instances wait for a down host, and the lines that name the down hosts."""

from __future__ import annotations

import base64
import json

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import (
    down_instances, hardware_facts, hardware_gpu_groups, hardware_gpus, host_status, status_probes, status_report, waiting_lines,
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
    assert hardware_gpus(hardware_facts(encoded({"version": 1, "facts": {"gangplank_gpus": [GPU]}}))) == [GPU]
    assert hardware_gpus(hardware_facts("")) == [] and hardware_gpus(hardware_facts(None)) == []
    assert hardware_gpus(hardware_facts(encoded({"facts": {}}))) == [] and hardware_gpus(hardware_facts(encoded([1]))) == []
    assert hardware_gpus(hardware_facts(encoded({"facts": {"gangplank_gpus": "x"}}))) == []
    assert hardware_gpus(hardware_facts("not base64!")) == [] and hardware_gpus(hardware_facts(base64.b64encode(b"{").decode())) == []


def _dual_socket(links=True):
    """Stored hardware facts of a PCIe server: GPUs 0-1 NVLinked on NUMA node 0, GPUs 2-3 on NUMA node 1."""
    gpus = [dict(GPU, index=index, uuid="GPU-%d" % index, numa_node=index // 2) for index in range(4)]
    pairs = [{"gpus": [a, b], "level": "nvlink" if (a, b) in ((0, 1), (2, 3)) else "system" if a // 2 != b // 2
              else "host_bridge", "nvlinks": 4 if (a, b) in ((0, 1), (2, 3)) else 0}
             for a in range(4) for b in range(a + 1, 4)]
    facts = {"gangplank_gpus": gpus}
    if links:
        facts["gangplank_gpu_links"] = pairs
    return encoded({"version": 1, "facts": facts})


def test_the_gpus_link_groups_come_from_the_stored_hardware_facts():
    assert hardware_gpu_groups("h", hardware_facts(_dual_socket())) == {
        "nvlink": [{"gpus": [0, 1], "nvlinks": 4}, {"gpus": [2, 3], "nvlinks": 4}],
        "numa": [{"gpus": [0, 1], "numa_node": 0}, {"gpus": [2, 3], "numa_node": 1}]}
    # No links, no file, or facts that are not what the facts modules write: the GPUs are drawn in one list.
    assert hardware_gpu_groups("h", hardware_facts(_dual_socket(links=False))) is None
    assert hardware_gpu_groups("h", hardware_facts("")) is None and hardware_gpu_groups("h", hardware_facts("not base64!")) is None
    hostile = json.loads(base64.b64decode(_dual_socket()))
    hostile["facts"]["gangplank_gpu_links"][0]["level"] = "<script>"
    assert hardware_gpu_groups("h", hardware_facts(encoded(hostile))) is None
    hostile["facts"]["gangplank_gpu_links"] = [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4}] * 3000
    assert hardware_gpu_groups("h", hardware_facts(encoded(hostile))) is None


def test_the_status_page_draws_each_hosts_gpus_in_their_link_groups():
    statuses = {host: host_status(host, [], [], {}, {"train-0": {"service": "train", "gpus": [
        {"index": 0, "uuid": "GPU-0", "memory": GPU["memory_total"]}]}} if host == "a" else {}, hardware)
        for host, hardware in (("a", _dual_socket()), ("b", _dual_socket(links=False)))}
    page = status_report(["a", "b"], statuses, {}, picture=True)["html"]
    assert page.count("NVLink \u00d74") == 2 and "NUMA node 0" in page and "NUMA node 1" in page
    plain = status_report(["b"], {"b": statuses["b"]}, {}, picture=True)["html"]
    assert "NVLink" not in plain and "NUMA node" not in plain


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
    assert "db-0 (db), waiting: host down" in html and "GPU0 A100-SXM4-80GB free: 80Gi" in html
