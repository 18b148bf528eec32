# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, reason, service, solve, where


def gpu_service(replicas, quota="compute", memory="20Gi"):
    request = {"count": 1}
    if memory:
        request["memory"] = memory
    return service(replicas=replicas, resources={"gpu": request}, quota=quota)


NODES = {"a": node(cpu=64, memory="256Gi", gpus=[gpu(i) for i in range(4)])}


def test_max_caps_the_group():
    quotas = {"compute": {"max": {"gpu": 3}}}
    assert where(solve(NODES, {"train": gpu_service(3, memory=None)}, quotas=quotas))
    result = solve(NODES, {"train": gpu_service(4, memory=None)}, quotas=quotas)
    assert reason(result, "train-3") == (
        "0/1 nodes are available: 1 node(s) would take quota compute to 4 GPUs, above its max of 3 GPUs.")
    result = solve(NODES, {"web": service(replicas=3, cpu=2, quota="compute")}, quotas={"compute": {"max": {"cpu": 5}}})
    assert reason(result, "web-2") == (
        "0/1 nodes are available: placing it would take quota compute to 6 CPUs, above its max of 5 CPUs.")


def test_max_gpu_memory_counts_whole_devices():
    quotas = {"compute": {"max": {"gpu_memory": "100Gi"}}}
    result = solve(NODES, {"train": gpu_service(2, memory=None)}, quotas=quotas)
    assert reason(result, "train-1") == \
        "0/1 nodes are available: 1 node(s) would take quota compute to 160Gi of GPU memory, above its max of "\
        "100Gi of GPU memory."


def test_cpu_and_memory_max_include_sidecars():
    services = {"web": service(replicas=2, cpu=1, sidecars=["log"], quota="web"),
                "log": {"sidecar": True, "resources": {"cpu": 1}}}
    assert not solve(NODES, services, quotas={"web": {"max": {"cpu": 3}}})["feasible"]
    assert solve(NODES, services, quotas={"web": {"max": {"cpu": 4}}})["feasible"]


def test_min_is_reserved_for_its_group():
    # 4 GPUs; compute reserves 3, so another group can take only 1 even while compute uses none.
    quotas = {"compute": {"min": {"gpu": 3}}, "batch": {}}
    services = {"infer": gpu_service(0), "batch": gpu_service(2, quota="batch", memory=None)}
    result = solve(NODES, services, quotas=quotas)
    assert reason(result, "batch-1") == \
        "0/1 nodes are available: 1 node(s) would leave too little for the quotas' min reservations (5 GPUs needed "\
        "in all, the cluster has 4 GPUs)."
    services["batch"] = gpu_service(1, quota="batch", memory=None)
    assert solve(NODES, services, quotas=quotas)["feasible"]


def test_min_counts_ungrouped_use_and_a_group_may_use_its_reservation():
    quotas = {"compute": {"min": {"gpu": 2}}}
    services = {"infer": gpu_service(2, memory=None), "free": gpu_service(2, quota=None, memory=None)}
    assert solve(NODES, services, quotas=quotas)["feasible"]
    services["free"] = gpu_service(3, quota=None, memory=None)
    assert not solve(NODES, services, quotas=quotas)["feasible"]


def test_reservations_larger_than_the_cluster_make_even_an_empty_gang_infeasible():
    result = solve({"a": node()}, {"infer": gpu_service(0)}, quotas={"compute": {"min": {"gpu": 1}}})
    assert result["feasible"] is False and result["placements"] == {} and result["unschedulable"] == {}
    assert result["summary"].startswith(
        "the quotas' min reservations cannot be kept (1 GPU needed in all, the cluster has 0 GPUs); no placement exists")


def test_gpu_counts_the_devices_a_group_occupies_so_shares_fit():
    # Three 20Gi instances share two GPUs: the group occupies 2 devices, within min 2 and max 2.
    nodes = {"a": node(gpus=[gpu(0), gpu(1)])}
    quotas = {"compute": {"min": {"gpu": 2}, "max": {"gpu": 2}}}
    result = solve(nodes, {"infer": gpu_service(3, memory="40Gi")}, quotas=quotas)
    assert {g["index"] for p in result["placements"].values() for g in p["gpus"]} == {0, 1}
    # A fifth 40Gi share needs a third device: above the max.
    nodes = {"a": node(gpus=[gpu(0), gpu(1), gpu(2)])}
    result = solve(nodes, {"infer": gpu_service(5, memory="40Gi")}, quotas=quotas)
    assert reason(result, "infer-4") == (
        "0/1 nodes are available: 1 node(s) would take quota compute to 3 GPUs, above its max of 2 GPUs.")
