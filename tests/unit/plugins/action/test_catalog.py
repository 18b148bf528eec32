# -*- coding: utf-8 -*-
"""gangplank.platform.catalog: the catalog parsed once, as plain data the later steps of the run take back; its
mistakes travel in the parse (the task never fails on them: it is no_log)."""

from __future__ import annotations

import json
import sys
from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gangplank.platform.plugins.action.catalog import ActionModule
from ansible_collections.gangplank.platform.plugins.action.deploy_plan import ActionModule as DeployPlan
from ansible_collections.gangplank.platform.plugins.action.gang_schedule import ActionModule as GangSchedule
from ansible_collections.gangplank.platform.plugins.action.secret_values import ActionModule as SecretValues
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import (
    MAX_SERVICES, handed_catalog, read_catalog,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_gang_schedule import hostvars

SERVICES = {"api": {"image": "localhost/api:1", "replicas": 2, "stateful": True, "env": {"MODE": "x"}, "resources": {"cpu": 1},
                    "secrets": {"token": {"var": "vault_token", "env": "TOKEN"}},
                    "volumes": [{"name": "data", "path": "/data", "size": "1Gi"}]},
            "web": None}


def run(args, check_mode=False):
    task = Task()
    task.args = args
    task.check_mode = check_mode
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=check_mode), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    return action.run(task_vars={})


def test_the_parse_as_plain_data_is_the_catalog_read_here_and_changes_nothing():
    result = run({"services": SERVICES}, check_mode=True)
    assert not result.get("failed") and result["changed"] is False
    parse = json.loads(json.dumps(result["catalog"]))           # as it travels between tasks: plain data
    assert set(parse) == {"scheduling", "deploy", "errors"} and parse["errors"] == []
    assert handed_catalog(parse) == read_catalog(SERVICES)
    # The scheduler's half carries the disk volumes' sizes; the deploy spec names the secret's variable, no value.
    assert parse["scheduling"]["api"]["resources"] == {"cpu": 1, "disk": 1 << 30}
    assert parse["deploy"]["api"]["secrets"][0]["var"] == "vault_token"


def test_the_catalogs_mistakes_are_in_the_parse_and_the_task_does_not_fail():
    result = run({"services": {"api": {"image": "localhost/api:1", "restart_policy": "sometimes", "colour": 1}}})
    assert not result.get("failed")
    paths = sorted(path for path, _message in result["catalog"]["errors"])
    assert paths == ["services.api.colour", "services.api.restart_policy"]
    assert handed_catalog(result["catalog"]).errors == [tuple(entry) for entry in result["catalog"]["errors"]]


def test_a_catalog_of_more_services_than_one_may_hold_is_a_mistake_in_the_parse_with_no_service():
    services = {"s%d" % number: {} for number in range(MAX_SERVICES + 1)}
    result = run({"services": services})
    assert not result.get("failed")
    assert result["catalog"]["scheduling"] == {} and result["catalog"]["deploy"] == {}
    assert [path for path, _message in result["catalog"]["errors"]] == ["services"]


def test_the_steps_of_one_site_run_parse_the_catalog_once_and_make_the_containers_a_parse_of_their_own_makes():
    # The controller steps of site.yml that read the catalog, in the roles' order and with the roles' arguments: the
    # schedule role's parse and plan, the deploy role's containers step and its secrets. Every call of read_catalog is
    # counted, whoever makes it.
    services = {"db": {"image": "localhost/db:1", "stateful": True, "resources": {"cpu": 1}, "ports": [5432],
                       "volumes": [{"name": "data", "path": "/var/lib/db", "size": "1Gi"}]},
                "api": {"image": "localhost/api:1", "replicas": 2, "resources": {"cpu": 1}, "depends_on": ["db"],
                        "env": {"MODE": "x"}, "secrets": {"token": {"var": "vault_token", "env": "TOKEN"}}}}
    hosts = ["a", "b"]
    variables = {"hostvars": {host: hostvars(host, ansible_facts=dict(hostvars(host)["ansible_facts"], gangplank_data_filesystem={
        "size": 100 << 30, "free": 90 << 30})) for host in hosts}, "vault_token": "t0ken-value-123"}

    def step(action_class, args):
        task = Task()
        task.args = args
        action = action_class(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(get_basedir=lambda: "/p"),
                              templar=Templar(loader=DataLoader(), variables=variables), shared_loader_obj=None)
        result = action.run(task_vars=variables)
        assert not result.get("failed"), result.get("msg")
        return json.loads(json.dumps(result))           # as a registered result travels: plain data

    def reads_of(plan):
        return {host: {"engine_found": True, "containers": [], "leftovers": [], "forwards": [], "secrets": [],
                       "missing": "", "note": "", "settings": {"instances": plan["hosts"][host]["instances"],
                                                               "data_dir": "/d", "engine": "podman", "volume_dir": "/v"}}
                for host in hosts}

    parses = []
    code = read_catalog.__code__
    sys.setprofile(lambda frame, event, _arg: parses.append(1) if event == "call" and frame.f_code is code else None)
    try:
        parsed = step(ActionModule, {"services": services})
        plan = step(GangSchedule, {"services": services, "catalog": parsed["catalog"], "hosts": hosts, "volume_dir": "/v"})
        containers = step(DeployPlan, {"step": "containers", "hosts": hosts, "services": services,
                                       "catalog": parsed["catalog"], "reads": reads_of(plan)})
        secrets = step(SecretValues, {"secret_specs": containers["secrets"], "hash_key": "k" * 40})
    finally:
        sys.setprofile(None)
    assert len(parses) == 1
    assert sorted(plan["plan"]["placements"]) == ["api-0", "api-1", "db-0"] and secrets["hashes"]
    # The same steps, each parsing the catalog itself, make the same plan and containers.
    own_plan = step(GangSchedule, {"services": services, "hosts": hosts, "volume_dir": "/v"})
    own = step(DeployPlan, {"step": "containers", "hosts": hosts, "services": services, "reads": reads_of(own_plan)})
    assert own_plan["hosts"] == plan["hosts"] and own["containers"] == containers["containers"]
