# -*- coding: utf-8 -*-
"""gangplank.platform.catalog: the catalog parsed once, as plain data the later steps of the run take back; its
mistakes travel in the parse (the task never fails on them: it is no_log)."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.catalog import ActionModule
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import (
    MAX_SERVICES, handed_catalog, read_catalog,
)

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
