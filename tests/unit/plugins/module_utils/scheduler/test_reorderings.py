# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gang that greedy's queue order cannot place, tried again in cheap other orders when the exact solver
cannot answer; and GPUFragmentation's expected mix on a living cluster (pinned instances, a small batch)."""

from __future__ import annotations

import copy

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu_fragmentation import GPUFragmentation
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import _greedy, framework_for, plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan


def _node(cpu, models):
    return {"cpu": cpu, "memory": "32Gi",
            "gpus": [{"index": index, "model": model, "memory": "1000Mi"} for index, model in enumerate(models)]}


def _gpu(memory=None, models=None):
    request = {"count": 1}
    if memory is not None:
        request["memory"] = memory
    if models is not None:
        request["models"] = models
    return request


# Found by a random search over small problems: the queue order (model-restricted shares before whole GPUs of a
# common model) leaves a whole B GPU short; whole GPUs first places everything.
WHOLE_FIRST = {
    "nodes": {
        "n0": _node(8, ["B", "B"]),
        "n1": _node(8, ["A", "B", "B", "B"]),
        "n2": _node(4, ["A", "A"]),
        "n3": _node(8, ["A"]),
    },
    "services": {
        "s0": {"replicas": 1, "resources": {"cpu": 2, "memory": "1Gi", "gpu": _gpu("700Mi")}},
        "s1": {"replicas": 2, "resources": {"cpu": 3, "memory": "1Gi", "gpu": _gpu(models=["B"])}},
        "s2": {"replicas": 2, "resources": {"cpu": 3, "memory": "1Gi", "gpu": _gpu("700Mi", ["A"])}},
        "s3": {"replicas": 2, "resources": {"cpu": 3, "memory": "1Gi", "gpu": _gpu("300Mi", ["B"])}},
    },
}


def _uuids(mapping):
    for name, spec in mapping["nodes"].items():
        for device in spec.get("gpus", ()):
            device["uuid"] = "%s-gpu%d" % (name, device["index"])
    return mapping


def test_a_gang_greedy_order_cannot_place_is_placed_by_a_reordering_which_the_result_names():
    mapping = _uuids(copy.deepcopy(WHOLE_FIRST))
    result = plan(copy.deepcopy(mapping), exact_seconds=0)
    assert result["feasible"], result
    assert result["path"] == "greedy"
    assert result["ordering"] == "whole_gpus_first"
    assert check_plan(mapping, result) == []
    # Deterministic: the same plan again.
    again = plan(copy.deepcopy(mapping), exact_seconds=0)
    assert {k: v for k, v in again.items() if k not in ("seconds", "steps")} == \
        {k: v for k, v in result.items() if k not in ("seconds", "steps")}


def test_the_queue_order_alone_fails_there(monkeypatch):
    """The test above can fail: without the re-orderings the same problem is infeasible."""
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import scheduler
    monkeypatch.setattr(scheduler, "_orderings", lambda framework, failed: iter(()))
    result = plan(_uuids(copy.deepcopy(WHOLE_FIRST)), exact_seconds=0)
    assert not result["feasible"]
    assert "ordering" not in result


def test_a_plan_the_queue_order_finds_names_no_ordering():
    mapping = _uuids(copy.deepcopy(WHOLE_FIRST))
    mapping["services"]["s3"]["replicas"] = 1
    result = plan(mapping, exact_seconds=0)
    assert result["feasible"] and "ordering" not in result


def test_when_the_exact_solver_is_skipped_the_reorderings_still_run(monkeypatch):
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 1)
    result = plan(_uuids(copy.deepcopy(WHOLE_FIRST)), exact_seconds=1)
    assert result["feasible"], result
    assert result["ordering"] == "whole_gpus_first"


def test_an_infeasible_gang_stays_infeasible_after_the_reorderings():
    mapping = _uuids(copy.deepcopy(WHOLE_FIRST))
    mapping["services"]["s1"]["replicas"] = 9      # 9 whole B GPUs; the cluster has 5
    result = plan(mapping, exact_seconds=0)
    assert not result["feasible"]
    assert "ordering" not in result and result["unschedulable"]


def _living(batch):
    """A cluster running 40 one-GPU pods and 2 8-GPU pods (stateful, pinned), 2 more 8-GPU pods in the catalog, and a
    batch of ``batch`` shares to place: a small batch is not the mix the cluster is expected to hold."""
    nodes = {"n%02d" % index: _node(96, ["A"] * 8) for index in range(12)}
    services = {
        "one": {"replicas": 40, "stateful": True, "resources": {"cpu": 4, "memory": "1Gi", "gpu": _gpu()}},
        "eight": {"replicas": 4, "stateful": True, "resources": {"cpu": 32, "memory": "1Gi",
                                                                 "gpu": {"count": 8}}},
        "share": {"replicas": batch, "resources": {"cpu": 1, "memory": "1Gi", "gpu": _gpu("300Mi")}},
    }
    mapping = _uuids({"nodes": nodes, "services": services})
    # They run: one-GPU pods 4 to a node on n00-n09, the 8-GPU pods on n10 and n11 (two of them on nodes gone).
    previous = {"one-%d" % ordinal: {"node": "n%02d" % (ordinal // 4), "gpus": [
        {"uuid": "n%02d-gpu%d" % (ordinal // 4, ordinal % 4)}]} for ordinal in range(40)}
    previous.update({"eight-%d" % ordinal: {"node": "n%02d" % (10 + ordinal)} for ordinal in range(2)})
    mapping["previous"] = previous
    return mapping


def test_a_small_batch_on_a_living_cluster_is_scored_against_the_catalog():
    problem = parse_problem(_living(batch=4))
    plugin = GPUFragmentation(problem)
    catalog = plugin._mix
    # The queue is only the batch (4 of 48 GPU instances): the mix stays the catalog's.
    assert plugin.expect({"share": 4}) is False
    assert plugin._mix == catalog
    assert plugin.expect(None) is False


def test_a_gang_that_is_most_of_the_catalog_follows_what_is_left():
    problem = parse_problem(_living(batch=60))      # 60 shares to place, 42 GPU instances running
    plugin = GPUFragmentation(problem)
    catalog = plugin._mix
    # The queue is most of the catalog: the mix is what is left of it.
    assert plugin.expect({"share": 60, "one": 40, "eight": 4}) is False      # the same counts as the catalog
    assert plugin.expect({"share": 50, "one": 0, "eight": 0}) is True
    assert plugin._mix != catalog
    assert plugin.expect(None) is True
    assert plugin._mix == catalog


def test_a_class_no_node_holds_is_proved_infeasible_by_counting_without_reorderings(monkeypatch):
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import scheduler
    tried = []
    monkeypatch.setattr(scheduler, "_reordered", lambda *args: tried.append(args) or None)
    mapping = _uuids({"nodes": {"a": _node(8, ["A", "A"]), "b": _node(8, ["B", "B"])},
                      "services": {"pair": {"replicas": 2, "resources": {"cpu": 1, "memory": "1Gi",
                                                                         "gpu": {"count": 2, "models": ["A"]}}}}})
    result = plan(mapping, exact_seconds=0)
    assert not result["feasible"]
    assert result["summary"].endswith("no placement exists: 2 instance(s) like pair-0 ask more than the 1 node(s) "
                                      "that accept them hold (1 at most)")
    assert tried == []


def test_instances_confined_to_the_same_nodes_are_counted_together():
    # Each fits "a" alone; together they ask 5 of its 4 cores, and only "a" has model A.
    mapping = _uuids({"nodes": {"a": _node(4, ["A", "A"]), "b": _node(4, ["B"])},
                      "services": {"whole": {"resources": {"cpu": 3, "memory": "1Gi", "gpu": _gpu(models=["A"])}},
                                   "share": {"resources": {"cpu": 2, "memory": "1Gi", "gpu": _gpu("500Mi", ["A"])}}}})
    result = plan(mapping, exact_seconds=0)
    assert not result["feasible"]
    assert "no placement exists: the 2 instance(s) that only the 1 node(s) accepting" in result["summary"]
    assert "ask 5000 of CPU (millicores), they have 4000" in result["summary"]


def test_no_counting_proof_where_the_exact_solver_finds_a_plan():
    """Soundness on random small problems: whenever counting says no placement exists, neither does the exact
    solver find one; and every plan passes the plan checker."""
    import random
    rng = random.Random(25)
    proofs = 0
    for _trial in range(100):
        nodes = {"n%d" % index: _node(rng.choice([4, 8]), [rng.choice("AB") for _unused in range(rng.choice([1, 2, 4]))])
                 for index in range(rng.randint(1, 3))}
        services = {}
        for index in range(rng.randint(1, 4)):
            resources = {"cpu": rng.choice([1, 2, 3, 5]), "memory": "1Gi"}
            kind = rng.random()
            if kind < 0.4:
                resources["gpu"] = {"count": rng.choice([1, 2])}
            elif kind < 0.8:
                resources["gpu"] = {"count": 1, "memory": "%dMi" % rng.choice([300, 500, 700])}
            if "gpu" in resources and rng.random() < 0.4:
                resources["gpu"]["models"] = [rng.choice("AB")]
            services["s%d" % index] = {"replicas": rng.randint(1, 4), "resources": resources}
        mapping = _uuids({"nodes": nodes, "services": services})
        counted = plan(copy.deepcopy(mapping), exact_seconds=0)
        if counted["feasible"]:
            assert check_plan(mapping, counted) == []
            continue
        if "no placement exists" in counted["summary"]:
            proofs += 1
            solved = plan(copy.deepcopy(mapping), exact_seconds=5)
            assert not solved["feasible"], (mapping, counted["summary"])
    assert proofs >= 5


def test_a_part_short_of_room_in_sum_is_not_searched(monkeypatch):
    """The part around the unplaced instances asks more GPU memory than its nodes have: said without CP-SAT."""
    searched = []
    monkeypatch.setattr(exact, "_two_phases", lambda *args: searched.append(args))
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 6)
    mapping = _uuids({"nodes": {"a": _node(8, ["A"]), "b": _node(8, ["A"]), "c": {"cpu": 8, "memory": "8Gi"}},
                      "services": {"share": {"replicas": 5, "resources": {"cpu": 1, "memory": "1Gi",
                                                                          "gpu": _gpu("600Mi")}},
                                   "web": {"replicas": 2, "resources": {"cpu": 1, "memory": "1Gi"}}}})
    result = plan(mapping, exact_seconds=5)
    assert not result["feasible"]
    # Too large to model whole: counting runs first and proves the whole infeasible (5 shares of 600Mi, one per 1000Mi
    # device, on 2 devices), so the part around the unplaced shares is never built.
    assert result["summary"] == ("3 of 7 instance(s) could not be placed (21 instance-node pairs exceed the exact solver's "
                                 "limit of 6, so the exact solver did not run); no placement exists: 5 instance(s) like "
                                 "share-0 ask more than the 2 node(s) that accept them hold (2 at most)")
    assert [step["step"] for step in result["steps"]] == ["greedy", "counting_proof"]
    assert searched == []
    # Asked directly, the exact solver says the part (one GPU node, what greedy put there and the unplaced shares) is
    # short of GPU memory in sum, without searching.
    problem = parse_problem(mapping)
    framework = framework_for(problem)
    failed, _path = _greedy(framework, problem)
    found = exact.solve(problem, framework, 5, around=failed)
    assert found.status == exact.SKIPPED and found.placements is None
    assert "has no plan (its instances ask 2516582400 bytes of GPU memory, its nodes have 1048576000)" in found.reason
    assert searched == []


def test_the_counting_proof_is_bounded(monkeypatch):
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import scheduler
    monkeypatch.setattr(scheduler, "PROOF_WORK", 1)
    mapping = _uuids({"nodes": {"a": _node(4, ["A", "A"]), "b": _node(4, ["B"])},
                      "services": {"whole": {"resources": {"cpu": 3, "memory": "1Gi", "gpu": _gpu(models=["A"])}},
                                   "share": {"resources": {"cpu": 2, "memory": "1Gi", "gpu": _gpu("500Mi", ["A"])}}}})
    result = plan(mapping, exact_seconds=0)
    assert not result["feasible"] and "no placement exists" not in result["summary"]
