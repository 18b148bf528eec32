# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU topology: which set of a node's GPUs a multi-GPU instance gets, by how well its GPUs are linked.

The idea and the scores are NVIDIA's go-gpuallocator ``besteffort`` policy (the k8s device plugin's,
``calculateGPUPairScore``): every pair of GPUs has a link score from its NVLink lanes and its PCIe path
(``nodes.<n>.gpu_links``; a pair not listed is unknown), and a set scores the sum over its pairs. A pair scores 100
per NVLink lane (lanes counted up to 18) plus its PCIe path's score: board 60, switch 50, multi_switch 40,
host_bridge 30, numa 20, system 10, unknown 10 (an NVLinked pair whose PCIe path is not said counts it unknown).

``best_set`` picks ``count`` of the devices that fit (given in best-fit order, the GPU plugin's) with the highest
score; among sets of equal score the first in best-fit order (what the GPU plugin takes without links), and the
devices an instance used before are kept first. Its work is bounded: when the candidate sets number at most
EXHAUSTIVE (every count on an 8-GPU node: at most 70 sets; 2 of 64 GPUs: 2,016) every set is scored, so the choice is
the optimum; beyond, a greedy grown from every candidate (each step adds the device linked best to the set so far)
and then single swaps while they improve the best of them (at most SWAP_PASSES passes): O(n^2 count) pair lookups,
64 candidates x 8 GPUs about 40,000, a few tens of milliseconds. ``required`` keeps only sets whose every pair is
NVLinked (the greedy then grows cliques of the NVLink graph and may miss one; the exact solver does not).

``largest_nvlinked_set`` bounds what ``required`` can ever get on a node (the GPU plugin's static filter): the largest
set of the given devices whose every pair is NVLinked, a maximum clique of the NVLink graph (``largest_clique``: branch
and bound with a pivot over bitmasks, at most CLIQUE_STEPS branches; on the published servers a few dozen, since their
NVLink graphs are disjoint cliques). Remembered on the node per set of devices.

``link_groups`` tells how a node's GPUs group by their links, for the plan's ``usage`` and its picture: the NVLinked
groups (largest first, each a maximum clique of what is left) and, where ``system`` links show more than one, the NUMA
nodes (the GPUs joined by links that stay within one).

``break_cost`` ranks single devices for a 1-GPU (or share) placement among those that fit equally well: the device
whose best link to another wholly free device is weakest (then the least linked to them in sum) breaks the least of
what multi-GPU work could get. Remembered per node state version.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import GPU_LINK_NVLINK
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import NodeState

NVLINK_LANE_SCORE = 100
NVLINK_SCORE = NVLINK_LANE_SCORE    # an NVLinked pair scores at least this (one lane), any other pair less
MAX_SCORED_LANES = 18           # an H100's NVLink lanes: more count no more
LINK_SCORES = {"board": 60, "switch": 50, "multi_switch": 40, "host_bridge": 30, "numa": 20, "system": 10, "unknown": 10}
UNKNOWN_SCORE = LINK_SCORES["unknown"]
BEST_LINK_SCORE = NVLINK_LANE_SCORE * MAX_SCORED_LANES + max(LINK_SCORES.values())
EXHAUSTIVE = 5000               # candidate sets scored one by one at most; beyond, greedy and swaps
SWAP_PASSES = 8                 # passes of single swaps over the greedy's best set
CLIQUE_STEPS = 2000             # branches of the maximum-clique search at most; beyond, an upper bound stands


def link_score(level, nvlinks, pcie="unknown"):
    """A pair's score: 100 per NVLink lane (at most MAX_SCORED_LANES counted) plus its PCIe path's score; ``pcie`` is
    read only for an nvlink pair (any other pair's PCIe path is its level)."""
    if level == GPU_LINK_NVLINK:
        return NVLINK_LANE_SCORE * min(nvlinks, MAX_SCORED_LANES) + LINK_SCORES.get(pcie, UNKNOWN_SCORE)
    return LINK_SCORES.get(level, UNKNOWN_SCORE)


def link_matrix(node):
    """The link score of every pair of the node's devices, by position (a list of lists), or None when the node
    lists no links. Remembered on the node, which is immutable."""
    cached = node.__dict__.get("_link_matrix", False)
    if cached is not False:
        return cached
    matrix = None
    if node.gpu_links:
        positions = {device.index: position for position, device in enumerate(node.gpus)}
        size = len(node.gpus)
        matrix = [[UNKNOWN_SCORE] * size for _position in range(size)]
        for position in range(size):
            matrix[position][position] = 0
        for link in node.gpu_links:
            first, second = positions.get(link.first), positions.get(link.second)
            if first is not None and second is not None:
                matrix[first][second] = matrix[second][first] = link_score(link.level, link.nvlinks, link.pcie)
    object.__setattr__(node, "_link_matrix", matrix)
    return matrix


def nvlinked(matrix, first, second):
    return matrix is not None and matrix[first][second] >= NVLINK_SCORE


def set_score(matrix, positions):
    """The sum of the link scores over the pairs of ``positions``."""
    if matrix is None:
        return UNKNOWN_SCORE * len(positions) * (len(positions) - 1) // 2
    return sum(matrix[first][second] for first, second in combinations(positions, 2))


def best_set(matrix, ordered, count, forced=(), required=False):
    """``count`` positions of ``ordered`` (candidates in best-fit order; ``forced`` a prefix of them that must be in
    the set) with the highest set_score, returned in best-fit order with their score; None when none qualifies
    (``required``: a pair not NVLinked). ``matrix`` is link_matrix's (not None)."""
    forced = list(forced)
    if required and any(not nvlinked(matrix, a, b) for a, b in combinations(forced, 2)):
        forced = []
    pool = [position for position in ordered if position not in forced]
    need = count - len(forced)
    if need < 0 or need > len(pool):
        return None
    base = set_score(matrix, forced)
    if need == 0:
        return list(forced), base
    # What each candidate adds with the forced devices; a required set's candidates must be NVLinked to them all.
    start = [sum(matrix[position][other] for other in forced) for position in pool]
    allowed = [not required or all(nvlinked(matrix, position, other) for other in forced) for position in pool]
    if comb(len(pool), need) <= EXHAUSTIVE:
        found = _exhaustive(matrix, pool, need, start, allowed, required)
    else:
        found = _greedy(matrix, pool, need, start, allowed, required)
    if found is None:
        return None
    chosen, score = found
    rank = {position: order for order, position in enumerate(ordered)}
    return sorted(forced + [pool[item] for item in chosen], key=rank.__getitem__), base + score


def _exhaustive(matrix, pool, need, start, allowed, required):
    best, best_score = None, -1
    rows = [[matrix[a][b] for b in pool] for a in pool]
    usable = [item for item in range(len(pool)) if allowed[item]]
    for chosen in combinations(usable, need):
        score = 0
        ok = True
        for position, first in enumerate(chosen):
            score += start[first]
            row = rows[first]
            for second in chosen[position + 1:]:
                link = row[second]
                if required and link < NVLINK_SCORE:
                    ok = False
                    break
                score += link
            if not ok:
                break
        if ok and score > best_score:       # strictly: among equal scores the first in best-fit order stays
            best, best_score = chosen, score
    return None if best is None else (list(best), best_score)


def _greedy(matrix, pool, need, start, allowed, required):
    size = len(pool)
    rows = [[matrix[a][b] for b in pool] for a in pool]
    best, best_score = None, -1
    for seed in range(size):
        if not allowed[seed]:
            continue
        chosen = [seed]
        inside = [False] * size
        inside[seed] = True
        gain = [start[item] + rows[seed][item] for item in range(size)]
        ok = [allowed[item] and (not required or rows[seed][item] >= NVLINK_SCORE) for item in range(size)]
        score = start[seed]
        while len(chosen) < need:
            pick = -1
            for item in range(size):
                if not inside[item] and ok[item] and (pick < 0 or gain[item] > gain[pick]):
                    pick = item
            if pick < 0:
                break
            chosen.append(pick)
            inside[pick] = True
            score += gain[pick]
            row = rows[pick]
            for item in range(size):
                gain[item] += row[item]
                if required and row[item] < NVLINK_SCORE:
                    ok[item] = False
        if len(chosen) == need and (score > best_score or (score == best_score and sorted(chosen) < best)):
            best, best_score = sorted(chosen), score
    if best is None:
        return None
    return _swaps(rows, best, best_score, start, allowed, required)


def _swaps(rows, chosen, score, start, allowed, required):
    """Single swaps (one device out, one in) while one raises the score, the best swap first."""
    size = len(rows)
    chosen = list(chosen)
    for _pass in range(SWAP_PASSES):
        gain = [start[item] + sum(rows[item][member] for member in chosen) for item in range(size)]
        move = None
        for out in chosen:
            for item in range(size):
                if item in chosen or not allowed[item]:
                    continue
                if required and any(rows[item][member] < NVLINK_SCORE for member in chosen if member != out):
                    continue
                delta = gain[item] - rows[item][out] - gain[out]
                if delta > 0 and (move is None or delta > move[0]):
                    move = (delta, out, item)
        if move is None:
            break
        chosen[chosen.index(move[1])] = move[2]
        score += move[0]
    return sorted(chosen), score


def break_cost(node_state, position):
    """What taking device ``position`` alone costs multi-GPU work on this node: (its best link score to another
    wholly free device, the sum of its links to them); (0, 0) for a device not wholly free or a node without links.
    Remembered per node state version."""
    matrix = link_matrix(node_state.node)
    if matrix is None:
        return (0, 0)
    memo = node_state.topology
    if memo is None or memo[0] != node_state.version:
        used = node_state.gpu_used
        free = [position for position in range(len(used)) if used[position] == 0]
        costs = {}
        for first in free:
            links = [matrix[first][second] for second in free if second != first]
            costs[first] = (max(links), sum(links)) if links else (0, 0)
        memo = node_state.topology = (node_state.version, costs)
    return memo[1].get(position, (0, 0))


def best_empty_score(node, request, choose):
    """The score of the set ``choose`` (the GPU plugin's choose_gpus) gives ``request`` on the empty node, or None when
    it fits there in no way. Remembered on the node per request (a few distinct requests per problem)."""
    cache = node.__dict__.get("_best_empty")
    if cache is None:
        cache = {}
        object.__setattr__(node, "_best_empty", cache)
    if request not in cache:
        chosen = choose(NodeState(node), request)
        cache[request] = None if chosen is None else set_score(link_matrix(node), [position for position, _take in chosen])
    return cache[request]


def largest_clique(neighbours, candidates, steps=CLIQUE_STEPS):
    """The largest clique among ``candidates`` (a bitmask of vertices; ``neighbours[v]`` the bitmask of v's neighbours,
    without v): (its members as a bitmask, True), the first found in a tie (low vertices are tried first); or, when
    ``steps`` branches did not settle it, (the largest found, False): then no clique is larger than
    clique_bound(neighbours, candidates).
    Branch and bound: a branch ends once its size plus what may join cannot beat the best; each level branches only
    on the vertices not adjacent to a pivot (the one with the most neighbours left), as any maximal clique holds one."""
    best = [0, 0]                   # [size, members]
    left = [steps]

    def grow(members, size, pool):
        if not pool:
            if size > best[0]:
                best[0], best[1] = size, members
            return True
        if size + bin(pool).count("1") <= best[0]:
            return True
        left[0] -= 1
        if left[0] < 0:
            return False
        pivot = max(_bits(pool), key=lambda vertex: (bin(pool & neighbours[vertex]).count("1"), -vertex))
        for vertex in _bits(pool & ~neighbours[pivot]):
            if not grow(members | 1 << vertex, size + 1, pool & neighbours[vertex]):
                return False
            pool &= ~(1 << vertex)
            if size + bin(pool).count("1") <= best[0]:
                break
        return True

    exact = grow(0, 0, candidates)
    return best[1], exact


def clique_bound(neighbours, candidates):
    """No clique among ``candidates`` is larger than this: one more than the most neighbours a candidate has among them."""
    return max((bin(neighbours[vertex] & candidates).count("1") + 1 for vertex in _bits(candidates)), default=0)


def _bits(mask):
    """The vertices of a bitmask, ascending."""
    vertices = []
    while mask:
        low = mask & -mask
        vertices.append(low.bit_length() - 1)
        mask ^= low
    return vertices


def nvlink_neighbours(matrix, size):
    """Per device position the bitmask of the positions NVLinked to it (none without links)."""
    return [sum(1 << other for other in range(size) if other != position and nvlinked(matrix, position, other))
            for position in range(size)]


def largest_nvlinked_set(node, positions):
    """How many of the devices at ``positions`` at most are NVLinked all to all: the largest clique of the NVLink
    graph among them (1 for a device alone, 0 for none), or, where the bounded search does not settle it, an upper
    bound, so a filter that refuses a larger count refuses only what is certain. Remembered on the node per set."""
    cache = node.__dict__.get("_largest_nvlinked")
    if cache is None:
        cache = {}
        object.__setattr__(node, "_largest_nvlinked", cache)
    candidates = sum(1 << position for position in positions)
    if candidates not in cache:
        neighbours = nvlink_neighbours(link_matrix(node), len(node.gpus))
        members, exact = largest_clique(neighbours, candidates)
        cache[candidates] = bin(members).count("1") if exact else clique_bound(neighbours, candidates)
    return cache[candidates]


# Levels of a path that leaves its NUMA node (nvidia-smi's SYS) or says nothing of it.
CROSS_NUMA = "system"
NOT_KNOWN = "unknown"


def link_groups(node):
    """How the node's GPUs group by their links, by GPU index, or None for a node without links:
    ``{"nvlink": [{"gpus": [...], "nvlinks": the fewest lanes of a pair}, ...], "numa": [{"gpus": [...]}, ...]}``.
    ``nvlink``: groups of 2 or more GPUs NVLinked all to all, the largest first (a maximum clique of the NVLink graph
    among the GPUs no group holds yet, ties to the lowest positions), each GPU in at most one; listed by first GPU.
    ``numa``: the GPUs joined by links that stay within a NUMA node (every level but system and unknown; an NVLinked
    pair by its PCIe path where known), when the
    links show at least two such groups and a system link between GPUs; each group has ``numa_node`` where its GPUs
    say the same one. At most one entry per GPU in each list: the size is bounded by the node's GPUs (64). A fresh
    value each call (a plan's result is its caller's to change); the clique searches are bounded (CLIQUE_STEPS each)."""
    groups = None
    if node.gpu_links:
        size = len(node.gpus)
        positions = {device.index: position for position, device in enumerate(node.gpus)}
        neighbours = nvlink_neighbours(link_matrix(node), size)
        lanes, near, crossing = {}, [[] for _position in range(size)], False
        known = [False] * size      # a link of the GPU says where it sits (any level but unknown)
        for link in node.gpu_links:
            first, second = positions.get(link.first), positions.get(link.second)
            if first is None or second is None:
                continue
            lanes[(min(first, second), max(first, second))] = link.nvlinks
            # Where the pair's path runs: an NVLinked pair's PCIe path where it is known (NVLink across sockets).
            path = link.pcie if link.level == GPU_LINK_NVLINK and link.pcie != NOT_KNOWN else link.level
            if path != NOT_KNOWN:
                known[first] = known[second] = True
            if path == CROSS_NUMA:
                crossing = True
            elif path != NOT_KNOWN:
                near[first].append(second)
                near[second].append(first)
        nvlink, left = [], (1 << size) - 1
        while left:
            members, _exact = largest_clique(neighbours, left)
            chosen = _bits(members)
            if len(chosen) < 2:
                break
            fewest = min(lanes.get((a, b), 0) for a in chosen for b in chosen if a < b)
            nvlink.append({"gpus": [node.gpus[position].index for position in chosen], "nvlinks": fewest})
            left &= ~members
        nvlink.sort(key=lambda group: positions[group["gpus"][0]])
        numa = []
        if crossing:
            seen = [False] * size
            for start in range(size):
                if seen[start] or not known[start]:
                    continue        # a GPU whose links say nothing of its NUMA node stays outside
                seen[start], component, queue = True, [], [start]
                while queue:
                    position = queue.pop()
                    component.append(position)
                    for other in near[position]:
                        if not seen[other]:
                            seen[other] = True
                            queue.append(other)
                component.sort()
                group = {"gpus": [node.gpus[position].index for position in component]}
                numa_nodes = {node.gpus[position].numa_node for position in component}
                if len(numa_nodes) == 1 and None not in numa_nodes:
                    group["numa_node"] = numa_nodes.pop()
                numa.append(group)
            if len(numa) < 2:
                numa = []
        groups = {"nvlink": nvlink, "numa": numa}
    return groups
