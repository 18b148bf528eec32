# -*- coding: utf-8 -*-
"""gangplank.platform.container with _execute_module replaced: the module it runs, its arguments, and a failure
message without the secrets."""

from __future__ import annotations

from unittest.mock import MagicMock

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.container import ActionModule
from ansible_collections.gangplank.platform.plugins.module_utils.deploy import MASK
from ansible_collections.gangplank.platform.plugins.module_utils.engine import docker_arguments, podman_arguments

SPEC = {"name": "h1-api-0", "image": "localhost/api:1", "command": [], "env": {"LEVEL": "verbose-level", "GANGPLANK_NODE": "h1"},
        "ports": ["8080:8080"], "devices": [], "volumes": [], "mounts": [], "network": None, "cpus": None, "memory": None,
        "init": True, "stop_timeout": 10, "restart_policy": "unless-stopped", "labels": {"a": "b"}, "podman_secrets": [],
        "secrets": [{"name": "token", "var": "vault_token", "delivery": "env", "env": "API_TOKEN"}], "action": "create"}
SECRETS = {"vault_token": "token-secret-value"}


def run(args, module_result):
    task = Task()
    task.args = args
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    action._execute_module = MagicMock(return_value=dict(module_result))
    return action.run(task_vars={}), action._execute_module


def test_it_runs_the_engines_module_with_the_adapters_arguments():
    result, execute = run({"engine": "docker", "spec": SPEC, "secret_values": SECRETS, "recreate": True},
                          {"changed": True, "container": {"Id": "1"}})
    assert result["changed"] is True and result["container"] == {"Id": "1"}
    assert execute.call_args.kwargs["module_name"] == "community.docker.docker_container"
    assert execute.call_args.kwargs["module_args"] == docker_arguments(SPEC, SECRETS, recreate=True)
    _result, execute = run({"engine": "podman", "spec": SPEC}, {"changed": False})
    assert execute.call_args.kwargs["module_name"] == "containers.podman.podman_container"
    assert execute.call_args.kwargs["module_args"] == podman_arguments(SPEC)
    _result, execute = run({"engine": "podman", "name": "h1-x", "state": "absent"}, {"changed": True})
    assert execute.call_args.kwargs["module_args"] == {"name": "h1-x", "state": "absent"}


def test_a_failure_names_the_container_and_masks_env_and_secret_values():
    module_result = {"failed": True, "msg": "podman run --env LEVEL=verbose-level --env API_TOKEN=token-secret-value failed",
                     "stderr": "x" * 600 + " token-secret-value", "container": {"Config": {"Env": ["API_TOKEN=token-secret-value"]}}}
    result, _execute = run({"engine": "docker", "spec": SPEC, "secret_values": SECRETS}, module_result)
    assert result["failed"] is True
    assert result["msg"].startswith("h1-api-0: podman run --env LEVEL=%s --env API_TOKEN=%s failed stderr: " % (MASK, MASK))
    assert result["msg"].endswith(" " + MASK) and "token-secret-value" not in result["msg"] and "Env" not in result["msg"]
    result, _execute = run({"engine": "podman", "spec": SPEC}, {"failed": True})
    assert result["msg"] == "h1-api-0: no message"


def test_a_spec_without_a_secrets_value_fails_naming_the_variable():
    result, execute = run({"engine": "docker", "spec": SPEC}, {})
    assert result["failed"] is True and "vault_token" in result["msg"] and not execute.called
