# -*- coding: utf-8 -*-
"""GPU topology in the scheduler: ``nodes.<n>.gpu_links``, ``gpus[].numa_node`` and ``resources.gpu.topology``; the
best-linked set on the four published topologies (against brute force), required filtering, the single-GPU choice,
the node score, the exact solver and the plan checker."""

from __future__ import annotations

import copy
import random
import time
from itertools import combinations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import plan_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import GPURequest
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import GPU, choose_gpus
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import NodeState
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import (
    clique_bound, largest_clique, largest_nvlinked_set, link_matrix, nvlinked, set_score,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import checked, errors_of, gpu, node, service
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan


def links(level_of, gpus=8):
    """gpu_links of a node of ``gpus`` GPUs, ``level_of(a, b)`` giving (level, nvlinks) or None (unknown)."""
    result = []
    for first, second in combinations(range(gpus), 2):
        found = level_of(first, second)
        if found is not None:
            result.append({"gpus": [first, second], "level": found[0], "nvlinks": found[1]})
    return result


def nvswitch(first, second):
    """An 8-GPU NVSwitch server (HGX H100): every pair NVLinked, 18 lanes."""
    return ("nvlink", 18)


def pcie_bridged(first, second):
    """An 8-GPU PCIe server with NVLink bridges in pairs (0-1, 2-3, ...), four GPUs per socket."""
    if first // 2 == second // 2:
        return ("nvlink", 4)
    return ("host_bridge", 0) if first // 4 == second // 4 else ("system", 0)


def dual_socket(first, second):
    """A dual-socket PCIe server, 4 GPUs per socket, two per PCIe switch."""
    if first // 4 != second // 4:
        return ("system", 0)
    return ("switch", 0) if first // 2 == second // 2 else ("host_bridge", 0)


def mixed(first, second):
    """Mixed: GPUs 0-3 an NVLink mesh (4 lanes), 4-5 bridged (2 lanes), 6-7 on a switch, the rest PCIe."""
    if second < 4:
        return ("nvlink", 4)
    if (first, second) == (4, 5):
        return ("nvlink", 2)
    if (first, second) == (6, 7):
        return ("switch", 0)
    if first // 4 == second // 4:
        return ("host_bridge", 0)
    return None if first == 0 else ("system", 0)       # some pairs unknown


TOPOLOGIES = {"nvswitch": nvswitch, "pcie_bridged": pcie_bridged, "dual_socket": dual_socket, "mixed": mixed}


def server(kind, gpus=8, name="a", **extra):
    devices = [dict(gpu(index, uuid="GPU-%s%d" % (name, index)), numa_node=index * 2 // gpus) for index in range(gpus)]
    return node(cpu=64, memory="512Gi", gpus=devices, gpu_links=links(TOPOLOGIES[kind], gpus), **extra)


def whole(count, topology=None, replicas=1, **extra):
    request = {"count": count}
    if topology is not None:
        request["topology"] = topology
    return service(replicas=replicas, resources={"gpu": request}, **extra)


def gpus_of(result, instance):
    return [entry["index"] for entry in result["placements"][instance]["gpus"]]


# --- the choice against brute force ------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
@pytest.mark.parametrize("required", [False, True])
def test_the_choice_is_the_best_set_on_each_published_topology(kind, required):
    the_node = parse_problem({"nodes": {"a": server(kind)}, "services": {}}).nodes["a"]
    matrix = link_matrix(the_node)
    chance = random.Random(kind)
    for _trial in range(60):
        state = NodeState(the_node)
        for position in chance.sample(range(8), chance.randint(0, 5)):
            state.gpu_used[position] = the_node.gpus[position].memory
        free = [position for position in range(8) if state.gpu_used[position] == 0]
        for count in (2, 3, 4, 8):
            request = GPURequest(count, None, topology="required" if required else "preferred")
            chosen = choose_gpus(state, request)
            sets = [combo for combo in combinations(free, count)
                    if not required or all(nvlinked(matrix, a, b) for a, b in combinations(combo, 2))]
            if not sets:
                assert chosen is None, (kind, free, count)
                continue
            best = max(set_score(matrix, combo) for combo in sets)
            positions = [position for position, _take in chosen]
            assert len(set(positions)) == count and set(positions) <= set(free)
            assert set_score(matrix, positions) == best, (kind, free, count, positions)
            # Ties: the first best set in best-fit (index) order, as the GPU plugin takes without links.
            assert sorted(positions) == list(next(combo for combo in sets if set_score(matrix, combo) == best))


def test_nodes_without_links_choose_as_before():
    problem = parse_problem({"nodes": {"a": node(gpus=[gpu(index) for index in range(4)])}, "services": {}})
    state = NodeState(problem.nodes["a"])
    state.gpu_used[1] = 1
    assert choose_gpus(state, GPURequest(2, None)) == [(0, 80 * 2 ** 30), (2, 80 * 2 ** 30)]
    assert choose_gpus(state, GPURequest(2, None, topology="required")) is None


def test_previous_devices_stay_first():
    the_node = parse_problem({"nodes": {"a": server("pcie_bridged")}, "services": {}}).nodes["a"]
    chosen = choose_gpus(NodeState(the_node), GPURequest(2, None), preferred=("GPU-a3",))
    assert sorted(position for position, _take in chosen) == [2, 3]


def test_a_large_node_is_chosen_within_its_bound():
    # 64 GPUs, eight NVSwitch islands of 8: 8 of 64 is past the exhaustive bound (greedy and swaps) yet finds an island.
    gpus = 64
    spec = node(gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(gpus)],
                gpu_links=links(lambda a, b: ("nvlink", 18) if a // 8 == b // 8 else ("system", 0), gpus))
    the_node = parse_problem({"nodes": {"a": spec}, "services": {}}).nodes["a"]
    state = NodeState(the_node)
    for position in (0, 9, 18, 27, 36, 45, 54):
        state.gpu_used[position] = 1
    started = time.process_time()
    chosen = choose_gpus(state, GPURequest(8, None, topology="required"))
    assert time.process_time() - started < 2.0
    assert [position for position, _take in chosen] == list(range(56, 64))
    assert choose_gpus(state, GPURequest(8, None)) == chosen


# --- placement through plan() ------------------------------------------------------------------------

def test_required_filters_a_node_without_an_nvlinked_set_and_says_why():
    problem = {"nodes": {"a": server("dual_socket")}, "services": {"train": whole(2, "required")}}
    result = plan(problem)
    assert not result["feasible"]
    assert result["unschedulable"]["train-0"] == \
        "0/1 nodes are available: 1 node(s) had no NVLinked set of 2 GPU(s)."


def test_required_refuses_statically_a_node_that_could_never_offer_the_set():
    """A PCIe server with NVLink bridges in pairs can never give 4 NVLinked GPUs: its static filter says so (cached
    per class, counted by the proof); an NVSwitch server passes it; a node whose NVLinked GPUs are taken is refused
    by the dynamic filter with "no free NVLinked set"."""
    request = whole(4, "required")
    bridged = parse_problem({"nodes": {"a": server("pcie_bridged")}, "services": {"train": request}})
    instance = bridged.instances()[0]
    status = GPU(bridged).filter_static(instance, bridged.nodes["a"], False)
    assert not status.ok and status.reasons == ("node(s) had no NVLinked set of 4 GPU(s)",)
    for kind, largest in (("nvswitch", 8), ("pcie_bridged", 2), ("dual_socket", 1), ("mixed", 4)):
        the_node = parse_problem({"nodes": {"a": server(kind)}, "services": {}}).nodes["a"]
        assert largest_nvlinked_set(the_node, range(8)) == largest, kind
        accepted = GPU(bridged).filter_static(instance, the_node, False).ok
        assert accepted == (largest >= 4), kind
    # Only the devices of the models asked count: the mixed server's mesh is 0-3; without GPU 0 there it is 3.
    mixed = parse_problem({"nodes": {"a": server("mixed")}, "services": {}}).nodes["a"]
    assert largest_nvlinked_set(mixed, [1, 2, 3, 4, 5]) == 3
    # A node without links has no NVLinked pair.
    bare = parse_problem({"nodes": {"a": node(gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(4)])},
                          "services": {}}).nodes["a"]
    assert largest_nvlinked_set(bare, range(4)) == 1
    assert largest_nvlinked_set(bare, []) == 0


def test_the_diagnosis_tells_never_from_not_now_and_the_counting_proof_uses_it():
    # b's NVLink mesh is GPUs 0-3 and an instance that stays holds GPU 0: b could, but not now; a never could.
    problem = {"nodes": {"a": server("pcie_bridged", name="a"), "b": server("mixed", name="b")},
               "services": {"train": whole(4, "required"), "old": whole(1, stateful=True)},
               "previous": {"old-0": {"node": "b", "gpus": [{"uuid": "GPU-b0"}]}}}
    result = plan(problem, exact_seconds=0)
    assert not result["feasible"]
    assert result["unschedulable"] == {"train-0": "0/2 nodes are available: 1 node(s) had no NVLinked set of 4 GPU(s), "
                                                  "1 node(s) had no free NVLinked set of 4 GPU(s)."}
    assert "no placement exists" not in result["summary"]
    only = {"nodes": {"a": server("pcie_bridged", name="a"), "b": server("dual_socket", name="b")},
            "services": {"train": whole(4, "required")}}
    result = plan(only, exact_seconds=0)
    assert result["unschedulable"] == {"train-0": "0/2 nodes are available: 2 node(s) had no NVLinked set of 4 GPU(s)."}
    assert result["summary"] == "1 of 1 instance(s) could not be placed; no placement exists: no node accepts train-0"


def test_the_largest_clique_is_exact_and_bounded():
    """The clique search against brute force on random graphs of 10 vertices, and within its bound on 64."""
    rng = random.Random(7)
    for _trial in range(60):
        size, density = 10, rng.random()
        edges = {(a, b) for a, b in combinations(range(size), 2) if rng.random() < density}
        neighbours = [sum(1 << other for other in range(size) if (min(vertex, other), max(vertex, other)) in edges)
                      for vertex in range(size)]
        candidates = rng.randrange(1 << size)
        members, exact_answer = largest_clique(neighbours, candidates)
        vertices = [vertex for vertex in range(size) if candidates >> vertex & 1]
        brute = max((len(chosen) for count in range(len(vertices) + 1) for chosen in combinations(vertices, count)
                     if all(pair in edges for pair in combinations(chosen, 2))), default=0)
        assert exact_answer and bin(members).count("1") == brute
        assert members & ~candidates == 0
    # 64 vertices, random at one half: a hard case for the search, settled or bounded within a few hundred ms.
    size = 64
    edges = {(a, b) for a, b in combinations(range(size), 2) if rng.random() < 0.5}
    neighbours = [sum(1 << other for other in range(size) if (min(vertex, other), max(vertex, other)) in edges)
                  for vertex in range(size)]
    started = time.process_time()
    members, exact_answer = largest_clique(neighbours, (1 << size) - 1)
    assert time.process_time() - started < 2.0
    found = bin(members).count("1")
    assert found >= 5 and (exact_answer or clique_bound(neighbours, (1 << size) - 1) >= found)


def test_required_takes_an_nvlinked_set_and_preferred_falls_back():
    problem = {"nodes": {"a": server("pcie_bridged")}, "services": {"train": whole(4, "required")}}
    assert not plan(copy.deepcopy(problem))["feasible"]
    problem["services"]["train"] = whole(2, "required", replicas=4)
    result = checked(problem)
    assert sorted(gpus_of(result, "train-%d" % ordinal) for ordinal in range(4)) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    problem["services"]["train"] = whole(4)
    result = checked(problem)
    assert gpus_of(result, "train-0") == [0, 1, 2, 3]       # two bridged pairs on one socket: the best there is


def test_a_count_of_one_may_say_required():
    result = checked({"nodes": {"a": server("dual_socket")}, "services": {"infer": whole(1, "required")}})
    assert result["feasible"]


def test_a_single_gpu_leaves_a_free_nvlink_pair_alone():
    spec = node(gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(3)],
                gpu_links=[{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4}])
    result = checked({"nodes": {"a": spec}, "services": {"infer": whole(1)}})
    assert gpus_of(result, "infer-0") == [2]
    # Without links the lowest index, as before.
    del spec["gpu_links"]
    assert gpus_of(checked({"nodes": {"a": spec}, "services": {"infer": whole(1)}}), "infer-0") == [0]


def test_single_gpus_fill_broken_groups_first():
    # One GPU taken on socket 0 of a dual-socket server: the next single GPU stays on that socket.
    problem = {"nodes": {"a": server("pcie_bridged")}, "services": {"infer": whole(1, replicas=3)}}
    result = checked(problem)
    assert sorted(gpus_of(result, "infer-%d" % ordinal)[0] for ordinal in range(3)) == [0, 1, 2]


def test_the_node_score_prefers_the_nvlinked_node():
    flat = node(cpu=64, memory="512Gi", gpus=[gpu(index, uuid="GPU-a%d" % index) for index in range(4)],
                gpu_links=links(lambda a, b: ("host_bridge", 0), 4))
    meshed = node(cpu=64, memory="512Gi", gpus=[gpu(index, uuid="GPU-b%d" % index) for index in range(4)],
                  gpu_links=links(lambda a, b: ("nvlink", 4), 4))
    result = checked({"nodes": {"a": flat, "b": meshed}, "services": {"train": whole(4)}})
    assert result["placements"]["train-0"]["node"] == "b"
    # A node whose NVLinked pair is broken scores below one whose pair is whole.
    broken = server("pcie_bridged", name="c")
    intact = server("pcie_bridged", name="d")
    problem = {"nodes": {"c": broken, "d": intact},
               "services": {"old": whole(1, stateful=True), "train": whole(2, cpu=1)},
               "previous": {"old-0": {"node": "c", "gpus": [{"uuid": "GPU-c0"}]}}}
    # c has GPUs 1..7 free (pairs 2-3, 4-5, 6-7 whole): as good as d for two GPUs; take 2-3 and 4-5 and 6-7 away too.
    for ordinal, pair in enumerate(((2, 3), (4, 5), (6, 7))):
        problem["services"]["old%d" % ordinal] = whole(2, stateful=True)
        problem["previous"]["old%d-0" % ordinal] = {"node": "c", "gpus": [{"uuid": "GPU-c%d" % index} for index in pair]}
    result = checked(problem)
    assert result["placements"]["train-0"]["node"] == "d"


# --- the exact solver and the plan checker -----------------------------------------------------------

# A path 0-1-2-3 of NVLinks, the middle one strongest: greedy gives the first instance 1-2, and the second finds no
# NVLinked pair in 0 and 3; 0-1 and 2-3 exist.
PATH = {"nodes": {"a": node(gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(4)],
                            gpu_links=[{"gpus": [0, 1], "level": "nvlink", "nvlinks": 1},
                                       {"gpus": [1, 2], "level": "nvlink", "nvlinks": 18},
                                       {"gpus": [2, 3], "level": "nvlink", "nvlinks": 1}])},
        "services": {"train": whole(2, "required", replicas=2)}}


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_the_exact_solver_finds_the_nvlinked_sets_greedy_misses():
    assert not plan(copy.deepcopy(PATH), exact_seconds=0)["feasible"]
    result = checked(PATH)
    assert result["path"] == "exact"
    assert sorted(gpus_of(result, "train-%d" % ordinal) for ordinal in range(2)) == [[0, 1], [2, 3]]


def test_the_plan_checker_catches_a_required_set_that_is_not_nvlinked():
    problem = {"nodes": {"a": server("pcie_bridged")}, "services": {"train": whole(2, "required")}}
    result = checked(problem)
    bad = copy.deepcopy(result)
    entries = bad["placements"]["train-0"]["gpus"]
    entries[1] = {"index": 2, "uuid": "GPU-a2", "model": entries[1]["model"], "memory": entries[1]["memory"]}
    assert any("not NVLinked (topology required)" in violation for violation in check_plan(problem, bad))


def test_the_catalog_takes_topology():
    result = plan_catalog({"nodes": {"a": server("nvswitch")}, "services": {"train": whole(8, "required")}},
                          exact_seconds=0)
    assert result["feasible"]
    with pytest.raises(ProblemError):
        plan_catalog({"nodes": {"a": server("nvswitch")}, "services": {"train": whole(8, "always")}}, exact_seconds=0)


# --- the problem format ------------------------------------------------------------------------------

def test_the_new_keys_are_read():
    problem = parse_problem({"nodes": {"a": server("mixed")}, "services": {"train": whole(2, "required"), "x": whole(1)}})
    the_node = problem.nodes["a"]
    assert [device.numa_node for device in the_node.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert the_node.gpu_links[0].first == 0 and the_node.gpu_links[0].level == "nvlink"
    assert problem.services["train"].resources.gpu.topology == "required"
    assert problem.services["x"].resources.gpu.topology == "preferred"


def bad_links(entries, gpus=3):
    return {"nodes": {"a": node(gpus=[gpu(index) for index in range(gpus)], gpu_links=entries)}, "services": {}}


@pytest.mark.parametrize("entries, path, message", [
    ("nvlink", "nodes.a.gpu_links", 'got "nvlink"; expected a list'),
    ([7], "nodes.a.gpu_links[0]", "got 7; expected a mapping"),
    ([{"gpus": [0, 1]}], "nodes.a.gpu_links[0].level", "is required"),
    ([{"gpus": [0], "level": "board"}], "nodes.a.gpu_links[0].gpus", "got [0]; expected a list of two GPU indices of node a"),
    ([{"gpus": [1, 1], "level": "board"}], "nodes.a.gpu_links[0].gpus", "got [1, 1]; expected two different GPUs"),
    ([{"gpus": [0, 5], "level": "board"}], "nodes.a.gpu_links[0].gpus[1]", "got 5; expected the index of a GPU of node a"),
    ([{"gpus": [0, True], "level": "board"}], "nodes.a.gpu_links[0].gpus[1]", "got true; expected an integer >= 0"),
    ([{"gpus": [0, 1], "level": "board"}, {"gpus": [1, 0], "level": "switch"}], "nodes.a.gpu_links[1].gpus",
     "got [1, 0]; expected a pair of GPUs not listed before in gpu_links"),
    ([{"gpus": [0, 1], "level": "NVLink"}], "nodes.a.gpu_links[0].level",
     'got "NVLink"; expected one of nvlink, board, switch, multi_switch, host_bridge, numa, system, unknown'),
    ([{"gpus": [0, 1], "level": "nvlink"}], "nodes.a.gpu_links[0].nvlinks",
     "got null; expected an integer from 1 to 64 for an nvlink pair"),
    ([{"gpus": [0, 1], "level": "system", "nvlinks": 2}], "nodes.a.gpu_links[0].nvlinks",
     "got 2; expected 0 (or none) for a system pair: only nvlink has lanes"),
    ([{"gpus": [0, 1], "level": "nvlink", "nvlinks": 65}], "nodes.a.gpu_links[0].nvlinks", "got 65; expected an integer from 0 to 64"),
    ([{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4, "speed": 1}], "nodes.a.gpu_links[0].speed",
     "unknown key; expected one of: gpus, level, nvlinks, pcie"),
    ([{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4, "pcie": "nvlink"}], "nodes.a.gpu_links[0].pcie",
     'got "nvlink"; expected one of board, switch, multi_switch, host_bridge, numa, system, unknown (the pair\'s PCIe path)'),
    ([{"gpus": [0, 1], "level": "switch", "pcie": "system"}], "nodes.a.gpu_links[0].pcie",
     'got "system"; expected switch (or none) for a switch pair: pcie differs from level only beside NVLinks'),
])
def test_bad_gpu_links_name_their_path(entries, path, message):
    errors = errors_of(bad_links(entries))
    assert errors.get(path) == message, errors


def test_gpu_links_are_bounded():
    entries = [{"gpus": [0, 1], "level": "board"}] * 2017
    assert errors_of(bad_links(entries)) == {"nodes.a.gpu_links": "has 2017 items; expected at most 2016"}
    # Every pair of 64 GPUs once is within the bound.
    problem = parse_problem(bad_links(links(lambda a, b: ("numa", 0), 64), gpus=64))
    assert len(problem.nodes["a"].gpu_links) == 2016


@pytest.mark.parametrize("value, message", [
    (-1, "got -1; expected an integer from 0 to 1023"), (1024, "got 1024; expected an integer from 0 to 1023"),
    ("0", 'got "0"; expected an integer from 0 to 1023'), (True, "got true; expected an integer from 0 to 1023"),
])
def test_a_bad_numa_node_names_its_gpu(value, message):
    spec = node(gpus=[dict(gpu(0), numa_node=value)])
    assert errors_of({"nodes": {"a": spec}, "services": {}}) == {"nodes.a.gpus[0].numa_node": message}


@pytest.mark.parametrize("value, shown", [("Required", '"Required"'), (True, "true"), (["required"], '["required"]'), ("", '""')])
def test_a_bad_topology_names_its_service(value, shown):
    errors = errors_of({"nodes": {}, "services": {"train": whole(2, value)}})
    assert errors == {"services.train.resources.gpu.topology":
                      "got %s; expected one of preferred, required (whether every pair of the GPUs must be NVLinked)" % shown}


# --- instances placed before keep their GPUs ----------------------------------------------------------------------------

def pinned_pairs_problem(stateful):
    """GPUs 0-1 and 2-3 NVLinked; db-0 ran on GPU 1 and cache-0 on GPU 2: the free GPUs, 0 and 3, are no NVLinked pair."""
    spec = node(gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(4)],
                gpu_links=[{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4}, {"gpus": [2, 3], "level": "nvlink", "nvlinks": 4}])
    return {"nodes": {"a": spec},
            "services": {"db": whole(1, stateful=stateful), "cache": whole(1, stateful=stateful), "train": whole(2, "required")},
            "previous": {"db-0": {"node": "a", "gpus": [{"uuid": "GPU-1"}]}, "cache-0": {"node": "a", "gpus": [{"uuid": "GPU-2"}]}}}


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_a_stateful_instance_keeps_its_gpus_when_required_topology_finds_no_free_set():
    result = plan(pinned_pairs_problem(stateful=True))
    assert not result["feasible"] and result["path"] == "exact" and result["exact"]["status"] == "infeasible"
    assert "no free NVLinked set of 2 GPU(s)" in result["unschedulable"]["train-0"]


def test_a_stateless_instance_given_other_gpus_on_its_node_is_reported_as_a_restart():
    problem = pinned_pairs_problem(stateful=False)
    result = checked(problem)
    assert result["moves"] == [] and sorted(gpus_of(result, "train-0")) in ([0, 1], [2, 3])
    restarted = result["restarts"]
    assert len(restarted) == 1 and restarted[0]["node"] == "a"
    name = restarted[0]["instance"]
    assert restarted[0]["gpus"] == {"from": [problem["previous"][name]["gpus"][0]["uuid"]],
                                    "to": ["GPU-%d" % gpus_of(result, name)[0]]}
    assert "  restart %s on a: gpus %s -> %s" % (name, restarted[0]["gpus"]["from"][0], restarted[0]["gpus"]["to"][0]) \
        in render_table(result).splitlines()
    # A plan that restarts nothing says nothing of restarts.
    assert "restarts" not in checked({"nodes": problem["nodes"], "services": {"db": whole(1)},
                                      "previous": {"db-0": problem["previous"]["db-0"]}})


def test_a_single_gpu_keeps_the_last_nvlinked_pair_whole_before_best_fit():
    # The only NVLinked pair is the two smaller GPUs (40Gi); the 80Gi ones sit on two sockets. Best fit alone gives the
    # single GPU a 40Gi one, and the pair instance of the same gang a pair across sockets.
    gpus = [gpu(0, memory="40Gi", uuid="GPU-0"), gpu(1, memory="40Gi", uuid="GPU-1"),
            gpu(2, uuid="GPU-2"), gpu(3, uuid="GPU-3")]
    spec = node(gpus=gpus, gpu_links=[{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4},
                                      {"gpus": [0, 2], "level": "numa"}, {"gpus": [1, 2], "level": "numa"},
                                      {"gpus": [0, 3], "level": "system"}, {"gpus": [1, 3], "level": "system"},
                                      {"gpus": [2, 3], "level": "system"}])
    # The single GPU instance has the higher priority: it is placed first.
    result = checked({"nodes": {"a": spec}, "services": {"one": whole(1, priority=10), "two": whole(2)}})
    assert gpus_of(result, "two-0") == [0, 1] and gpus_of(result, "one-0")[0] in (2, 3)
    # Where no other device fits, best fit stands: a 40Gi request on a node whose only other GPUs are the pair.
    result = checked({"nodes": {"a": dict(spec, gpus=gpus[:2] + [gpu(2, memory="20Gi", uuid="GPU-2")],
                                          gpu_links=spec["gpu_links"][:3])},
                      "services": {"one": service(resources={"gpu": {"count": 1, "memory": "30Gi"}})}})
    assert gpus_of(result, "one-0")[0] in (0, 1)
