# -*- coding: utf-8 -*-
"""The gpu_facts module's main(), run with ansible-core 2.19's patch_module_args."""

from __future__ import annotations

import pynvml
import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.modules import gpu_facts
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.fake_pynvml import FakeNvml

GIB = 2 ** 30


@pytest.fixture(autouse=True)
def module_exits(monkeypatch, tmp_path):
    capture_module_exits(monkeypatch)
    # The test machine's own /sys is not read: a fake bus id might name one of its devices.
    monkeypatch.setattr(gpu_facts, "SYSFS", str(tmp_path / "sys"))


@pytest.fixture
def no_nvidia_smi(monkeypatch):
    commands = []

    def run_command(self, args, **kwargs):
        commands.append(args)
        raise AssertionError("no command may run")
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: None)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return commands


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as caught:
            gpu_facts.main()
    return caught.value.args[0]


def fake_nvml():
    return FakeNvml([
        {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a", "memory_total": 80 * GIB, "pci_bus_id": "00000000:07:00.0",
         "compute_capability": (8, 0), "persistence": True, "mig": {"current": False, "pending": False, "devices": {}}},
        {"name": "NVIDIA L4", "uuid": "GPU-b", "memory_total": 24 * GIB, "pci_bus_id": "00000000:0A:00.0",
         "compute_capability": (8, 9), "persistence": True, "mig": None},
    ])


def test_returns_only_the_three_facts_from_nvml(monkeypatch, no_nvidia_smi):
    nvml = fake_nvml()
    monkeypatch.setattr(gpu_facts, "pynvml", nvml)
    result = run({})

    assert result["changed"] is False and "failed" not in result
    assert set(result) == {"changed", "ansible_facts"}
    facts = result["ansible_facts"]
    assert set(facts) == {"gangplank_gpus", "gangplank_gpu_links", "gangplank_gpu_driver"}
    assert facts["gangplank_gpu_links"] == [{"gpus": [0, 1], "level": "unknown", "nvlinks": 0, "pcie": "unknown"}]
    assert facts["gangplank_gpu_driver"]["source"] == "nvml" and facts["gangplank_gpu_driver"]["gpu_count"] == 2
    assert [g["uuid"] for g in facts["gangplank_gpus"]] == ["GPU-a", "GPU-b"]
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1
    assert no_nvidia_smi == []


def test_check_mode_returns_the_same_facts(monkeypatch, no_nvidia_smi):
    monkeypatch.setattr(gpu_facts, "pynvml", fake_nvml())
    normal = run({})
    monkeypatch.setattr(gpu_facts, "pynvml", fake_nvml())
    checked = run({"_ansible_check_mode": True})
    assert checked == normal and checked["changed"] is False


def test_no_driver_does_not_fail(monkeypatch, no_nvidia_smi):
    monkeypatch.setattr(gpu_facts, "pynvml", FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    result = run({})
    assert "failed" not in result
    driver = result["ansible_facts"]["gangplank_gpu_driver"]
    assert driver["available"] is False and "NVMLError_DriverNotLoaded" in driver["reason"]
    assert result["ansible_facts"]["gangplank_gpus"] == []


def test_no_pynvml_and_no_nvidia_smi(monkeypatch, no_nvidia_smi):
    monkeypatch.setattr(gpu_facts, "pynvml", None)
    result = run({})
    assert result["ansible_facts"]["gangplank_gpu_driver"]["reason"] == "nvidia-ml-py (pynvml) is not installed and nvidia-smi was not found"
    assert result["ansible_facts"]["gangplank_gpus"] == [] and no_nvidia_smi == []


def test_no_pynvml_uses_nvidia_smi(monkeypatch):
    line = "0, GPU-c, NVIDIA L40S, 46068, 1, 45483, 00000000:81:00.0, 8.9, Enabled, [N/A], [N/A], 550.54.15\n"
    commands = []

    def run_command(self, args, **kwargs):
        commands.append(args)
        return 0, line, ""
    monkeypatch.setattr(gpu_facts, "pynvml", None)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    result = run({})
    assert commands and commands[0][0] == "/usr/bin/nvidia-smi" and isinstance(commands[0], list)
    facts = result["ansible_facts"]
    assert facts["gangplank_gpu_driver"]["source"] == "nvidia-smi"
    assert facts["gangplank_gpus"][0]["memory_total"] == 46068 * 2 ** 20 and facts["gangplank_gpus"][0]["mig_mode"] is None


def test_simulated(monkeypatch, no_nvidia_smi):
    nvml = fake_nvml()
    monkeypatch.setattr(gpu_facts, "pynvml", nvml)
    monkeypatch.setattr(gpu_facts.socket, "gethostname", lambda: "node7")
    result = run({"simulated": [{"model": "NVIDIA L4", "memory": "24Gi"}]})
    assert sum(nvml.calls.values()) == 0
    assert result["ansible_facts"]["gangplank_gpus"][0]["uuid"] == "GPU-sim-node7-0"
    assert result["ansible_facts"]["gangplank_gpus"][0]["memory_total"] == 24 * GIB
    assert result["ansible_facts"]["gangplank_gpu_driver"]["source"] == "simulated"


def test_bad_simulated_entry_fails_with_its_path(monkeypatch, no_nvidia_smi):
    monkeypatch.setattr(gpu_facts, "pynvml", fake_nvml())
    result = run({"simulated": [{"model": "NVIDIA L4", "memory": "24Gi"}, {"model": "NVIDIA A100", "memory": "80Gx"}]})
    assert result["failed"] is True
    assert result["msg"].startswith('gangplank_simulated_gpus[1].memory: got "80Gx"; expected a size')


def test_simulated_must_be_a_list_of_mappings(monkeypatch, no_nvidia_smi):
    monkeypatch.setattr(gpu_facts, "pynvml", fake_nvml())
    result = run({"simulated": ["NVIDIA L4"]})
    assert result["failed"] is True and "simulated" in result["msg"]


def test_simulated_links_reach_the_facts(monkeypatch, no_nvidia_smi):
    monkeypatch.setattr(gpu_facts, "pynvml", fake_nvml())
    simulated = [{"model": "NVIDIA L4", "memory": "24Gi", "numa_node": 1}, {"model": "NVIDIA L4", "memory": "24Gi", "cpu_affinity": "0-7"}]
    facts = run({"simulated": simulated, "simulated_links": [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 2}]})["ansible_facts"]
    assert facts["gangplank_gpu_links"] == [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 2, "pcie": "unknown"}]
    assert [(g["numa_node"], g["cpu_affinity"]) for g in facts["gangplank_gpus"]] == [(1, None), (None, "0-7")]
    result = run({"simulated": simulated, "simulated_links": [{"gpus": [0, 2], "level": "system"}]})
    assert result["failed"] is True and result["msg"].startswith("gangplank_simulated_gpu_links[0].gpus: got [0, 2]")
