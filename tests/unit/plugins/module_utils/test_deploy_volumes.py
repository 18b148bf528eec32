# -*- coding: utf-8 -*-
"""Each stateful instance's volumes: its own directories, bind-mounted, made once with their mode and owner."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    SPEC_HASH, DeployError, desired_containers, make_directory_argv, rollout,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step, rollout_step

HOST = "h1"
DATA = "/var/lib/gangplank/instances"
VOLUMES = "/var/lib/gangplank/volumes"
NVME = {"name": "nvme0n1", "size": 2 ** 30, "mount": "/mnt/nvme0n1"}

DB = {"replicas": 2, "stateful": True, "image": "localhost/db:1",
      "resources": {"nvme": {"label": "cache", "size": "1Gi"}},
      "volumes": [{"name": "data", "path": "/var/lib/db", "size": "1Gi", "uid": 999, "gid": 999, "mode": "0700"},
                  {"name": "cache", "path": "/cache", "where": "nvme"}]}


_ON_NVME = object()


def binding(service, ordinal, nvme=_ON_NVME):
    return {"service": service, "ordinal": ordinal, "node": HOST, "gpus": [], "nvme": NVME if nvme is _ON_NVME else nvme,
            "sidecars": [], "rank": 0}


def specs(services=None, instances=None, **options):
    options.setdefault("volume_dir", VOLUMES)
    return {spec["name"]: spec for spec in desired_containers(
        HOST, instances or {"db-0": binding("db", 0), "db-1": binding("db", 1)}, services or {"db": DB}, DATA,
        **options)}


def test_every_instance_has_its_own_directories_on_disk_and_on_its_nvme_device():
    made = specs()
    assert made["h1-db-0"]["volumes"] == ["/var/lib/gangplank/volumes/db/db-0/data:/var/lib/db",
                                          "/mnt/nvme0n1/gangplank/db/db-0/cache:/cache"]
    assert made["h1-db-1"]["volumes"] == ["/var/lib/gangplank/volumes/db/db-1/data:/var/lib/db",
                                          "/mnt/nvme0n1/gangplank/db/db-1/cache:/cache"]
    # The NVMe volumes replace the per-service NVMe directory, which two instances on one device would share.
    assert made["h1-db-0"]["directories"] == [] and made["h1-db-1"]["directories"] == []
    assert made["h1-db-0"]["env"]["GANGPLANK_NVME_DIR"] == "/cache"
    assert made["h1-db-0"]["data_dirs"] == [
        {"path": "/var/lib/gangplank/volumes/db/db-0/data", "volume": "data", "where": "disk", "size": 2 ** 30,
         "mode": "0700", "uid": 999, "gid": 999},
        {"path": "/mnt/nvme0n1/gangplank/db/db-0/cache", "volume": "cache", "where": "nvme", "size": None,
         "mode": "0750", "uid": None, "gid": None},
    ]


def test_the_directory_is_made_once_with_its_mode_and_owner_never_recursively():
    assert make_directory_argv({"path": "/v/db/db-0/data", "mode": "0700", "uid": 999, "gid": 998}) == [
        "install", "-d", "-m", "0700", "-o", "999", "-g", "998", "--", "/v/db/db-0/data"]
    assert make_directory_argv({"path": "/v/db/db-0/data", "mode": "0750", "uid": None, "gid": None}) == [
        "install", "-d", "-m", "0750", "--", "/v/db/db-0/data"]


def test_a_new_mode_or_owner_does_not_recreate_the_container():
    before = specs()
    changed = dict(DB, volumes=[dict(DB["volumes"][0], mode="0750", uid=1000), DB["volumes"][1]])
    after = specs({"db": changed})

    def hashes(made):
        planned = rollout(HOST, list(made.values()), {}, [])
        return [container["labels"][SPEC_HASH] for container in planned["containers"]]
    assert hashes(before) == hashes(after)
    # A volume at another path is another container.
    moved = dict(DB, volumes=[dict(DB["volumes"][0], path="/data"), DB["volumes"][1]])
    assert hashes(before) != hashes(specs({"db": moved}))


def test_missing_places_are_errors_not_guesses():
    with pytest.raises(DeployError, match=r"services.db.volumes: disk volumes need the host's volume directory"):
        specs(volume_dir=None)
    with pytest.raises(DeployError, match=r"instances.db-0: volume cache lives on NVMe, but the instance has no NVMe "
                                          r"placement with a mount"):
        specs(instances={"db-0": binding("db", 0, nvme=None)})


def test_the_rank_lists_the_volume_root_first_then_each_volume():
    services = {"db": DB}
    reads = {HOST: {"settings": {"data_dir": DATA, "volume_dir": VOLUMES, "engine": "podman",
                                 "instances": {"db-0": binding("db", 0)}},
                    "engine_found": True, "containers": []}}
    step = containers_step([HOST], reads, services)
    result = rollout_step([HOST], reads, {HOST: {}}, step)
    dirs = result["hosts"][HOST]["ranks"]["0"]["volume_dirs"]
    assert dirs == [
        {"path": VOLUMES, "argv": ["install", "-d", "-m", "0700", "--", VOLUMES]},
        {"path": VOLUMES + "/db/db-0/data",
         "argv": ["install", "-d", "-m", "0700", "-o", "999", "-g", "999", "--", VOLUMES + "/db/db-0/data"]},
        {"path": "/mnt/nvme0n1/gangplank/db/db-0/cache",
         "argv": ["install", "-d", "-m", "0750", "--", "/mnt/nvme0n1/gangplank/db/db-0/cache"]},
    ]


def test_a_bad_volume_dir_is_refused():
    reads = {HOST: {"settings": {"data_dir": DATA, "volume_dir": "/var/lib/../volumes", "instances": {}},
                    "engine_found": True, "containers": []}}
    with pytest.raises(DeployError, match=r'volume_dir: got "/var/lib/../volumes"; expected an absolute, normalised '
                                          r'path other than /'):
        containers_step([HOST], reads, {"db": DB})
