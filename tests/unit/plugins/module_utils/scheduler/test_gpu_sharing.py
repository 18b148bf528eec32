# -*- coding: utf-8 -*-
"""GPU shares enforced by MPS: ``nodes.<n>.gpu_sharing``, ``resources.gpu.cores``, the MPS server's
memory counted against the device, in the greedy pass, the exact solver, the repair pass and the plan checker."""

from __future__ import annotations

import copy
import random

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import plan_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.candidates import equivalence_key
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import MPS_SERVER_MEMORY, Instance, gpu_overhead
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import GPU
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu_fragmentation import GPUFragmentation
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import ClusterState
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import checked, errors_of, gpu, node, reason, service
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

GI = 2 ** 30
MI = 2 ** 20


def share(replicas=1, memory="10Gi", cores=None, count=1):
    request = {"count": count, "memory": memory}
    if cores is not None:
        request["cores"] = cores
    return service(replicas=replicas, resources={"gpu": request})


def mps_node(gpus=1, sharing="mps", memory="80Gi", name="a"):
    return node(gpus=[gpu(index, memory=memory, uuid="GPU-%s%d" % (name, index)) for index in range(gpus)], gpu_sharing=sharing)


# --- the problem format ---------------------------------------------------------------------------

def test_the_new_keys_are_read():
    problem = parse_problem({"nodes": {"a": mps_node(), "b": node()}, "services": {"infer": share(cores=30)}})
    assert problem.nodes["a"].gpu_sharing == "mps" and problem.nodes["b"].gpu_sharing == "none"
    assert problem.services["infer"].resources.gpu.cores == 30
    assert parse_problem({"nodes": {}, "services": {"infer": share()}}).services["infer"].resources.gpu.cores is None


def test_cores_on_a_whole_gpu_is_an_error_at_its_path():
    errors = errors_of({"nodes": {}, "services": {"infer": service(resources={"gpu": {"count": 1, "cores": 50}})}})
    assert errors == {"services.infer.resources.gpu.cores": "got 50; expected only on a GPU share (with "
                                                            "resources.gpu.memory): a whole GPU has all its cores"}


@pytest.mark.parametrize("cores, shown", [
    (True, "true"), ("50", '"50"'), (0, "0"), (101, "101"), (-5, "-5"), (50.0, "50.0"), (10 ** 40, "100000000000000000000"),
    ([50], "[50]"), ({"x": 1}, '{"x": 1}'),
])
def test_cores_out_of_range_or_not_an_integer(cores, shown):
    errors = errors_of({"nodes": {}, "services": {"infer": share(cores=cores)}})
    message = errors["services.infer.resources.gpu.cores"]
    assert message.startswith("got " + shown) and message.endswith("expected an integer from 1 to 100"), message


@pytest.mark.parametrize("value", ["MPS", "mps\n", "", True, 1, ["mps"], "exclusive"])
def test_a_bad_gpu_sharing_names_the_node(value):
    errors = errors_of({"nodes": {"a": dict(node(), gpu_sharing=value)}, "services": {}})
    assert errors["nodes.a.gpu_sharing"].endswith("expected one of mps, none (how the node enforces GPU shares)")


def test_the_catalog_takes_cores_too():
    services = {"infer": dict(share(cores=25), image="localhost/infer:1")}
    scheduling, _deploy = split_catalog(services)
    assert scheduling["infer"]["resources"]["gpu"]["cores"] == 25
    result = plan_catalog({"nodes": {"a": mps_node()}, "services": services}, exact_seconds=0)
    assert result["placements"]["infer-0"]["gpus"][0]["cores"] == 25
    with pytest.raises(ProblemError, match="services.infer.resources.gpu.cores: got 0; expected an integer from 1 to 100"):
        plan_catalog({"nodes": {"a": mps_node()}, "services": {"infer": share(cores=0)}}, exact_seconds=0)


def test_previous_gpus_with_cores_are_read_back():
    problem = {"nodes": {"a": mps_node(2)}, "services": {"infer": share(replicas=3, cores=40)}}
    first = checked(problem)
    again = dict(problem, previous=first["placements"])
    second = checked(again)
    assert second["placements"] == first["placements"] and second["moves"] == []


# --- cores per device -------------------------------------------------------------------------------

def test_the_cores_on_a_device_add_up_to_100_at_most():
    problem = {"nodes": {"a": mps_node()}, "services": {"x": share(cores=60), "y": share(cores=40)}}
    result = checked(problem)
    assert [entry["cores"] for name in ("x-0", "y-0") for entry in result["placements"][name]["gpus"]] == [60, 40]
    problem["services"]["y"] = share(cores=41)
    assert reason(plan(problem), "y-0") == "0/1 nodes are available: 1 Insufficient GPU cores (asked 41% of a GPU's cores; the most free on a device is 40%)."


def test_shares_without_cores_count_none_and_whole_gpus_never_share():
    problem = {"nodes": {"a": mps_node()}, "services": {"x": share(cores=100), "y": share(replicas=3)}}
    result = checked(problem)
    assert all("cores" not in entry for name in ("y-0", "y-1", "y-2") for entry in result["placements"][name]["gpus"])


def test_best_fit_goes_to_another_device_when_the_cores_are_taken():
    result = checked({"nodes": {"a": mps_node(2)}, "services": {"x": share(replicas=2, cores=60)}})
    assert sorted(result["placements"]["x-%d" % i]["gpus"][0]["index"] for i in range(2)) == [0, 1]


def test_cores_need_a_node_that_enforces_them():
    nodes = {"a": mps_node(sharing="none"), "b": node(gpus=[gpu(0, uuid="GPU-b0")]), "c": node()}
    result = plan({"nodes": nodes, "services": {"x": share(cores=10)}})
    assert reason(result, "x-0") == ("0/3 nodes are available: 1 node(s) had fewer than 1 GPU(s) of any model, "
                                     "2 node(s) cannot enforce GPU cores (gpu_sharing none).")
    nodes["b"]["gpu_sharing"] = "mps"
    assert checked({"nodes": nodes, "services": {"x": share(cores=10)}})["placements"]["x-0"]["node"] == "b"


def test_a_share_with_cores_is_its_own_equivalence_class():
    problem = parse_problem({"nodes": {}, "services": {"x": share(cores=10), "y": share(cores=20), "z": share(cores=10)}})
    keys = {name: equivalence_key(problem, problem.services[name]) for name in "xyz"}
    assert keys["x"] != keys["y"] and keys["x"] == keys["z"]


# --- the MPS server's memory ----------------------------------------------------------------------------

def test_the_fourth_20gi_share_does_not_fit_an_80gi_mps_device_but_fits_without_mps():
    assert MPS_SERVER_MEMORY == 66 * MI == 69206016
    problem = {"nodes": {"a": mps_node()}, "services": {"infer": share(replicas=4, memory="20Gi")}}
    assert reason(plan(copy.deepcopy(problem)), "infer-3") == (
        "0/1 nodes are available: 1 Insufficient GPU memory (asked 20Gi per GPU and 66Mi for its MPS server on a node "
        "with gpu_sharing mps; the largest free device has 19.8Gi).")
    problem["services"]["infer"]["replicas"] = 3
    result = checked(problem)
    # The claim is the grant; the device holds the grant and the MPS server.
    assert {entry["memory"] for p in result["placements"].values() for entry in p["gpus"]} == {20 * GI}
    assert result["usage"]["a"]["gpus"][0]["used"] == 3 * (20 * GI + MPS_SERVER_MEMORY)
    problem["nodes"]["a"]["gpu_sharing"] = "none"
    problem["services"]["infer"]["replicas"] = 4
    result = checked(problem)
    assert result["usage"]["a"]["gpus"][0]["used"] == 80 * GI


def test_a_share_of_a_whole_device_fits_only_without_mps():
    services = {"infer": share(memory="80Gi")}
    assert reason(plan({"nodes": {"a": mps_node()}, "services": services}), "infer-0") == \
        "0/1 nodes are available: 1 Insufficient GPU memory (asked 80Gi per GPU and 66Mi for its MPS server on a node " \
        "with gpu_sharing mps; the largest free device has 80Gi)."
    assert checked({"nodes": {"a": mps_node(sharing="none")}, "services": services})["feasible"]


def test_whole_gpus_take_no_mps_server_and_a_share_takes_one_per_device():
    problem = {"nodes": {"a": mps_node(3)},
               "services": {"train": service(resources={"gpu": {"count": 1}}), "infer": share(memory="10Gi", count=2)}}
    result = checked(problem)
    used = {entry["index"]: entry["used"] for entry in result["usage"]["a"]["gpus"]}
    train = result["placements"]["train-0"]["gpus"][0]["index"]
    assert used[train] == 80 * GI
    assert sorted(value for index, value in used.items() if index != train) == [10 * GI + MPS_SERVER_MEMORY] * 2


def test_gpu_overhead_is_kubes_pod_overhead():
    problem = parse_problem({"nodes": {"a": mps_node(), "b": node(gpus=[gpu(0, uuid="GPU-b0")])},
                             "services": {"s": share(), "w": service(resources={"gpu": {"count": 1}})}})
    s, w = problem.services["s"].resources.gpu, problem.services["w"].resources.gpu
    assert gpu_overhead(problem.nodes["a"], s) == MPS_SERVER_MEMORY
    assert gpu_overhead(problem.nodes["a"], w) == 0 and gpu_overhead(problem.nodes["b"], s) == 0


def test_unreserve_gives_back_exactly_what_reserve_took():
    problem = parse_problem({"nodes": {"a": mps_node(2)}, "services": {"s": share(cores=30, count=2)}})
    cluster = ClusterState(problem)
    node_state = cluster.nodes["a"]
    plugin = GPU(problem)
    instance = Instance(problem.services["s"], 0)
    placement = {}
    plugin.reserve({}, cluster, instance, node_state, placement)
    assert node_state.gpu_used == [10 * GI + MPS_SERVER_MEMORY] * 2 and node_state.gpu_cores == [30, 30]

    class Bound:
        gpus = placement["gpus"]
    plugin.unreserve({}, cluster, instance, node_state, Bound)
    assert node_state.gpu_used == [0, 0] and node_state.gpu_cores == [0, 0]


# --- the exact solver and the plan checker -----------------------------------------------------------

# Greedy's best fit (by memory) puts both 20-core shares on one device; the 70-core shares then fit nowhere.
CORES_PACKING = {"nodes": {"a": mps_node(2)},
                 "services": {"s0": share(replicas=2, cores=20), "s1": share(replicas=2, cores=70)}}


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_the_exact_solver_packs_the_cores_greedy_cannot():
    assert not plan(copy.deepcopy(CORES_PACKING), exact_seconds=0)["feasible"]
    result = checked(CORES_PACKING)
    assert result["path"] == "exact" and result["exact"]["status"] == "optimal"
    per_device = {}
    for placement in result["placements"].values():
        for entry in placement["gpus"]:
            per_device[entry["index"]] = per_device.get(entry["index"], 0) + entry["cores"]
    assert per_device == {0: 90, 1: 90}


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_the_exact_solver_keeps_the_mps_overhead_and_the_cores_limit():
    problem = copy.deepcopy(CORES_PACKING)
    problem["services"]["s1"] = share(replicas=3, cores=70)
    result = plan(copy.deepcopy(problem))
    assert not result["feasible"] and result["exact"]["status"] == "infeasible"
    overhead = {"nodes": {"a": mps_node(2)}, "services": {"half": share(replicas=4, memory="40Gi")}}
    # Without MPS the four shares pack two per device exactly; with the servers they do not, as the solver proves.
    result = plan(copy.deepcopy(overhead))
    assert not result["feasible"] and result["path"] == "exact" and result["exact"]["status"] == "infeasible"
    overhead["nodes"]["a"]["gpu_sharing"] = "none"
    assert checked(overhead)["feasible"]


def test_the_plan_checker_knows_cores_and_the_mps_overhead():
    problem = {"nodes": {"a": mps_node()}, "services": {"x": share(cores=60), "y": share(cores=40)}}
    result = checked(problem)
    broken = copy.deepcopy(problem)
    broken["services"]["y"]["resources"]["gpu"]["cores"] = 41
    assert any("41" in v for v in check_plan(broken, result))          # the claim says 40
    forged = copy.deepcopy(result)
    forged["placements"]["y-0"]["gpus"][0]["cores"] = 41
    assert "node a GPU GPU-a0: 101 cores asked, at most 100 (x-0, y-0)" in check_plan(broken, forged)
    none = copy.deepcopy(problem)
    none["nodes"]["a"]["gpu_sharing"] = "none"
    assert any("cannot enforce" in v for v in check_plan(none, result))
    # Four 20Gi shares on an 80Gi MPS device: the servers do not fit.
    four = {"nodes": {"a": mps_node(sharing="none")}, "services": {"infer": share(replicas=4, memory="20Gi")}}
    result = checked(four)
    four["nodes"]["a"]["gpu_sharing"] = "mps"
    assert any("MPS servers included" in v for v in check_plan(four, result))


def test_a_cores_placement_leaves_plans_without_the_keys_unchanged():
    problem = {"nodes": {"a": node(gpus=[gpu(0)])}, "services": {"infer": share(replicas=2)}}
    result = checked(problem)
    assert all(set(entry) == {"index", "uuid", "model", "memory"} for p in result["placements"].values() for entry in p["gpus"])


def test_fragmentation_counts_the_mps_server():
    problem = parse_problem({"nodes": {"m": mps_node(name="m"), "n": mps_node(sharing="none", name="n")},
                             "services": {"infer": share(memory="20Gi")}})
    plugin = GPUFragmentation(problem)
    # 20Gi free fits a 20Gi share without MPS; with its server it does not: all of it is fragment (a quarter GPU).
    assert plugin.fragmentation(problem.nodes["n"], 10 ** 6, 2 ** 40, [20 * GI]) == 0.0
    assert plugin.fragmentation(problem.nodes["m"], 10 ** 6, 2 ** 40, [20 * GI]) == pytest.approx(0.25)
    assert plugin.fragmentation(problem.nodes["m"], 10 ** 6, 2 ** 40, [20 * GI + MPS_SERVER_MEMORY]) == 0.0


def _random_problem(rng):
    nodes = {}
    for index in range(rng.randint(1, 3)):
        name = "n%d" % index
        nodes[name] = node(cpu=rng.choice([4, 8]), memory="32Gi", gpu_sharing=rng.choice(["mps", "none"]),
                           gpus=[gpu(position, memory=rng.choice(["40Gi", "80Gi"]), uuid="GPU-%s-%d" % (name, position))
                                 for position in range(rng.randint(0, 2))])
    services = {}
    for index in range(rng.randint(1, 4)):
        request = {"count": rng.choice([1, 1, 2])}
        if rng.random() < 0.8:
            request["memory"] = "%dGi" % rng.choice([10, 20, 30, 40])
            if rng.random() < 0.6:
                request["cores"] = rng.choice([10, 30, 50, 70, 100])
        services["s%d" % index] = service(replicas=rng.randint(1, 3), cpu=1, resources={"gpu": request})
    return {"nodes": nodes, "services": services}


@pytest.mark.parametrize("seed", range(40))
def test_random_plans_keep_cores_and_the_mps_servers(seed):
    problem = _random_problem(random.Random(seed))
    result = checked(problem, exact_seconds=2)
    if result["feasible"]:
        # Fed back as the running placement, the plan stays as it is.
        again = checked(dict(problem, previous=result["placements"]), exact_seconds=2)
        assert again["placements"] == result["placements"]
