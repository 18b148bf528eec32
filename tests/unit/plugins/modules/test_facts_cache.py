# -*- coding: utf-8 -*-
"""The facts_cache module's main(): write, read back while nothing changed, refuse when the inputs changed."""

from __future__ import annotations

import os
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.modules import facts_cache

FACTS = {"processor_vcpus": 4, "memtotal_mb": 8192, "architecture": "x86_64", "system": "Linux", "gangplank_gpus": [],
         "gangplank_nvme": [], "env": {"HOME": "/root"}}
INPUTS = {"hostname": "h1", "simulated_gpus": [{"model": "NVIDIA L4", "memory": "24Gi"}]}


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch):
    return capture_module_exits(monkeypatch, warnings=[])


def run(args, check=False):
    with patch_module_args(dict(args, _ansible_check_mode=check)):
        try:
            facts_cache.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return failed.args[0]
    raise AssertionError("main() returned without exit_json or fail_json")


def test_write_then_read_back_while_nothing_changed(tmp_path):
    path = str(tmp_path / "state" / "hardware-facts.json")
    assert run({"path": path})["valid"] is False
    assert run({"path": path, "state": "write", "inputs": INPUTS, "facts": FACTS}, check=True)["changed"] is True
    assert not os.path.exists(path)
    assert run({"path": path, "state": "write", "inputs": INPUTS, "facts": FACTS})["changed"] is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert run({"path": path, "state": "write", "inputs": INPUTS, "facts": FACTS})["changed"] is False
    result = run({"path": path, "inputs": INPUTS})
    assert result["valid"] is True and result["changed"] is False
    assert result["ansible_facts"] == {key: value for key, value in FACTS.items() if key != "env"}


def test_other_inputs_or_a_damaged_file_mean_gather_again(tmp_path):
    path = tmp_path / "hardware-facts.json"
    run({"path": str(path), "state": "write", "inputs": INPUTS, "facts": FACTS})
    result = run({"path": str(path), "inputs": dict(INPUTS, hostname="h2")})
    assert result["valid"] is False and "ansible_facts" not in result
    path.write_text("{not json")
    assert run({"path": str(path), "inputs": INPUTS})["valid"] is False


def test_the_read_also_returns_the_node_fact_file_when_asked(tmp_path):
    path, bindings = str(tmp_path / "hardware-facts.json"), tmp_path / "gangplank.fact"
    result = run({"path": path, "inputs": INPUTS, "bindings_path": str(bindings)})
    assert result["valid"] is False and result["ansible_facts"] == {"gangplank_node_bindings": None}
    bindings.write_text('{"revision": 2, "labels": {}, "instances": {}, "ranks": []}')
    run({"path": path, "state": "write", "inputs": INPUTS, "facts": FACTS})
    result = run({"path": path, "inputs": INPUTS, "bindings_path": str(bindings)}, check=True)
    assert result["valid"] is True
    assert result["ansible_facts"]["gangplank_node_bindings"] == {"revision": 2, "labels": {}, "instances": {}, "ranks": []}
    assert result["ansible_facts"]["processor_vcpus"] == 4
    bindings.write_text("[1, 2]")
    assert run({"path": path, "inputs": INPUTS, "bindings_path": str(bindings)})["ansible_facts"]["gangplank_node_bindings"] is None
