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
    assert where(solve(NODES, {"infer": gpu_service(3)}, quotas=quotas))
    result = solve(NODES, {"infer": gpu_service(4)}, quotas=quotas)
    assert reason(result, "infer-3") == "0/1 nodes are available: quota compute: gpu would be 4, above its max 3."


def test_max_gpu_memory_counts_whole_devices():
    quotas = {"compute": {"max": {"gpu_memory": "100Gi"}}}
    result = solve(NODES, {"train": gpu_service(2, memory=None)}, quotas=quotas)
    assert reason(result, "train-1") == \
        "0/1 nodes are available: 1 quota compute: gpu_memory would be 160Gi, above its max 100Gi."


def test_cpu_and_memory_max_include_sidecars():
    services = {"web": service(replicas=2, cpu=1, sidecars=["log"], quota="web"),
                "log": {"sidecar": True, "resources": {"cpu": 1}}}
    assert not solve(NODES, services, quotas={"web": {"max": {"cpu": 3}}})["feasible"]
    assert solve(NODES, services, quotas={"web": {"max": {"cpu": 4}}})["feasible"]


def test_min_is_reserved_for_its_group():
    # 4 GPUs; compute reserves 3, so another group can take only 1 even while compute uses none.
    quotas = {"compute": {"min": {"gpu": 3}}, "batch": {}}
    services = {"infer": gpu_service(0), "batch": gpu_service(2, quota="batch")}
    result = solve(NODES, services, quotas=quotas)
    assert reason(result, "batch-1") == \
        "0/1 nodes are available: quota min reservations: gpu would need 5 of the cluster's 4."
    services["batch"] = gpu_service(1, quota="batch")
    assert solve(NODES, services, quotas=quotas)["feasible"]


def test_min_counts_ungrouped_use_and_a_group_may_use_its_reservation():
    quotas = {"compute": {"min": {"gpu": 2}}}
    services = {"infer": gpu_service(2), "free": gpu_service(2, quota=None)}
    assert solve(NODES, services, quotas=quotas)["feasible"]
    services["free"] = gpu_service(3, quota=None)
    assert not solve(NODES, services, quotas=quotas)["feasible"]


def test_reservations_larger_than_the_cluster_make_even_an_empty_gang_infeasible():
    result = solve({"a": node()}, {"infer": gpu_service(0)}, quotas={"compute": {"min": {"gpu": 1}}})
    assert result["feasible"] is False and result["placements"] == {} and result["unschedulable"] == {}
    assert result["summary"] == "quota min reservations: gpu would need 1 of the cluster's 0"
