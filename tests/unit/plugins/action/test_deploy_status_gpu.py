# -*- coding: utf-8 -*-
"""gangplank.platform.deploy_status with GPU instances: step=host also reads the GPU watchdog's state file (slurp,
faked here) and returns the share rows and the watchdog's lines; without GPU instances it reads nothing more."""

from __future__ import annotations

import base64
import json
import time

from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_deploy_status import SETTINGS, action

GIB = 1 << 30
SERVICES = {"infer": {"image": "localhost/infer:1", "resources": {"gpu": {"count": 1, "memory": "20Gi"}}}}
INSTANCES = {"infer-0": {"service": "infer", "ordinal": 0, "rank": 0,
                         "gpus": [{"index": 0, "uuid": "GPU-a", "memory": 20 * GIB}]}}
STATE = {"version": 1, "pid": 5, "started": 1.0, "last_poll": time.time(), "source": "nvml", "policy": "warn", "grace": 30,
         "interval": 5, "error": "", "notes": [], "seq": 0, "bypasses": [], "servers": [], "events": [],
         "instances": {"infer-0": {"container": "h1-infer-0", "enforced": True, "grants": {"GPU-a": 20 * GIB}, "cores": {},
                                   "used": {"GPU-a": 3 * GIB}, "over_since": None, "action": None, "action_at": None}}}


def test_the_host_step_reads_the_watchdog_state_where_an_instance_has_gpus():
    plugin = action({"step": "host", "instances": INSTANCES, "services": SERVICES, "settings": SETTINGS,
                     "watchdog_state": "/s/gpu-watchdog/state.json", "sharing": "mps"})
    plugin._execute_module.return_value = {"content": base64.b64encode(json.dumps(STATE).encode()).decode()}
    result = plugin.run(task_vars={"inventory_hostname": "h1"})
    assert not result.get("failed"), result
    sent = plugin._execute_module.call_args.kwargs
    assert sent["module_name"] == "ansible.legacy.slurp" and sent["module_args"] == {"src": "/s/gpu-watchdog/state.json"}
    assert [(row["used"], row["granted"], row["sharing"]) for row in result["shares"]] == [(3 * GIB, 20 * GIB, "enforced (mps)")]
    assert result["watchdog_lines"] == []


def test_no_gpu_instance_no_read():
    plugin = action({"step": "host", "instances": {}, "services": SERVICES, "settings": SETTINGS,
                     "watchdog_state": "/s/gpu-watchdog/state.json"})
    result = plugin.run(task_vars={"inventory_hostname": "h1"})
    assert "shares" not in result and not result.get("failed")
    plugin._execute_module.assert_not_called()
