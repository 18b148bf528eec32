# -*- coding: utf-8 -*-
"""The per-service NVMe directory of a site that ran before volumes: adopted by its one instance (a rename), or named
with the instances that shared it."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import desired_containers
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.nvme_adoption import (
    adopt, adoptions, inspect, is_old_layout, shared_message,
)

NVME = {"name": "nvme0n1", "size": 2 ** 30, "mount": "/mnt/nvme0n1"}
STORE = {"replicas": 2, "stateful": True, "image": "localhost/store:1", "nvme_path": "/cache",
         "resources": {"nvme": {"label": "cache", "size": "1Gi"}},
         "volumes": [{"name": "cache", "path": "/cache", "where": "nvme"}]}


def binding(ordinal):
    return {"service": "store", "ordinal": ordinal, "node": "h1", "gpus": [], "nvme": NVME, "sidecars": [], "rank": 0}


def test_the_plan_lists_each_old_directory_with_the_instances_on_its_device():
    made = desired_containers("h1", {"store-0": binding(0), "store-1": binding(1)}, {"store": STORE}, "/d",
                              volume_dir="/v")
    assert adoptions(made) == [{"legacy": "/mnt/nvme0n1/gangplank/store", "service": "store",
                                "instances": ["store-0", "store-1"],
                                "targets": {"store-0": "/mnt/nvme0n1/gangplank/store/store-0/cache",
                                            "store-1": "/mnt/nvme0n1/gangplank/store/store-1/cache"}}]
    # Without NVMe volumes: nothing to adopt.
    plain = dict(STORE, volumes=[])
    assert adoptions(desired_containers("h1", {"store-0": binding(0)}, {"store": plain}, "/d")) == []


def entry(tmp_path, *instances):
    legacy = tmp_path / "gangplank" / "store"
    return {"legacy": str(legacy), "service": "store", "instances": list(instances),
            "targets": {name: str(legacy / name / "cache") for name in instances}}


def test_one_instance_adopts_the_old_directory_by_a_rename(tmp_path):
    item = entry(tmp_path, "store-0")
    legacy = tmp_path / "gangplank" / "store"
    (legacy / "base").mkdir(parents=True)
    (legacy / "base" / "table").write_text("rows")
    moves, shared = inspect([item])
    assert shared == [] and moves == [{"legacy": str(legacy), "instance": "store-0", "target": item["targets"]["store-0"]}]
    inode = legacy.stat().st_ino
    adopt(moves)
    target = legacy / "store-0" / "cache"
    assert (target / "base" / "table").read_text() == "rows" and target.stat().st_ino == inode
    assert sorted(path.name for path in (tmp_path / "gangplank").iterdir()) == ["store"]
    # Adopted, the directory is of the new layout: nothing more to do.
    assert inspect([item]) == ([], [])


def test_a_directory_several_instances_shared_is_named_with_how_to_split_it(tmp_path):
    item = entry(tmp_path, "store-0", "store-1")
    legacy = tmp_path / "gangplank" / "store"
    legacy.mkdir(parents=True)
    (legacy / "data").write_text("both")
    moves, shared = inspect([item])
    assert moves == [] and shared == [{"legacy": str(legacy), "service": "store", "instances": ["store-0", "store-1"]}]
    assert shared_message(shared) == (
        "%s was shared by store-0, store-1 (the NVMe directory of service store before volumes); each now has its own "
        "NVMe volume. Split it by hand: stop the instances, move each one's files into %s/store-0/<volume> and "
        "%s/store-1/<volume>, leave nothing else in %s, then run again" % (legacy, legacy, legacy, legacy))


def test_new_layouts_and_missing_directories_need_nothing(tmp_path):
    legacy = tmp_path / "store"
    assert not is_old_layout(str(legacy), "store")
    legacy.mkdir()
    assert not is_old_layout(str(legacy), "store")            # empty
    (legacy / "store-0").mkdir()
    (legacy / "store@node1").mkdir()
    assert not is_old_layout(str(legacy), "store")
    (legacy / "store-x").mkdir()
    assert is_old_layout(str(legacy), "store")
