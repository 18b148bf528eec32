# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The "0/N nodes are available" message says, for each shortage, what was asked and the most a node had."""

from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, reason, service, solve


def _l40s(name, cpu=32, memory="256Gi"):
    return node(cpu=cpu, memory=memory, gpus=[gpu(i, model="NVIDIA L40S", memory="48Gi", uuid="%s-%d" % (name, i))
                                              for i in range(4)])


def test_gpu_memory_names_the_request_and_the_largest_free_device():
    result = solve({"l40s": _l40s("l")}, {"llm": service(resources={"gpu": {"count": 1, "memory": "96Gi"}})})
    assert reason(result, "llm-0") == (
        "0/1 nodes are available: 1 Insufficient GPU memory (asked 96Gi per GPU; the largest free device has 48Gi).")


def test_several_gpus_say_how_many_devices_have_that_free():
    nodes = {"l40s": _l40s("l")}
    services = {"small": service(replicas=3, resources={"gpu": {"count": 1, "memory": "40Gi"}}),
                "pair": service(resources={"gpu": {"count": 2, "memory": "40Gi"}}, priority=-1)}
    assert reason(solve(nodes, services), "pair-0") == (
        "0/1 nodes are available: 1 Insufficient GPU memory (asked 2 GPUs with 40Gi each; the largest free device has "
        "48Gi, and at most 1 device(s) of a node have that free).")


def test_whole_gpus_cpu_and_memory_carry_their_numbers():
    nodes = {"a": _l40s("a", cpu=8, memory="32Gi"), "b": _l40s("b", cpu=64, memory="512Gi")}
    services = {"hog": service(cpu=1, resources={"gpu": {"count": 3}}, node_selector={"pool": "x"}, priority=10),
                "train": service(cpu=16, memory="64Gi", resources={"gpu": {"count": 4}})}
    nodes["b"]["labels"] = {"pool": "x"}
    result = solve(nodes, services)
    assert reason(result, "train-0") == (
        "0/2 nodes are available: 1 Insufficient cpu (asked 16 CPUs; the most free on a node is 8 CPUs), "
        "1 Insufficient free GPUs (asked 4 whole GPU(s); the most free on a node is 1).")
    result = solve({"a": node(cpu=8, memory="32Gi")}, {"db": service(cpu=2, memory="48Gi")})
    assert reason(result, "db-0") == (
        "0/1 nodes are available: 1 Insufficient memory (asked 48Gi of memory; the most free on a node is 32Gi).")


def test_nvme_names_the_request_and_the_largest_free_device():
    nodes = {"a": node(nvme=[{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"]},
                             {"name": "nvme1n1", "size": "500Gi", "labels": ["cache"]}])}
    result = solve(nodes, {"index": service(resources={"nvme": {"label": "cache", "size": "2Ti"}})})
    assert reason(result, "index-0") == (
        "0/1 nodes are available: 1 Insufficient NVMe space (cache; asked 2Ti; the largest free device has 1Ti).")


def test_the_counting_proof_names_how_many_more_are_like_the_first():
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
    nodes = {"a": node()}
    services = {"web": service(replicas=3, node_selector={"zone": "moon"}), "db": service(node_selector={"zone": "moon"})}
    result = plan({"nodes": nodes, "services": {"web": services["web"]}}, exact_seconds=0)
    assert result["summary"].endswith("no placement exists: no node accepts web-0 (nor the 2 more like it)")
    result = plan({"nodes": nodes, "services": {"db": services["db"]}}, exact_seconds=0)
    assert result["summary"].endswith("no placement exists: no node accepts db-0")
