# -*- coding: utf-8 -*-
"""gangplank.platform.deploy_plan with fake hostvars: both steps read each host's read (and rendered files) there."""

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


def test_both_steps_from_the_hosts_variables():
    hostvars = {"h1": {"deploy__read": read("h1")}}
    step = run({"step": "containers", "hosts": ["h1"], "services": SERVICES}, hostvars)
    assert not step.get("failed") and step["changed"] is False
    assert [c["name"] for c in step["containers"]["h1"]] == ["h1-web-0"]
    hostvars["h1"]["deploy__rendered"] = {"/d/h1-web-0/config/0-web.conf": "x"}
    plan = run({"step": "rollout", "hosts": ["h1"], "containers": step}, hostvars, check_mode=True)
    assert plan["lines"] == {"h1": "would start 1 ['h1-web-0'], restart 0 [], stop 0 [], keep 0"}
    assert plan["hosts"]["h1"]["ranks"]["0"]["waves"][0]["start"][0]["action"] == "create"


def test_a_host_without_its_read_or_rendered_files_fails_naming_it():
    result = run({"step": "containers", "hosts": ["h1", "h2"], "services": SERVICES},
                 {"h1": {"deploy__read": read("h1")}, "h2": {}})
    assert result["failed"] is True and result["msg"].startswith("h2: deploy__read is not set")
    step = run({"step": "containers", "hosts": ["h1"], "services": SERVICES}, {"h1": {"deploy__read": read("h1")}})
    result = run({"step": "rollout", "hosts": ["h1"], "containers": step}, {"h1": {"deploy__read": read("h1")}})
    assert result["failed"] is True and result["msg"] == "h1: container h1-web-0: config file /d/h1-web-0/config/0-web.conf was not rendered"
    result = run({"step": "containers", "hosts": ["h9"], "services": SERVICES}, {})
    assert result["failed"] is True and result["msg"].startswith("host h9: no host variables")
