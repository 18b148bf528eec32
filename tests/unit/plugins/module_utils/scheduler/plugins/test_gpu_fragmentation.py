# -*- coding: utf-8 -*-
from __future__ import annotations

import random

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
    t4 = [gpu(i, model="Tesla T4", memory="16Gi", uuid="GPU-t4-%d" % i) for i in range(4)]
    nodes = {"a-t4": node(cpu=16, gpus=[dict(device, index=i) for i, device in enumerate(t4[:2])]),
             "a2-t4": node(cpu=16, gpus=[dict(device, index=i) for i, device in enumerate(t4[2:])]),
             "b-big": node(cpu=16, gpus=[gpu(i, uuid="GPU-big-%d" % i) for i in range(3)])}
    # The T4 nodes sort first by name and are as good a fit otherwise; the gang also runs T4-only work, which
    # comes after "any" in the queue (as many nodes, by powers of two, and lighter).
    services = {"any": whole(), "t4-only": service(resources={"gpu": {"count": 1, "models": ["T4"]}})}
    assert where(solve(nodes, services)) == {"any-0": "b-big", "t4-only-0": "a-t4"}
    problem = parse_problem({"nodes": nodes, "services": services})
    plugin = GPUFragmentation(problem)
    big = problem.nodes["b-big"]
    # Half the mix can use only 4 of the 7 GPUs: its weight 0.5 counts 0.5 x 7 / 4 on the node it cannot use.
    assert plugin.fragmentation(big, 16000, 64 * GI, [80 * GI] * 3) == pytest.approx(0.875 * 3)


def test_expected_mix_follows_the_work_the_gang_has_left():
    problem = parse_problem({"nodes": {"a": gpu_node(cpu=64)}, "services": {
        "train": whole(replicas=2), "small": shared(replicas=4, memory="10Gi")}})
    plugin = GPUFragmentation(problem)
    node_spec = problem.nodes["a"]
    half_used = [80 * GI, 40 * GI]
    # The catalog: the half-used device's free half is a fragment for the whole-GPU third of the mix.
    assert plugin.fragmentation(node_spec, 64000, 64 * GI, half_used) == pytest.approx(0.5 / 3)
    assert plugin.expect({"train": 2, "small": 4}) is False         # all of it still to place: the catalog
    # Only small shapes left (half of the GPU work): they fit the free half, nothing is a fragment.
    assert plugin.expect({"train": 0, "small": 3}) is True
    assert plugin.fragmentation(node_spec, 64000, 64 * GI, half_used) == 0.0
    assert plugin.expect({"small": 2}) is False                     # not halved since: the mix stays
    assert plugin.expect(None) is True                              # the attempt is over: the catalog
    assert plugin.fragmentation(node_spec, 64000, 64 * GI, half_used) == pytest.approx(0.5 / 3)
    assert plugin.expect({"small": 1}) is True                      # another attempt: what it has left
    assert plugin.expect({}) is True                                # no GPU work left: the catalog again
    assert plugin.fragmentation(node_spec, 64000, 64 * GI, half_used) == pytest.approx(0.5 / 3)


def _reference_fragmentation(plugin, node, cpu_free, memory_free, gpu_free):
    """The fragmentation as the design states it, shape by shape, without any of the plugin's caching."""
    mix = expected_mix(plugin.problem)
    devices = [device for n in plugin.problem.nodes.values() for device in n.gpus]
    sizes = [device.memory for device in node.gpus]
    shares = [free / float(size) for free, size in zip(gpu_free, sizes)]
    idle = sum(shares)
    if idle <= 0:
        return 0.0
    cpu = memory = gpus = 0.0
    result = 0.0
    for request, weight, shapes in mix:
        positions = [p for p, device in enumerate(node.gpus) if request.matches(device)]
        if not positions:
            matching = sum(1 for device in devices if request.matches(device))
            result += weight * len(devices) / float(matching) * idle
            continue
        size = float(max(sizes[p] for p in positions))
        taken = request.count * (1.0 if request.memory is None else min(1.0, request.memory / size))
        usable = [p for p in positions
                  if (gpu_free[p] == sizes[p] if request.memory is None else gpu_free[p] >= request.memory)]
        for shape_cpu, shape_memory, share in shapes:
            cpu += share * shape_cpu
            memory += share * shape_memory
            gpus += share * taken
            fits = len(usable) >= request.count and shape_cpu <= cpu_free and shape_memory <= memory_free
            result += share * (idle - sum(shares[p] for p in usable)) if fits else share * idle
    starved = 0.0
    if gpus and cpu:
        starved = max(starved, idle - max(cpu_free, 0) / (cpu / gpus))
    if gpus and memory:
        starved = max(starved, idle - max(memory_free, 0) / (memory / gpus))
    return starved + result


def test_cached_fragmentation_equals_the_shape_by_shape_definition():
    rng = random.Random(7)
    mixed = [gpu(0, uuid="GPU-m-0"), gpu(1, model="NVIDIA L4", memory="24Gi", uuid="GPU-m-1"),
             gpu(2, model="Tesla T4", memory="16Gi", uuid="GPU-m-2"), gpu(3, uuid="GPU-m-3")]
    problem = parse_problem({"nodes": {"mixed": node(cpu=32, memory="128Gi", gpus=mixed), "plain": gpu_node(cpu=16)},
                             "services": {
                                 "train": whole(replicas=3, count=2, cpu=8), "one": whole(replicas=2, cpu=3),
                                 "small": shared(replicas=5, memory="10Gi", cpu=2), "mid": shared(replicas=2, memory="30Gi", cpu=6),
                                 "l4": service(replicas=2, cpu=4, resources={"gpu": {"memory": "8Gi", "models": ["L4"]}}),
                                 "web": service(replicas=9)}})
    plugin = GPUFragmentation(problem)
    for _case in range(400):
        node_spec = problem.nodes[rng.choice(["mixed", "plain"])]
        gpu_free = [rng.choice([device.memory, device.memory // 2, 8 * GI, 0, device.memory - 10 * GI])
                    for device in node_spec.gpus]
        cpu_free = rng.choice([0, 1000, 2000, 3000, 6000, 7999, 8000, 16000, -500])
        memory_free = rng.choice([0, GI, 8 * GI, 64 * GI])
        assert plugin.fragmentation(node_spec, cpu_free, memory_free, gpu_free) == pytest.approx(
            _reference_fragmentation(plugin, node_spec, cpu_free, memory_free, gpu_free)), (node_spec.name, cpu_free, memory_free, gpu_free)


def test_without_gpu_work_the_framework_leaves_the_score_out():
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
    names = {"cpu": {"web": service()}, "gpu": {"web": service(), "train": whole()}}
    scorers = {}
    for case, services in names.items():
        framework = Framework(parse_problem({"nodes": {"a": gpu_node()}, "services": services}), PLUGINS, WEIGHTS)
        scorers[case] = [plugin.name for plugin in framework.scorers]
    assert "GPUFragmentation" not in scorers["cpu"]
    assert "GPUFragmentation" in scorers["gpu"]


def test_a_scalable_service_counts_in_the_mix_as_its_max_replicas():
    problem = parse_problem({"nodes": {"a": gpu_node()}, "services": {
        "small": shared(replicas=3, memory="10Gi"),
        "train": dict(whole(replicas=1, count=2), scalable=True, max_replicas=4)}})
    assert [(request.count, round(weight, 3)) for request, weight, _shapes in expected_mix(problem)] == [
        (1, 0.429), (2, 0.571)]
    # Without max_replicas, its replicas alone (the growth is not known).
    plain = parse_problem({"nodes": {"a": gpu_node()}, "services": {
        "small": shared(replicas=3, memory="10Gi"), "train": dict(whole(replicas=1, count=2), scalable=True)}})
    assert [(request.count, round(weight, 3)) for request, weight, _shapes in expected_mix(plain)] == [
        (1, 0.75), (2, 0.25)]


def test_the_gang_leaves_room_for_what_a_scalable_service_may_grow_to():
    # Two 8-GPU servers, GPU shares that never move, and a training service of 4 whole GPUs that the compute
    # platform grows from 0 (benchmarks/headroom_benchmark.py, seed 1). With max_replicas 2 the shares are packed so
    # that both training instances fit later without moving anything; without it the same gang leaves room for one.
    nodes = {name: node(cpu=96, memory="1Ti", gpus=[gpu(i, uuid="GPU-%s-%d" % (name, i)) for i in range(8)])
             for name in ("a", "b")}
    services = {
        "infer": dict(shared(replicas=12, memory="20Gi", cpu=2), stateful=True),
        "embed": dict(shared(replicas=5, memory="40Gi", cpu=2), stateful=True),
        "train": dict(whole(replicas=0, count=4, cpu=8), scalable=True, max_replicas=2),
    }
    gang = solve(nodes, services)
    assert gang["feasible"]
    grown = solve(nodes, dict(services, train=dict(services["train"], replicas=2)), previous=gang["placements"])
    assert grown["feasible"], grown.get("reasons")
    assert not grown["moves"]
