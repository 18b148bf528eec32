# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cpu_pinning: numa: the problem's keys, the NUMAPinning plugin, the exact solver and the plan checker."""

from __future__ import annotations

import copy
import itertools
import random

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Node
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.numa_pinning import numa_fits
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_cpulist, parse_cpulist
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import Attempt, plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import (
    checked, errors_of, node, service,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

NUMA = {"0": "0-15,32-47", "1": "16-31,48-63"}     # 32 CPUs on each of two NUMA nodes


def gpus(count=4, per_numa=2, prefix="GPU", **extra):
    return [dict({"index": i, "uuid": "%s-%d" % (prefix, i), "model": "NVIDIA H100", "memory": "80Gi", "numa_node": i // per_numa},
                 **extra) for i in range(count)]


def numa_node(numa_cpus=None, prefix="GPU", **extra):
    return node(cpu=64, memory="512Gi", gpus=gpus(prefix=prefix), numa_cpus=dict(NUMA if numa_cpus is None else numa_cpus), **extra)


def pinned(replicas=1, cpu=8, gpu=None, **extra):
    extra.setdefault("cpu_pinning", "numa")
    return service(replicas=replicas, cpu=cpu, resources={"gpu": gpu or {"count": 1}}, **extra)


# --- cpulists ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, cpus", [("0", {0}), ("0-3", {0, 1, 2, 3}), ("4095", {4095}), ("0-1,1-2", {0, 1, 2}),
                                        ("7,3-4", {3, 4, 7})])
def test_cpulist_parsed(text, cpus):
    assert parse_cpulist(text) == frozenset(cpus)


@pytest.mark.parametrize("text", ["", "0-3\n", " 0-3", "0-3 ", "0 - 3", "3-0", "0-4096", "4096", "0-99999999999",
                                  "1-", "-1", "+1", "01", "0x1", "1,,2", ",1", "1,", "0-1-2", "\u0661", "0\x00", "a",
                                  "0," * 9000 + "0", 3, None, ["0"]])
def test_hostile_cpulist_refused(text):
    with pytest.raises(ValueError, match="Linux cpulist"):
        parse_cpulist(text)


def test_a_cpulist_listing_more_cpus_than_there_may_be_is_refused():
    # Ranges that each fit but together list more CPUs than ids exist: refused without expanding them.
    assert parse_cpulist(",".join(["0-2047"] * 2)) == frozenset(range(2048))
    with pytest.raises(ValueError, match="its ranges hold more than 4096 CPUs in all"):
        parse_cpulist(",".join(["0-4095"] * 2))
    with pytest.raises(ValueError, match="its ranges hold more than 4096 CPUs in all"):
        parse_cpulist(",".join(["0-4095"] * 1638))


def test_format_cpulist_is_canonical():
    assert format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert format_cpulist(()) == ""
    assert parse_cpulist(format_cpulist(range(0, 4096, 2))) == frozenset(range(0, 4096, 2))


# --- the problem's keys ------------------------------------------------------------------------------------------------

def test_numa_cpus_read():
    problem = parse_problem({"nodes": {"a": numa_node()}, "services": {}})
    assert problem.nodes["a"].numa_cpus == {0: frozenset(range(0, 16)) | frozenset(range(32, 48)),
                                            1: frozenset(range(16, 32)) | frozenset(range(48, 64))}
    assert parse_problem({"nodes": {"a": node()}, "services": {}}).nodes["a"].numa_cpus == {}


@pytest.mark.parametrize("numa_cpus, path, expected", [
    ({"0": "0-3\n"}, "nodes.a.numa_cpus.0", "Linux cpulist"),
    ({"0": "8-4"}, "nodes.a.numa_cpus.0", "Linux cpulist"),
    ({"0": "0-1000000"}, "nodes.a.numa_cpus.0", "Linux cpulist"),
    ({"0": "junk"}, "nodes.a.numa_cpus.0", "Linux cpulist"),
    ({"0": 7}, "nodes.a.numa_cpus.0", "Linux cpulist"),
    ({"00": "0"}, "nodes.a.numa_cpus.00", "a NUMA node id from 0 to 1023"),
    ({"1024": "0"}, "nodes.a.numa_cpus.1024", "a NUMA node id from 0 to 1023"),
    ({"x": "0"}, "nodes.a.numa_cpus.x", "a NUMA node id from 0 to 1023"),
    ({"0": "0-7", "1": "4-11"}, "nodes.a.numa_cpus.1", "CPUs of this NUMA node only (CPU 4 is also NUMA node 0's)"),
    ({str(i): str(i) for i in range(65)}, "nodes.a.numa_cpus", "has 65 entries; expected at most 64"),
    ("0-3", "nodes.a.numa_cpus", "a mapping"),
])
def test_numa_cpus_refused(numa_cpus, path, expected):
    errors = errors_of({"nodes": {"a": node(numa_cpus=numa_cpus)}, "services": {}})
    assert expected in errors[path], errors


def test_cpu_pinning_refused_with_its_path():
    nodes = {"a": numa_node()}
    errors = errors_of({"nodes": nodes, "services": {"infer": pinned(cpu_pinning="x")}})
    assert errors == {"services.infer.cpu_pinning": 'got "x"; expected one of none, numa'}
    errors = errors_of({"nodes": nodes, "services": {"web": service(cpu_pinning="numa")}})
    assert errors == {"services.web.cpu_pinning": 'got "numa"; expected none on a service without a GPU request '
                                                  "(numa pins it to its GPUs' NUMA node)"}
    errors = errors_of({"nodes": nodes, "services": {"log": {"sidecar": True, "cpu_pinning": "numa"}}})
    assert errors == {"services.log.cpu_pinning": 'got "numa"; expected nothing: a sidecar follows its app\'s cpu_pinning'}
    problem = parse_problem({"nodes": nodes, "services": {"a": pinned(), "b": service(cpu_pinning="none"), "c": service()}})
    assert [problem.services[name].cpu_pinning for name in "abc"] == ["numa", "none", "none"]


def test_previous_placements_with_cpusets_are_read():
    problem = {"nodes": {"a": numa_node()}, "services": {"infer": pinned()}}
    first = checked(problem)
    again = checked(dict(problem, previous=first["placements"]))
    assert again["placements"] == first["placements"]
    assert again["moves"] == []


# --- plans -------------------------------------------------------------------------------------------------------------

def test_pinned_instance_gets_its_gpus_numa_node():
    result = checked({"nodes": {"a": numa_node()}, "services": {"infer": pinned(gpu={"count": 1, "memory": "10Gi"})}})
    placement = result["placements"]["infer-0"]
    assert placement["gpus"][0]["index"] == 0
    assert placement["cpuset_cpus"] == "0-15,32-47"
    assert placement["cpuset_mems"] == "0"


def test_gpus_on_two_numa_nodes_get_both():
    result = checked({"nodes": {"a": numa_node()}, "services": {"infer": pinned(cpu=40, gpu={"count": 3})}})
    placement = result["placements"]["infer-0"]
    assert placement["cpuset_cpus"] == "0-63"
    assert placement["cpuset_mems"] == "0-1"


def test_two_pinned_instances_share_one_numa_node():
    problem = {"nodes": {"a": numa_node()},
               "services": {"infer": pinned(replicas=2, cpu=16, gpu={"count": 1, "memory": "10Gi"}, sidecars=["log"]),
                            "log": {"sidecar": True, "resources": {"cpu": "0"}}}}
    result = checked(problem)
    assert result["path"] == "greedy"
    assert [p["cpuset_mems"] for p in result["placements"].values()] == ["0", "0"]
    # 2 x 16 = 32 CPUs: the NUMA node is full; a sidecar's CPU counts too, so the second goes to NUMA node 1.
    problem["services"]["log"]["resources"]["cpu"] = "1m"
    result = checked(problem)
    assert [p["cpuset_mems"] for p in result["placements"].values()] == ["0", "1"]
    # With only NUMA node 0's GPUs to take, the second is refused for its CPUs.
    problem["nodes"]["a"]["gpus"] = problem["nodes"]["a"]["gpus"][:2]
    result = plan(copy.deepcopy(problem), exact_seconds=0)
    assert not result["feasible"]
    assert result["unschedulable"]["infer-1"] == "0/1 nodes are available: 1 Insufficient CPUs on the GPUs' NUMA node."


def test_unpinned_work_does_not_count_against_numa_nodes():
    problem = {"nodes": {"a": numa_node()},
               "services": {"infer": pinned(replicas=2, cpu=16, gpu={"count": 1, "memory": "10Gi"}), "web": service(cpu=30)}}
    assert checked(problem)["feasible"]


def test_refused_without_numa_facts():
    nodes = {"a": numa_node(numa_cpus={}), "b": node(gpus=gpus(prefix="b")), "c": numa_node(numa_cpus={"1": "16-31"}, prefix="c")}
    result = plan({"nodes": nodes, "services": {"infer": pinned(gpu={"count": 3})}}, exact_seconds=0)
    assert result["unschedulable"]["infer-0"] == \
        "0/3 nodes are available: 3 node(s) had no NUMA facts for CPU pinning."
    # The GPUs of NUMA node 1 are known on c: one GPU fits there.
    assert checked({"nodes": nodes, "services": {"infer": pinned()}})["placements"]["infer-0"]["node"] == "c"


def test_pinned_instances_take_devices_on_a_numa_node_with_room():
    # Best fit alone would put both whole GPUs on NUMA node 0 (40 > 32 CPUs): the second takes a GPU of NUMA node 1,
    # in the greedy pass.
    problem = {"nodes": {"a": numa_node()}, "services": {"infer": pinned(replicas=2, cpu=20)}}
    result = checked(problem)
    assert result["path"] == "greedy"
    assert sorted(p["cpuset_mems"] for p in result["placements"].values()) == ["0", "1"]
    # Unpinned, the same instances keep best fit's devices (both on NUMA node 0).
    unpinned = copy.deepcopy(problem)
    del unpinned["services"]["infer"]["cpu_pinning"]
    placements = checked(unpinned)["placements"]
    assert [p["gpus"][0]["index"] for p in placements.values()] == [0, 1]
    # Three of 20 CPUs cannot share two NUMA nodes of 32: proved.
    problem["services"]["infer"]["replicas"] = 3
    result = plan(copy.deepcopy(problem))
    assert not result["feasible"]
    assert result["exact"]["status"] == "infeasible"
    assert check_plan(problem, result) == []


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_exact_model_spreads_a_spanning_instance_like_the_greedy_flow():
    # "wide" takes GPUs on both NUMA nodes and 40 CPUs; "narrow" 20 on NUMA node 1: 40 + 20 <= 64, with 8 from "wide"
    # on NUMA node 1 at most. The greedy flow accepts it; so must the exact model (path exact via a hint-less solve).
    problem = parse_problem({"nodes": {"a": numa_node()},
                             "services": {"wide": pinned(cpu=40, gpu={"count": 3}), "narrow": pinned(cpu=20)}})
    found = exact.solve(problem, Framework(problem, PLUGINS, WEIGHTS), 5.0)
    assert found.status == exact.OPTIMAL
    result = checked({"nodes": {"a": numa_node()},
                      "services": {"wide": pinned(cpu=40, gpu={"count": 3}), "narrow": pinned(cpu=20)}})
    assert result["placements"]["narrow-0"]["cpuset_mems"] == "1"


def test_reserve_and_unreserve_account_per_numa_set():
    problem = parse_problem({"nodes": {"a": numa_node()},
                             "services": {"infer": pinned(replicas=2, cpu=10, gpu={"count": 1, "memory": "10Gi"}),
                                          "wide": pinned(cpu=5, gpu={"count": 4})}})
    attempt = Attempt(Framework(problem, PLUGINS, WEIGHTS), problem, moves_allowed=False)
    instances = {instance.name: instance for instance in attempt.gang}
    state = attempt.cluster.nodes["a"]
    for name in ("infer-0", "infer-1"):
        assert attempt._place_on(instances[name], "a")
    assert state.numa_pinned == {frozenset([0]): 20000}
    placements = {p.instance.name: p for p in attempt.placements}
    _status, cycle, _filters = attempt.framework.run_pre_filter(attempt.cluster, instances["infer-0"])
    attempt._unbind(placements["infer-0"], cycle)
    assert state.numa_pinned == {frozenset([0]): 10000}
    _status, cycle, _filters = attempt.framework.run_pre_filter(attempt.cluster, instances["infer-1"])
    attempt._unbind(placements["infer-1"], cycle)
    assert state.numa_pinned == {}


# --- the flow ----------------------------------------------------------------------------------------------------------

def _hall(capacity, demands):
    numa_nodes = sorted(capacity)
    for size in range(1, len(numa_nodes) + 1):
        for chosen in itertools.combinations(numa_nodes, size):
            inside = sum(amount for wanted, amount in demands.items() if wanted <= set(chosen))
            if inside > sum(capacity[numa] for numa in chosen):
                return False
    return True


def test_numa_fits_agrees_with_halls_condition():
    generator = random.Random(39)
    for _round in range(400):
        count = generator.randint(1, 4)
        cpus, start = {}, 0
        for numa in range(count):
            size = generator.randint(1, 4)
            cpus[numa] = frozenset(range(start, start + size))
            start += size
        node_spec = Node("a", 1000 * start, 1, numa_cpus=cpus)
        demands = {}
        for _demand in range(generator.randint(0, 5)):
            wanted = frozenset(generator.sample(range(count), generator.randint(1, count)))
            demands[wanted] = demands.get(wanted, 0) + generator.randint(0, 4) * 500
        capacity = {numa: 1000 * len(members) for numa, members in cpus.items()}
        assert numa_fits(node_spec, demands) == _hall(capacity, demands), (cpus, demands)


def test_numa_fits_reroutes_an_earlier_demand():
    node_spec = Node("a", 4000, 1, numa_cpus={0: frozenset([0, 1]), 1: frozenset([2, 3])})
    # {0,1} asks 2 (it may take NUMA node 0's), then {0} asks 2: the first must move to NUMA node 1.
    assert numa_fits(node_spec, {frozenset([0, 1]): 2000, frozenset([0]): 2000})
    assert not numa_fits(node_spec, {frozenset([0, 1]): 2000, frozenset([0]): 2001, frozenset([1]): 0})
    assert not numa_fits(node_spec, {frozenset([0, 1]): 1000, frozenset([0]): 1500, frozenset([1]): 1600})


# --- unpinned problems plan as before ----------------------------------------------------------------------------------

def test_numa_facts_change_nothing_for_unpinned_work():
    services = {"infer": service(replicas=3, cpu=20, resources={"gpu": {"count": 1}}), "web": service(cpu=2)}
    with_facts = plan({"nodes": {"a": numa_node(), "b": numa_node(prefix="b")}, "services": copy.deepcopy(services)})
    without = plan({"nodes": {"a": node(cpu=64, memory="512Gi", gpus=gpus()),
                              "b": node(cpu=64, memory="512Gi", gpus=gpus(prefix="b"))}, "services": copy.deepcopy(services)})
    explicit = copy.deepcopy(services)
    explicit["infer"]["cpu_pinning"] = "none"
    none = plan({"nodes": {"a": numa_node(), "b": numa_node(prefix="b")}, "services": explicit})
    for result in (with_facts, without, none):
        del result["seconds"], result["steps"]
    assert with_facts == without == none
    assert all("cpuset_cpus" not in placement for placement in with_facts["placements"].values())


def test_checker_flags_a_broken_pinning():
    problem = {"nodes": {"a": numa_node()}, "services": {"infer": pinned(replicas=2, cpu=16, gpu={"count": 1, "memory": "1Gi"})}}
    result = checked(problem)
    broken = copy.deepcopy(result)
    broken["placements"]["infer-0"]["cpuset_cpus"] = "0-63"
    assert any("cpuset" in violation for violation in check_plan(problem, broken))
    over = copy.deepcopy(problem)
    over["services"]["infer"]["resources"]["cpu"] = 17
    assert any("pinned instances ask 34000m, their CPUs are 32000m" in violation for violation in check_plan(over, result))
    unpinned = copy.deepcopy(problem)
    del unpinned["services"]["infer"]["cpu_pinning"]
    assert any("has a cpuset but is not pinned" in violation for violation in check_plan(unpinned, result))
