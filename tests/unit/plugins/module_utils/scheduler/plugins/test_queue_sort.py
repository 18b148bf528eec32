# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.queue_sort import HeavyFirst
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, service


def order(problem_mapping, moves_allowed=False):
    problem = parse_problem(problem_mapping)
    sorter = HeavyFirst(problem)
    return [i.name for i in sorted(problem.instances(), key=lambda i: sorter.sort_key(i, moves_allowed))]


def test_pinned_first_then_gpu_memory_gpu_count_nvme_share_then_name():
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
        "db-0", "web-0", "whole-gpu-0", "big-gpu-0", "small-gpu-0", "disk-0", "cpu-heavy-0",
        "cpu-light-0", "cpu-light-1"]
    # When stateless instances may move, only stateful ones stay ahead.
    assert order({"nodes": nodes, "services": services, "previous": previous}, moves_allowed=True)[:2] == \
        ["db-0", "whole-gpu-0"]
