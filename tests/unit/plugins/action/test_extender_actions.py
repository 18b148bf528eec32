# -*- coding: utf-8 -*-
"""gang_plan and gang_schedule with HTTP scheduler extenders (docs/extenders.md), against real servers on loopback."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

import pytest
from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action import gang_plan, gang_schedule
from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_gang_schedule import HOSTVARS, SERVICES
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_extender import (
    TOKEN, PythonExtender, maintenance,
)

PROBLEM = {"nodes": {"a": {"cpu": 4, "memory": "8Gi"}, "b": {"cpu": 4, "memory": "8Gi"}},
           "services": {"web": {"replicas": 2, "resources": {"cpu": 1}}}}


@pytest.fixture
def servers():
    started = []

    def start(behave):
        started.append(PythonExtender(behave))
        return started[-1]
    yield start
    for server in started:
        server.close()


def _run(module, args, task_vars):
    task = Task()
    task.args = args
    loader = MagicMock()
    loader.get_basedir.return_value = "/nonexistent"
    action = module.ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=loader, templar=MagicMock(),
                                 shared_loader_obj=None)
    return action.run(task_vars=task_vars)


def _profile(url, **extra):
    return {"extenders": [dict({"urlPrefix": url, "filterVerb": "filter", "bearerToken": TOKEN}, **extra)]}


def test_gang_plan_keeps_work_off_refused_nodes(servers):
    server = servers(maintenance({"a"}))
    result = _run(gang_plan, {"problem": PROBLEM, "profile": _profile(server.url)}, {})
    assert not result.get("failed")
    assert {p["node"] for p in result["placements"].values()} == {"b"}
    assert result["extenders"][0]["filter_calls"] == 1 and TOKEN not in json.dumps(result, default=str)
    assert result["table"][-1].startswith("extender %s: 1 filter and 0 prioritize call(s)" % server.url)


def test_gang_plan_fails_cleanly_when_an_extender_fails(servers):
    server = servers(lambda verb, args, headers, handler: (503, ("busy; got %s" % dict(headers)).encode()))
    result = _run(gang_plan, {"problem": PROBLEM, "profile": _profile(server.url)}, {})
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("A scheduler extender failed; no plan was made: extender %s: filter answered "
                                    "HTTP 503" % server.url)
    assert TOKEN not in json.dumps(result, default=str)


def test_gang_schedule_changes_nothing_when_an_extender_fails(servers):
    server = servers(lambda verb, args, headers, handler: (200, b"{not json"))
    args = {"services": SERVICES, "hosts": ["a", "b", "c"], "record": {}, "quotas": {}, "profile": _profile(server.url)}
    result = _run(gang_schedule, args, {"hostvars": HOSTVARS})
    assert result["failed"] is True and result["changed"] is False
    assert "nothing was changed on any host" in result["msg"] and "is not JSON" in result["msg"]
    assert "record" not in result and "hosts" not in result
    # ignorable: planned without it, and the skip is a task warning
    args["profile"] = _profile(server.url, ignorable=True)
    result = _run(gang_schedule, args, {"hostvars": HOSTVARS})
    assert not result.get("failed") and result["changed"] is True
    assert len(result["warnings"]) == 1 and "ignorable, so it is left out of this plan" in result["warnings"][0]
    assert result["plan"]["extenders"][0]["skipped"] is True


def test_gang_schedule_honours_the_verdict(servers):
    server = servers(maintenance({"b", "c"}))
    args = {"services": {"web": {"replicas": 2, "resources": {"cpu": 1}}}, "hosts": ["a", "b", "c"], "record": {},
            "quotas": {}, "profile": _profile(server.url, nodeCacheCapable=True)}
    result = _run(gang_schedule, args, {"hostvars": HOSTVARS})
    assert not result.get("failed")
    assert {p["node"] for p in result["plan"]["placements"].values()} == {"a"}
