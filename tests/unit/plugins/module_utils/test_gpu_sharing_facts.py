# -*- coding: utf-8 -*-
"""The facts side of GPU shares enforced by MPS: gpu_facts' ``mps_control`` (the CUDA MPS control
binary's path, or null) and the host's sharing mode in the scheduler's node entry."""

from __future__ import annotations

import os
import shutil

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.plugins.module_utils.facts.gpu_facts import MPS_CONTROL, mps_control_path
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import NodeFactsError, gpu_sharing, scheduler_node
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.modules import gpu_facts
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.test_node_facts import gpu, host
from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

GPUS = [{"index": 0, "uuid": "GPU-0"}]
# A stand-in for the MPS control binary, clearly named as one: the tests look it up, never run it.
STAND_IN = "#!/bin/sh\n# nvidia-cuda-mps-control stand-in for the unit tests: never run\nexit 1\n"


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    """A PATH of one folder holding an executable nvidia-cuda-mps-control stand-in."""
    folder = tmp_path / "bin"
    folder.mkdir()
    binary = folder / MPS_CONTROL
    binary.write_text(STAND_IN)
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return binary


def test_a_bare_name_is_looked_up_on_path(fake_path):
    assert mps_control_path(MPS_CONTROL, GPUS, shutil.which) == str(fake_path)
    assert mps_control_path("nvidia-cuda-mps-control-missing", GPUS, shutil.which) is None


def test_an_absolute_path_is_taken_when_it_is_an_executable_file(fake_path, tmp_path):
    assert mps_control_path(str(fake_path), GPUS, shutil.which) == str(fake_path)
    plain = tmp_path / "not-executable"
    plain.write_text(STAND_IN)
    assert mps_control_path(str(plain), GPUS, shutil.which) is None
    assert mps_control_path(str(tmp_path), GPUS, shutil.which) is None            # a directory
    assert mps_control_path(str(tmp_path / "missing"), GPUS, shutil.which) is None


def test_no_gpus_no_lookup_and_empty_looks_nothing_up(fake_path):
    def which(name):
        raise AssertionError("looked up on a host without GPUs")
    assert mps_control_path(MPS_CONTROL, [], which) is None
    assert mps_control_path("", GPUS, shutil.which) is None and mps_control_path(None, GPUS, shutil.which) is None


@pytest.mark.parametrize("name", ["bin/nvidia-cuda-mps-control", "./x", "nvidia-cuda-mps-control\n", "a\x00b", 5])
def test_a_relative_path_or_a_control_character_is_refused(name):
    with pytest.raises(ValueError, match="^mps_control: got .*; expected a command name"):
        mps_control_path(name, GPUS, shutil.which)


# --- the module -----------------------------------------------------------------------------------------

@pytest.fixture
def module_exits(monkeypatch):
    capture_module_exits(monkeypatch)
    monkeypatch.setattr(gpu_facts, "pynvml", None)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kwargs: (1, "", "no nvidia-smi"))


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as caught:
            gpu_facts.main()
    return caught.value.args[0]


def test_the_module_reports_the_stand_in_for_simulated_gpus(module_exits, fake_path):
    simulated = [{"model": "NVIDIA L4", "memory": "24Gi"}]
    driver = run({"simulated": simulated, "hostname": "h"})["ansible_facts"]["gangplank_gpu_driver"]
    assert driver["mps_control"] == str(fake_path)
    driver = run({"simulated": simulated, "hostname": "h", "mps_control": str(fake_path)})["ansible_facts"]["gangplank_gpu_driver"]
    assert driver["mps_control"] == str(fake_path)
    os.remove(str(fake_path))
    assert run({"simulated": simulated, "hostname": "h"})["ansible_facts"]["gangplank_gpu_driver"]["mps_control"] is None


def test_the_module_reports_null_without_gpus_and_fails_on_a_relative_path(module_exits, fake_path):
    assert run({})["ansible_facts"]["gangplank_gpu_driver"]["mps_control"] is None
    result = run({"simulated": [{"model": "NVIDIA L4", "memory": "24Gi"}], "mps_control": "bin/x"})
    assert result["failed"] and result["msg"].startswith('mps_control: got "bin/x"; expected a command name')


# --- the host's sharing mode -------------------------------------------------------------------------

def with_mps(path="/usr/bin/nvidia-cuda-mps-control", **hostvars):
    values = host(gpus=[gpu(0)], **hostvars)
    values["ansible_facts"]["gangplank_gpu_driver"]["mps_control"] = path
    return values


def test_mps_where_the_facts_found_the_binary_unless_the_host_says_otherwise():
    assert gpu_sharing(with_mps()) == "mps" and scheduler_node(with_mps())["gpu_sharing"] == "mps"
    assert gpu_sharing(with_mps(path=None)) == "none" and gpu_sharing(host()) == "none"
    assert gpu_sharing(with_mps(gangplank_gpu_sharing="none")) == "none"
    assert gpu_sharing(with_mps(path=None, gangplank_gpu_sharing="mps")) == "mps"
    node = scheduler_node(with_mps())
    assert parse_problem({"nodes": {"node-a": node}, "services": {}}).nodes["node-a"].gpu_sharing == "mps"


@pytest.mark.parametrize("value", ["MPS", "exclusive", True, ["mps"], "mps\n"])
def test_a_bad_gangplank_gpu_sharing_names_the_host_and_the_variable(value):
    with pytest.raises(NodeFactsError, match="^node-a: gangplank_gpu_sharing: got .*; expected mps or none") as caught:
        scheduler_node(with_mps(gangplank_gpu_sharing=value))
    assert "\n" not in str(caught.value)
