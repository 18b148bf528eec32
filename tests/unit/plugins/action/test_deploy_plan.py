# -*- coding: utf-8 -*-
"""gangplank.platform.deploy_plan: both steps take each host's read (and rendered files) as the role hands them in."""

from __future__ import annotations

from unittest.mock import MagicMock

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.deploy_plan import ActionModule

SERVICES = {"web": {"image": "localhost/web:1", "config": [{"dest": "/etc/web.conf", "content": "x"}]}}


def read(host):
    return {"engine_found": True, "containers": [], "leftovers": [], "forwards": [], "secrets": [], "missing": "", "note": "",
            "settings": {"instances": {"web-0": {"service": "web", "ordinal": 0, "rank": 0}}, "data_dir": "/d",
                         "engine": "podman"}}


def run(args, hostvars, check_mode=False):
    task = Task()
    task.args = args
    task.check_mode = check_mode
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=check_mode), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    return action.run(task_vars={"hostvars": hostvars})


def test_both_steps_from_the_reads_and_rendered_files_handed_in():
    reads = {"h1": read("h1")}
    step = run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": reads}, {})
    assert not step.get("failed") and step["changed"] is False
    assert [c["name"] for c in step["containers"]["h1"]] == ["h1-web-0"]
    rendered = {"h1": {"/d/h1-web-0/config/0-web.conf": "x"}}
    plan = run({"step": "rollout", "hosts": ["h1"], "containers": step, "reads": reads, "rendered": rendered}, {},
               check_mode=True)
    assert plan["lines"] == {"h1": "would start 1 ['h1-web-0'], restart 0 [], stop 0 [], keep 0"}
    assert plan["hosts"]["h1"]["ranks"]["0"]["waves"][0]["start"][0]["action"] == "create"


def test_a_host_without_its_read_or_rendered_files_fails_naming_it():
    result = run({"step": "containers", "hosts": ["h1", "h2"], "services": SERVICES,
                  "reads": {"h1": read("h1"), "h2": None}}, {})
    assert result["failed"] is True and result["msg"] == (
        "h2: not in reads (the deploy role's read of the host runs first)")
    step = run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": {"h1": read("h1")}}, {})
    result = run({"step": "rollout", "hosts": ["h1"], "containers": step, "reads": {"h1": read("h1")}}, {})
    assert result["failed"] is True and result["msg"] == "h1: container h1-web-0: config file /d/h1-web-0/config/0-web.conf was not rendered"


def test_the_containers_step_takes_the_catalog_as_parsed_earlier_in_the_run():
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import catalog_data, read_catalog

    reads = {"h1": read("h1")}
    parsed = catalog_data(read_catalog(SERVICES))
    handed = run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": reads, "catalog": parsed}, {})
    assert handed == run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": reads}, {})
    # The parse is what the containers come from: a handed parse with another image gives that image.
    other = dict(parsed, deploy={"web": dict(parsed["deploy"]["web"], image="localhost/web:2")})
    step = run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": reads, "catalog": other}, {})
    assert step["containers"]["h1"][0]["image"] == "localhost/web:2"
    # Its mistakes fail the step as a parse here would, naming each path; a value that is no parse is named too.
    bad = catalog_data(read_catalog({"web": {"image": "localhost/web:1", "restart_policy": "sometimes"}}))
    result = run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": reads, "catalog": bad}, {})
    assert result["failed"] is True and "services.web.restart_policy" in result["msg"]
    result = run({"step": "containers", "hosts": ["h1"], "services": SERVICES, "reads": reads,
                  "catalog": {"scheduling": {}}}, {})
    assert result["failed"] is True and "catalog: got" in result["msg"]
