# -*- coding: utf-8 -*-
"""gangplank.platform.deploy_status: step=host works the containers out and probes them on the host through
health_wait (faked here), step=report takes every host's result as the role hands them in."""

from __future__ import annotations

from unittest.mock import MagicMock

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.deploy_status import ActionModule

SERVICES = {"web": {"image": "localhost/web:1", "env": {"TOKEN": "s3cret"},
                    "health": {"tcp": {"port": 80}}, "ports": [80]},
            "batch": {"image": "localhost/batch:1"}}
INSTANCES = {"web-0": {"service": "web", "ordinal": 0, "rank": 0, "ports": {"80": 30080}},
             "batch-0": {"service": "batch", "ordinal": 0, "rank": 1}}
SETTINGS = {"data_dir": "/d"}


def action(args, probes=None):
    task = Task()
    task.args = args
    plugin = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    plugin._execute_module = MagicMock(return_value={"failed": True, "probes": probes or {}})
    return plugin


def test_the_host_step_probes_the_containers_with_a_probe_and_returns_rows_without_specs():
    plugin = action({"step": "host", "instances": INSTANCES, "services": SERVICES, "settings": SETTINGS,
                     "existing": []}, probes={"h1-web-0": {"healthy": False, "last_output": "refused"}})
    result = plugin.run(task_vars={"inventory_hostname": "h1"})
    assert not result.get("failed") and result["changed"] is False
    sent = plugin._execute_module.call_args.kwargs
    assert sent["module_name"] == "gangplank.platform.health_wait"
    assert [(probe["name"], probe["retries"]) for probe in sent["module_args"]["probes"]] == [("h1-web-0", 2)]
    assert [(row["container"], row["state"], row["health"]) for row in result["rows"]] == [
        ("h1-web-0", "missing", "unhealthy: refused"), ("h1-batch-0", "missing", "no probe")]
    assert result["bound"] == INSTANCES and result["gpus"] == [] and "s3cret" not in repr(result)


def test_a_host_without_probes_runs_nothing_on_the_host_and_a_bad_catalog_fails_naming_it():
    plugin = action({"step": "host", "instances": {}, "services": SERVICES, "settings": SETTINGS})
    assert plugin.run(task_vars={"inventory_hostname": "h1"})["rows"] == []
    plugin._execute_module.assert_not_called()
    result = action({"step": "host", "instances": {"x-0": {"service": "x", "ordinal": 0, "rank": 0}},
                     "services": {"x": {}}, "settings": SETTINGS}).run(task_vars={"inventory_hostname": "h1"})
    assert result["failed"] is True and "x" in result["msg"] and "Traceback" not in result["msg"]


def test_the_report_step_takes_each_hosts_status_and_names_the_down_hosts():
    row = {"node": "h1", "rank": 0, "instance": "web-0", "container": "h1-web-0", "service": "web",
           "state": "running", "health": "healthy", "ports": "80"}
    statuses = {"h1": {"rows": [row], "bound": {}, "gpus": []}}
    record = {"placement": {"db-0": {"service": "db", "ordinal": 0, "node": "h2"}}}
    result = action({"step": "report", "hosts": ["h1"], "inventory": ["h1", "h2"], "record": record,
                     "statuses": statuses}).run(task_vars={})
    assert result["lines"][-1] == "h2 is down; waiting for it: db-0" and "html" not in result
    assert result["down"] == {"h2": record["placement"]}
    result = action({"step": "report", "hosts": ["h1", "h3"], "picture": True,
                     "statuses": dict(statuses, h3=None)}).run(task_vars={})
    assert result["failed"] is True and result["msg"] == "h3: not in statuses (the step=host task runs on every host first)"


def test_the_catalog_step_parses_once_and_every_host_step_takes_its_parse_with_the_same_rows(monkeypatch):
    import json

    from ansible_collections.gangplank.platform.plugins.module_utils.planning import catalog as catalog_module

    parses = []
    real = catalog_module.read_catalog
    monkeypatch.setattr(catalog_module, "read_catalog", lambda services: parses.append(1) or real(services))
    handed = action({"step": "catalog", "services": SERVICES}).run(task_vars={})
    assert not handed.get("failed") and handed["changed"] is False and len(parses) == 1
    # What a registered result becomes once Ansible hands it to the next task: plain data.
    parsed = json.loads(json.dumps(handed["catalog"]))
    probes = {"h1-web-0": {"healthy": True}}
    rows = {}
    for host in ("h1", "h2", "h3"):
        args = {"step": "host", "instances": INSTANCES, "catalog": parsed, "settings": SETTINGS, "existing": []}
        rows[host] = action(args, probes).run(task_vars={"inventory_hostname": host})["rows"]
    assert len(parses) == 1
    own = action({"step": "host", "instances": INSTANCES, "services": SERVICES, "settings": SETTINGS, "existing": []},
                 probes).run(task_vars={"inventory_hostname": "h1"})
    assert len(parses) == 2 and own["rows"] == rows["h1"] and rows["h1"]


def test_a_bad_catalog_fails_the_catalog_step_and_a_handed_value_that_is_no_parse_fails_the_host_step():
    result = action({"step": "catalog", "services": {"x": {"image": 5}}}).run(task_vars={})
    assert result["failed"] is True and "services.x.image" in result["msg"] and "catalog" not in result
    result = action({"step": "host", "instances": INSTANCES, "catalog": {"web": {}}, "settings": SETTINGS}).run(
        task_vars={"inventory_hostname": "h1"})
    assert result["failed"] is True and result["msg"].startswith("catalog: got a mapping of 1 entr")
