# -*- coding: utf-8 -*-
"""NVMe facts from fake sysfs trees built in tmp_path, laid out the way the Linux kernel lays them out."""

from __future__ import annotations

import os
from collections import namedtuple

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.facts.nvme_facts import collect

StatVfs = namedtuple("StatVfs", "f_bavail f_frsize")
PCI = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme"
FABRICS = "sys/devices/virtual/nvme-fabrics/ctl"


class FakeSysfs:
    """Writes a fake /sys and /proc under root: controllers, namespaces, links, a mount table."""

    def __init__(self, root):
        self.root = root

    def write(self, relative, text):
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def link(self, relative, target):
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    def controller(self, name, model="", serial="", firmware="", transport="pcie", parent=PCI):
        """/sys/devices/.../nvme/<name> with its attributes (space-padded as the kernel pads them)
        and the class link /sys/class/nvme/<name>."""
        where = "%s/%s" % (parent, name)
        for attribute, value, width in (("model", model, 40), ("serial", serial, 20), ("firmware_rev", firmware, 8)):
            if value is not None:
                self.write("%s/%s" % (where, attribute), value.ljust(width) + "\n")
        if transport is not None:
            self.write("%s/transport" % where, transport + "\n")
        self.link("sys/class/nvme/%s" % name, os.path.relpath(self.root / where, self.root / "sys/class/nvme"))
        return where

    def namespace(self, parent, name, sectors, logical_block_size=512, device_link=True):
        """<parent>/<name> with size and queue/logical_block_size, linked from /sys/block/<name>;
        its device link points at parent (the controller, or a multipath subsystem)."""
        where = "%s/%s" % (parent, name)
        self.write("%s/size" % where, "%d\n" % sectors)
        self.write("%s/queue/logical_block_size" % where, "%d\n" % logical_block_size)
        if device_link:
            self.link("%s/device" % where, os.path.relpath(self.root / parent, self.root / where))
        self.link("sys/block/%s" % name, os.path.relpath(self.root / where, self.root / "sys/block"))

    def plain_namespace(self, name, sectors, logical_block_size=512):
        """A /sys/block/<name> directory with no device link: the controller comes from the name."""
        self.write("sys/block/%s/size" % name, "%d\n" % sectors)
        self.write("sys/block/%s/queue/logical_block_size" % name, "%d\n" % logical_block_size)

    def mounts(self, *lines, where="proc/self/mounts"):
        self.write(where, "".join(line + "\n" for line in lines))


def fake_statvfs(table, calls=None):
    def statvfs(path):
        if calls is not None:
            calls.append(path)
        if path not in table:
            raise FileNotFoundError(2, "No such file or directory", path)
        return table[path]
    return statvfs


@pytest.fixture
def host(tmp_path):
    """Two controllers (pcie and tcp); nvme0n1 with a mounted partition; nvme1n1 unmounted, nvme1n2 mounted
    twice; a hidden multipath path device and a partition in /sys/block that are not namespaces."""
    sysfs = FakeSysfs(tmp_path)
    nvme0 = sysfs.controller("nvme0", model="SAMSUNG MZQL23T8HCLS-00A07", serial="S64HNE0R123456", firmware="GDC5602Q")
    sysfs.namespace(nvme0, "nvme0n1", sectors=7501476528, logical_block_size=4096)
    sysfs.write("%s/nvme0n1/nvme0n1p1/size" % nvme0, "7501474480\n")
    sysfs.link("sys/block/nvme0n1p1", "../devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1")
    nvme1 = sysfs.controller("nvme1", model="Linux", serial="a1b2c3d4e5f6", firmware="6.8.0-45", transport="tcp",
                             parent=FABRICS)
    sysfs.namespace(nvme1, "nvme1n1", sectors=2097152)
    sysfs.namespace(nvme1, "nvme1n2", sectors=4194304)
    sysfs.namespace(nvme1, "nvme1c1n3", sectors=4194304)
    sysfs.mounts(
        "/dev/nvme1n2 /var/lib/scratch ext4 rw,relatime 0 0",
        "/dev/nvme0n1p1 /mnt/fast\\040data xfs rw,noatime 0 0",
        "/dev/nvme1n10 /mnt/other xfs rw 0 0",
        "/dev/nvme1n2 /scratch ext4 rw,relatime 0 0",
        "proc /proc proc rw 0 0",
    )
    return sysfs


def by_name(devices):
    return {device["name"]: device for device in devices}


def test_namespaces_from_sysfs(host, tmp_path):
    calls = []
    statvfs = fake_statvfs({
        os.path.join(str(tmp_path), "mnt/fast data"): StatVfs(f_bavail=1000, f_frsize=4096),
        os.path.join(str(tmp_path), "scratch"): StatVfs(f_bavail=10, f_frsize=1024),
    }, calls)
    devices = collect(root=str(tmp_path), statvfs=statvfs)
    assert [device["name"] for device in devices] == ["nvme0n1", "nvme1n1", "nvme1n2"]
    assert devices[0] == {
        "name": "nvme0n1", "controller": "nvme0", "model": "SAMSUNG MZQL23T8HCLS-00A07", "serial": "S64HNE0R123456",
        "firmware": "GDC5602Q", "transport": "pcie", "size": 7501476528 * 512, "logical_block_size": 4096,
        "mount": "/mnt/fast data", "fstype": "xfs", "free": 4096000, "labels": [], "source": "sysfs",
    }
    assert devices[1] == {
        "name": "nvme1n1", "controller": "nvme1", "model": "Linux", "serial": "a1b2c3d4e5f6", "firmware": "6.8.0-45",
        "transport": "tcp", "size": 2 ** 30, "logical_block_size": 512,
        "mount": None, "fstype": None, "free": None, "labels": [], "source": "sysfs",
    }
    assert (devices[2]["mount"], devices[2]["fstype"], devices[2]["free"]) == ("/scratch", "ext4", 10240)
    assert sorted(calls) == [os.path.join(str(tmp_path), "mnt/fast data"), os.path.join(str(tmp_path), "scratch")]


def test_size_is_in_512_byte_sectors_whatever_the_logical_block_size(host, tmp_path):
    device = by_name(collect(root=str(tmp_path), statvfs=fake_statvfs({})))["nvme0n1"]
    assert device["logical_block_size"] == 4096
    assert device["size"] == 3840755982336


def test_hidden_multipath_paths_and_partitions_are_not_namespaces(host, tmp_path):
    assert (tmp_path / "sys/block/nvme1c1n3").exists() and (tmp_path / "sys/block/nvme0n1p1").exists()
    names = [device["name"] for device in collect(root=str(tmp_path), statvfs=fake_statvfs({}))]
    assert "nvme1c1n3" not in names and "nvme0n1p1" not in names


def test_mounted_without_statvfs_answer_has_no_free_space(host, tmp_path):
    device = by_name(collect(root=str(tmp_path), statvfs=fake_statvfs({})))["nvme0n1"]
    assert device["mount"] == "/mnt/fast data" and device["free"] is None


def test_free_space_on_a_real_directory_under_the_fake_root(host, tmp_path):
    (tmp_path / "scratch").mkdir()
    device = by_name(collect(root=str(tmp_path)))["nvme1n2"]
    usage = os.statvfs(str(tmp_path / "scratch"))
    assert device["mount"] == "/scratch"
    assert isinstance(device["free"], int) and device["free"] > 0
    assert abs(device["free"] - usage.f_bavail * usage.f_frsize) < 2 ** 30


def test_proc_mounts_when_there_is_no_proc_self_mounts(tmp_path):
    sysfs = FakeSysfs(tmp_path)
    sysfs.namespace(sysfs.controller("nvme0", model="M"), "nvme0n1", sectors=8)
    sysfs.mounts("/dev/nvme0n1 /data xfs rw 0 0", where="proc/mounts")
    device = collect(root=str(tmp_path), statvfs=fake_statvfs({}))[0]
    assert (device["mount"], device["fstype"]) == ("/data", "xfs")


def test_whole_device_and_partition_mounts_first_by_mount_point(tmp_path):
    sysfs = FakeSysfs(tmp_path)
    sysfs.namespace(sysfs.controller("nvme0"), "nvme0n1", sectors=8)
    sysfs.mounts("/dev/nvme0n1p2 /srv ext4 rw 0 0", "/dev/nvme0n1p1 /boot/efi vfat rw 0 0", "/dev/nvme0n1p3 / xfs rw 0 0")
    statvfs = fake_statvfs({os.path.join(str(tmp_path), ""): StatVfs(3, 512)})
    device = collect(root=str(tmp_path), statvfs=statvfs)[0]
    assert (device["mount"], device["fstype"], device["free"]) == ("/", "xfs", 1536)


def test_namespace_without_device_link_takes_the_controller_from_its_name(tmp_path):
    sysfs = FakeSysfs(tmp_path)
    sysfs.controller("nvme3", model="Plain", serial="SN3", firmware="1.0", transport="rdma")
    sysfs.plain_namespace("nvme3n1", sectors=16)
    device = collect(root=str(tmp_path), statvfs=fake_statvfs({}))[0]
    assert (device["controller"], device["model"], device["transport"], device["size"]) == ("nvme3", "Plain", "rdma", 8192)


def test_multipath_namespace_maps_to_its_first_controller_through_the_subsystem(tmp_path):
    """Native multipath: the head disk nvme4n1 is named after subsystem 4, its device link leads to
    nvme-subsys4, which links controllers nvme2 and nvme3; the per-path devices nvme4c2n1, nvme4c3n1 are hidden."""
    sysfs = FakeSysfs(tmp_path)
    subsystem = "sys/devices/virtual/nvme-subsystem/nvme-subsys4"
    for name in ("nvme3", "nvme2"):
        where = sysfs.controller(name, model="Shared Array", serial="ARRAY-1", firmware="2.1", transport="rdma",
                                 parent=FABRICS)
        sysfs.link("%s/%s" % (subsystem, name), os.path.relpath(tmp_path / where, tmp_path / subsystem))
        sysfs.namespace(where, "nvme4c%sn1" % name[4:], sectors=64)
    sysfs.write("%s/model" % subsystem, "Shared Array".ljust(40) + "\n")
    sysfs.namespace(subsystem, "nvme4n1", sectors=64)
    devices = collect(root=str(tmp_path), statvfs=fake_statvfs({}))
    assert [device["name"] for device in devices] == ["nvme4n1"]
    assert devices[0]["controller"] == "nvme2"
    assert (devices[0]["model"], devices[0]["transport"], devices[0]["size"]) == ("Shared Array", "rdma", 32768)


def test_unreadable_attributes_are_null(tmp_path):
    sysfs = FakeSysfs(tmp_path)
    where = sysfs.controller("nvme0", model=None, serial=None, firmware=None, transport=None)
    sysfs.namespace(where, "nvme0n1", sectors=8)
    (tmp_path / where / "nvme0n1" / "queue" / "logical_block_size").unlink()
    device = collect(root=str(tmp_path), statvfs=fake_statvfs({}))[0]
    assert device["controller"] == "nvme0"
    assert [device[key] for key in ("model", "serial", "firmware", "transport", "logical_block_size")] == [None] * 5
    assert device["size"] == 4096 and device["mount"] is None


def test_order_is_by_name_with_numbers_as_numbers(tmp_path):
    sysfs = FakeSysfs(tmp_path)
    for index in (10, 2, 1):
        sysfs.namespace(sysfs.controller("nvme%d" % index), "nvme%dn1" % index, sectors=8)
    assert [device["name"] for device in collect(root=str(tmp_path))] == ["nvme1n1", "nvme2n1", "nvme10n1"]


def test_labels_are_attached(host, tmp_path):
    devices = by_name(collect(root=str(tmp_path), labels={"nvme0n1": ["cache", "dataset"], "nvme1n2": ["scratch"]},
                              statvfs=fake_statvfs({})))
    assert devices["nvme0n1"]["labels"] == ["cache", "dataset"]
    assert devices["nvme1n1"]["labels"] == []
    assert devices["nvme1n2"]["labels"] == ["scratch"]


def test_label_for_a_device_the_host_does_not_have(host, tmp_path):
    with pytest.raises(ValueError) as error:
        collect(root=str(tmp_path), labels={"nvme9n1": ["cache"], "nvme0n1": ["cache"]}, statvfs=fake_statvfs({}))
    assert str(error.value) == "labels names nvme9n1, which this host does not have (it has nvme0n1, nvme1n1, nvme1n2)"


def test_label_on_a_host_without_nvme(tmp_path):
    with pytest.raises(ValueError, match=r"^labels names nvme0n1, which this host does not have \(it has no NVMe namespaces\)$"):
        collect(root=str(tmp_path), labels={"nvme0n1": ["cache"]})


@pytest.mark.parametrize("labels, message", [
    ({"nvme0n1": "cache"}, 'labels.nvme0n1: got "cache"; expected a list of labels (non-empty strings)'),
    ({"nvme0n1": ["cache", ""]}, 'labels.nvme0n1[1]: got ""; expected a non-empty string'),
    ({"nvme0n1": [3, None]}, 'labels.nvme0n1[0]: got 3; expected a non-empty string\nlabels.nvme0n1[1]: got null; expected a non-empty string'),
    ({"nvme0n1": None}, "labels.nvme0n1: got null; expected a list of labels (non-empty strings)"),
    (["nvme0n1"], 'labels: got ["nvme0n1"]; expected a mapping of namespace name to a list of labels'),
])
def test_bad_label_types(host, tmp_path, labels, message):
    with pytest.raises(ValueError) as error:
        collect(root=str(tmp_path), labels=labels, statvfs=fake_statvfs({}))
    assert str(error.value) == message


def test_simulated_devices_win_over_sysfs(host, tmp_path):
    devices = collect(root=str(tmp_path), labels={"nvme0n1": ["cache"]}, simulated=[
        {"name": "nvme1n1", "size": "1Ti", "model": "Fake Drive", "serial": "SIM-1", "labels": ["bulk"]},
        {"name": "nvme0n1", "size": "3576Gi", "mount": "/mnt/nvme0n1", "fstype": "xfs", "free": "3000Gi",
         "labels": ["cache", "fast"]},
    ])
    assert devices == [
        {"name": "nvme0n1", "controller": "nvme0", "model": "Simulated NVMe", "serial": None, "firmware": None,
         "transport": None, "size": 3576 * 2 ** 30, "logical_block_size": 512, "mount": "/mnt/nvme0n1",
         "fstype": "xfs", "free": 3000 * 2 ** 30, "labels": ["cache", "fast"], "source": "simulated"},
        {"name": "nvme1n1", "controller": "nvme1", "model": "Fake Drive", "serial": "SIM-1", "firmware": None,
         "transport": None, "size": 2 ** 40, "logical_block_size": 512, "mount": None, "fstype": None, "free": None,
         "labels": ["bulk"], "source": "simulated"},
    ]


def test_simulated_devices_on_a_host_without_nvme_and_labels_for_them(tmp_path):
    devices = collect(root=str(tmp_path), labels={"nvme12n3": ["cache"]}, simulated=[{"name": "nvme12n3", "size": 1000}])
    assert [(device["name"], device["controller"], device["size"], device["labels"]) for device in devices] == [
        ("nvme12n3", "nvme12", 1000, ["cache"])]
    with pytest.raises(ValueError, match=r"^labels names nvme0n1, which this host does not have \(it has nvme12n3\)$"):
        collect(root=str(tmp_path), labels={"nvme0n1": ["cache"]}, simulated=[{"name": "nvme12n3", "size": 1000}])


def test_empty_simulated_list_reads_sysfs(host, tmp_path):
    assert [device["source"] for device in collect(root=str(tmp_path), simulated=[], statvfs=fake_statvfs({}))] == ["sysfs"] * 3


@pytest.mark.parametrize("entries, message", [
    ([{"name": "nvme0n1", "size": "1Tx"}],
     'gangplank_simulated_nvme[0].size: got "1Tx"; expected a size: bytes, or a number with Ki, Mi, Gi, Ti, Pi, K, M, G, T or P (e.g. 16Gi)'),
    ([{"name": "nvme0n1"}], "gangplank_simulated_nvme[0].size: missing; expected a size"),
    ([{"size": "1Ti"}], "gangplank_simulated_nvme[0].name: got null; expected a namespace name such as nvme0n1"),
    ([{"name": "sda", "size": "1Ti"}], 'gangplank_simulated_nvme[0].name: got "sda"; expected a namespace name such as nvme0n1'),
    ([{"name": "nvme0c1n1", "size": "1Ti"}], 'gangplank_simulated_nvme[0].name: got "nvme0c1n1"; expected a namespace name'),
    ([{"name": "nvme0n1", "size": 1}, {"name": "nvme0n1", "size": 2}],
     'gangplank_simulated_nvme[1].name: got "nvme0n1"; expected a name not used before (gangplank_simulated_nvme[0] has it)'),
    ([{"name": "nvme0n1", "size": "1Ti", "free": "1Gi"}],
     'gangplank_simulated_nvme[0].free: got "1Gi"; expected no free space without a mount'),
    ([{"name": "nvme0n1", "size": "1Gi", "mount": "/m", "free": "2Gi"}],
     'gangplank_simulated_nvme[0].free: got "2Gi"; expected at most the size ("1Gi")'),
    ([{"name": "nvme0n1", "size": "1Gi", "mount": "/m", "free": "lots"}], 'gangplank_simulated_nvme[0].free: got "lots"; expected a size'),
    ([{"name": "nvme0n1", "size": "1Gi", "mount": "mnt"}], 'gangplank_simulated_nvme[0].mount: got "mnt"; expected an absolute path or null'),
    ([{"name": "nvme0n1", "size": "1Gi", "sise": 1}], "gangplank_simulated_nvme[0].sise: unknown key; expected one of name, size,"),
    ([{"name": "nvme0n1", "size": "1Gi", "labels": "cache"}], 'gangplank_simulated_nvme[0].labels: got "cache"; expected a list'),
    ([{"name": "nvme0n1", "size": "1Gi", "labels": ["ok", ""]}], 'gangplank_simulated_nvme[0].labels[1]: got ""; expected a non-empty string'),
    ([{"name": "nvme0n1", "size": "1Gi", "model": 5}], "gangplank_simulated_nvme[0].model: got 5; expected a non-empty string"),
    (["nvme0n1"], 'gangplank_simulated_nvme[0]: got "nvme0n1"; expected a mapping with name and size'),
    ({"name": "nvme0n1"}, 'gangplank_simulated_nvme: got {"name": "nvme0n1"}; expected a list of devices'),
])
def test_bad_simulated_devices(tmp_path, entries, message):
    with pytest.raises(ValueError) as error:
        collect(root=str(tmp_path), simulated=entries)
    assert str(error.value).startswith(message)


def test_every_simulated_mistake_is_reported(tmp_path):
    with pytest.raises(ValueError) as error:
        collect(root=str(tmp_path), simulated=[{"name": "nvme0n1", "size": "big"}, {"name": "x", "size": 1}])
    assert str(error.value).splitlines() == [
        'gangplank_simulated_nvme[0].size: got "big"; expected a size: bytes, or a number with Ki, Mi, Gi, Ti, Pi, K, M, G, T or P (e.g. 16Gi)',
        'gangplank_simulated_nvme[1].name: got "x"; expected a namespace name such as nvme0n1',
    ]


def test_no_nvme_at_all(tmp_path):
    assert collect(root=str(tmp_path)) == []
    assert collect(root=str(tmp_path), labels={}) == []


def test_nvme_class_without_namespaces(tmp_path):
    sysfs = FakeSysfs(tmp_path)
    sysfs.controller("nvme0", model="Empty")
    (tmp_path / "sys/block/loop0").mkdir(parents=True)
    assert collect(root=str(tmp_path)) == []


def test_block_devices_without_the_nvme_class_are_not_reported(tmp_path):
    FakeSysfs(tmp_path).plain_namespace("nvme0n1", sectors=8)
    assert collect(root=str(tmp_path)) == []


def test_this_machine_never_fails():
    devices = collect()
    assert isinstance(devices, list)
    assert all(device["source"] == "sysfs" for device in devices)
