# -*- coding: utf-8 -*-
"""playbooks/facts.yml for real: local connections, one host with simulated devices, this machine as it is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
if not os.path.exists(ANSIBLE_PLAYBOOK):
    # A GPU machine with ansible-core from wheels (tests/gpu/run_on_gpu.sh): on the PATH, not beside the Python.
    ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook") or ANSIBLE_PLAYBOOK

SIMULATED = {
    "ansible_connection": "local",
    "ansible_python_interpreter": sys.executable,
    "gangplank_simulated_gpus": [{"model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"},
                                 {"model": "NVIDIA L4", "memory": "24Gi"}],
    "gangplank_simulated_nvme": [{"name": "nvme0n1", "size": "3576Gi", "mount": "/mnt/nvme0n1", "free": "3000Gi"}],
    "gangplank_nvme_labels": {"nvme0n1": ["cache"]},
    "gangplank_labels": {"zone": "east"},
    "gangplank_reserved": {"cpu": 1, "memory": "1Gi"},
}
THIS_MACHINE = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}


def play(tmp_path, hosts, *extra):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1")
    completed = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), os.path.join(ROOT, "playbooks", "facts.yml"),
                                *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        pytest.fail("no JSON report:\n%s\n%s" % (completed.stdout[-3000:], completed.stderr[-3000:]))
    # Role tasks are reported as "gangplank.platform.facts : <name>".
    tasks = {task["task"]["name"].split(" : ", 1)[-1]: task["hosts"] for task in report["plays"][0]["tasks"]}
    return completed.returncode, tasks, report["stats"]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    return play(tmp_path_factory.mktemp("facts"), {"sim-a": SIMULATED, "sim-b": SIMULATED, "this-machine": THIS_MACHINE})


def test_simulated_host_gets_its_devices_labels_and_node_entry(first_run):
    returncode, tasks, _stats = first_run
    assert returncode == 0
    gpus = tasks["Read the GPUs"]["sim-a"]["ansible_facts"]["gangplank_gpus"]
    assert [(g["model"], g["memory_total"], g["source"]) for g in gpus] == [
        ("NVIDIA A100-SXM4-80GB", 80 * 2 ** 30, "simulated"), ("NVIDIA L4", 24 * 2 ** 30, "simulated")]
    facts = tasks["Work out the node labels and the scheduler's node entry"]["sim-a"]["ansible_facts"]
    labels = facts["facts_node_labels"]
    assert labels["nvidia.com/gpu.count"] == "2" and labels["gangplank.io/nvme.cache"] == "true"
    assert labels["zone"] == "east" and labels["gangplank.io/gpu.simulated"] == "true"
    node = facts["facts_node"]
    assert [g["model"] for g in node["gpus"]] == ["NVIDIA A100-SXM4-80GB", "NVIDIA L4"]
    assert node["nvme"] == [{"name": "nvme0n1", "size": 3576 * 2 ** 30, "labels": ["cache"], "mount": "/mnt/nvme0n1"}]
    table = tasks["Show the host's GPUs, NVMe devices and labels"]["sim-a"]["msg"]
    assert "SIMULATED GPUs and NVMe" in table[0]


def gpus_here():
    """The UUIDs of this machine's NVIDIA GPUs as nvidia-smi lists them; [] without a loaded driver or nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None or not os.path.exists("/proc/driver/nvidia/version"):
        return []
    try:
        completed = subprocess.run([smi, "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True, text=True,
                                   timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("nvidia-smi did not answer within 60 s")
    return [line.strip() for line in completed.stdout.splitlines() if line.strip()] if completed.returncode == 0 else []


def test_this_machine_reports_its_gpus_as_nvidia_smi_does_or_says_why_it_has_none(first_run):
    _returncode, tasks, _stats = first_run
    facts = tasks["Read the GPUs"]["this-machine"]["ansible_facts"]
    assert isinstance(tasks["Read the NVMe devices"]["this-machine"]["ansible_facts"]["gangplank_nvme"], list)
    table = tasks["Show the host's GPUs, NVMe devices and labels"]["this-machine"]["msg"]
    expected = gpus_here()
    if expected:
        # A GPU host (tests/gpu/run_on_gpu.sh runs this there): the same GPUs, by UUID, and a driver.
        assert [gpu["uuid"] for gpu in facts["gangplank_gpus"]] == expected
        assert all(gpu["source"] in ("nvml", "nvidia-smi") for gpu in facts["gangplank_gpus"])
        assert facts["gangplank_gpu_driver"]["available"] is True
        assert not table[1].startswith("  no GPUs: ")
        return
    assert facts["gangplank_gpus"] == []
    assert facts["gangplank_gpu_driver"]["available"] is False and facts["gangplank_gpu_driver"]["reason"]
    assert table[1].startswith("  no GPUs: ")


def test_the_node_entries_are_a_cluster_the_scheduler_plans_on(first_run):
    _returncode, tasks, _stats = first_run
    facts = tasks["Work out the node labels and the scheduler's node entry"]
    nodes = {host: result["ansible_facts"]["facts_node"] for host, result in facts.items()}
    result = plan({"nodes": nodes, "services": {
        "infer": {"replicas": 2, "resources": {"cpu": "500m", "memory": "1Gi",
                                               "gpu": {"memory": "10Gi", "models": ["A100"]},
                                               "nvme": {"label": "cache", "size": "10Gi"}},
                  "node_selector": {"zone": "east"}}}})
    assert result["feasible"], result.get("unschedulable")
    assert {p["node"] for p in result["placements"].values()} <= {"sim-a", "sim-b"}
    uuids = [gpu["uuid"] for node in nodes.values() for gpu in node["gpus"]]
    assert len(uuids) == 4 and len(set(uuids)) == 4       # two simulated hosts on one machine


def test_second_run_and_check_mode_change_nothing(tmp_path):
    hosts = {"sim-a": SIMULATED}
    for extra in ((), ("--check",)):
        returncode, _tasks, stats = play(tmp_path, hosts, *extra)
        assert returncode == 0
        assert stats["sim-a"]["changed"] == 0 and stats["sim-a"]["failures"] == 0


def test_a_label_for_a_missing_device_fails_naming_both(tmp_path):
    returncode, tasks, _stats = play(tmp_path, {"sim-a": dict(SIMULATED, gangplank_nvme_labels={"nvme9n1": ["cache"]})})
    assert returncode == 2
    message = tasks["Read the NVMe devices"]["sim-a"]["msg"]
    assert "nvme9n1" in message and "nvme0n1" in message
