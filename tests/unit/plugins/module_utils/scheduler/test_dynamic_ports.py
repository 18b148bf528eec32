# -*- coding: utf-8 -*-
"""Dynamic host ports: named ports whose host port the scheduler picks from the port range, per node."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

SMALL = {"cpu": "100m", "memory": "16Mi"}


def _problem(replicas=3, port_range=None, nodes=("a", "b"), extra=None):
    problem = {
        "nodes": {name: {"cpu": 4, "memory": "4Gi"} for name in nodes},
        "services": {"api": {"replicas": replicas, "resources": SMALL,
                             "ports": [{"name": "http", "container_port": 8080}]}},
    }
    if port_range is not None:
        problem["port_range"] = port_range
    problem["services"].update(extra or {})
    return problem


def _errors(problem):
    with pytest.raises(ProblemError) as caught:
        parse_problem(problem)
    return dict(caught.value.errors)


def test_many_instances_per_node_each_get_their_own_host_port():
    problem = _problem(replicas=5)
    result = plan(problem)
    assert result["feasible"] is True
    assert check_plan(problem, result) == []
    by_node = {}
    for name, placement in result["placements"].items():
        assert list(placement["host_ports"]) == ["http"]
        by_node.setdefault(placement["node"], []).append(placement["host_ports"]["http"])
    assert any(len(ports) > 1 for ports in by_node.values())
    for ports in by_node.values():
        assert sorted(ports) == list(range(20000, 20000 + len(ports)))


def test_a_node_takes_no_more_instances_than_its_range_has_ports():
    problem = _problem(replicas=4, port_range=[30000, 30001])
    result = plan(problem)
    assert result["feasible"] is True and check_plan(problem, result) == []
    nodes = sorted(placement["node"] for placement in result["placements"].values())
    assert nodes == ["a", "a", "b", "b"]
    refused = plan(_problem(replicas=5, port_range=[30000, 30001]))
    assert refused["feasible"] is False


def test_static_ports_keep_one_instance_per_node_beside_dynamic_ones():
    problem = _problem(replicas=2, extra={"db": {"replicas": 2, "resources": SMALL, "ports": [5432]}})
    result = plan(problem)
    assert result["feasible"] is True and check_plan(problem, result) == []
    assert "host_ports" not in result["placements"]["db-0"]
    assert {result["placements"]["db-0"]["node"], result["placements"]["db-1"]["node"]} == {"a", "b"}


def test_an_instance_keeps_its_host_port_on_its_node():
    problem = _problem(replicas=2, nodes=("a",))
    problem["previous"] = {"api-1": {"node": "a", "host_ports": {"http": 20007}}}
    result = plan(problem)
    assert result["placements"]["api-1"]["host_ports"] == {"http": 20007}
    assert result["placements"]["api-0"]["host_ports"] == {"http": 20000}
    assert check_plan(problem, result) == []
    assert "restarts" not in result


def test_a_kept_port_outside_a_narrowed_range_is_replaced_and_restarts_the_instance():
    problem = _problem(replicas=1, nodes=("a",), port_range=[21000, 21010])
    problem["previous"] = {"api-0": {"node": "a", "host_ports": {"http": 20007}}}
    result = plan(problem)
    assert result["placements"]["api-0"]["host_ports"] == {"http": 21000}
    assert result["restarts"] == [{"instance": "api-0", "node": "a",
                                   "host_ports": {"from": {"http": 20007}, "to": {"http": 21000}}}]


def test_a_problem_without_dynamic_ports_plans_as_before():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi"}},
               "services": {"db": {"resources": SMALL, "ports": [5432]}}}
    result = plan(problem)
    assert "host_ports" not in result["placements"]["db-0"]
    assert parse_problem(problem).port_range == (20000, 32000)


# Two 10Gi GPUs and requests 5, 4, 4, 3, 2, 2 Gi: the only packing is {5, 3, 2} + {4, 4, 2} (greedy misses it).
PACKING = {
    "nodes": {name: {"cpu": 8, "memory": "8Gi", "gpus": [{"index": 0, "uuid": "GPU-" + name, "model": "NVIDIA L4",
                                                         "memory": "10Gi"}]} for name in ("a", "b")},
    "services": {"s5": {"resources": {"gpu": {"memory": "5Gi"}}},
                 "s4": {"replicas": 2, "resources": {"gpu": {"memory": "4Gi"}},
                        "ports": [{"name": "http", "container_port": 80}]},
                 "s3": {"resources": {"gpu": {"memory": "3Gi"}}},
                 "s2": {"replicas": 2, "resources": {"gpu": {"memory": "2Gi"}}}},
}


def test_the_exact_solver_counts_the_ports_of_the_range():
    fits = copy.deepcopy(PACKING)
    fits["port_range"] = [20000, 20001]
    result = plan(fits)
    assert result["feasible"] is True and result["path"] == "exact"
    assert check_plan(fits, result) == []
    assert sorted(result["placements"][name]["host_ports"]["http"] for name in ("s4-0", "s4-1")) == [20000, 20001]
    too_few = copy.deepcopy(PACKING)
    too_few["port_range"] = [20000, 20000]
    refused = plan(too_few)
    assert refused["feasible"] is False and refused["path"] == "exact"


def test_the_plan_checker_finds_a_shared_host_port():
    problem = _problem(replicas=2, nodes=("a",))
    result = plan(problem)
    result["placements"]["api-1"]["host_ports"]["http"] = result["placements"]["api-0"]["host_ports"]["http"]
    assert any("used 2 times" in violation for violation in check_plan(problem, result))


@pytest.mark.parametrize("ports, path, expected", [
    ([{"name": "Http", "container_port": 80}], "services.api.ports[0].name", "a port name"),
    ([{"name": "ht tp", "container_port": 80}], "services.api.ports[0].name", "a port name"),
    ([{"name": "http\nx", "container_port": 80}], "services.api.ports[0].name", "a port name"),
    ([{"name": "http#1", "container_port": 80}], "services.api.ports[0].name", "a port name"),
    ([{"name": "a-very-long-port-name", "container_port": 80}], "services.api.ports[0].name", "a port name"),
    ([{"name": "http", "container_port": 0}], "services.api.ports[0].container_port", "from 1 to 65535"),
    ([{"name": "http", "container_port": 80}, {"name": "http", "container_port": 81}], "services.api.ports[1].name",
     "not listed twice"),
    ([{"name": "http"}], "services.api.ports[0].container_port", "is required"),
    ([{"name": "http", "container_port": 80, "host": 1}], "services.api.ports[0].host", "unknown"),
    ([{"name": "http", "container_port": 80}, 25000], "services.api.ports[1]", "outside the dynamic port range 20000-32000"),
])
def test_bad_ports_are_refused_naming_the_path(ports, path, expected):
    problem = _problem()
    problem["services"]["api"]["ports"] = ports
    errors = _errors(problem)
    assert expected in errors[path].lower()


@pytest.mark.parametrize("port_range, path, expected", [
    ([30000, 20000], "port_range", "first <= last"),
    ([0, 20000], "port_range[0]", "from 1 to 65535"),
    ([20000, 70000], "port_range[1]", "from 1 to 65535"),
    ([20000], "port_range", "two ports"),
    ("20000-32000", "port_range", "a list"),
])
def test_bad_port_ranges_are_refused_naming_the_path(port_range, path, expected):
    errors = _errors(_problem(port_range=port_range))
    assert expected in errors[path]


def test_more_dynamic_ports_than_the_range_holds_are_refused():
    problem = _problem(port_range=[20000, 20001])
    problem["services"]["api"]["ports"] = [{"name": "p%d" % i, "container_port": 80 + i} for i in range(3)]
    errors = _errors(problem)
    assert "at most 2 dynamic ports" in errors["services.api.ports"]


def test_a_static_port_in_the_range_stays_allowed_on_a_site_without_dynamic_ports():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi"}}, "services": {"db": {"resources": SMALL, "ports": [25000]}}}
    assert parse_problem(problem).services["db"].ports == (25000,)
    problem["services"]["api"] = {"resources": SMALL, "ports": [{"name": "http", "container_port": 80}]}
    assert "outside the dynamic port range" in _errors(problem)["services.db.ports[0]"]


def test_a_service_without_dynamic_ports_is_not_held_to_the_range():
    # api and web ask the same; only api takes the one port of the range per node.
    problem = _problem(replicas=2, port_range=[20000, 20000],
                       extra={"web": {"replicas": 4, "resources": SMALL}})
    result = plan(problem)
    assert result["feasible"] is True and check_plan(problem, result) == []
    assert {result["placements"]["api-0"]["node"], result["placements"]["api-1"]["node"]} == {"a", "b"}
