# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.container: one container spec, started or removed with its secrets, as
ansible.builtin.package runs the host's package module. The calls come from the engine's driver
(plugins/module_utils/deploy/engine_driver.py) and run in order, stopping at the first failure: the secrets first (Podman
secrets, or Docker's private directories and files, handed to ansible.builtin.copy as ansible.builtin.template hands
its text), then the engine's module (containers.podman.podman_container or community.docker.docker_container); for a
removal the container, then its secrets. A call that carries a secret's value reports only whether it changed and a
masked message.

A GPU share's MPS control daemon and its instance (module_utils/deploy/mps.py) need one step each on the host around the
engine: before a daemon starts, its directories are made (0700, with pipe, shm and log 1777) and an earlier daemon's
ready file is removed; before an instance starts, the action waits for its daemon's ready file (its limits are set),
at most the spec's timeout, and fails without starting the instance when it does not come. Not in check mode.

Before a container joins Podman's own network, each of Podman's bridges gets a fixed MAC address, its present one
(engine_driver.bridge_command): otherwise the bridge takes the lowest address of its ports, which changes as containers
come and go, and the other containers lose their gateway until their ARP entry is renewed. A bridge whose address cannot
be fixed is a warning. Not in check mode."""

from __future__ import annotations

import shlex

from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import mps
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import redact
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import (
    DRIVERS, EngineError, bridge_warnings, driver, image_registry)
from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

ARGUMENT_SPEC = {
    "engine": {"type": "str", "required": True, "choices": sorted(DRIVERS)},
    "state": {"type": "str", "default": "started", "choices": ["started", "absent", "pulled"]},
    "images": {"type": "list", "elements": "str", "default": []},
    "registries": {"type": "list", "elements": "dict", "default": []},
    "registry_passwords": {"type": "dict", "default": {}, "no_log": True},
    "spec": {"type": "dict"},
    "name": {"type": "str"},
    "recreate": {"type": "bool", "default": False},
    "secret_values": {"type": "dict", "default": {}, "no_log": True},
    "secrets": {"type": "list", "elements": "str", "default": []},
    "secret_dir": {"type": "str"},
}
# The end of the engine's error output that a failure message quotes.
STDERR_TAIL = 500
# The log lines of an MPS daemon quoted when its instance waited for it in vain.
MPS_LOG_LINES = 10


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC, required_if=[("state", "started", ["spec"])],
            required_one_of=[("spec", "name", "secrets", "images")])
        try:
            engine = driver(args["engine"], args["secret_dir"])
            if args["state"] == "pulled":
                calls = engine.pull_calls(args["images"], args["registries"], args["registry_passwords"])
            elif args["state"] == "absent":
                calls = engine.remove_calls(args["name"], args["secrets"])
            else:
                calls = engine.start_calls(args["spec"], args["secret_values"], args["recreate"])
        except (EngineError, KeyError) as error:
            # A spec without a key it needs: the key's name, never a value.
            if args["state"] == "pulled":
                # The registries' settings (deploy_registries), by path; never a password.
                return dict(result, failed=True, changed=False, msg=str(error))
            return dict(result, failed=True, changed=False, msg="spec: %s" % (
                error if isinstance(error, EngineError) else "has no %s" % error))
        if args["state"] == "pulled":
            # Only what the host lacks is pulled: the engine's module (and a login) runs for no image the host holds.
            missing = self._missing_images(engine.engine, args["images"])
            if missing is not None:
                if not missing:
                    return dict(result, changed=False)
                calls = engine.pull_calls(missing, args["registries"], args["registry_passwords"])
                args = dict(args, images=missing)
            if self._task.check_mode:
                # No login in check mode: the pulls only say whether the host lacks the image.
                return self._pull(result, [call for call in calls if not call.no_log], args, task_vars)
            try:
                return self._pull(result, calls, args, task_vars)
            finally:
                for call in engine.logout_calls(args["images"], args["registries"]):
                    self._run_call(call, task_vars)
        warnings = []
        if args["state"] == "started" and not self._task.check_mode:
            failure = self._mps_step(args["engine"], args["spec"])
            if failure:
                return dict(result, failed=True, changed=False, msg="%s: %s" % (args["spec"].get("name"), failure))
            bridge = engine.bridge_command(args["spec"])
            if bridge:
                done = self._low_level_execute_command(bridge)
                warnings = bridge_warnings(done.get("stdout")) if done.get("rc") == 0 else [
                    "cannot read Podman's bridges: %s" % one_line(_output(done), 200)]
        changed = False
        for call in calls:
            done = self._run_call(call, task_vars)
            changed = changed or bool(done.get("changed"))
            if call.module == engine.module or done.get("failed"):
                result.update(done)
            if done.get("failed"):
                if args["state"] == "started":
                    result["msg"] = failure_message(args["spec"], done, args["secret_values"])
                break
        result["changed"] = changed
        if warnings:
            result["warnings"] = list(result.get("warnings") or []) + warnings
        return result

    def _missing_images(self, engine, images):
        """The images the host does not hold, asked with one command (``<engine> image inspect`` each: an image
        already loaded from a bundle costs no module run); None when the answer is not what was asked, so that the
        pulls decide."""
        wanted = list(dict.fromkeys(images))
        if not wanted:
            return []
        # No trailing ';': Ansible appends '&& sleep 0' to the command.
        command = "; ".join("%s image inspect %s >/dev/null 2>&1 || printf '%%s\\n' %s" % (engine, quoted, quoted)
                            for quoted in map(shlex.quote, wanted))
        done = self._low_level_execute_command(command)
        lines = (done.get("stdout") or "").splitlines() if done.get("rc") == 0 else None
        if lines is None or len(lines) > len(wanted) or any(line not in wanted for line in lines):
            return None
        return [image for image in wanted if image in lines]

    def _pull(self, result, calls, args, task_vars):
        """The logins, then the pulls, stopping at the first failure (the logouts follow, whatever happened)."""
        changed = False
        for call in calls:
            done = self._run_call(call, task_vars)
            if done.get("failed"):
                return dict(result, failed=True, changed=changed, msg=pull_failure_message(call, done, args))
            # A login is no change to the host's images.
            changed = changed or (not call.no_log and bool(done.get("changed")))
        return dict(result, changed=changed)

    def _run_call(self, call, task_vars):
        """One call on the host; a call with a secret's value gives back only changed, failed and a masked message."""
        if call.module == "ansible.builtin.copy":
            # As ansible.builtin.template hands its text to ansible.builtin.copy: the content goes as a file.
            task = self._task.copy()
            task.args = dict(call.args)
            task.no_log = True
            task.diff = False
            copy = self._shared_loader_obj.action_loader.get(
                "ansible.legacy.copy", task=task, connection=self._connection, play_context=self._play_context,
                loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
            done = copy.run(task_vars=task_vars)
        else:
            # Check mode and --diff reach the module as the task's (_execute_module passes them on).
            done = self._execute_module(module_name=call.module, module_args=call.args, task_vars=task_vars)
        if not call.no_log:
            return done
        return {"changed": bool(done.get("changed")), "failed": bool(done.get("failed")),
                "msg": "%s %s failed (its message is not shown: it may hold a secret)" % (
                    call.module, call.args.get("name") or call.args.get("dest"))} if done.get("failed") else \
            {"changed": bool(done.get("changed"))}

    def _mps_step(self, engine, spec):
        """What an MPS daemon or client needs on the host before it starts (module docstring); a message when it fails."""
        try:
            if spec.get("mps_daemon"):
                done = self._low_level_execute_command(mps.prepare_command(spec))
                if done.get("rc") != 0:
                    return "cannot make the MPS directory %s: %s" % (
                        spec["mps_daemon"]["dir"], one_line(_output(done), STDERR_TAIL))
            if spec.get("mps_client"):
                done = self._low_level_execute_command(mps.wait_command(spec))
                if done.get("rc") != 0:
                    daemon = spec["mps_client"]["daemon"]
                    logs = self._low_level_execute_command(
                        "%s logs --tail %d %s 2>&1" % (shlex.quote(engine), MPS_LOG_LINES, shlex.quote(daemon)))
                    return ("its MPS control daemon %s did not set its limits (%s: %s); not started; the daemon's last log "
                            "lines: %s" % (daemon, spec["mps_client"]["ready"], one_line(_output(done), 200),
                                           one_line(_output(logs), STDERR_TAIL)))
        except mps.MpsError as error:
            return str(error)
        return ""


def _output(done):
    return ((done.get("stdout") or "") + (done.get("stderr") or "")).strip() or "no output"


def pull_failure_message(call, result, args):
    """``cannot pull <image> from registry <registry>: ...``: the images of a registry whose login failed, or the image
    whose pull failed, with the engine's message; never a password (each is masked wherever it appears)."""
    registry = call.args.get("registry") or call.args.get("registry_url")
    if registry:
        images = [image for image in args["images"] if image_registry(image) == registry]
        text = "cannot pull %s from registry %s: the registry refused the login of user %s (the password is not shown)" % (
            ", ".join(images), registry, call.args.get("username"))
    else:
        image = call.args["name"]
        text = "cannot pull %s from registry %s: %s" % (
            image, image_registry(image) or "(the engine's default)", str(result.get("msg") or "no message")[-STDERR_TAIL:])
    for password in args["registry_passwords"].values():
        if password:
            text = text.replace(str(password), "********")
    return text


def failure_message(spec, result, secret_values):
    """``<name>: <the module's message>[ stderr: <its end>]``, each catalog env value and secret masked: an engine's
    error may quote the container's arguments. Only the message and stderr, never the inspect data it returns."""
    text = str(result["msg"]) if "msg" in result else "no message"
    if result.get("stderr"):
        text += " stderr: " + str(result["stderr"])[-STDERR_TAIL:]
    return "%s: %s" % (spec.get("name"), redact(text, [spec], secret_values))
