# -*- coding: utf-8 -*-
"""gangplank.platform.deploy_status with GPU instances: step=host also reads the GPU watchdog's state file (its host
command run here, by sh, on real files) and returns the share rows and the watchdog's lines; without GPU instances it
reads nothing more."""

from __future__ import annotations

import json
import os
import subprocess
import time

from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.gpu_watchdog_state import MAX_STATE_BYTES
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import state_read_command

from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_deploy_status import SETTINGS, action

GIB = 1 << 30
SERVICES = {"infer": {"image": "localhost/infer:1", "resources": {"gpu": {"count": 1, "memory": "20Gi"}}}}
INSTANCES = {"infer-0": {"service": "infer", "ordinal": 0, "rank": 0,
                         "gpus": [{"index": 0, "uuid": "GPU-a", "memory": 20 * GIB}]}}
STATE = {"version": 1, "pid": 5, "started": 1.0, "last_poll": time.time(), "source": "nvml", "policy": "warn", "grace": 30,
         "interval": 5, "error": "", "notes": [], "seq": 0, "bypasses": [], "servers": [], "events": [],
         "instances": {"infer-0": {"container": "h1-infer-0", "enforced": True, "grants": {"GPU-a": 20 * GIB}, "cores": {},
                                   "used": {"GPU-a": 3 * GIB}, "over_since": None, "action": None, "action_at": None}}}


def on_this_machine(plugin):
    """The plugin's host commands run here by sh, as the connection runs them on a host; returns the commands run."""
    commands = []

    def execute(command):
        commands.append(command)
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30, check=False)
        return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    plugin._low_level_execute_command = execute
    return commands


def host_step(path):
    plugin = action({"step": "host", "instances": INSTANCES, "services": SERVICES, "settings": SETTINGS,
                     "watchdog_state": str(path), "sharing": "mps"})
    commands = on_this_machine(plugin)
    return plugin.run(task_vars={"inventory_hostname": "h1"}), commands


def test_the_host_step_reads_the_watchdog_state_where_an_instance_has_gpus(tmp_path):
    path = tmp_path / "gpu watchdog" / "state.json"
    path.parent.mkdir()
    path.write_text(json.dumps(STATE))
    result, commands = host_step(path)
    assert not result.get("failed"), result
    assert len(commands) == 1 and str(path) in commands[0]
    assert [(row["used"], row["granted"], row["sharing"]) for row in result["shares"]] == [(3 * GIB, 20 * GIB, "enforced (mps)")]
    assert result["watchdog_lines"] == []


def test_the_state_file_is_read_at_most_one_byte_over_its_bound(tmp_path):
    path = tmp_path / "state.json"
    with open(path, "wb") as handle:
        handle.truncate(1 << 40)                            # a sparse terabyte: read whole, it would never end
    plugin = action({"step": "host", "instances": INSTANCES, "services": SERVICES, "settings": SETTINGS,
                     "watchdog_state": str(path)})
    on_this_machine(plugin)
    done = plugin._low_level_execute_command(state_read_command(str(path)))
    assert len("".join(done["stdout"].split())) == 4 * ((MAX_STATE_BYTES + 1 + 2) // 3)
    started = time.monotonic()
    result = plugin.run(task_vars={"inventory_hostname": "h1"})
    assert time.monotonic() - started < 20
    assert result["watchdog_lines"] == ["h1: the GPU watchdog's state file %s is larger than %d bytes" % (path, MAX_STATE_BYTES)]


def test_a_missing_state_file_or_one_that_is_not_a_regular_file_is_a_line_naming_it(tmp_path):
    result, _commands = host_step(tmp_path / "state.json")
    assert result["watchdog_lines"] == ["h1: GPU watchdog: it has not run here (no %s)" % (tmp_path / "state.json")]
    os.mkfifo(tmp_path / "fifo")
    result, _commands = host_step(tmp_path / "fifo")
    assert result["watchdog_lines"] == ["h1: GPU watchdog: not a regular file"]
    (tmp_path / "deep").write_text("[" * 100000 + "]" * 100000)
    result, _commands = host_step(tmp_path / "deep")
    assert result["watchdog_lines"] == ["h1: the GPU watchdog's state file %s is not JSON: it is nested too deeply" % (tmp_path / "deep")]


def test_no_gpu_instance_no_read():
    plugin = action({"step": "host", "instances": {}, "services": SERVICES, "settings": SETTINGS,
                     "watchdog_state": "/s/gpu-watchdog/state.json"})
    result = plugin.run(task_vars={"inventory_hostname": "h1"})
    assert "shares" not in result and not result.get("failed")
    plugin._execute_module.assert_not_called()
