# -*- coding: utf-8 -*-
"""NVIDIA go-gpuallocator's best-effort test cases (gpuallocator/besteffort_test.go, its machines in common_test.go),
translated: the same machines (4x RTX 8000, DGX-1 Pascal, DGX-1 Volta) as ``gpu_links`` with NVLink lanes and the PCIe
path per pair, the same requests. Each choice must be theirs, or a set that scores at least as much under their own
set score (``their_set_score``, their calculateGPUPairScore summed over pairs, written out here independently of the
scheduler's scores).

How their cases map: ``available`` devices are free, the others taken; ``required`` devices are an instance's previous
GPUs, which the GPU plugin keeps first. Their sequential Allocate(size) cases are each checked from the state their
allocator had reached (the devices handed out before are taken), so every step is checked on its own.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import GPURequest
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import choose_gpus
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import NodeState
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import link_groups
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import checked, gpu, node, service

# Their P2P link types as our PCIe levels, with their scores (calculateGPUPairScore).
THEIR_PCIE_SCORES = {"system": 10, "numa": 20, "host_bridge": 30, "multi_switch": 40, "switch": 50, "board": 60}
THEIR_LANE_SCORE = 100


def machine(nvlinks, pcie, gpus):
    """{(a, b): (lanes, pcie level)} for every pair of ``gpus`` GPUs."""
    return {pair: (nvlinks.get(pair, 0), pcie(*pair)) for pair in combinations(range(gpus), 2)}


def rtx8000(a, b):
    return "numa" if a // 2 == b // 2 else "system"


def dgx1_pcie(same_switch):
    def level(a, b):
        if a // 4 != b // 4:
            return "system"
        return "switch" if (a % 4, b % 4) in same_switch else "host_bridge"
    return level


MACHINES = {
    # New4xRTX8000Node: 0-3 and 1-2 bridged (two lanes); 0-1 and 2-3 on one socket.
    "rtx8000": machine({(0, 3): 2, (1, 2): 2}, rtx8000, 4),
    # NewDGX1PascalNode: a hybrid cube mesh of single lanes; PCIe switches 0-2, 1-3, 4-6, 5-7.
    "dgx1_pascal": machine(dict.fromkeys([(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 5), (2, 3), (2, 6),
                                          (3, 7), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7)], 1),
                           dgx1_pcie({(0, 2), (1, 3)}), 8),
    # NewDGX1VoltaNode: the same mesh, some pairs with two lanes; PCIe switches 0-1, 2-3, 4-5, 6-7.
    "dgx1_volta": machine({(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
                           (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2},
                          dgx1_pcie({(0, 1), (2, 3)}), 8),
}


def their_set_score(name, chosen):
    """go-gpuallocator's calculateGPUSetScore: per pair 100 per NVLink lane plus its PCIe path's score."""
    links = MACHINES[name]
    return sum(THEIR_LANE_SCORE * links[pair][0] + THEIR_PCIE_SCORES[links[pair][1]]
               for pair in combinations(sorted(chosen), 2))


def gpu_links(name):
    entries = []
    for (a, b), (lanes, pcie) in sorted(MACHINES[name].items()):
        if lanes:
            entries.append({"gpus": [a, b], "level": "nvlink", "nvlinks": lanes, "pcie": pcie})
        else:
            entries.append({"gpus": [a, b], "level": pcie})
    return entries


def the_node(name):
    count = 4 if name == "rtx8000" else 8
    spec = node(cpu=64, memory="512Gi", gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(count)],
                gpu_links=gpu_links(name))
    return parse_problem({"nodes": {"a": spec}, "services": {}}).nodes["a"]


def allocate(name, available, size, required=()):
    """The GPU plugin's choice of ``size`` GPUs with only ``available`` free and ``required`` the previous GPUs."""
    machine_node = the_node(name)
    state = NodeState(machine_node)
    for position, device in enumerate(machine_node.gpus):
        if device.index not in available:
            state.gpu_used[position] = device.memory
    chosen = choose_gpus(state, GPURequest(size, None), preferred=tuple("GPU-%d" % index for index in required))
    return None if chosen is None else sorted(machine_node.gpus[position].index for position, _take in chosen)


def assert_at_least_theirs(name, chosen, theirs):
    assert chosen is not None, (name, theirs)
    assert len(chosen) == len(theirs) and len(set(chosen)) == len(chosen)
    if sorted(chosen) != sorted(theirs):
        assert their_set_score(name, chosen) >= their_set_score(name, theirs), (name, chosen, theirs)


# --- TestBestEffortAllocate (DGX-1 Volta) -----------------------------------------------------------------

@pytest.mark.parametrize("available, required, size, theirs", [
    ([0, 2, 4, 5], [], 2, [4, 5]),                  # single NVLink, prefer same switch
    ([0, 4, 5, 6], [], 2, [5, 6]),                  # single NVLink, prefer same socket
    ([0, 3, 1], [], 2, [0, 3]),                     # prefer dual NVLink same socket
    ([0, 1, 4], [], 2, [0, 4]),                     # prefer dual NVLink cross socket
    (list(range(8)), [4], 1, [4]),                  # must include, size 1
    (list(range(8)), [4], 2, [4, 7]),               # must include, size 2
    (list(range(8)), [4], 4, [4, 5, 6, 7]),         # must include, size 4
    (list(range(8)), [0, 2, 4, 6], 4, [0, 2, 4, 6]),    # must include the full set
])
def test_their_policy_cases_on_the_dgx1_volta(available, required, size, theirs):
    chosen = allocate("dgx1_volta", available, size, required)
    assert_at_least_theirs("dgx1_volta", chosen, theirs)
    assert set(required) <= set(chosen)


def test_the_pair_that_needed_the_pcie_path_beside_nvlink_is_theirs():
    # GPUs 0, 4, 5, 6 free: 0-4 has two lanes across sockets (230), 5-6 two lanes on one socket (230 too, but on
    # the host bridge); 4-5 one lane on a switch. A pair's PCIe path counts beside its lanes.
    assert their_set_score("dgx1_volta", [5, 6]) == 230 == their_set_score("dgx1_volta", [0, 4]) + 20
    assert allocate("dgx1_volta", [0, 4, 5, 6], 2) == [5, 6]


@pytest.mark.parametrize("available, required, size", [
    ([1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], 4),      # a required device is not available
    (list(range(8)), [1, 2, 3, 4, 5, 6], 4),        # more required than the size
    ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6], 1),       # more required than available
])
def test_previous_gpus_that_cannot_all_stay_still_give_a_set(available, required, size):
    # go-gpuallocator allocates nothing here; an instance's previous GPUs are kept where they fit, else it moves:
    # a set of free GPUs, as many of the previous ones as the set holds, the best-scored set among those.
    chosen = allocate("dgx1_volta", available, size, required)
    assert chosen is not None and len(chosen) == size and set(chosen) <= set(available)
    kept = len(set(chosen) & set(required))
    assert kept == min(size, len(set(required) & set(available)))
    same_keep = [combo for combo in combinations(available, size) if len(set(combo) & set(required)) == kept]
    assert their_set_score("dgx1_volta", chosen) == max(their_set_score("dgx1_volta", combo) for combo in same_keep)


# --- their sequential allocations: TestBestEffort<machine>GPUAlloc<size> ------------------------------------

SEQUENCES = [
    ("rtx8000", [(1, [0]), (1, [1]), (1, [2]), (1, [3]), (1, [])]),
    ("rtx8000", [(2, [0, 3]), (2, [1, 2]), (1, [])]),
    ("rtx8000", [(4, [0, 1, 2, 3]), (1, [])]),
    ("dgx1_pascal", [(1, [index]) for index in range(8)] + [(1, [])]),
    ("dgx1_pascal", [(2, [0, 2]), (2, [1, 3]), (2, [4, 6]), (2, [5, 7]), (1, [])]),
    ("dgx1_pascal", [(4, [0, 1, 2, 3]), (4, [4, 5, 6, 7]), (1, [])]),
    ("dgx1_pascal", [(8, list(range(8))), (1, [])]),
    ("dgx1_volta", [(1, [index]) for index in range(8)] + [(1, [])]),
    ("dgx1_volta", [(2, [0, 3]), (2, [1, 2]), (2, [4, 7]), (2, [5, 6]), (1, [])]),
    ("dgx1_volta", [(4, [0, 1, 2, 3]), (4, [4, 5, 6, 7]), (1, [])]),
    ("dgx1_volta", [(8, list(range(8))), (1, [])]),
]


@pytest.mark.parametrize("name, steps", SEQUENCES, ids=["%s-%d" % (name, steps[0][0]) for name, steps in SEQUENCES])
def test_their_sequential_allocations(name, steps):
    gpus = 4 if name == "rtx8000" else 8
    handed_out = set()
    for size, theirs in steps:
        available = [index for index in range(gpus) if index not in handed_out]
        chosen = allocate(name, available, size)
        if not theirs:
            assert chosen is None, (name, size, available)
            continue
        if size == 1:
            # Their single GPUs go in index order (every single GPU scores 0); ours: best fit, then the GPU whose
            # taking breaks the least of the free well-linked groups. Any free GPU scores as theirs.
            assert chosen is not None and len(chosen) == 1 and chosen[0] in available
        else:
            assert_at_least_theirs(name, chosen, theirs)
        handed_out.update(theirs)


def test_single_gpus_keep_the_nvlinked_pairs_whole_where_theirs_break_them():
    # Their single GPUs go 0, 1, 2, 3 on the RTX 8000 machine: after two, both bridged pairs are broken. Ours takes a
    # GPU of a pair already broken first: after two single GPUs, one bridged pair is still whole for a 2-GPU instance.
    result = checked({"nodes": {"a": {"cpu": 64, "memory": "512Gi",
                                      "gpus": [gpu(index, uuid="GPU-%d" % index) for index in range(4)],
                                      "gpu_links": gpu_links("rtx8000")}},
                      "services": {"one": service(replicas=2, resources={"gpu": {"count": 1}})}})
    taken = sorted(result["placements"]["one-%d" % ordinal]["gpus"][0]["index"] for ordinal in range(2))
    assert taken in ([0, 3], [1, 2])


# --- through the whole scheduler ------------------------------------------------------------------------

def planned_set(name, held, size, required=()):
    """The GPUs plan() gives a new instance asking ``size`` whole GPUs on the machine, where each set in ``held`` is
    held by a stateful instance placed before, and ``required`` are the new instance's previous GPUs."""
    gpus = 4 if name == "rtx8000" else 8
    spec = node(cpu=64, memory="512Gi", gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(gpus)],
                gpu_links=gpu_links(name))
    services = {"want": service(resources={"gpu": {"count": size}})}
    previous = {}
    for number, taken in enumerate(held):
        services["held%d" % number] = service(stateful=True, resources={"gpu": {"count": len(taken)}})
        previous["held%d-0" % number] = {"node": "a", "gpus": [{"uuid": "GPU-%d" % index} for index in taken]}
    if required:
        previous["want-0"] = {"node": "a", "gpus": [{"uuid": "GPU-%d" % index} for index in required]}
    result = checked({"nodes": {"a": spec}, "services": services, "previous": previous})
    return sorted(entry["index"] for entry in result["placements"]["want-0"]["gpus"]) if result["feasible"] else None


@pytest.mark.parametrize("available, required, size, theirs", [
    ([0, 2, 4, 5], [], 2, [4, 5]), ([0, 4, 5, 6], [], 2, [5, 6]), ([0, 3, 1], [], 2, [0, 3]), ([0, 1, 4], [], 2, [0, 4]),
    (list(range(8)), [4], 1, [4]), (list(range(8)), [4], 2, [4, 7]), (list(range(8)), [4], 4, [4, 5, 6, 7]),
    (list(range(8)), [0, 2, 4, 6], 4, [0, 2, 4, 6]),
])
def test_their_policy_cases_as_problems(available, required, size, theirs):
    held = [[index] for index in range(8) if index not in available]
    chosen = planned_set("dgx1_volta", held, size, required)
    assert_at_least_theirs("dgx1_volta", chosen, theirs)
    assert set(required) <= set(chosen)


@pytest.mark.parametrize("name, steps", SEQUENCES, ids=["%s-%d" % (name, steps[0][0]) for name, steps in SEQUENCES])
def test_their_sequential_allocations_as_problems(name, steps):
    held = []
    for size, theirs in steps:
        chosen = planned_set(name, held, size)
        if not theirs:
            assert chosen is None
            continue
        if size > 1:
            assert_at_least_theirs(name, chosen, theirs)
        held.append(theirs)


def test_a_problem_with_the_dgx1_volta_places_as_theirs():
    # GPUs 1, 2, 3 and 7 held by stateful instances placed before: 0, 4, 5, 6 free; a 2-GPU instance gets 5-6.
    spec = node(cpu=64, memory="512Gi", gpus=[gpu(index, uuid="GPU-%d" % index) for index in range(8)],
                gpu_links=gpu_links("dgx1_volta"))
    services = {"held": service(replicas=4, stateful=True, resources={"gpu": {"count": 1}}),
                "train": service(resources={"gpu": {"count": 2}})}
    previous = {"held-%d" % ordinal: {"node": "a", "gpus": [{"uuid": "GPU-%d" % index}]}
                for ordinal, index in enumerate((1, 2, 3, 7))}
    result = checked({"nodes": {"a": spec}, "services": services, "previous": previous})
    assert sorted(entry["index"] for entry in result["placements"]["train-0"]["gpus"]) == [5, 6]


def test_the_picture_groups_the_dgx1_by_socket_across_its_nvlinks():
    # NVLinks join the two sockets (0-4, 1-5, ...); their PCIe paths say where each GPU sits.
    groups = link_groups(the_node("dgx1_volta"))
    assert groups["numa"] == [{"gpus": [0, 1, 2, 3]}, {"gpus": [4, 5, 6, 7]}]
