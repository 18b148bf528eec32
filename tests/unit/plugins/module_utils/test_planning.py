# -*- coding: utf-8 -*-
"""Planning a catalog (planning.py): the deploy keys read off, both sides' mistakes raised together."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import read_catalog, split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import plan_catalog, plan_or_rebalance, rebalance_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.test_catalog import ARGV_EXPECTED, NODES, api

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
DEMO_CATALOG = os.path.join(ROOT, "inventories", "local", "group_vars", "all", "catalog.yml")


def untimed(result):
    """A plan without the time it took."""
    return {key: value for key, value in result.items() if key not in ("seconds", "steps")}


# -- planning a catalog -----------------------------------------------------------------------------------------------

def test_plan_catalog_plans_a_catalog_with_deploy_keys():
    result = plan_catalog({"nodes": NODES, "services": {
        "db": {"ports": [5432], "stateful": True, "image": "localhost/db:1", "health": {"tcp": {"port": 5432}}},
        "api": api(replicas=2, ports=[], depends_on=["db"], env={"A": 1}, config=[{"dest": "/etc/a", "content": "x"}],
                   sidecars=["log"]),
        "log": {"sidecar": True, "image": "localhost/log:1", "command": ["sleep", "infinity"]},
    }})
    assert result["feasible"] is True
    assert sorted(result["placements"]) == ["api-0", "api-1", "db-0"]
    assert result["placements"]["api-0"]["sidecars"] == ["log"]
    assert result["ranks"] == [["db"], ["api"]]


def test_plan_catalog_reports_deploy_and_scheduler_mistakes_together():
    with pytest.raises(ProblemError) as caught:
        plan_catalog({"nodes": NODES, "services": {
            "api": api(replicas=-1, image=3, health={"http": {"port": 81}}),
            "web": api(depends_on=["db"]),
        }})
    assert caught.value.errors == [
        ("services.api.image", "got 3; expected an image reference such as localhost/app:1"),
        ("services.api.health.http.port", "got 81; expected one of the service's ports (8080)"),
        ("services.api.replicas", "got -1; expected an integer >= 0"),
        ("services.web.depends_on[0]", 'got "db"; expected a service defined under services'),
    ]


def test_plan_catalog_raises_deploy_mistakes_of_a_plannable_catalog():
    with pytest.raises(ProblemError) as caught:
        plan_catalog({"nodes": NODES, "services": {"api": api(command="serve")}})
    assert caught.value.errors == [("services.api.command", 'got "serve"; expected ' + ARGV_EXPECTED)]


def test_plan_catalog_leaves_a_malformed_problem_to_the_scheduler():
    with pytest.raises(ProblemError) as caught:
        plan_catalog({"nodes": NODES, "services": ["api"]})
    assert caught.value.errors == [("services", 'got ["api"]; expected a mapping')]
    with pytest.raises(ProblemError) as caught:
        plan_catalog({"nodes": NODES, "services": {"api": api(ports=8080)}})
    assert ("services.api.ports", "got 8080; expected a list") in caught.value.errors


def test_the_demo_catalog_is_valid_and_plans():
    with open(DEMO_CATALOG, encoding="utf-8") as stream:
        demo = yaml.safe_load(stream)
    # Ansible renders "{{ demo_image }}" before the catalog reaches split_catalog.
    services = yaml.safe_load(yaml.safe_dump(demo["gangplank_services"]).replace("{{ demo_image }}", demo["demo_image"]))
    scheduling, deploy = split_catalog(services)
    assert set(scheduling) == set(deploy) == set(services)
    assert deploy["infer"]["nvme_path"] == "/cache"
    assert {name: (spec["health"] or {}).get("type") for name, spec in deploy.items()} == {
        "db": "tcp", "queue": "command", "api": "http", "worker": "command", "infer": "http", "logshipper": None}
    # Each node's data filesystem holds the stateful services' disk volumes.
    nodes = {name: {"cpu": 8, "memory": "16Gi", "disk": "10Gi",
                    "gpus": [{"index": 0, "uuid": "GPU-%s" % name, "model": "NVIDIA A100", "memory": "40Gi"}],
                    "nvme": [{"name": "nvme0n1", "size": "100Gi", "labels": ["cache"], "mount": "/mnt/nvme0n1"}]}
             for name in ("node-a", "node-b")}
    result = plan_catalog({"nodes": nodes, "services": services, "quotas": demo["gangplank_quotas"]})
    assert result["feasible"] is True, result.get("unschedulable")
    assert result["ranks"] == [["db", "queue"], ["api"], ["infer", "worker"]]


def test_plan_or_rebalance_rebalances_only_with_max_moves():
    problem = {"nodes": NODES, "services": {"api": api(command=["serve"])}, "previous": {"api-0": {"node": "n1"}}}
    planned = plan_or_rebalance(problem, None, 0)
    assert untimed(planned) == untimed(plan_catalog(problem, exact_seconds=0)) and "rebalance" not in planned
    assert plan_or_rebalance(problem, 2, 0)["rebalance"]["max_moves"] == rebalance_catalog(problem, 2, 0)["rebalance"]["max_moves"] == 2
    with pytest.raises(ProblemError) as caught:
        plan_or_rebalance({"nodes": NODES, "services": {"api": api(command="serve")}}, 2, 0)
    assert caught.value.errors == [("services.api.command", 'got "serve"; expected ' + ARGV_EXPECTED)]


def test_planning_hands_the_scheduler_the_catalogs_scheduling_part():
    services = {"api": api(env={"A": 1}, health={"tcp": {"port": 8080}})}
    catalog = read_catalog(services)
    assert catalog.errors == [] and untimed(plan_catalog({"nodes": NODES, "services": services}, exact_seconds=0)) == \
        untimed(plan_catalog({"nodes": NODES, "services": catalog.scheduling}, exact_seconds=0))


def test_a_catalog_read_by_the_caller_is_not_read_again_and_plans_as_a_read_here_with_the_scale_requests_replicas(
        monkeypatch):
    from ansible_collections.gangplank.platform.plugins.module_utils.planning import planning

    services = {"db": {"ports": [5432], "stateful": True, "image": "localhost/db:1"},
                "api": api(replicas=2, ports=[], depends_on=["db"], env={"A": 1}),
                "web": api(ports=[], config=[{"dest": "/etc/w", "content": "x"}])}
    read = read_catalog(services)
    # A scale request sets a service's replicas on the problem's services (scheduling.build_problem): the one change
    # the schedule makes to them. The caller's read takes the problem's counts.
    scaled = {name: dict(entry, replicas=3) if name in ("api", "web") else entry for name, entry in services.items()}
    problem = {"nodes": NODES, "services": scaled}
    reads = []
    monkeypatch.setattr(planning, "read_catalog", lambda value: reads.append(1) or read_catalog(value))
    for max_moves in (None, 2):
        taken = plan_or_rebalance(problem, max_moves, 0, catalog=read)
        assert reads == []
        own = plan_or_rebalance(problem, max_moves, 0)
        assert reads == [1]
        reads.clear()
        assert untimed(taken) == untimed(own) and sorted(taken["placements"]) == [
            "api-0", "api-1", "api-2", "db-0", "web-0", "web-1", "web-2"]
    # A read of other services (another set of names) is not taken: the problem's services are read here.
    other = read_catalog({"db": services["db"]})
    assert untimed(plan_catalog(problem, exact_seconds=0, catalog=other)) == untimed(plan_catalog(problem, exact_seconds=0))
    assert reads == [1, 1]
