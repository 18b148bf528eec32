# -*- coding: utf-8 -*-
"""Bad input at the later entry points (names, every-node services, taints, the exact solver's evictions, rebalance,
waves, scale requests, the facts cache), each at the cause that now handles it; test names say which."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
from unittest.mock import MagicMock

import pytest

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.gang_schedule import ActionModule
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import DeployError, waves
from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import plan_catalog, rebalance_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_EVERY_NODE_WORK
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import scale_overrides
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import (
    NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Service, Taint, Toleration, toleration_index, tolerated,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import parse_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import describe, rebalance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import schedule
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import _max_moves
from ansible_collections.gangplank.platform.plugins.modules.facts_cache import read_cache
from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases
from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_gang_schedule import HOSTVARS, SERVICES

SURROGATE = "\ud800"
NODE = {"cpu": 4, "memory": "8Gi"}


@contextlib.contextmanager
def at_most(seconds):
    """A hang becomes a failure (the defect took minutes, or forever) instead of a stuck test run."""
    def expired(_signum, _frame):
        raise AssertionError("still running after %d s" % seconds)
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def errors_of(problem):
    with pytest.raises(ProblemError) as caught:
        parse_problem(problem)
    return dict(caught.value.errors)


def action(services=None, record=None, **args):
    task = Task()
    task.args = dict({"services": SERVICES if services is None else services, "hosts": ["a", "b", "c"], "record": record or {}, "quotas": {}}, **args)
    module = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    return module.run(task_vars={"hostvars": HOSTVARS})


# --- a lone surrogate in a name ---------------------------------------------------------------

def test_lone_surrogate_node_name_is_refused_naming_the_path():
    errors = errors_of({"nodes": {"ok": NODE, SURROGATE: NODE}, "services": {"web": {}}})
    assert list(errors) == ['nodes."\\ud800"'] and "lone surrogates" in errors['nodes."\\ud800"']
    # Anywhere text is read: labels, taints, GPU fields, previous, quotas.
    node = dict(NODE, labels={"zone": SURROGATE}, taints=[{"key": SURROGATE, "effect": "NoSchedule"}],
                gpus=[{"index": 0, "uuid": "G" + SURROGATE, "model": "M", "memory": "1Gi"}])
    errors = errors_of({"nodes": {"a": node}, "services": {"web": {"node_selector": {SURROGATE: "x"}}},
                        "previous": {"web-0": {"node": SURROGATE}}})
    assert sorted(errors) == ['nodes.a.gpus[0].uuid', 'nodes.a.labels.zone', 'nodes.a.taints[0].key',
                              'previous.web-0.node', 'services.web.node_selector."\\ud800"']


def test_exact_solver_names_hold_any_node_name():
    """The cause of the TypeError: OR-Tools names carried node names as UTF-8. Given a model past the parser
    (a user plugin's or a caller's), the exact solver must still run."""
    problem = parse_problem({"nodes": {"a": NODE}, "services": {"web": {"resources": {"cpu": 1}}}})
    nodes = {SURROGATE: dataclasses.replace(problem.nodes["a"], name=SURROGATE)}
    odd = dataclasses.replace(problem, nodes=nodes)
    found = exact.solve(odd, Framework(odd, PLUGINS, WEIGHTS), 2.0)
    assert found.status in (exact.OPTIMAL, exact.FEASIBLE) and found.placements[0].node == SURROGATE


@pytest.mark.parametrize("extra", [[], ["--json"], ["--html", "page.html"], ["--rebalance"]])
def test_lone_surrogate_in_table_and_html_output_is_an_error_not_a_traceback(tmp_path, extra):
    text = '{"nodes": {"\\ud800": {"cpu": 4, "memory": "8Gi"}}, "services": {"web": {}}}'
    extra = [str(tmp_path / item) if item.endswith(".html") else item for item in extra]
    code, stdout, stderr, _seconds = fuzz_cases.run_command(text, *extra)
    assert code == 1 and "Traceback" not in stderr and "lone surrogates" in stderr and stdout == ""
    assert not os.path.exists(tmp_path / "page.html")


# --- products of independent bounds -------------------------------------------------------------

def test_every_node_services_times_nodes_is_bounded_before_any_pair_is_checked():
    problem = {"nodes": {"n%05d" % i: NODE for i in range(10000)},
               "services": {"s%05d" % j: {"every_node": True} for j in range(10000)}}
    with at_most(60):
        errors = errors_of(problem)
    assert "100000000 eligibility checks" in errors["services"] and str(MAX_EVERY_NODE_WORK) in errors["services"]


def test_every_node_within_the_work_bound_is_planned():
    problem = {"nodes": {"n%04d" % i: dict(NODE, labels={"role": "gpu" if i % 2 else "cpu"}) for i in range(1000)},
               "services": {"s%02d" % j: {"every_node": True, "node_selector": {"role": "gpu"}, "resources": {"cpu": "1m"}}
                            for j in range(10)}}
    with at_most(120):
        parsed = parse_problem(problem)
    assert all(service.replicas == 500 for service in parsed.services.values())


def test_taints_times_tolerations_is_linear():
    taints = [{"key": "k%d" % t, "value": "v", "effect": "NoSchedule"} for t in range(1024)]
    problem = {"nodes": {"n%03d" % i: dict(NODE, taints=taints) for i in range(230)},
               "services": {"web": {"replicas": 4, "resources": {"cpu": "10m"},
                                    "tolerations": [{"key": "k%d" % t, "value": "v"} for t in range(1024)]},
                            # Classes tolerating all but one: every node refuses them, after 1,023 lookups each.
                            "db": {"resources": {"cpu": "10m"},
                                   "tolerations": [{"key": "k%d" % t, "value": "v"} for t in range(1, 1024)]},
                            "cache": {"resources": {"cpu": "20m"},
                                      "tolerations": [{"key": "k%d" % t, "value": "v"} for t in range(1, 1024)]}}}
    # A few seconds here; each class took 30 s and more before (1,024 x 1,024 comparisons per node).
    with at_most(30):
        result = plan_catalog(problem, exact_seconds=2.0)
    assert result["feasible"] is False and "untolerated taint {k0: v}" in json.dumps(result["unschedulable"])


def test_the_toleration_index_answers_as_toleration_tolerates():
    keys, values, effects = ("k", "j"), (None, "v", "w"), (None, NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
    tolerations = [Toleration(key, value, effect) for key, value, effect in itertools.product(keys, values, effects)]
    taints = [Taint(key, value, effect) for key, value, effect in itertools.product(keys, values, effects[1:])]
    for size in (0, 1, 2):
        for chosen in itertools.combinations(tolerations, size):
            index = toleration_index(Service("s", tolerations=chosen))
            for taint in taints:
                assert tolerated(index, taint) == any(toleration.tolerates(taint) for toleration in chosen), (chosen, taint)


# --- the exact solver's evictions ------------------------------------------------------------------

PRIORITIES = {"nodes": {"n1": NODE, "n2": NODE},
              "services": {"high": {"preemptible": True, "priority": 2, "resources": {"cpu": 2}},
                           "low": {"replicas": 2, "preemptible": True, "priority": 1, "resources": {"cpu": 2}},
                           "gang": {"resources": {"cpu": 4}}},
              "previous": {"high-0": {"node": "n1"}, "low-0": {"node": "n2"}, "low-1": {"node": "n2"}}}


def test_exact_solver_never_evicts_a_higher_priority_to_keep_lower_ones():
    greedy = schedule(parse_problem(PRIORITIES), exact_seconds=0)
    assert [entry["instance"] for entry in greedy["evictions"]] == ["low-1"]
    result = schedule(parse_problem(PRIORITIES), exact_seconds=5.0)
    # Before: the exact plan evicted high-0 (one eviction instead of... one, but of priority 2) and was taken.
    assert [entry["instance"] for entry in result["evictions"]] == ["low-1"]
    assert "high-0" in result["placements"]


def test_exact_model_alone_weighs_evictions_by_priority():
    problem = parse_problem(PRIORITIES)
    found = exact.solve(problem, Framework(problem, PLUGINS, WEIGHTS), 5.0)
    assert found.status == exact.OPTIMAL
    placed = {placement.instance.name for placement in found.placements}
    assert "high-0" in placed and "gang-0" in placed and len(placed & {"low-0", "low-1"}) == 1


# --- rebalance under a profile ----------------------------------------------------------------------

def _profile_problem():
    gpu = {"index": 0, "model": "NVIDIA L4", "memory": "20Gi"}
    nodes = {"n1": dict(NODE, gpus=[dict(gpu, uuid="G1")]), "n2": dict(NODE, gpus=[dict(gpu, uuid="G2")]),
             "cad": dict(NODE, labels={"gangplank.io/image": "cad"},
                         gpus=[dict(gpu, uuid="G3", memory="80Gi")])}
    services = {"web": {"replicas": 2, "image": "localhost/web:1", "resources": {"cpu": 1, "gpu": {"memory": "15Gi"}}},
                "cad": {"image": "registry.local/cad:1", "resources": {"cpu": 1, "gpu": {"memory": "10Gi"}}}}
    previous = {"web-0": {"node": "n1", "gpus": [{"uuid": "G1"}]}, "web-1": {"node": "n2", "gpus": [{"uuid": "G2"}]},
                "cad-0": {"node": "cad", "gpus": [{"uuid": "G3"}]}}
    return {"nodes": nodes, "services": services, "previous": previous}


def test_rebalance_honours_the_profile_filter():
    profile = parse_profile(dict(fuzz_cases.PROFILE, plugins={"filter": {"enabled": ["ImageAffinity"]}}))
    # Without the profile, packing both web instances onto the cad node's large GPU frees two GPUs.
    free = rebalance(_profile_problem(), max_moves=2, exact_seconds=5.0)
    assert free["path"] == "rebalance" and free["placements"]["web-0"]["node"] == "cad"
    for result in (rebalance(_profile_problem(), max_moves=2, exact_seconds=5.0, profile=profile),
                   rebalance_catalog(_profile_problem(), 2, 5.0, profile=profile)):
        assert all(result["placements"][name]["node"] != "cad" for name in ("web-0", "web-1")), result["placements"]
        # The next normal plan under the profile moves nothing back.
        running = {name: {"node": entry["node"], "gpus": entry["gpus"]} for name, entry in result["placements"].items()}
        again = dict(_profile_problem(), previous=running)
        assert plan_catalog(again, exact_seconds=0, profile=profile)["moves"] == []


def test_gang_schedule_rebalance_passes_the_profile():
    # No host is in zone west: only a profile without NodeSelector places this service, in a plan or a rebalance.
    services = {"web": {"replicas": 2, "node_selector": {"zone": "west"}, "resources": {"cpu": 1}}}
    profile = {"plugins": {"filter": {"disabled": ["NodeSelector"]}}}
    planned = action(services=services, profile=profile)
    assert planned["plan"]["feasible"] is True
    result = action(services=services, record=planned["record"], rebalance={"max_moves": 2}, profile=profile)
    assert not result.get("failed") and result["plan"]["feasible"] is True, result.get("msg")
    assert result["plan"]["rebalance"]["status"] != "not_run"


def test_rebalance_max_moves_0_says_the_moves_are_the_current_plans():
    problem = {"nodes": {"n1": dict(NODE, taints=[{"key": "drain", "effect": "NoExecute"}]), "n2": NODE},
               "services": {"web": {"resources": {"cpu": 1}}}, "previous": {"web-0": {"node": "n1"}}}
    result = rebalance(problem, max_moves=0, exact_seconds=2.0)
    report = result["rebalance"]
    assert report["max_moves"] == 0 and report["moves"] == 1 and report["current_moves"] == 1
    assert any("the current plan itself makes 1 move(s)" in line for line in describe(result))
    quiet = rebalance(dict(problem, previous={"web-0": {"node": "n2"}}), max_moves=0, exact_seconds=2.0)
    assert quiet["rebalance"]["current_moves"] == 0 and not any("current plan" in line for line in describe(quiet))


# --- strings that pass a loose check -------------------------------------------------------------

@pytest.mark.parametrize("value", ["50%\n", "50%\n\n", "\n50%", "٥٠%", "50 %"])
def test_max_unavailable_block_scalar_is_refused_by_the_catalog(value):
    with pytest.raises(ProblemError) as caught:
        split_catalog({"web": {"image": "localhost/web:1", "max_unavailable": value}})
    assert list(dict(caught.value.errors)) == ["services.web.max_unavailable"]
    with pytest.raises(DeployError, match="max_unavailable"):
        waves([], {"web": {"image": "localhost/web:1", "max_unavailable": value}})


@pytest.mark.parametrize("value", ["²", "٣", "1²", "\n2²"])
def test_rebalance_max_moves_non_ascii_digits_are_refused(value):
    assert "expected a whole number" in _max_moves({"max_moves": value})
    result = action(rebalance={"max_moves": value})
    assert result["failed"] is True and result["msg"].startswith("rebalance.max_moves: got")
    assert _max_moves({"max_moves": " 2 "}) == 2


# --- scale requests -------------------------------------------------------------------------

def test_override_of_a_service_that_became_every_node_is_skipped_and_resettable():
    services = dict(SERVICES, agent={"every_node": True, "resources": {"cpu": "10m"}})
    record = {"replicas": {"agent": 3, "web": 3}}
    result = action(services=services, record=record)
    assert not result.get("failed"), result.get("msg")
    assert sorted(name for name in result["plan"]["placements"] if name.startswith("agent@")) == \
        ["agent@a", "agent@b", "agent@c"]
    assert result["record"]["replicas"] == {"web": 3}           # the lapsed override is dropped; the next run is clean
    assert scale_overrides(services, record["replicas"], {"service": "agent", "reset": True}) == {"web": 3}
    reset = action(services=services, record=record, scale={"service": "agent", "reset": True})
    assert not reset.get("failed") and reset["record"]["replicas"] == {"web": 3}


def test_a_sidecar_cannot_be_scalable():
    errors = errors_of({"nodes": {"a": NODE}, "services": {"web": {"sidecars": ["log"]}, "log": {"sidecar": True, "scalable": True}}})
    assert list(errors) == ["services.log.scalable"]
    services = {"web": {"scalable": True, "sidecars": ["log"]}, "log": {"sidecar": True, "scalable": True}}
    with pytest.raises(ProblemError) as caught:
        scale_overrides(services, {}, {"service": "log", "replicas": 10})
    assert caught.value.errors[0][0] == "scale.service" and "a sidecar has no replicas" in caught.value.errors[0][1]
    result = action(services=services, scale={"service": "log", "replicas": 10})
    assert result["failed"] is True and "record" not in result


# --- the facts cache on something that is not a file ---------------------------------------------------

def test_facts_cache_on_a_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    with at_most(10):
        assert read_cache(str(fifo)) is None


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom"])
def test_facts_cache_linked_to_an_endless_device_is_not_read(tmp_path, target):
    link = tmp_path / "facts.json"
    os.symlink(target, link)
    with at_most(10):
        assert read_cache(str(link)) is None


def test_facts_cache_on_a_directory_or_fifo_leaves_no_descriptor_open(tmp_path):
    directory, fifo = tmp_path / "dir.json", tmp_path / "fifo.json"
    directory.mkdir()
    os.mkfifo(fifo)
    before = len(os.listdir("/proc/self/fd"))
    for _attempt in range(5):
        assert read_cache(str(directory)) is None and read_cache(str(fifo)) is None
    assert len(os.listdir("/proc/self/fd")) == before


def test_facts_cache_larger_than_its_bound_is_not_read_whole(tmp_path):
    big = tmp_path / "facts.json"
    big.write_bytes(b'{"x": "' + b"a" * (5 * 2 ** 20) + b'"}')
    assert read_cache(str(big)) is None
    small = tmp_path / "small.json"
    small.write_text('{"version": 1}')
    assert read_cache(str(small)) == {"version": 1}


def test_facts_cache_module_answers_on_a_fifo(tmp_path):
    """The module as Ansible runs it (a subprocess reading its arguments as JSON): it answers and does not block."""
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    collections = os.environ.get("PYTHONPATH", "")
    arguments = json.dumps({"ANSIBLE_MODULE_ARGS": {"path": str(fifo), "state": "read"}})
    process = subprocess.run([sys.executable, "-m", "ansible_collections.gangplank.platform.plugins.modules.facts_cache"],
                             input=arguments.encode(), capture_output=True, timeout=60, check=False,
                             env=dict(os.environ, PYTHONPATH=collections))
    answer = json.loads(process.stdout)
    assert answer["valid"] is False and answer["changed"] is False


# --- found by fuzzing -----------------------------------------------------------------------------------------

def test_fuzz_found_a_catalog_entry_that_is_not_a_mapping_is_refused_by_the_deploy_side():
    for entry in (3, [], "web"):
        with pytest.raises(DeployError, match='services.web: got .*; expected a mapping'):
            waves([], {"web": entry})
    # null is an empty entry, as the scheduler reads it (the planner command accepts it).
    assert split_catalog({"web": None})[0] == {"web": None}


def test_fuzz_found_the_probe_port_error_stays_one_short_line():
    with pytest.raises(ProblemError) as caught:
        split_catalog({"db": {"image": "localhost/db:1", "ports": list(range(1, 2001)), "health": {"tcp": {"port": 5432}}}})
    message = dict(caught.value.errors)["services.db.health.tcp.port"]
    assert message == "got 5432; expected one of the service's ports (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)"


def test_scheduling_classes_times_nodes_is_bounded_before_planning():
    nodes = {"n%04d" % i: dict(NODE, labels={"id": str(i)}) for i in range(1300)}
    services = {"s%04d" % j: {"resources": {"cpu": "1m"}, "node_selector": {"id": str(j)}} for j in range(1300)}
    with at_most(60):
        with pytest.raises(ProblemError) as caught:
            plan_catalog({"nodes": nodes, "services": services}, exact_seconds=0)
    assert "1300 scheduling classes" in caught.value.errors[0][1] and "at most 1000000" in caught.value.errors[0][1]
    # Services scaled to 0 and identical services are no classes of their own.
    idle = dict({"s%04d" % j: {"replicas": 0, "node_selector": {"id": str(j)}} for j in range(1300)},
                web={"replicas": 3, "resources": {"cpu": "1m"}})
    assert plan_catalog({"nodes": nodes, "services": idle}, exact_seconds=0)["feasible"] is True
