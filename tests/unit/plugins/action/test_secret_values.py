# -*- coding: utf-8 -*-
"""gangplank.platform.secret_values: from the catalog, or from the secrets the deploy's containers step parsed (the
catalog then not parsed again), the same values, hashes and errors."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gangplank.platform.plugins.action.secret_values import ActionModule
from ansible_collections.gangplank.platform.plugins.module_utils.planning import catalog as catalog_module
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step

KEY = "k" * 40
SERVICES = {"api": {"image": "localhost/api:1", "env": {"MODE": "prod"},
                    "secrets": {"db_password": "vault_db_password", "token": {"var": "vault_token", "env": "TOKEN"}}},
            "web": {"image": "localhost/web:1"}}
READ = {"missing": "", "settings": {"instances": {"api-0": {"service": "api", "ordinal": 0, "rank": 0}},
                                    "data_dir": "/d"}}


def run(args, variables):
    task = Task()
    task.args = args
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(),
                          templar=Templar(loader=DataLoader(), variables=variables), shared_loader_obj=None)
    return action.run(task_vars=variables)


def counted_parses(monkeypatch):
    parses = []
    real = catalog_module.read_catalog
    monkeypatch.setattr(catalog_module, "read_catalog", lambda services: parses.append(1) or real(services))
    return parses


def test_the_secrets_the_containers_step_parsed_give_the_catalogs_values_without_a_second_parse(monkeypatch):
    parses = counted_parses(monkeypatch)
    variables = {"vault_db_password": "pw-1", "vault_token": "tok-2"}
    secrets = json.loads(json.dumps(containers_step(["h1"], {"h1": READ}, SERVICES)["secrets"]))
    assert len(parses) == 1
    assert secrets == {"api": [
        {"name": "db_password", "var": "vault_db_password", "delivery": "file", "env": None,
         "target": "/run/secrets/db_password", "mode": "0400", "uid": None, "gid": None},
        {"name": "token", "var": "vault_token", "delivery": "env", "env": "TOKEN", "target": None, "mode": None,
         "uid": None, "gid": None}]}
    handed = run({"secret_specs": secrets, "hash_key": KEY}, variables)
    assert len(parses) == 1
    own = run({"services": SERVICES, "hash_key": KEY}, variables)
    assert len(parses) == 2
    assert handed == own and handed["secrets"] == {"vault_db_password": "pw-1", "vault_token": "tok-2"}
    assert "prod" not in json.dumps(secrets)


def test_a_missing_variable_is_named_the_same_either_way_and_a_handed_value_that_is_no_parse_is_refused():
    secrets = containers_step(["h1"], {"h1": READ}, SERVICES)["secrets"]
    handed = run({"secret_specs": secrets, "hash_key": KEY}, {"vault_token": "tok-2"})
    assert handed == run({"services": SERVICES, "hash_key": KEY}, {"vault_token": "tok-2"})
    assert handed["errors"] == [{"path": "services.api.secrets.db_password", "message": (
        "the variable vault_db_password is not defined (define it, vaulted, in the inventory or with -e @file, and "
        "give the vault password)")}] and handed["secrets"] == {}
    for bad in ({"api": "vault_x"}, {"api": [{"name": "x"}]}, {"api": [{"name": "x", "var": "v", "value": "s"}]}):
        result = run({"secret_specs": bad, "hash_key": KEY}, {})
        assert result["errors"][0]["path"] == "secret_specs" and result["secrets"] == {} and "vault_x" not in result["msg"]
