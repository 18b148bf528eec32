# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.queue_sort import HeavyFirst
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, service, solve, where


def order(problem_mapping, moves_allowed=False):
    problem = parse_problem(problem_mapping)
    sorter = HeavyFirst(problem)
    return [i.name for i in sorted(problem.instances(), key=lambda i: sorter.sort_key(i, moves_allowed))]


def test_pinned_first_then_whole_gpus_nvme_cpu_memory_gpu_share_then_name():
    nodes = {"a": node(cpu=100, memory="100Gi", gpus=[gpu(0), gpu(1)],
                       nvme=[{"name": "n0", "size": "1Ti", "labels": ["c"]}])}
    services = {
        "cpu-heavy": service(cpu=50),
        "cpu-light": service(replicas=2, cpu=1),
        "disk": service(resources={"nvme": {"label": "c", "size": "10Gi"}}),
        "small-gpu": service(resources={"gpu": {"memory": "10Gi", "count": 2}}),
        "big-gpu": service(resources={"gpu": {"memory": "40Gi"}}),
        "whole-gpu": service(resources={"gpu": {"count": 1}}),
        "db": service(stateful=True),
        "web": service(),
    }
    previous = {"db-0": {"node": "a"}, "web-0": {"node": "a"}}
    assert order({"nodes": nodes, "services": services, "previous": previous}) == [
        "db-0", "web-0", "whole-gpu-0", "disk-0", "cpu-heavy-0", "big-gpu-0", "small-gpu-0",
        "cpu-light-0", "cpu-light-1"]
    # When stateless instances may move, only stateful ones stay ahead.
    assert order({"nodes": nodes, "services": services, "previous": previous}, moves_allowed=True)[:2] == \
        ["db-0", "whole-gpu-0"]


def test_a_gpu_share_that_asks_more_cpu_goes_before_one_that_asks_more_gpu_memory():
    # A share is a fraction of one device: what leaves it nowhere to go once nodes fill is CPU (the openb trace).
    nodes = {"a": node(cpu=16, gpus=[gpu(0), gpu(1)])}
    services = {"cpu-share": service(cpu=8, resources={"gpu": {"memory": "10Gi"}}),
                "memory-share": service(cpu=2, resources={"gpu": {"memory": "40Gi"}}),
                "whole": service(cpu=1, resources={"gpu": {"count": 1}})}
    assert order({"nodes": nodes, "services": services}) == ["whole-0", "cpu-share-0", "memory-share-0"]


def test_an_instance_few_nodes_can_take_goes_before_work_that_fits_anywhere():
    # Both ask one whole GPU; "any" sorts first by name and, on a tie, takes node "a-p100" (first by name),
    # which leaves "only-p100" nowhere. Fewest feasible nodes first places both.
    nodes = {"a-p100": node(gpus=[gpu(0, model="Tesla P100", uuid="GPU-p")]),
             "b-t4": node(gpus=[gpu(0, model="Tesla T4", uuid="GPU-t")])}
    services = {"any": service(resources={"gpu": {"count": 1}}),
                "only-p100": service(resources={"gpu": {"count": 1, "models": ["P100"]}})}
    assert where(solve(nodes, services)) == {"any-0": "b-t4", "only-p100-0": "a-p100"}


def test_nodes_a_service_cannot_use_do_not_reorder_it():
    gpu_nodes = {"g%d" % i: node(cpu=8, gpus=[gpu(0, uuid="GPU-%d-0" % i), gpu(1, uuid="GPU-%d-1" % i)])
                 for i in range(3)}
    services = {"big": service(cpu=4, resources={"gpu": {"memory": "50Gi"}}),
                "small": service(replicas=3, cpu=2, resources={"gpu": {"memory": "30Gi"}}),
                "wide": service(cpu=6, memory="2Gi", resources={"gpu": {"memory": "30Gi"}})}
    alone = solve(gpu_nodes, services)
    more = dict(gpu_nodes, **{"cpu-%d" % i: node(cpu=256, memory="1Ti") for i in range(5)})
    with_cpu_nodes = solve(more, services)
    assert where(alone) == where(with_cpu_nodes)
