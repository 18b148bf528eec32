# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, service, solve


def test_ranks_are_dependency_levels_and_sidecars_have_none():
    services = {
        "db": service(), "queue": service(),
        "api": service(depends_on=["db", "queue"]),
        "worker": service(depends_on=["queue"]),
        "infer": service(depends_on=["api", "db"], sidecars=["log"]),
        "idle": service(replicas=0, depends_on=["worker"]),
        "log": {"sidecar": True},
    }
    assert solve({"a": node(cpu=64)}, services)["ranks"] == [["db", "queue"], ["api", "worker"], ["idle", "infer"]]


def test_ranks_are_reported_when_infeasible_too():
    result = solve({"a": node(cpu=1)}, {"db": service(cpu=2), "api": service(depends_on=["db"])})
    assert not result["feasible"] and result["ranks"] == [["db"], ["api"]]
