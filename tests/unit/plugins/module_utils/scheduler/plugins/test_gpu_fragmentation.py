# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu_fragmentation import GPUFragmentation, expected_mix
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, service, solve, where

GI = 2 ** 30


def shared(replicas=1, memory="20Gi", cpu=1, **extra):
    return service(replicas=replicas, cpu=cpu, resources={"gpu": {"memory": memory}}, **extra)


def whole(replicas=1, count=1, cpu=1):
    return service(replicas=replicas, cpu=cpu, resources={"gpu": {"count": count}})


def gpu_node(cpu=16, devices=2, prefix="x"):
    return node(cpu=cpu, memory="64Gi", gpus=[gpu(i, uuid="GPU-%s-%d" % (prefix, i)) for i in range(devices)])


def test_expected_mix_is_the_catalog_s_gpu_replicas_grouped_by_request():
    problem = parse_problem({"nodes": {"a": gpu_node()}, "services": {
        "small": shared(replicas=3, memory="10Gi", cpu=2), "small-b": shared(replicas=1, memory="10Gi", cpu=4),
        "train": whole(replicas=4), "web": service(replicas=10), "idle": whole(replicas=0)}})
    mix = expected_mix(problem)
    assert [(request.count, request.memory, round(weight, 3)) for request, weight, _shapes in mix] == [
        (1, None, 0.5), (1, 10 * GI, 0.5)]
    # Within a request, each (cpu, memory) keeps its own share: what the node's free CPU must still fit.
    assert [(cpu, share) for cpu, _memory, share in mix[1][2]] == [(2000, 0.375), (4000, 0.125)]


def test_fragmentation_counts_what_the_mix_cannot_use():
    problem = parse_problem({"nodes": {"a": gpu_node(cpu=64, devices=2)}, "services": {
        "train": whole(replicas=1, cpu=1)}})
    plugin = GPUFragmentation(problem)
    node_spec = problem.nodes["a"]
    full = 80 * GI
    # Two whole GPUs free, CPU to spare: nothing is stranded.
    assert plugin.fragmentation(node_spec, 64000, 64 * GI, [full, full]) == 0.0
    # A device partly used cannot take a whole-GPU request: its free half is a fragment.
    assert plugin.fragmentation(node_spec, 64000, 64 * GI, [full, full // 2]) == pytest.approx(0.5)
    # No free CPU: every idle GPU is stranded, for FGD (no request fits) and for want of cores (again).
    assert plugin.fragmentation(node_spec, 0, 64 * GI, [full, full]) == pytest.approx(4.0)


def test_shared_work_goes_where_it_leaves_whole_gpus_for_whole_gpu_work():
    nodes = {"a": gpu_node(prefix="a"), "b": gpu_node(prefix="b")}
    # b already has a partly used device; a is untouched. The catalog also runs whole-GPU work.
    services = {"infer": shared(stateful=True), "small": shared(memory="10Gi"), "train": whole(replicas=2)}
    previous = {"infer-0": {"node": "b"}}
    placed = where(solve(nodes, services, previous=previous))
    assert placed["small-0"] == "b"
    assert sorted(placed[name] for name in ("train-0", "train-1")) in (["a", "a"], ["a", "b"])


def test_cpu_only_work_keeps_off_the_cores_that_feed_idle_gpus():
    # Node "lean" has just the cores its GPUs' expected work needs; "rich" has cores to spare.
    nodes = {"lean": gpu_node(cpu=8, devices=2, prefix="l"), "rich": gpu_node(cpu=64, devices=2, prefix="r")}
    # With the expected 4-core whole-GPU work, web on "lean" would strand one of its GPUs.
    result = solve(nodes, {"web": service(cpu=4), "train": whole(replicas=1, cpu=4)})
    assert where(result)["web-0"] == "rich"


def test_no_gpu_work_in_the_catalog_scores_every_node_alike():
    problem = parse_problem({"nodes": {"a": gpu_node()}, "services": {"web": service()}})
    assert expected_mix(problem) == []
    assert GPUFragmentation(problem).fragmentation(problem.nodes["a"], 0, 0, [80 * GI, 80 * GI]) == 0.0


def test_work_that_fits_anywhere_leaves_a_scarce_model_to_the_work_that_needs_it():
    nodes = {"a-t4": node(cpu=16, gpus=[gpu(i, model="Tesla T4", memory="16Gi", uuid="GPU-t4-%d" % i) for i in range(2)]),
             "b-big": node(cpu=16, gpus=[gpu(i, uuid="GPU-big-%d" % i) for i in range(3)])}
    # The T4 node sorts first by name and is as good a fit otherwise; the catalog also runs T4-only work.
    services = {"any": whole(), "t4-only": service(resources={"gpu": {"count": 1, "models": ["T4"]}})}
    assert where(solve(nodes, services)) == {"any-0": "b-big", "t4-only-0": "a-t4"}
    problem = parse_problem({"nodes": nodes, "services": services})
    plugin = GPUFragmentation(problem)
    big = problem.nodes["b-big"]
    # Half the mix can use only 2 of the 5 GPUs: its weight 0.5 counts 0.5 x 5 / 2 on the node it cannot use.
    assert plugin.fragmentation(big, 16000, 64 * GI, [80 * GI] * 3) == pytest.approx(1.25 * 3)
