# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property tests of the gang scheduler against the independent checker (plan_checker.py).

Hypothesis generates small problems in the documented format (docs/problem-format.md)
and every result is checked by ``check_plan``, which re-derives each rule from the
raw problem. All runs are derandomized so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
import json
import os
import random

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, reject, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import (
    check_plan, cpu_millicores, reservations_exceed_cluster, size_bytes,
)

# Shrinking a failure takes minutes on these problems; it is off by default so a failing run
# is as quick as a passing one (the assertion lists every violation and the problem as JSON).
# To have hypothesis minimise a failure: GANGPLANK_HYPOTHESIS_SHRINK=1 pytest ...
PHASES = (Phase.explicit, Phase.reuse, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("GANGPLANK_HYPOTHESIS_SHRINK") else ())
SETTINGS = dict(deadline=None, derandomize=True, database=None, phases=PHASES,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

NODE_NAMES = ["node-a", "node-b", "node-c", "gpu-1", "gpu-2", "edge"]
APP_NAMES = ["web", "api", "db", "infer", "train", "cache"]
SIDECAR_NAMES = ["logship", "mesh"]
GPU_MODELS = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4", "Tesla T4"]
GPU_MEMORY = ["16Gi", "24Gi", "40Gi", "80Gi", "39.5Gi", 25769803776, "20G"]
MODEL_WANTED = ["a100", "H100", "L4", "t4", "nvidia"]
NODE_CPU = [2, 4, 8, "16", 32, 7.5, "3500m"]
NODE_MEMORY = ["4Gi", "8Gi", "16Gi", "64Gi", "7.5Gi", 17179869184, "12G", "32Gi"]
APP_CPU = [None, 0, "250m", 0.5, 1, "1.5", 2]
APP_MEMORY = [None, 0, "256Mi", "512Mi", "1Gi", "1.5Gi", "2G", 1073741824, "3Gi"]
SIDECAR_CPU = [None, "100m", 0.25, "500m"]
SIDECAR_MEMORY = [None, "64Mi", "128Mi", "0.25Gi"]
GPU_REQUEST_MEMORY = [None, "8Gi", "19.75Gi", "20Gi", "40Gi", 10737418240]
NVME_SIZE = ["100Gi", "500Gi", "1Ti", "1.5Ti", 1000000000000]
NVME_REQUEST_SIZE = [None, 0, "50Gi", "200Gi", "750Gi", "1Ti"]
NVME_LABELS = ["cache", "scratch"]
PORTS = [80, 443, 8080, 9100]
LABELS = {"zone": ["east", "west"], "rack": [1, 2, "1"], "ssd": [True, False, "true"]}
TAINT_KEYS = ["dedicated", "gpu"]
TAINT_VALUES = [None, "cdn", "ml"]
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
QUOTA_NAMES = ["compute", "batch"]
# Quota amounts per dimension, in increasing order (so min <= max is easy to keep).
QUOTA_AMOUNTS = {
    "cpu": [1, "2", 4, "8000m", 16, 64],
    "memory": ["1Gi", "2Gi", "4Gi", "16Gi", "64Gi", "1Ti"],
    "gpu": [0, 1, 2, 3, 4, 8],
    "gpu_memory": ["10Gi", "20Gi", "40Gi", "80Gi", "160Gi", "1Ti"],
    "nvme": ["50Gi", "100Gi", "500Gi", "1Ti", "2Ti", "8Ti"],
}


def pick(draw, items):
    """One of ``items`` (a cheap draw: hypothesis caches ``st.integers`` strategies)."""
    return items[draw(st.integers(0, len(items) - 1))]


def chance(draw, one_in):
    return draw(st.integers(0, one_in - 1)) == 0


def subset(draw, items, max_size=None):
    """Some of ``items``, in their order, drawn as one bit mask (shrinks towards none)."""
    if not items:
        return []
    mask = draw(st.integers(0, 2 ** len(items) - 1))
    chosen = [item for bit, item in enumerate(items) if mask >> bit & 1]
    return chosen[:max_size] if max_size is not None else chosen


def distinct(draw, items, count):
    """``count`` distinct items in a drawn order."""
    pool = list(items)
    return [pool.pop(draw(st.integers(0, len(pool) - 1))) for _unused in range(count)]


@st.composite
def nodes_strategy(draw, count=None, names=tuple(NODE_NAMES), uuid_prefix="GPU-", rare=1):
    count = count if count is not None else draw(st.integers(1, 6))
    nodes = {}
    uuid_counter = 0
    for name in distinct(draw, names, count):
        spec = {"cpu": pick(draw, NODE_CPU), "memory": pick(draw, NODE_MEMORY)}
        labels = {key: pick(draw, LABELS[key]) for key in subset(draw, sorted(LABELS))}
        if labels:
            spec["labels"] = labels
        if chance(draw, 5 * rare):
            taints = []
            for _unused in range(draw(st.integers(1, 2))):
                taint = {"key": pick(draw, TAINT_KEYS), "effect": pick(draw, EFFECTS)}
                value = pick(draw, TAINT_VALUES)
                if value is not None:
                    taint["value"] = value
                taints.append(taint)
            spec["taints"] = taints
        if chance(draw, 10 * rare):
            spec["unschedulable"] = True
        if not chance(draw, 3):
            gpus = []
            for index in distinct(draw, range(8), draw(st.integers(1, 4))):
                uuid_counter += 1
                gpus.append({"index": index, "uuid": "%s%s-%d" % (uuid_prefix, name, uuid_counter),
                             "model": pick(draw, GPU_MODELS), "memory": pick(draw, GPU_MEMORY)})
            spec["gpus"] = gpus
        devices = []
        for position in range(pick(draw, (0, 1, 1, 2))):
            device = {"name": "nvme%dn1" % position, "size": pick(draw, NVME_SIZE),
                      "labels": subset(draw, NVME_LABELS) if chance(draw, 3) else list(NVME_LABELS)}
            if chance(draw, 2):
                device["mount"] = "/mnt/nvme%dn1" % position
            devices.append(device)
        if devices:
            spec["nvme"] = devices
        nodes[name] = spec
    return nodes


def _resources(draw, cpu_choices, memory_choices):
    resources = {}
    cpu = pick(draw, cpu_choices)
    memory = pick(draw, memory_choices)
    if cpu is not None:
        resources["cpu"] = cpu
    if memory is not None:
        resources["memory"] = memory
    return resources


def _compatible_sidecars(name, ports, anti, sidecars, sidecar_specs):
    """Leave out sidecars that would clash with the instance they run beside (a port it or an
    earlier sidecar uses, or anti-affinity either way): the parser rejects such a catalog."""
    kept = []
    used_ports = set(ports)
    avoids = {name: set(anti)}
    for sidecar in sidecars:
        spec = sidecar_specs[sidecar]
        sidecar_ports = set(spec.get("ports", []))
        sidecar_anti = set(spec.get("anti_affinity", []))
        members = [name] + kept
        if sidecar_ports & used_ports or sidecar_anti & set(members) \
                or any(sidecar in avoids[member] for member in members):
            continue
        kept.append(sidecar)
        used_ports |= sidecar_ports
        avoids[sidecar] = sidecar_anti
    return kept


def _app(draw, name, earlier_apps, all_names, sidecar_specs, quota_names, nodes, rare):
    sidecar_names = sorted(sidecar_specs)
    spec = {}
    replicas = pick(draw, (0, 1, 1, 2, 2, 3, 4))
    if replicas != 1 or chance(draw, 2):
        spec["replicas"] = replicas
    if chance(draw, 4):
        spec["stateful"] = True
    if chance(draw, 6):
        spec["scalable"] = chance(draw, 2)
    resources = _resources(draw, APP_CPU, APP_MEMORY)
    if chance(draw, 3):
        gpu = {}
        count = pick(draw, (None, 1, 1, 1, 2, 3))
        if count is not None:
            gpu["count"] = count
        memory = pick(draw, GPU_REQUEST_MEMORY)
        if memory is not None:
            gpu["memory"] = memory
        models = subset(draw, MODEL_WANTED, max_size=2) if chance(draw, 2) else []
        if models:
            gpu["models"] = models
        resources["gpu"] = gpu
    if chance(draw, 4 * rare):
        nvme = {"label": pick(draw, NVME_LABELS) if not chance(draw, 10) else "missing"}
        size = pick(draw, NVME_REQUEST_SIZE)
        if size is not None:
            nvme["size"] = size
        resources["nvme"] = nvme
    if resources:
        spec["resources"] = resources
    ports = subset(draw, PORTS, max_size=2) if chance(draw, 4 * rare) else []
    if ports:
        spec["ports"] = ports
    sidecars = subset(draw, sidecar_names) if sidecar_names and chance(draw, 2) else []
    anti = []
    if chance(draw, 3 * rare):
        anti = subset(draw, all_names, max_size=2)
        if chance(draw, 2) and name not in anti:
            anti.append(name)
        spec["anti_affinity"] = anti
    sidecars = _compatible_sidecars(name, ports, anti, sidecars, sidecar_specs)
    if sidecars:
        spec["sidecars"] = sidecars
    if chance(draw, 5 * rare):
        # Mostly labels some node has (so the selector can match), sometimes any label.
        labels = nodes[pick(draw, sorted(nodes))].get("labels", {})
        if chance(draw, 4) or not labels:
            labels = {key: pick(draw, LABELS[key]) for key in sorted(LABELS)}
        spec["node_selector"] = {key: labels[key] for key in subset(draw, sorted(labels), max_size=2)}
    if chance(draw, 2):
        tolerations = []
        for _unused in range(draw(st.integers(1, 2))):
            toleration = {"key": pick(draw, TAINT_KEYS)}
            value = pick(draw, TAINT_VALUES)
            if value is not None:
                toleration["value"] = value
            effect = pick(draw, (None,) + tuple(EFFECTS))
            if effect is not None:
                toleration["effect"] = effect
            tolerations.append(toleration)
        spec["tolerations"] = tolerations
    depends = subset(draw, earlier_apps, max_size=2)
    if depends:
        spec["depends_on"] = depends
    if quota_names and chance(draw, 2):
        spec["quota"] = pick(draw, quota_names)
    return spec


def _quotas(draw, quota_names):
    quotas = {}
    for name in quota_names:
        quota, low, high = {}, {}, {}
        for dim in subset(draw, sorted(QUOTA_AMOUNTS), max_size=3):
            a, b = sorted((draw(st.integers(0, 5)), draw(st.integers(0, 5))))
            which = pick(draw, ("max", "min", "both"))
            if which in ("min", "both"):
                low[dim] = QUOTA_AMOUNTS[dim][a]
            if which in ("max", "both"):
                high[dim] = QUOTA_AMOUNTS[dim][b]
        if low:
            quota["min"] = low
        if high:
            quota["max"] = high
        quotas[name] = quota
    return quotas


def _previous(draw, nodes, services, app_names):
    instances = ["%s-%d" % (name, ordinal) for name in app_names
                 for ordinal in range(services[name].get("replicas", 1))]
    candidates = instances + ["gone-0", "%s-7" % app_names[0]]
    previous = {}
    for instance in subset(draw, candidates, max_size=6):
        node = pick(draw, sorted(nodes)) if not chance(draw, 10) else "retired-node"
        entry = {"node": node}
        if node in nodes and nodes[node].get("gpus") and chance(draw, 2):
            entry["gpus"] = [{"uuid": pick(draw, [g["uuid"] for g in nodes[node]["gpus"]])}]
        if node in nodes and nodes[node].get("nvme") and chance(draw, 2):
            entry["nvme"] = {"name": pick(draw, [d["name"] for d in nodes[node]["nvme"]])}
        previous[instance] = entry
    return previous


@st.composite
def problems(draw, with_previous=True):
    """A small valid problem: 1-6 nodes, 1-6 services (apps and sidecars), maybe quotas and previous."""
    rare = pick(draw, (1, 3))  # 3: a roomier problem, with fewer constraints
    nodes = draw(nodes_strategy(rare=rare))
    sidecar_names = subset(draw, SIDECAR_NAMES)
    app_names = distinct(draw, APP_NAMES, draw(st.integers(1, 6 - len(sidecar_names))))
    all_names = app_names + sidecar_names
    quota_names = subset(draw, QUOTA_NAMES) if chance(draw, 3 * rare) else []
    services = {}
    for name in sidecar_names:
        spec = {"sidecar": True}
        resources = _resources(draw, SIDECAR_CPU, SIDECAR_MEMORY)
        if resources:
            spec["resources"] = resources
        ports = subset(draw, PORTS, max_size=1) if chance(draw, 3 * rare) else []
        if ports:
            spec["ports"] = ports
        if chance(draw, 6 * rare):
            spec["anti_affinity"] = subset(draw, all_names, max_size=2)
        services[name] = spec
    for position, name in enumerate(app_names):
        sidecar_specs = {sidecar: services[sidecar] for sidecar in sidecar_names}
        services[name] = _app(draw, name, app_names[:position], all_names, sidecar_specs, quota_names, nodes, rare)
    problem = {"nodes": nodes, "services": services}
    if quota_names:
        problem["quotas"] = _quotas(draw, quota_names)
    if with_previous and chance(draw, 2):
        problem["previous"] = _previous(draw, nodes, services, app_names)
    return problem


def instances_of(problem):
    return ["%s-%d" % (name, ordinal) for name, spec in problem["services"].items() if not spec.get("sidecar")
            for ordinal in range(spec.get("replicas", 1))]


def run_plan(problem):
    """Plan a deep copy and make sure the scheduler did not change its input."""
    before = copy.deepcopy(problem)
    result = plan(problem)
    assert problem == before, "plan() modified its input problem"
    json.dumps(result)  # the result must be JSON
    return result


def without_timings(result):
    """The result less its timings, the only part that may differ between runs."""
    result = dict(result)
    result.pop("seconds", None)
    if "steps" in result:
        result["steps"] = [{key: value for key, value in step.items() if key != "seconds"} for step in result["steps"]]
    if "exact" in result:
        result["exact"] = {key: value for key, value in result["exact"].items() if key != "seconds"}
    return result


def assert_valid(problem, result):
    violations = check_plan(problem, result)
    assert not violations, "violations:\n  %s\nproblem: %s\nresult: %s" % (
        "\n  ".join(violations), json.dumps(problem, sort_keys=True), json.dumps(result, sort_keys=True))


def as_previous(placements):
    return copy.deepcopy(placements)


def shuffled(value, rng):
    """The same data with every mapping's keys inserted in a different order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


# --- properties ----------------------------------------------------------------------------

def assert_well_formed_failure(problem, result):
    """(b) An infeasible result places nothing and says why, kube-style, for some instance."""
    assert result["placements"] == {}
    assert "node_labels" not in result
    instances = instances_of(problem)
    if instances and not reservations_exceed_cluster(problem):
        # Otherwise nobody may be to blame (docs: "unschedulable may be empty").
        assert result["unschedulable"], result
    prefix = "0/%d nodes are available" % len(problem["nodes"])
    for instance, message in result["unschedulable"].items():
        assert instance in instances, instance
        assert message.startswith(prefix), (instance, message)


@settings(max_examples=800, **SETTINGS)
@given(problems())
def test_every_result_passes_the_checker(problem):
    """(a) Feasible results satisfy every rule; (b) infeasible ones are well-formed and explained."""
    result = run_plan(problem)
    assert_valid(problem, result)
    if not result["feasible"]:
        assert_well_formed_failure(problem, result)


@settings(max_examples=400, **SETTINGS)
@given(problems(with_previous=False), st.lists(st.integers(0, 11), min_size=24, max_size=24))
def test_scattered_previous_passes_the_checker(problem, picks):
    """(a) again, where it is hardest: a feasible plan whose stateless instances are partly
    scattered to other nodes (and partly new) is re-planned, often through the moves path."""
    result = run_plan(problem)
    if not result["feasible"]:
        reject()  # only feasible plans are interesting here
    nodes = sorted(problem["nodes"])
    previous = {}
    for position, (name, placement) in enumerate(result["placements"].items()):
        if problem["services"][placement["service"]].get("stateful"):
            previous[name] = copy.deepcopy(placement)
        elif picks[(position + 7) % 24] % 2:
            previous[name] = {"node": nodes[picks[position % 24] % len(nodes)]}
    changed = dict(problem, previous=previous)
    again = run_plan(changed)
    assert_valid(changed, again)
    if not again["feasible"]:
        assert_well_formed_failure(changed, again)


@settings(max_examples=250, **SETTINGS)
@given(problems(), st.integers(0, 2 ** 32 - 1))
def test_deterministic_and_independent_of_key_order(problem, seed):
    """(c) Same problem, same bytes; also with every mapping's keys inserted in another order."""
    first = json.dumps(without_timings(run_plan(copy.deepcopy(problem))))
    assert json.dumps(without_timings(run_plan(copy.deepcopy(problem)))) == first
    rng = random.Random(seed)
    for _unused in range(2):
        assert json.dumps(without_timings(run_plan(shuffled(problem, rng)))) == first


@settings(max_examples=400, **SETTINGS)
@given(problems())
def test_feeding_placements_back_moves_nothing(problem):
    """(d) A feasible plan fed back as ``previous`` is kept exactly: no move, same devices."""
    result = run_plan(problem)
    if not result["feasible"]:
        reject()  # only feasible plans are interesting here
    again_problem = dict(problem, previous=as_previous(result["placements"]))
    again = run_plan(again_problem)
    assert again["feasible"], again
    assert again["moves"] == [], again["moves"]
    assert again["placements"] == result["placements"]
    assert_valid(again_problem, again)


@st.composite
def perturbations(draw):
    """A base problem and the changes to make once it is planned."""
    problem = draw(problems(with_previous=False))
    kinds = subset(draw, ["add_node", "add_replica", "remove_service"]) or ["add_node"]
    extra = draw(nodes_strategy(count=1, names=("spare-1", "spare-2"), uuid_prefix="GPU-new-"))
    which = draw(st.integers(0, 100))
    return problem, kinds, extra, which


def perturb(problem, kinds, extra, which):
    changed = copy.deepcopy(problem)
    services = changed["services"]
    stateless = sorted(name for name, spec in services.items()
                       if not spec.get("sidecar") and not spec.get("stateful"))
    for kind in kinds:
        if kind == "add_node":
            changed["nodes"].update(copy.deepcopy(extra))
        elif kind == "add_replica" and stateless:
            name = stateless[which % len(stateless)]
            if name in services:
                services[name]["replicas"] = services[name].get("replicas", 1) + 1
        elif kind == "remove_service" and stateless:
            name = stateless[(which // 7) % len(stateless)]
            if name in services:
                del services[name]
                for spec in services.values():
                    for key in ("depends_on", "anti_affinity"):
                        if name in spec.get(key, []):
                            spec[key] = [other for other in spec[key] if other != name]
    return changed


@settings(max_examples=400, **SETTINGS)
@given(perturbations())
def test_stateful_instances_never_move(case):
    """(e) After adding a node, adding a stateless replica or removing a stateless service,
    every stateful instance stays where it was (or the plan fails, placing nothing)."""
    problem, kinds, extra, which = case
    result = run_plan(problem)
    if not result["feasible"]:
        reject()  # only feasible plans are interesting here
    changed = perturb(problem, kinds, extra, which)
    changed["previous"] = as_previous(result["placements"])
    again = run_plan(changed)
    assert_valid(changed, again)
    if not again["feasible"]:
        assert_well_formed_failure(changed, again)
        return
    for name, placement in result["placements"].items():
        if problem["services"][placement["service"]].get("stateful"):
            assert again["placements"][name]["node"] == placement["node"], (name, again["moves"])
    if "add_replica" not in kinds:
        # Only capacity was added or work removed: every instance that is left still fits
        # where it is, so nothing may move and each keeps its devices.
        assert again["moves"] == [], again["moves"]
        for name, placement in again["placements"].items():
            assert placement == result["placements"][name], name


# --- catalogs the properties above found placed wrongly; now rejected as contradictions ------

POD_CLASHES = {
    # docs: "if A lists B, no node runs both an A and a B instance (sidecars included)";
    # web-0 was once placed beside the sidecar that must never share a node with web.
    "sidecar anti-affinity against its own app": """
nodes:
  node-a: {cpu: 2, memory: 4Gi}
services:
  web: {sidecars: [logship]}
  logship: {sidecar: true, anti_affinity: [web]}
""",
    "app anti-affinity against its own sidecar": """
nodes:
  node-a: {cpu: 2, memory: 4Gi}
services:
  web: {sidecars: [logship], anti_affinity: [logship]}
  logship: {sidecar: true}
""",
    "anti-affinity between two sidecars of one app": """
nodes:
  node-a: {cpu: 2, memory: 4Gi}
services:
  web: {sidecars: [logship, mesh]}
  logship: {sidecar: true, anti_affinity: [mesh]}
  mesh: {sidecar: true}
""",
    # docs: "Host ports: a port has at most one user per node" (sidecar ports included).
    "host port shared by an app and its sidecar": """
nodes:
  node-a: {cpu: 2, memory: 4Gi}
services:
  db: {ports: [80], sidecars: [logship]}
  logship: {sidecar: true, ports: [80]}
""",
    "host port shared by two sidecars of one app": """
nodes:
  node-a: {cpu: 2, memory: 4Gi}
services:
  db: {sidecars: [logship, mesh]}
  logship: {sidecar: true, ports: [9100]}
  mesh: {sidecar: true, ports: [9100]}
""",
}


@pytest.mark.parametrize("name", sorted(POD_CLASHES))
def test_an_instance_clashing_with_its_own_sidecars_is_rejected(name):
    with pytest.raises(ProblemError, match=r"services\.(web|db)\.sidecars\[\d\]: got"):
        run_plan(yaml.safe_load(POD_CLASHES[name]))


def test_quota_min_beyond_the_cluster_with_no_instance():
    """Found by the properties (fixed in 6ee5d27): the min reservations hold with nothing to place."""
    problem = yaml.safe_load("""
nodes:
  node-a: {cpu: 2, memory: 4Gi}
services:
  web: {replicas: 0}
quotas:
  compute: {min: {gpu: 1}}
""")
    result = run_plan(problem)
    assert not result["feasible"]
    assert_valid(problem, result)
    assert_well_formed_failure(problem, result)


# --- the checker can fail ------------------------------------------------------------------

BASE = {
    "nodes": {
        "gpu-node": {"cpu": 16, "memory": "64Gi", "labels": {"zone": "east"},
                     "gpus": [{"index": 0, "uuid": "GPU-0", "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"},
                              {"index": 1, "uuid": "GPU-1", "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"}],
                     "nvme": [{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"], "mount": "/mnt/nvme0n1"}]},
        "cpu-node": {"cpu": 8, "memory": "32Gi", "labels": {"zone": "west"},
                     "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
        "spare": {"cpu": 8, "memory": "32Gi", "labels": {"zone": "west"}},
    },
    "services": {
        "infer": {"replicas": 1, "resources": {"cpu": 2, "memory": "8Gi",
                                               "gpu": {"count": 1, "memory": "20Gi", "models": ["a100"]},
                                               "nvme": {"label": "cache", "size": "100Gi"}},
                  "ports": [8080], "quota": "ml"},
        "trainer": {"resources": {"cpu": 1, "gpu": {"count": 1}}, "quota": "ml", "node_selector": {"zone": "east"}},
        "web": {"replicas": 2, "ports": [80], "anti_affinity": ["web"], "sidecars": ["logship"],
                "tolerations": [{"key": "dedicated", "value": "web"}], "resources": {"cpu": 1, "memory": "1Gi"}},
        "db": {"stateful": True, "resources": {"cpu": "500m", "memory": "2Gi"}, "ports": [5432]},
        "logship": {"sidecar": True, "ports": [9100], "resources": {"cpu": "100m", "memory": "64Mi"}},
    },
    "quotas": {"ml": {"max": {"gpu": 2, "gpu_memory": "100Gi"}}},
    "previous": {"db-0": {"node": "spare"}},
}


@pytest.fixture(name="base")
def fixture_base():
    problem = copy.deepcopy(BASE)
    result = plan(copy.deepcopy(problem))
    assert result["feasible"], result
    assert check_plan(problem, result) == []
    return problem, result


def _node_of(result, instance):
    return result["placements"][instance]["node"]


def _move(result, instance, node):
    result["placements"][instance]["node"] = node


def mutate_gpu_to_cpu_node(problem, result):
    _move(result, "infer-0", "cpu-node")


def mutate_port_clash(problem, result):
    problem["services"]["db"]["ports"] = [80]
    _move(result, "db-0", _node_of(result, "web-0"))


def mutate_drop_label(problem, result):
    node = _node_of(result, "web-0")
    del result["node_labels"][node]["gangplank.io/service.logship"]


def mutate_extra_label(problem, result):
    result["node_labels"][next(iter(result["node_labels"]))]["gangplank.io/service.ghost"] = "true"


def mutate_missing_instance(problem, result):
    del result["placements"]["web-1"]


def mutate_extra_instance(problem, result):
    result["placements"]["web-2"] = dict(result["placements"]["web-1"], ordinal=2)


def mutate_gpu_memory(problem, result):
    result["placements"]["infer-0"]["gpus"][0]["memory"] = 1


def mutate_whole_gpu_shared(problem, result):
    result["placements"]["infer-0"]["gpus"] = copy.deepcopy(result["placements"]["trainer-0"]["gpus"])
    result["placements"]["infer-0"]["gpus"][0]["memory"] = size_bytes("20Gi")
    _move(result, "infer-0", _node_of(result, "trainer-0"))


def mutate_stateful_moved(problem, result):
    _move(result, "db-0", "gpu-node" if _node_of(result, "db-0") != "gpu-node" else "cpu-node")


def mutate_moves_forgotten(problem, result):
    problem["previous"]["web-0"] = {"node": "elsewhere"}


def mutate_quota_max(problem, result):
    problem["quotas"]["ml"]["max"]["gpu_memory"] = "90Gi"


def mutate_quota_min(problem, result):
    problem["quotas"]["spare-capacity"] = {"min": {"gpu": 2}}


def mutate_taint(problem, result):
    problem["services"]["web"]["tolerations"] = [{"key": "dedicated", "value": "other"}]
    _move(result, "web-0", "cpu-node")


def mutate_selector(problem, result):
    problem["services"]["trainer"]["node_selector"] = {"zone": "west"}


def mutate_cpu(problem, result):
    problem["nodes"][_node_of(result, "web-0")]["cpu"] = "100m"


def mutate_nvme_label(problem, result):
    problem["services"]["infer"]["resources"]["nvme"]["label"] = "scratch"


def mutate_anti_affinity(problem, result):
    _move(result, "web-1", _node_of(result, "web-0"))


def mutate_ranks(problem, result):
    problem["services"]["web"]["depends_on"] = ["db"]


def mutate_unschedulable(problem, result):
    problem["nodes"][_node_of(result, "infer-0")]["unschedulable"] = True


def mutate_stateful_node_gone(problem, result):
    problem["previous"]["db-0"] = {"node": "retired"}
    _move(result, "db-0", "spare")


def mutate_usage(problem, result):
    result["usage"]["gpu-node"]["gpus"][0]["used"] += 1


MUTATIONS = {
    "stateful instance whose node is gone": (mutate_stateful_node_gone, "which is gone: the plan must fail"),
    "usage misreported": (mutate_usage, "usage gpu-node GPU"),
    "gpu on a node without GPUs": (mutate_gpu_to_cpu_node, "not a GPU of its node"),
    "host port over-committed": (mutate_port_clash, "host port 80"),
    "planted label dropped": (mutate_drop_label, "node_labels"),
    "stray planted label": (mutate_extra_label, "node_labels"),
    "instance missing": (mutate_missing_instance, "web-1 is not placed"),
    "extra instance": (mutate_extra_instance, "web-2 is not an instance"),
    "GPU claim differs from request": (mutate_gpu_memory, "claim of 1 bytes"),
    "whole GPU shared": (mutate_whole_gpu_shared, "whole-GPU claim shared"),
    "stateful instance moved": (mutate_stateful_moved, "stateful db-0 moved"),
    "move not reported": (mutate_moves_forgotten, "moves:"),
    "quota max exceeded": (mutate_quota_max, "quota ml: gpu_memory"),
    "quota min reservation": (mutate_quota_min, "quota min reservations: gpu"),
    "untolerated taint": (mutate_taint, "untolerated NoSchedule taint"),
    "node selector": (mutate_selector, "node selector zone=west"),
    "cpu over-committed": (mutate_cpu, "CPU over-committed"),
    "nvme label": (mutate_nvme_label, "lacks label scratch"),
    "anti-affinity": (mutate_anti_affinity, "anti-affinity: 2 instances of web"),
    "ranks": (mutate_ranks, "ranks: service web"),
    "unschedulable node": (mutate_unschedulable, "node is unschedulable"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_checker_catches(base, mutation):
    problem, result = base
    mutate, expected = MUTATIONS[mutation]
    mutate(problem, result)
    violations = check_plan(problem, result)
    assert any(expected in violation for violation in violations), violations


def test_checker_infeasible_shape():
    problem = {"nodes": {"a": {"cpu": 1, "memory": "1Gi"}, "b": {"cpu": 4, "memory": "1Gi", "labels": {"zone": "x"}},
                         "c": {"cpu": 4, "memory": "1Gi", "unschedulable": True}},
               "services": {"big": {"resources": {"cpu": 2}, "node_selector": {"zone": "y"}}}}
    result = plan(copy.deepcopy(problem))
    assert not result["feasible"]
    assert check_plan(problem, result) == []
    message = result["unschedulable"]["big-0"]
    assert message.startswith("0/3 nodes are available: ")
    broken = dict(result, placements={"big-0": {"node": "a"}}, node_labels={"a": {}})
    violations = check_plan(problem, broken)
    assert any("has placements" in v for v in violations) and any("node_labels" in v for v in violations)
    broken = dict(result, unschedulable={"big-0": "no room"})
    assert any("does not start with" in v for v in check_plan(problem, broken))
    broken = dict(result, unschedulable={"big-0": "0/3 nodes are available: 1 Insufficient cpu, "
                                                  "1 node(s) didn't match node selector."})
    assert any("add up to 2, not to the 3 nodes" in v for v in check_plan(problem, broken))
    broken = dict(result, unschedulable={})
    assert any("names no unschedulable instance" in v for v in check_plan(problem, broken))


@pytest.mark.parametrize("text, millicores", [(4, 4000), (0.5, 500), ("2", 2000), ("500m", 500),
                                              ("0.0001", 1), ("1.5", 1500), ("333.3m", 334)])
def test_checker_cpu_quantities(text, millicores):
    assert cpu_millicores(text) == millicores


@pytest.mark.parametrize("text, size", [(1073741824, 1073741824), ("1Gi", 2 ** 30), ("1.5Gi", 3 * 2 ** 29),
                                        ("2G", 2 * 10 ** 9), ("3k", 3000), ("1.1K", 1100), ("0.3Ki", 308),
                                        ("1Ti", 2 ** 40), ("1P", 10 ** 15)])
def test_checker_size_quantities(text, size):
    assert size_bytes(text) == size
