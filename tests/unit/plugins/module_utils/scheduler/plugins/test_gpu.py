# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import GPURequest, Node
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import choose_gpus
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import NodeState
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, reason, service, solve, where

GI = 2 ** 30


def infer(replicas=1, memory="20Gi", count=1, models=None, **extra):
    request = {"count": count}
    if memory is not None:
        request["memory"] = memory
    if models is not None:
        request["models"] = models
    return service(replicas=replicas, resources={"gpu": request}, **extra)


def test_shared_by_memory_on_one_device():
    result = solve({"a": node(gpus=[gpu(0, memory="80Gi")])}, {"infer": infer(replicas=4)})
    gpus = [p["gpus"] for p in result["placements"].values()]
    assert all(g == [{"index": 0, "uuid": "GPU-A100-SXM4-80GB-0", "model": "NVIDIA A100-SXM4-80GB",
                      "memory": 20 * GI}] for g in gpus)
    assert result["usage"]["a"]["gpus"][0]["used"] == 80 * GI
    assert reason(solve({"a": node(gpus=[gpu(0)])}, {"infer": infer(replicas=5)}), "infer-4") == \
        "0/1 nodes are available: 1 Insufficient GPU memory (asked 20Gi per GPU; the largest free device has 0)."


def test_count_takes_distinct_devices_on_one_node():
    nodes = {"a": node(gpus=[gpu(0), gpu(1)]), "b": node(gpus=[gpu(0, uuid="GPU-b0")])}
    result = solve(nodes, {"train": infer(count=2, memory="10Gi")})
    placement = result["placements"]["train-0"]
    assert placement["node"] == "a" and [g["index"] for g in placement["gpus"]] == [0, 1]
    result = solve(nodes, {"train": infer(count=3, memory="10Gi")})
    assert reason(result, "train-0") == "0/2 nodes are available: 2 node(s) had fewer than 3 GPU(s) of any model."


def test_model_matching_is_a_case_insensitive_substring():
    nodes = {"a": node(gpus=[gpu(0, model="NVIDIA L4", memory="24Gi")]),
             "b": node(gpus=[gpu(0, model="NVIDIA H100 80GB HBM3")])}
    assert where(solve(nodes, {"infer": infer(models=["h100"])})) == {"infer-0": "b"}
    result = solve(nodes, {"infer": infer(models=["A100"])})
    assert reason(result, "infer-0") == "0/2 nodes are available: 2 node(s) had fewer than 1 GPU(s) of A100."


def test_whole_gpu_needs_an_unused_device_and_takes_all_of_it():
    nodes = {"a": node(gpus=[gpu(0)])}
    services = {"infer": infer(memory="1Gi"), "train": infer(memory=None)}
    assert reason(solve(nodes, services), "infer-0") == \
        "0/1 nodes are available: 1 Insufficient GPU memory (asked 1Gi per GPU; the largest free device has 0)."
    services = {"train": infer(memory=None, replicas=2)}
    assert reason(solve(nodes, services), "train-1") == \
        "0/1 nodes are available: 1 Insufficient free GPUs (asked 1 whole GPU(s); the most free on a node is 0)."
    result = solve(nodes, {"train": infer(memory=None)})
    assert result["placements"]["train-0"]["gpus"][0]["memory"] == 80 * GI


def test_best_fit_keeps_whole_gpus_free():
    # A 10Gi request goes onto the device that is already partly used, so device 1 stays whole.
    nodes = {"a": node(gpus=[gpu(0), gpu(1)], labels={"n": "a"})}
    services = {"big": infer(memory="60Gi"), "small": infer(memory="10Gi")}
    result = solve(nodes, services)
    assert result["placements"]["big-0"]["gpus"][0]["index"] == result["placements"]["small-0"]["gpus"][0]["index"]
    free_whole = [d for d in result["usage"]["a"]["gpus"] if d["used"] == 0]
    assert len(free_whole) == 1


def test_best_fit_across_nodes_prefers_the_tighter_device():
    nodes = {"a": node(gpus=[gpu(0, memory="80Gi", uuid="GPU-a")]),
             "b": node(gpus=[gpu(0, model="NVIDIA L40S", memory="48Gi", uuid="GPU-b")])}
    assert where(solve(nodes, {"infer": infer(memory="40Gi")})) == {"infer-0": "b"}


def test_choose_gpus_prefers_previous_devices_then_best_fit():
    problem = parse_problem({"nodes": {"a": node(gpus=[gpu(0), gpu(1), gpu(2)])}, "services": {}})
    state = NodeState(problem.nodes["a"])
    state.gpu_used = [0, 50 * GI, 70 * GI]
    request = GPURequest(1, 10 * GI)
    assert choose_gpus(state, request) == [(2, 10 * GI)]
    assert choose_gpus(state, request, preferred=("GPU-A100-SXM4-80GB-0",)) == [(0, 10 * GI)]
    assert choose_gpus(state, GPURequest(2, None)) is None
    assert choose_gpus(state, GPURequest(1, None)) == [(0, 80 * GI)]
    assert isinstance(problem.nodes["a"], Node)


def test_staying_instance_keeps_its_gpu():
    nodes = {"a": node(gpus=[gpu(0), gpu(1)])}
    previous = {"infer-0": {"node": "a", "gpus": [{"uuid": "GPU-A100-SXM4-80GB-1"}]}}
    result = solve(nodes, {"infer": infer()}, previous=previous)
    assert result["placements"]["infer-0"]["gpus"][0]["index"] == 1
