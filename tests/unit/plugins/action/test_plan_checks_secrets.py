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


def test_gang_schedule_reads_a_catalog_with_secrets_and_volumes_for_them_once_and_plans_as_from_its_own_reads(
        monkeypatch):
    from ansible_collections.gangplank.platform.plugins.action import gang_schedule
    from ansible_collections.gangplank.platform.plugins.module_utils.planning import catalog as catalog_module, planning, scheduling

    services = dict(SERVICES, db={"image": "registry.local/db:1", "stateful": True, "resources": {"cpu": 1},
                                  "volumes": [{"name": "data", "path": "/var/lib/db", "size": "1Gi"}]})
    disk = {"gangplank_data_filesystem": {"size": 100 << 30, "free": 90 << 30}}
    hosts = {name: dict(values, ansible_facts=dict(values["ansible_facts"], **disk)) for name, values in HOSTVARS.items()}
    variables = {"hostvars": hosts, "vault_db_pasword": CANARY}
    reads = []
    real = catalog_module.read_catalog
    monkeypatch.setattr(catalog_module, "read_catalog", lambda value: reads.append(1) or real(value))
    for module in (gang_schedule, planning, scheduling):
        monkeypatch.setattr(module, "read_catalog", catalog_module.read_catalog)
    once = _run(GangSchedule, {"services": services, "hosts": ["a", "b", "c"], "volume_dir": "/v"}, variables)
    # One read, for the secrets' check, the planner (the scheduler's half) and the volumes.
    assert not once.get("failed") and once["plan"]["feasible"] is True and len(reads) == 1
    # Handed the parse of an earlier task of the run (gangplank.platform.catalog's), it reads nothing itself.
    handed = catalog_module.catalog_data(real(services))
    taken = _run(GangSchedule, {"services": services, "catalog": handed, "hosts": ["a", "b", "c"], "volume_dir": "/v"},
                 variables)
    assert len(reads) == 1
    monkeypatch.setattr(gang_schedule, "_read_once", lambda value: None)
    own = _run(GangSchedule, {"services": services, "hosts": ["a", "b", "c"], "volume_dir": "/v"}, variables)
    # Without the one read (as the action was before), the secrets' check, the planner and the volumes each read it.
    assert len(reads) == 1 + 3
    assert _untimed(once) == _untimed(own) and _untimed(taken) == _untimed(own)
    assert CANARY not in json.dumps(once, default=str)


def _untimed(result):
    """``result`` as JSON text without the plan's measured time (``seconds``), which differs from run to run."""
    def strip(value):
        if isinstance(value, dict):
            return {key: strip(item) for key, item in value.items() if key != "seconds"}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value
    return json.dumps(strip(json.loads(json.dumps(result, default=str))), sort_keys=True)


def test_gang_schedule_reports_the_mistakes_of_a_handed_parse_with_the_schedulers_and_refuses_a_value_that_is_none():
    from ansible_collections.gangplank.platform.plugins.module_utils.planning import catalog as catalog_module

    services = {"api": {"image": "registry.local/api:1", "restart_policy": "sometimes", "replicas": "two"}}
    handed = catalog_module.catalog_data(catalog_module.read_catalog(services))
    taken = _run(GangSchedule, {"services": services, "catalog": handed, "hosts": ["a", "b", "c"]}, {"hostvars": HOSTVARS})
    own = _run(GangSchedule, {"services": services, "hosts": ["a", "b", "c"]}, {"hostvars": HOSTVARS})
    assert taken["failed"] is True and taken["msg"] == own["msg"]
    assert "services.api.restart_policy" in taken["msg"] and "services.api.replicas" in taken["msg"]
    refused = _run(GangSchedule, {"services": services, "catalog": {"scheduling": {}, "deploy": []}, "hosts": ["a"]},
                   {"hostvars": HOSTVARS})
    assert refused["failed"] is True and refused["msg"].startswith("catalog: got")
