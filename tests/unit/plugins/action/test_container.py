# -*- coding: utf-8 -*-
"""gangplank.platform.container with _execute_module replaced: the module it runs, its arguments, and a failure
message without the secrets."""

from __future__ import annotations

from unittest.mock import MagicMock

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.container import ActionModule
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import MASK
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import BRIDGE_COMMAND, driver

SPEC = {"name": "h1-api-0", "image": "localhost/api:1", "command": [], "env": {"LEVEL": "verbose-level", "GANGPLANK_NODE": "h1"},
        "ports": ["8080:8080"], "devices": [], "volumes": [], "mounts": [], "network": None, "cpus": None, "memory": None,
        "init": True, "stop_timeout": 10, "restart_policy": "unless-stopped", "labels": {"a": "b"}, "podman_secrets": [],
        "secrets": [{"name": "token", "var": "vault_token", "delivery": "env", "env": "API_TOKEN", "engine_name": "h1-api-0.token",
                     "path": None}], "action": "create"}
SECRETS = {"vault_token": "token-secret-value"}


def run(args, module_result, host_answer=None):
    """The action with its module calls answered by module_result; the host's one command (which images it lacks)
    answered by host_answer, (rc, stdout), by default: it lacks every image asked for."""
    task = Task()
    task.args = args
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    action._execute_module = MagicMock(return_value=dict(module_result))
    rc, out = host_answer or (0, "".join(image + "\n" for image in args.get("images") or []))
    action._low_level_execute_command = MagicMock(return_value={"rc": rc, "stdout": out, "stderr": ""})
    return action.run(task_vars={}), action._execute_module


def test_it_runs_the_engines_module_with_the_adapters_arguments():
    result, execute = run({"engine": "docker", "spec": SPEC, "secret_values": SECRETS, "recreate": True},
                          {"changed": True, "container": {"Id": "1"}})
    assert result["changed"] is True and result["container"] == {"Id": "1"}
    assert execute.call_args.kwargs["module_name"] == "community.docker.docker_container"
    assert execute.call_args.kwargs["module_args"] == driver("docker").container_arguments(SPEC, SECRETS, recreate=True)
    _result, execute = run({"engine": "podman", "spec": SPEC, "secret_values": SECRETS}, {"changed": False})
    assert execute.call_args.kwargs["module_name"] == "containers.podman.podman_container"
    assert execute.call_args.kwargs["module_args"] == driver("podman").container_arguments(SPEC)
    _result, execute = run({"engine": "podman", "name": "h1-x", "state": "absent"}, {"changed": True})
    assert execute.call_args.kwargs["module_args"] == {"name": "h1-x", "state": "absent"}


def test_the_calls_run_in_order_secrets_first_and_the_container_last():
    result, execute = run({"engine": "podman", "spec": SPEC, "secret_values": SECRETS}, {"changed": False})
    assert [call.kwargs["module_name"] for call in execute.call_args_list] == [
        "containers.podman.podman_secret", "containers.podman.podman_container"]
    assert execute.call_args_list[0].kwargs["module_args"]["data"] == "token-secret-value"
    assert result["changed"] is False and "data" not in str(result)
    # Removal: the container, then its secrets by the names given.
    result, execute = run({"engine": "podman", "name": "h1-x", "secrets": ["h1-x.a", "h1-x.b"], "state": "absent"},
                          {"changed": True})
    assert [call.kwargs["module_args"] for call in execute.call_args_list] == [
        {"name": "h1-x", "state": "absent"}, {"name": "h1-x.a", "state": "absent"}, {"name": "h1-x.b", "state": "absent"}]
    assert result["changed"] is True
    result, execute = run({"engine": "docker", "secrets": ["h1-x/a"], "secret_dir": "/run/s", "state": "absent"},
                          {"changed": False})
    assert [(call.kwargs["module_name"], call.kwargs["module_args"]) for call in execute.call_args_list] == [
        ("ansible.builtin.file", {"path": "/run/s/h1-x/a", "state": "absent"})]


def test_a_failed_secret_call_stops_the_list_and_shows_no_value():
    result, execute = run({"engine": "podman", "spec": SPEC, "secret_values": SECRETS},
                          {"failed": True, "msg": "cannot store token-secret-value"})
    assert execute.call_count == 1 and result["failed"] is True
    assert "token-secret-value" not in str(result)
    assert result["msg"].startswith("h1-api-0: containers.podman.podman_secret h1-api-0.token failed")


def test_dockers_secret_files_are_handed_to_the_copy_action():
    spec = dict(SPEC, secrets=[{"name": "db", "var": "vault_token", "delivery": "file", "path": "/run/s/h1-api-0/db",
                                "mode": "0400", "uid": None, "gid": None}])
    task = Task()
    task.args = {"engine": "docker", "spec": spec, "secret_values": SECRETS}
    loader = MagicMock()
    copy = loader.action_loader.get.return_value
    copy.run.return_value = {"changed": True, "diff": {"after": "token-secret-value"}}
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    action._shared_loader_obj = loader
    action._execute_module = MagicMock(return_value={"changed": False})
    result = action.run(task_vars={})
    handed = loader.action_loader.get.call_args
    assert handed.args == ("ansible.legacy.copy",) and handed.kwargs["task"].args == {
        "dest": "/run/s/h1-api-0/db", "content": "token-secret-value", "mode": "0400"}
    assert handed.kwargs["task"].no_log is True
    assert [call.kwargs["module_args"].get("path") for call in action._execute_module.call_args_list[:2]] == ["/run/s", "/run/s/h1-api-0"]
    assert result["changed"] is True and "token-secret-value" not in str(result)


def test_a_failure_names_the_container_and_masks_env_and_secret_values():
    module_result = {"failed": True, "msg": "podman run --env LEVEL=verbose-level --env API_TOKEN=token-secret-value failed",
                     "stderr": "x" * 600 + " token-secret-value", "container": {"Config": {"Env": ["API_TOKEN=token-secret-value"]}}}
    result, _execute = run({"engine": "docker", "spec": SPEC, "secret_values": SECRETS}, module_result)
    assert result["failed"] is True
    assert result["msg"].startswith("h1-api-0: podman run --env LEVEL=%s --env API_TOKEN=%s failed stderr: " % (MASK, MASK))
    assert result["msg"].endswith(" " + MASK) and "token-secret-value" not in result["msg"] and "Env" not in result["msg"]
    result, _execute = run({"engine": "podman", "spec": dict(SPEC, action="start")}, {"failed": True})
    assert result["msg"] == "h1-api-0: no message"


def test_a_spec_without_a_secrets_value_fails_naming_the_variable():
    result, execute = run({"engine": "docker", "spec": SPEC}, {})
    assert result["failed"] is True and "vault_token" in result["msg"] and not execute.called


# GPU shares under MPS (module_utils/deploy/mps.py): the host steps around the engine's module.
DAEMON = dict(SPEC, name="h1-infer-0.mps", secrets=[], network="none",
              mps_daemon={"dir": "/run/gangplank/mps/h1-infer-0", "ready": "/run/gangplank/mps/h1-infer-0/log/ready"})
CLIENT = dict(SPEC, name="h1-infer-0", secrets=[], mps_client={"daemon": "h1-infer-0.mps", "timeout": 7,
                                                               "ready": "/run/gangplank/mps/h1-infer-0/log/ready"})


def run_on_host(args, answers, check_mode=False):
    """As run(), with the host's commands answered in turn: (rc, stdout) each; returns the commands too."""
    task = Task()
    task.args = args
    task.check_mode = check_mode
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=check_mode), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    action._execute_module = MagicMock(return_value={"changed": True})
    replies = iter(answers)
    commands = []

    def execute(command, **_kwargs):
        commands.append(command)
        rc, out = next(replies)
        return {"rc": rc, "stdout": out, "stderr": ""}

    action._low_level_execute_command = execute
    return action.run(task_vars={}), action._execute_module, commands


def test_a_daemons_directories_are_made_before_it_starts():
    result, execute, commands = run_on_host({"engine": "podman", "spec": DAEMON}, [(0, "")])
    assert result["changed"] is True and execute.called and len(commands) == 1
    assert commands[0].endswith(" gangplank-mps-dir '/run/gangplank/mps/h1-infer-0'") and 'chmod 0700 -- "$part"' in commands[0]
    assert "rm -f -- log/ready" in commands[0]
    result, execute, _commands = run_on_host({"engine": "podman", "spec": DAEMON}, [(1, "mkdir: Permission denied")])
    assert result["failed"] is True and not execute.called
    assert result["msg"] == "h1-infer-0.mps: cannot make the MPS directory /run/gangplank/mps/h1-infer-0: mkdir: Permission denied"


def test_an_instance_starts_only_once_its_daemon_is_ready():
    result, execute, commands = run_on_host({"engine": "podman", "spec": CLIENT}, [(0, "pinned_mem_limit GPU-a 1024M"), (0, "")])
    assert result["changed"] is True and execute.called and "no ready file after 7s" in commands[0]
    assert execute.call_args.kwargs["module_args"]["requires"] == ["h1-infer-0.mps"]
    result, execute, commands = run_on_host({"engine": "docker", "spec": CLIENT, "secret_values": SECRETS},
                                            [(1, "no ready file after 7s"), (0, "gangplank-mps: h1 -d failed")])
    assert result["failed"] is True and not execute.called
    assert commands[1] == "docker logs --tail 10 h1-infer-0.mps 2>&1"
    assert result["msg"] == ("h1-infer-0: its MPS control daemon h1-infer-0.mps did not set its limits "
                             "(/run/gangplank/mps/h1-infer-0/log/ready: no ready file after 7s); not started; the daemon's "
                             "last log lines: gangplank-mps: h1 -d failed")


def test_podmans_bridges_get_a_fixed_mac_address_before_a_container_joins_podmans_network():
    result, execute, commands = run_on_host({"engine": "podman", "spec": SPEC, "secret_values": SECRETS},
                                            [(0, "kept podman0 52:22:85:6d:e2:8f\n")])
    assert commands == [BRIDGE_COMMAND] and execute.called and "warnings" not in result
    # The bridge's address is fixed before the engine's module adds the container's port to it.
    order = []
    task = Task()
    task.args = {"engine": "podman", "spec": SPEC, "secret_values": SECRETS}
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    action._low_level_execute_command = lambda command, **_kwargs: order.append("host command") or {"rc": 0, "stdout": ""}
    action._execute_module = lambda module_name, **_kwargs: order.append(module_name) or {"changed": True}
    action.run(task_vars={})
    assert order == ["host command", "containers.podman.podman_secret", "containers.podman.podman_container"]
    # A bridge whose address cannot be fixed is a warning; the container starts.
    result, execute, _commands = run_on_host({"engine": "podman", "spec": SPEC, "secret_values": SECRETS},
                                             [(0, "no-ip podman0\nfailed cni-podman1 RTNETLINK answers: Operation not permitted\n")])
    assert execute.called and result["changed"] is True
    assert [warning.split(" keeps ")[0] for warning in result["warnings"]] == [
        "Podman's bridge podman0", "Podman's bridge cni-podman1"]
    assert "(the host has no ip command (iproute2))" in result["warnings"][0]
    assert "RTNETLINK answers: Operation not permitted" in result["warnings"][1]
    result, execute, _commands = run_on_host({"engine": "podman", "spec": SPEC, "secret_values": SECRETS},
                                             [(2, "sh: syntax error")])
    assert execute.called and result["warnings"] == ["cannot read Podman's bridges: sh: syntax error"]


def test_no_bridge_address_is_fixed_for_docker_a_network_of_its_own_or_in_check_mode():
    for args in ({"engine": "docker", "spec": SPEC, "secret_values": SECRETS},
                 {"engine": "podman", "spec": dict(SPEC, network="none"), "secret_values": SECRETS},
                 {"engine": "podman", "spec": dict(SPEC, network="container:h1-api-0"), "secret_values": SECRETS}):
        result, execute, commands = run_on_host(args, [])
        assert commands == [] and execute.called and not result.get("failed"), args
    _result, _execute, commands = run_on_host({"engine": "podman", "spec": SPEC, "secret_values": SECRETS}, [],
                                              check_mode=True)
    assert commands == []


def test_check_mode_and_removal_touch_nothing_on_the_host():
    result, execute, commands = run_on_host({"engine": "podman", "spec": CLIENT}, [], check_mode=True)
    assert execute.called and commands == [] and not result.get("failed")
    _result, _execute, commands = run_on_host({"engine": "podman", "name": "h1-infer-0.mps", "state": "absent"}, [])
    assert commands == []


PULL = {"engine": "podman", "state": "pulled", "images": ["127.0.0.1:5443/demo@sha256:" + "ab" * 32, "localhost/bundle:1"],
        "registries": [{"registry": "127.0.0.1:5443", "username": "deployer", "password_var": "vault_registry"}],
        "registry_passwords": {"vault_registry": "pw-secret-value"}}


def test_pulled_logs_in_then_pulls_each_image_and_hides_the_login():
    result, execute = run(PULL, {"changed": True})
    assert [call.kwargs["module_name"] for call in execute.call_args_list] == [
        "containers.podman.podman_login", "containers.podman.podman_image", "containers.podman.podman_image",
        "containers.podman.podman_logout"]
    assert execute.call_args_list[-1].kwargs["module_args"] == {"registry": "127.0.0.1:5443"}
    assert result["changed"] is True and "pw-secret-value" not in str(result)


def test_images_the_host_holds_are_not_pulled_and_their_registry_not_logged_in_to():
    bundle, remote = PULL["images"][1], PULL["images"][0]
    # The host holds both: no module runs at all.
    result, execute = run(PULL, {"changed": True}, host_answer=(0, ""))
    assert execute.call_args_list == [] and result["changed"] is False and not result.get("failed")
    # It holds the registry's image only: the bundle's image is pulled, with no login to the registry.
    result, execute = run(PULL, {"changed": True}, host_answer=(0, bundle + "\n"))
    assert [(call.kwargs["module_name"], call.kwargs["module_args"]["name"]) for call in execute.call_args_list] == [
        ("containers.podman.podman_image", bundle)]
    # It lacks the registry's image: the login, that pull, the logout.
    _result, execute = run(PULL, {"changed": True}, host_answer=(0, remote + "\n"))
    assert [call.kwargs["module_name"] for call in execute.call_args_list] == [
        "containers.podman.podman_login", "containers.podman.podman_image", "containers.podman.podman_logout"]


def test_an_answer_that_is_not_what_was_asked_leaves_the_pulls_to_decide():
    for answer in ((1, ""), (0, "localhost/other:1\n"), (0, "".join(image + "\n" for image in PULL["images"] * 2))):
        _result, execute = run(PULL, {"changed": False}, host_answer=answer)
        assert [call.kwargs["module_name"] for call in execute.call_args_list].count("containers.podman.podman_image") == 2


def test_the_host_is_asked_about_each_image_once_quoted():
    task = Task()
    task.args = dict(PULL, images=["localhost/a:1", "localhost/a:1", "localhost/b:1"])
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    action._execute_module = MagicMock(return_value={"changed": False})
    action._low_level_execute_command = MagicMock(return_value={"rc": 0, "stdout": "", "stderr": ""})
    action.run(task_vars={})
    command = action._low_level_execute_command.call_args.args[0]
    assert command == ("podman image inspect localhost/a:1 >/dev/null 2>&1 || printf '%s\\n' localhost/a:1; "
                       "podman image inspect localhost/b:1 >/dev/null 2>&1 || printf '%s\\n' localhost/b:1")


def test_a_refused_login_names_the_images_and_the_registry_never_the_password():
    result, execute = run(PULL, {"failed": True, "msg": "podman login --password pw-secret-value: unauthorized"})
    # No pull after the refused login; the logout all the same.
    assert [call.kwargs["module_name"] for call in execute.call_args_list] == [
        "containers.podman.podman_login", "containers.podman.podman_logout"]
    assert result["failed"] is True
    assert result["msg"] == ("cannot pull 127.0.0.1:5443/demo@sha256:%s from registry 127.0.0.1:5443: the registry refused "
                             "the login of user deployer (the password is not shown)" % ("ab" * 32))
    assert "pw-secret-value" not in str(result)


def test_a_failed_pull_names_the_image_and_the_registry_with_the_password_masked():
    args = dict(PULL, registries=[], registry_passwords={"vault_registry": "pw-secret-value"})
    result, _execute = run(args, {"failed": True, "msg": "pull failed: manifest unknown pw-secret-value"})
    assert result["msg"].startswith("cannot pull 127.0.0.1:5443/demo@sha256:")
    assert "from registry 127.0.0.1:5443: pull failed: manifest unknown ********" in result["msg"]
    assert "pw-secret-value" not in str(result)


def test_bad_registry_settings_fail_by_path_before_any_call():
    args = dict(PULL, registries=[{"registry": "127.0.0.1:5443", "username": "deployer"}])
    result, execute = run(args, {"changed": True})
    assert result["failed"] is True and result["msg"] == "deploy_registries[0].password_var: missing"
    assert execute.call_args_list == []
