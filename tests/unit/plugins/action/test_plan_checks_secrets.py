# -*- coding: utf-8 -*-
"""A plan (gang_plan, gang_schedule) checks that every secret the catalog names can be read, with the deploy's message,
and never returns or shows a value."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gangplank.platform.plugins.action.gang_plan import ActionModule as GangPlan
from ansible_collections.gangplank.platform.plugins.action.gang_schedule import ActionModule as GangSchedule
from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_gang_schedule import HOSTVARS

CANARY = "s3cr3t-canary-value"
SERVICES = {"api": {"image": "registry.local/api:1", "resources": {"cpu": 1},
                    "secrets": {"db_password": "vault_db_pasword"}}}


def _run(action_class, args, variables):
    task = Task()
    task.args = args
    templar = Templar(loader=DataLoader(), variables=variables)
    action = action_class(task, MagicMock(), MagicMock(check_mode=True), loader=MagicMock(), templar=templar,
                          shared_loader_obj=None)
    return action.run(task_vars=variables)


def test_gang_plan_fails_on_a_misspelt_secret_variable_with_the_deploys_message():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "8Gi"}}, "services": SERVICES}
    result = _run(GangPlan, {"problem": problem}, {"vault_db_password": CANARY})
    assert result["failed"] is True
    assert result["msg"] == (
        "The catalog's secrets cannot be read; nothing was changed:\n"
        "services.api.secrets.db_password: the variable vault_db_pasword is not defined (define it, vaulted, in the "
        "inventory or with -e @file, and give the vault password)")
    assert CANARY not in json.dumps(result, default=str)


def test_gang_plan_plans_when_every_secret_can_be_read_and_shows_no_value():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "8Gi"}}, "services": SERVICES}
    result = _run(GangPlan, {"problem": problem}, {"vault_db_pasword": CANARY})
    assert not result.get("failed") and result["feasible"] is True
    assert CANARY not in json.dumps(result, default=str)


def test_gang_schedule_fails_before_planning_on_an_unreadable_secret():
    variables = {"hostvars": HOSTVARS, "vault_db_password": CANARY}
    result = _run(GangSchedule, {"services": SERVICES, "hosts": ["a", "b", "c"]}, variables)
    assert result["failed"] is True and result["changed"] is False and "plan" not in result
    assert result["errors"] == [{"path": "services.api.secrets.db_password",
                                 "message": "the variable vault_db_pasword is not defined (define it, vaulted, in the "
                                            "inventory or with -e @file, and give the vault password)"}]
    variables["vault_db_pasword"] = ""
    result = _run(GangSchedule, {"services": SERVICES, "hosts": ["a", "b", "c"]}, variables)
    assert "the variable vault_db_pasword is empty" in result["msg"]
    variables["vault_db_pasword"] = CANARY
    result = _run(GangSchedule, {"services": SERVICES, "hosts": ["a", "b", "c"]}, variables)
    assert not result.get("failed") and result["plan"]["feasible"] is True
    assert CANARY not in json.dumps(result, default=str)
