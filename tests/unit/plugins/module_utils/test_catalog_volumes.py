# -*- coding: utf-8 -*-
"""The catalog's volumes: each read whole, every mistake named with its path and value, and the disk request the
scheduler places (the sum of the disk volumes' sizes)."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import read_catalog, split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError


def db(volumes, **extra):
    spec = {"replicas": 2, "stateful": True, "image": "localhost/db:1", "volumes": volumes}
    spec.update(extra)
    return {"db": spec}


def errors_of(services):
    with pytest.raises(ProblemError) as caught:
        split_catalog(services)
    return list(caught.value.errors)


def test_a_volume_with_defaults_and_one_with_every_key():
    scheduling, deploy = split_catalog(db([
        {"name": "data", "path": "/var/lib/db"},
        {"name": "wal", "path": "/wal", "where": "disk", "size": "2Gi", "uid": 999, "gid": 998, "mode": "0700"},
    ]))
    assert deploy["db"]["volumes"] == [
        {"name": "data", "path": "/var/lib/db", "where": "disk", "size": None, "uid": None, "gid": None, "mode": "0750"},
        {"name": "wal", "path": "/wal", "where": "disk", "size": 2 * 2 ** 30, "uid": 999, "gid": 998, "mode": "0700"},
    ]
    # The scheduler places the disk volumes' sizes on the node's data filesystem.
    assert scheduling["db"]["resources"] == {"disk": 2 * 2 ** 30}


def test_a_service_without_sized_disk_volumes_hands_the_scheduler_its_keys_unchanged():
    services = db([{"name": "data", "path": "/data"}], resources={"cpu": "100m"})
    scheduling, _deploy = split_catalog(services)
    assert scheduling["db"]["resources"] == {"cpu": "100m"}
    assert services["db"]["resources"] == {"cpu": "100m"}        # the caller's catalog is not changed
    scheduling, _deploy = split_catalog(db([{"name": "data", "path": "/data", "size": "1Gi"}], resources={"cpu": "100m"}))
    assert scheduling["db"]["resources"] == {"cpu": "100m", "disk": 2 ** 30}


def test_the_yaml_integer_mode_is_read_as_octal():
    _scheduling, deploy = split_catalog(db([{"name": "data", "path": "/data", "mode": 0o700}]))
    assert deploy["db"]["volumes"][0]["mode"] == "0700"


def test_nvme_volumes_need_an_nvme_request_and_fit_in_it():
    nvme = {"nvme": {"label": "cache", "size": "1Gi"}}
    _scheduling, deploy = split_catalog(db([{"name": "cache", "path": "/cache", "where": "nvme", "size": "1Gi"}],
                                           resources=nvme))
    assert deploy["db"]["volumes"][0]["where"] == "nvme"
    assert errors_of(db([{"name": "cache", "path": "/cache", "where": "nvme"}])) == [
        ("services.db.volumes[0].where", "got \"nvme\"; expected disk, or nvme with an NVMe request (resources.nvme) that "
                                         "places the instance on a device")]
    assert errors_of(db([{"name": "a", "path": "/a", "where": "nvme", "size": "1Gi"},
                         {"name": "b", "path": "/b", "where": "nvme", "size": "1"}], resources=nvme)) == [
        ("services.db.volumes", "has NVMe volumes of 1073741825 bytes in all; expected NVMe volumes that fit in the "
                                "service's NVMe request (resources.nvme.size, 1073741824 bytes)")]


def test_only_a_stateful_service_has_volumes():
    services = db([{"name": "data", "path": "/data"}])
    services["db"]["stateful"] = False
    assert errors_of(services) == [
        ("services.db.volumes", "has 1 volume(s) on a service that is not stateful; expected volumes only with "
                                "stateful: true (its instances stay on the node their data is on)")]


@pytest.mark.parametrize("path, expected", [
    ("data", "an absolute, normalised path in the container"),
    ("/", "a path in the container other than /, without ':', ',', NUL or line breaks"),
    ("/data/../etc", "an absolute, normalised path in the container"),
    ("/data/", "an absolute, normalised path in the container"),
    ("/data:U", "a path in the container other than /, without ':', ',', NUL or line breaks"),
    ("/data,ro", "a path in the container other than /, without ':', ',', NUL or line breaks"),
])
def test_bad_paths_are_named_with_their_value(path, expected):
    assert errors_of(db([{"name": "data", "path": path}])) == [
        ("services.db.volumes[0].path", "got %s; expected %s" % (show(path), expected))]


def test_every_mistake_of_every_volume_at_once():
    errors = errors_of(db([
        {"name": "Data", "path": "/a", "where": "tmpfs", "size": "lots", "uid": -1, "mode": "0640"},
        {"name": "b", "path": "/b", "colour": "red"},
        {"name": "b", "path": "/b/c"},
        {"path": "/d"},
        "data",
    ]))
    paths = [path for path, _message in errors]
    assert paths == [
        "services.db.volumes[0].name", "services.db.volumes[0].where", "services.db.volumes[0].size",
        "services.db.volumes[0].uid", "services.db.volumes[0].mode",
        "services.db.volumes[1].colour",
        "services.db.volumes[2].name", "services.db.volumes[2].path",
        "services.db.volumes[3].name", "services.db.volumes[4]",
    ]
    messages = dict(errors)
    assert messages["services.db.volumes[0].name"].startswith("got \"Data\"; expected a volume name")
    assert messages["services.db.volumes[0].where"].startswith("got \"tmpfs\"; expected one of disk, nvme")
    assert messages["services.db.volumes[0].size"].startswith("got \"lots\"; expected a size")
    assert messages["services.db.volumes[0].mode"].startswith("got \"0640\"; expected a directory mode")
    assert messages["services.db.volumes[2].name"] == "got \"b\"; expected a volume name not used twice in the service"
    assert messages["services.db.volumes[2].path"] == ("got \"/b/c\"; expected a path in the container that no other "
                                                       "volume is at, inside or above")


def test_a_volume_may_not_meet_a_config_file_a_secret_or_the_nvme_directory():
    errors = errors_of(db([{"name": "a", "path": "/etc/app"}, {"name": "b", "path": "/run/secrets"},
                           {"name": "c", "path": "/mnt/nvme"}],
                          config=[{"dest": "/etc/app/app.conf", "content": "x"}], secrets={"token": "db_token"},
                          resources={"nvme": {"label": "cache"}}))
    assert errors == [
        ("services.db.volumes[0].path", "got \"/etc/app\"; expected a path in the container that no config file is at, "
                                        "inside or above"),
        ("services.db.volumes[1].path", "got \"/run/secrets\"; expected a path in the container that no secret is at, "
                                        "inside or above"),
        ("services.db.volumes[2].path", "got \"/mnt/nvme\"; expected a path in the container that no NVMe directory "
                                        "(nvme_path) is at, inside or above"),
    ]


def test_sizes_and_a_hand_written_disk_request_do_not_mix():
    errors = errors_of(db([{"name": "data", "path": "/data", "size": "1Gi"}], resources={"disk": "5Gi"}))
    assert errors == [("services.db.resources.disk", "got \"5Gi\"; expected no resources.disk where the service's volumes "
                                                     "have sizes (their sum is its request)")]


def test_volumes_must_be_a_list():
    catalog = read_catalog(db({"name": "data"}))
    assert [path for path, _message in catalog.errors] == ["services.db.volumes"]
