# -*- coding: utf-8 -*-
"""The nvme_facts module's main(), run with module arguments the way ansible-core 2.19 passes them."""

from __future__ import annotations

import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.modules import nvme_facts


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch):
    capture_module_exits(monkeypatch)


def run(args):
    with patch_module_args(args):
        try:
            nvme_facts.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return failed.args[0]
    raise AssertionError("main() returned without exit_json or fail_json")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def sysfs_root(tmp_path):
    """nvme0 (pcie) with nvme0n1 mounted on /data, nvme1 (tcp) with nvme1n1 unmounted."""
    for controller, model, transport in (("nvme0", "Fast Drive", "pcie"), ("nvme1", "Linux", "tcp")):
        where = tmp_path / "sys/devices/nvme" / controller
        write(where / "model", model.ljust(40) + "\n")
        write(where / "serial", ("SN-" + controller).ljust(20) + "\n")
        write(where / "firmware_rev", "1.0     \n")
        write(where / "transport", transport + "\n")
        (tmp_path / "sys/class/nvme").mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys/class/nvme" / controller).symlink_to("../../devices/nvme/" + controller)
        namespace = where / (controller + "n1")
        write(namespace / "size", "2048\n")
        write(namespace / "queue/logical_block_size", "512\n")
        (namespace / "device").symlink_to("../../" + controller)
        (tmp_path / "sys/block").mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys/block" / (controller + "n1")).symlink_to("../devices/nvme/%s/%sn1" % (controller, controller))
    write(tmp_path / "proc/self/mounts", "/dev/nvme0n1 /data xfs rw 0 0\n")
    (tmp_path / "data").mkdir()
    return str(tmp_path)


def snapshot(root):
    found = {}
    for folder, _unused, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path) as handle:
                found[path] = handle.read()
    return found


def test_facts_from_a_fake_tree(sysfs_root):
    result = run({"sysfs_root": sysfs_root, "labels": {"nvme0n1": ["cache"]}})
    assert result["changed"] is False and not result.get("failed")
    assert set(result) == {"changed", "ansible_facts"}
    assert list(result["ansible_facts"]) == ["gangplank_nvme"]
    devices = result["ansible_facts"]["gangplank_nvme"]
    assert [device["name"] for device in devices] == ["nvme0n1", "nvme1n1"]
    first, second = devices
    assert (first["controller"], first["model"], first["serial"], first["transport"]) == ("nvme0", "Fast Drive", "SN-nvme0", "pcie")
    assert (first["size"], first["mount"], first["fstype"], first["labels"]) == (2048 * 512, "/data", "xfs", ["cache"])
    assert isinstance(first["free"], int) and first["free"] > 0
    assert (second["transport"], second["mount"], second["free"], second["labels"]) == ("tcp", None, None, [])


def test_check_mode_returns_the_same_facts(sysfs_root):
    normal = run({"sysfs_root": sysfs_root})
    checked = run({"sysfs_root": sysfs_root, "_ansible_check_mode": True})
    assert checked["changed"] is False
    strip = [{key: value for key, value in device.items() if key != "free"} for device in checked["ansible_facts"]["gangplank_nvme"]]
    assert strip == [{key: value for key, value in device.items() if key != "free"} for device in normal["ansible_facts"]["gangplank_nvme"]]


def test_bad_label_fails_naming_both_devices(sysfs_root):
    result = run({"sysfs_root": sysfs_root, "labels": {"nvme9n1": ["cache"]}})
    assert result["failed"] is True
    assert result["msg"] == "labels names nvme9n1, which this host does not have (it has nvme0n1, nvme1n1)"


def test_bad_label_type_fails_with_its_path(sysfs_root):
    result = run({"sysfs_root": sysfs_root, "labels": {"nvme0n1": [""]}})
    assert result["failed"] is True
    assert result["msg"] == 'labels.nvme0n1[0]: got ""; expected a non-empty string'


def test_simulated_devices(tmp_path):
    result = run({"sysfs_root": str(tmp_path), "simulated": [{"name": "nvme0n1", "size": "3576Gi", "mount": "/mnt/nvme0n1", "free": "3000Gi"}],
                  "labels": {"nvme0n1": ["cache"]}})
    device = result["ansible_facts"]["gangplank_nvme"][0]
    assert (device["source"], device["size"], device["free"], device["labels"]) == ("simulated", 3576 * 2 ** 30, 3000 * 2 ** 30, ["cache"])


def test_bad_simulated_device_fails_with_its_path(tmp_path):
    result = run({"sysfs_root": str(tmp_path), "simulated": [{"name": "nvme0n1", "size": "1Tx"}]})
    assert result["failed"] is True
    assert result["msg"].startswith('gangplank_simulated_nvme[0].size: got "1Tx"; expected a size')


def test_no_nvme_returns_an_empty_list(tmp_path):
    result = run({"sysfs_root": str(tmp_path)})
    assert result == {"changed": False, "ansible_facts": {"gangplank_nvme": []}}


def test_nothing_on_the_host_changes(sysfs_root):
    before = snapshot(sysfs_root)
    run({"sysfs_root": sysfs_root, "labels": {"nvme0n1": ["cache"]}})
    run({"sysfs_root": sysfs_root, "labels": {"nvme9n1": ["cache"]}})
    assert snapshot(sysfs_root) == before
