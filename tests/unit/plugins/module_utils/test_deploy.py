# -*- coding: utf-8 -*-
"""From one host's bindings to container specs, the rollout against what exists, and the status table."""

from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    CONFIG_HASH, DeployError, SPEC_HASH, container_name, decide, desired_containers, desired_on_hosts, render_status, rollout,
    status_rows,
    summary_line, waves,
)

HOST = "h1"
DATA = "/var/lib/gangplank/instances"
MIB = 1024 * 1024

SERVICES = {
    "db": {"stateful": True, "ports": [5432], "image": "localhost/db:1", "init": True, "stop_timeout": 30,
           "restart_policy": "unless-stopped", "health": {"tcp": {"port": 5432}, "interval": 0.2, "retries": 50}},
    "api": {"replicas": 2, "ports": [8080], "sidecars": ["log"], "depends_on": ["db"], "image": "localhost/api:1",
            "command": ["serve", "--port", 8080], "env": {"API_LOG_LEVEL": "info"},
            "config": [{"dest": "/etc/api/api.conf", "src": "templates/api.conf.j2"},
                       {"dest": "/etc/api/extra.conf", "content": "extra=1\n", "diff": True}],
            "health": {"http": {"port": 8080, "path": "/health", "expect_status": [200, 204]}, "timeout": 5}},
    "log": {"sidecar": True, "ports": [9100], "image": "localhost/log:1",
            "config": [{"dest": "/etc/log.conf", "content": "level=debug\n"}],
            "health": {"command": ["test", "-f", "/tmp/ready"], "start_period": 3}},
    "infer": {"ports": [9000], "depends_on": ["api"], "image": "localhost/infer:1", "nvme_path": "/cache",
              "resources": {"gpu": {"count": 2, "memory": "1Gi"}, "nvme": {"label": "cache", "size": "1Gi"}}},
    "job": {"depends_on": ["api"], "image": "localhost/job:1"},
}

GPUS = [{"index": 0, "uuid": "GPU-aaa", "model": "NVIDIA A100", "memory": 1024 * MIB},
        {"index": 1, "uuid": "GPU-bbb", "model": "NVIDIA A100", "memory": 2048 * MIB}]
NVME = {"name": "nvme0n1", "size": 1024 * MIB, "mount": "/mnt/nvme0n1"}


def binding(service, ordinal, rank, gpus=None, nvme=None, sidecars=None):
    """One instance as the schedule role publishes it: a placement plus its rank."""
    return {"service": service, "ordinal": ordinal, "node": HOST, "gpus": gpus or [], "nvme": nvme,
            "sidecars": sidecars or [], "rank": rank}


INSTANCES = {
    "infer-0": binding("infer", 0, 2, gpus=GPUS, nvme=NVME),
    "api-1": binding("api", 1, 1, sidecars=["log"]),
    "db-0": binding("db", 0, 0),
    "api-0": binding("api", 0, 1, sidecars=["log"]),
}


def containers(instances=None, services=None, **options):
    return desired_containers(HOST, copy.deepcopy(INSTANCES if instances is None else instances),
                              copy.deepcopy(SERVICES if services is None else services), DATA, **options)


def by_name(specs):
    return {spec["name"]: spec for spec in specs}


def rendered_for(specs, overrides=None):
    """Each config file's rendered text: its content, or a stand-in for a template."""
    rendered = {entry["path"]: entry.get("content", "rendered %s" % entry.get("src")) for spec in specs for entry in spec["config"]}
    rendered.update(overrides or {})
    return rendered


def inspect(name, running=True, labels=None):
    """A container as `podman inspect` shows it."""
    return {"Name": name, "Id": "0123", "State": {"Running": running, "Status": "running" if running else "exited"},
            "Config": {"Labels": labels}}


def as_deployed(planned, running=True):
    """The engine's view after a rollout: every planned container with its labels."""
    return [inspect(container["name"], running, dict(container["labels"])) for container in planned["containers"]]


# -- desired_containers -----------------------------------------------------------------------------------------------

def test_container_names():
    assert container_name("h1", "api-0") == "h1-api-0"
    assert container_name("h1", "api-0", "log") == "h1-api-0-log"
    assert container_name("node-b", "db-0", None) == "node-b-db-0"


def test_rank_order_each_instance_before_its_sidecars():
    specs = containers()
    assert [spec["name"] for spec in specs] == ["h1-db-0", "h1-api-0", "h1-api-0-log", "h1-api-1", "h1-api-1-log", "h1-infer-0"]
    assert [spec["rank"] for spec in specs] == [0, 1, 1, 1, 1, 2]
    assert [spec["sidecar"] for spec in specs] == [False, False, True, False, True, False]
    assert [(spec["instance"], spec["service"]) for spec in specs[1:3]] == [("api-0", "api"), ("api-0", "log")]


def test_no_instances_no_containers():
    assert not containers(instances={})


def test_spec_keys_copied_from_the_catalog():
    specs = by_name(containers())
    db, api, log = specs["h1-db-0"], specs["h1-api-0"], specs["h1-api-0-log"]
    assert (db["image"], db["command"], db["init"], db["stop_timeout"], db["restart_policy"]) == (
        "localhost/db:1", None, True, 30, "unless-stopped")
    assert (api["image"], api["command"], api["init"], api["stop_timeout"], api["restart_policy"]) == (
        "localhost/api:1", ["serve", "--port", "8080"], False, 10, "always")
    assert (log["image"], log["network"], api["network"], db["network"]) == ("localhost/log:1", "container:h1-api-0", None, None)
    job = desired_containers(HOST, {"job-0": binding("job", 0, 2)}, SERVICES, DATA)[0]
    assert (job["env"]["GANGPLANK_PORTS"], job["ports"], job["volumes"], job["probe"]) == ("", [], [], None)


def test_labels():
    specs = by_name(containers())
    assert specs["h1-api-1"]["labels"] == {
        "gangplank.io/managed": "true", "gangplank.io/node": "h1", "gangplank.io/instance": "api-1",
        "gangplank.io/service": "api", "gangplank.io/rank": "1"}
    assert specs["h1-api-1-log"]["labels"] == {
        "gangplank.io/managed": "true", "gangplank.io/node": "h1", "gangplank.io/instance": "api-1",
        "gangplank.io/service": "log", "gangplank.io/rank": "1", "gangplank.io/sidecar-of": "h1-api-1"}


def test_ports_published_on_the_instance_with_its_sidecars_ports():
    specs = by_name(containers())
    assert specs["h1-api-0"]["ports"] == ["8080:8080", "9100:9100"]
    assert specs["h1-api-0-log"]["ports"] == []
    assert specs["h1-db-0"]["ports"] == ["5432:5432"]
    published = by_name(containers(publish_address="10.0.0.5"))
    assert published["h1-api-0"]["ports"] == ["10.0.0.5:8080:8080", "10.0.0.5:9100:9100"]
    assert published["h1-db-0"]["ports"] == ["10.0.0.5:5432:5432"]


def test_environment_of_an_instance_and_its_sidecar():
    specs = by_name(containers())
    assert specs["h1-api-1"]["env"] == {
        "GANGPLANK_INSTANCE": "api-1", "GANGPLANK_SERVICE": "api", "GANGPLANK_ORDINAL": "1", "GANGPLANK_NODE": "h1",
        "GANGPLANK_PORTS": "8080,9100", "API_LOG_LEVEL": "info"}
    assert specs["h1-api-1-log"]["env"] == {
        "GANGPLANK_INSTANCE": "api-1", "GANGPLANK_SERVICE": "log", "GANGPLANK_ORDINAL": "1", "GANGPLANK_NODE": "h1",
        "GANGPLANK_PORTS": "8080,9100"}
    assert specs["h1-db-0"]["env"]["GANGPLANK_PORTS"] == "5432"


def test_gpus_as_cdi_devices_and_environment():
    infer = by_name(containers())["h1-infer-0"]
    assert infer["devices"] == ["nvidia.com/gpu=GPU-aaa", "nvidia.com/gpu=GPU-bbb"]
    assert infer["env"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"
    assert infer["env"]["GANGPLANK_GPU_MEMORY"] == "GPU-aaa=1073741824,GPU-bbb=2147483648"
    api = by_name(containers())["h1-api-0"]
    assert api["devices"] == [] and "NVIDIA_VISIBLE_DEVICES" not in api["env"] and "GANGPLANK_GPU_MEMORY" not in api["env"]


def test_a_sidecar_of_a_gpu_instance_gets_no_gpu():
    services = dict(SERVICES, infer=dict(SERVICES["infer"], sidecars=["log"]))
    instances = {"infer-0": binding("infer", 0, 2, gpus=GPUS, nvme=NVME, sidecars=["log"])}
    side = by_name(containers(instances=instances, services=services))["h1-infer-0-log"]
    assert side["devices"] == [] and "NVIDIA_VISIBLE_DEVICES" not in side["env"] and "GANGPLANK_GPU_MEMORY" not in side["env"]


def test_simulated_gpus_get_only_the_environment():
    infer = by_name(containers(gpu_mode="simulated"))["h1-infer-0"]
    assert infer["devices"] == []
    assert infer["env"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"


def test_unknown_gpu_mode():
    with pytest.raises(DeployError) as caught:
        containers(gpu_mode="passthrough")
    assert str(caught.value) == "gpu_mode: got 'passthrough'; expected one of cdi, simulated"


def test_the_catalogs_env_wins():
    services = copy.deepcopy(SERVICES)
    services["infer"]["env"] = {"GANGPLANK_NODE": "mine", "GANGPLANK_NVME_DIR": "/data", "X": 1}
    env = by_name(containers(services=services))["h1-infer-0"]["env"]
    assert env == {
        "GANGPLANK_INSTANCE": "infer-0", "GANGPLANK_SERVICE": "infer", "GANGPLANK_ORDINAL": "0", "GANGPLANK_NODE": "mine",
        "GANGPLANK_PORTS": "9000", "NVIDIA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb", "GANGPLANK_GPU_MEMORY": "GPU-aaa=1073741824,GPU-bbb=2147483648",
        "GANGPLANK_NVME_DIR": "/data", "X": "1"}


def test_nvme_directory_per_service_at_nvme_path():
    specs = by_name(containers())
    infer = specs["h1-infer-0"]
    assert infer["directories"] == ["/mnt/nvme0n1/gangplank/infer"]
    assert infer["volumes"] == ["/mnt/nvme0n1/gangplank/infer:/cache"]
    assert infer["env"]["GANGPLANK_NVME_DIR"] == "/cache"
    for name in ("h1-db-0", "h1-api-0", "h1-api-0-log"):
        assert specs[name]["directories"] == [] and "GANGPLANK_NVME_DIR" not in specs[name]["env"]


def test_nvme_default_path_and_sidecars_do_not_get_it():
    instances = {"api-0": binding("api", 0, 0, nvme={"name": "nvme1n1", "size": 0, "mount": "/srv/fast"}, sidecars=["log"])}
    specs = by_name(containers(instances=instances))
    api, log = specs["h1-api-0"], specs["h1-api-0-log"]
    assert api["directories"] == ["/srv/fast/gangplank/api"]
    assert api["volumes"][-1] == "/srv/fast/gangplank/api:/mnt/nvme"
    assert api["env"]["GANGPLANK_NVME_DIR"] == "/mnt/nvme"
    assert log["directories"] == [] and "GANGPLANK_NVME_DIR" not in log["env"]
    assert not [volume for volume in log["volumes"] if "/srv/fast" in volume]


def test_config_files_host_paths_and_read_only_volumes():
    specs = by_name(containers())
    api, log = specs["h1-api-0"], specs["h1-api-0-log"]
    assert api["config"] == [
        {"dest": "/etc/api/api.conf", "src": "templates/api.conf.j2", "mode": "0600", "group": None, "diff": False,
         "path": DATA + "/h1-api-0/config/0-api.conf"},
        {"dest": "/etc/api/extra.conf", "content": "extra=1\n", "mode": "0600", "group": None, "diff": True,
         "path": DATA + "/h1-api-0/config/1-extra.conf"}]
    assert api["volumes"] == [DATA + "/h1-api-0/config/0-api.conf:/etc/api/api.conf:ro",
                              DATA + "/h1-api-0/config/1-extra.conf:/etc/api/extra.conf:ro"]
    assert log["config"] == [{"dest": "/etc/log.conf", "content": "level=debug\n", "mode": "0600", "group": None, "diff": False,
                              "path": DATA + "/h1-api-0-log/config/0-log.conf"}]
    assert log["volumes"] == [DATA + "/h1-api-0-log/config/0-log.conf:/etc/log.conf:ro"]
    assert specs["h1-api-1"]["config"][0]["path"] == DATA + "/h1-api-1/config/0-api.conf"


def test_config_files_with_the_same_basename_do_not_collide():
    services = copy.deepcopy(SERVICES)
    services["db"]["config"] = [{"dest": "/etc/a/app.conf", "content": "a"}, {"dest": "/etc/b/app.conf", "content": "b"}]
    paths = [entry["path"] for entry in by_name(containers(services=services))["h1-db-0"]["config"]]
    assert paths == [DATA + "/h1-db-0/config/0-app.conf", DATA + "/h1-db-0/config/1-app.conf"]


def test_probes_for_http_tcp_and_command():
    specs = by_name(containers(probe_address="10.0.0.5"))
    assert specs["h1-api-0"]["probe"] == {
        "name": "h1-api-0", "type": "http", "url": "http://10.0.0.5:8080/health", "expect_status": [200, 204],
        "timeout": 5.0, "interval": 1.0, "retries": 60, "start_period": 0.0}
    assert specs["h1-db-0"]["probe"] == {
        "name": "h1-db-0", "type": "tcp", "host": "10.0.0.5", "port": 5432,
        "timeout": 2.0, "interval": 0.2, "retries": 50, "start_period": 0.0}
    assert specs["h1-api-0-log"]["probe"] == {
        "name": "h1-api-0-log", "type": "command", "argv": ["podman", "exec", "h1-api-0-log", "test", "-f", "/tmp/ready"],
        "timeout": 2.0, "interval": 1.0, "retries": 60, "start_period": 3.0}
    assert specs["h1-infer-0"]["probe"] is None


def test_probe_defaults_address_status_and_engine():
    services = copy.deepcopy(SERVICES)
    services["api"]["health"] = {"http": {"port": 8080}}
    specs = by_name(containers(services=services, engine="docker"))
    assert specs["h1-api-0"]["probe"]["url"] == "http://127.0.0.1:8080/"
    assert "expect_status" not in specs["h1-api-0"]["probe"]
    assert specs["h1-db-0"]["probe"]["host"] == "127.0.0.1"
    assert specs["h1-api-1-log"]["probe"]["argv"][:3] == ["docker", "exec", "h1-api-1-log"]


def test_limits_are_what_the_scheduler_reserved():
    services = copy.deepcopy(SERVICES)
    services["api"]["resources"] = {"cpu": "1500m", "memory": "64Mi"}
    services["log"]["resources"] = {"cpu": 0.05}
    specs = by_name(containers(services=services))
    assert (specs["h1-api-0"]["cpus"], specs["h1-api-0"]["memory"]) == ("1.500", 64 * MIB)
    # A sidecar gets its own reservation; what is not reserved is not limited.
    assert (specs["h1-api-0-log"]["cpus"], specs["h1-api-0-log"]["memory"]) == ("0.050", None)
    assert (specs["h1-db-0"]["cpus"], specs["h1-db-0"]["memory"]) == (None, None)


def test_no_limits_where_the_engine_cannot_enforce_them():
    services = copy.deepcopy(SERVICES)
    services["api"]["resources"] = {"cpu": 2, "memory": "1Gi"}
    specs = containers(services=services, limits=False)
    assert all(spec["cpus"] is None and spec["memory"] is None for spec in specs)


def test_limits_change_the_spec_hash_only_when_set():
    services = copy.deepcopy(SERVICES)
    services["api"]["resources"] = {"cpu": "500m"}
    without = containers(services=services, limits=False)
    limited = containers(services=services)
    before = {c["name"]: c["labels"][SPEC_HASH] for c in rollout(HOST, without, rendered_for(without), [])["containers"]}
    after = {c["name"]: c["labels"][SPEC_HASH] for c in rollout(HOST, limited, rendered_for(limited), [])["containers"]}
    changed = sorted(name for name in before if before[name] != after[name])
    # The apis get a limit (their sidecars are recreated with them); the rest keep their hashes.
    assert changed == ["h1-api-0", "h1-api-0-log", "h1-api-1", "h1-api-1-log"]


def test_unknown_engine():
    with pytest.raises(DeployError) as caught:
        containers(engine="lxc")
    assert str(caught.value) == "engine: got 'lxc'; expected one of podman, docker"


def test_a_placed_service_without_an_image():
    services = copy.deepcopy(SERVICES)
    del services["db"]["image"]
    with pytest.raises(DeployError) as caught:
        containers(services=services)
    assert str(caught.value) == "services.db.image: is required to deploy it (an image reference such as localhost/app:1)"


def test_every_missing_image_is_named_sidecars_and_unknown_services_too():
    services = copy.deepcopy(SERVICES)
    del services["log"]["image"]
    del services["db"]["image"]
    instances = dict(INSTANCES, **{"gone-0": binding("gone", 0, 0)})
    with pytest.raises(DeployError) as caught:
        containers(instances=instances, services=services)
    assert str(caught.value).split("; ") == [
        "services.db.image: is required to deploy it (an image reference such as localhost/app:1)",
        "services.gone.image: is required to deploy it (an image reference such as localhost/app:1)",
        "services.log.image: is required to deploy it (an image reference such as localhost/app:1)"]


def test_an_unplaced_service_needs_no_image():
    services = copy.deepcopy(SERVICES)
    del services["job"]["image"]
    assert len(containers(services=services)) == 6


def test_a_bad_catalog_changes_nothing():
    services = copy.deepcopy(SERVICES)
    services["api"]["restart_policy"] = "sometimes"
    services["db"]["health"] = {"tcp": {"port": 1}}
    with pytest.raises(DeployError) as caught:
        containers(services=services)
    assert str(caught.value).splitlines() == [
        "the catalog is not valid; nothing was changed:",
        "services.db.health.tcp.port: got 1; expected one of the service's ports (5432)",
        'services.api.restart_policy: got "sometimes"; expected one of no, on-failure, always, unless-stopped']


# -- rollout ----------------------------------------------------------------------------------------------------------

def test_first_rollout_creates_everything():
    specs = containers()
    planned = rollout(HOST, specs, rendered_for(specs), [])
    assert [container["action"] for container in planned["containers"]] == ["create"] * 6
    assert planned["stale"] == []
    assert planned["summary"] == {"start": [spec["name"] for spec in specs], "restart": [], "stop": [], "keep": []}
    for container, spec in zip(planned["containers"], specs):
        assert re.fullmatch("[0-9a-f]{64}", container["labels"][CONFIG_HASH])
        assert re.fullmatch("[0-9a-f]{64}", container["labels"][SPEC_HASH])
        assert {key: value for key, value in container["labels"].items() if key not in (CONFIG_HASH, SPEC_HASH)} == spec["labels"]
        assert CONFIG_HASH not in spec["labels"]       # the input is not changed


def test_a_second_rollout_keeps_everything():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    second = rollout(HOST, containers(), rendered_for(specs), as_deployed(first))
    assert [container["action"] for container in second["containers"]] == ["keep"] * 6
    assert second["summary"] == {"start": [], "restart": [], "stop": [], "keep": [spec["name"] for spec in specs]}
    assert [c["labels"] for c in second["containers"]] == [c["labels"] for c in first["containers"]]


def test_a_stopped_container_is_started():
    specs = containers()
    existing = as_deployed(rollout(HOST, specs, rendered_for(specs), []))
    existing[0]["State"]["Running"] = False
    planned = rollout(HOST, specs, rendered_for(specs), existing)
    assert planned["containers"][0]["action"] == "start"
    assert planned["summary"]["start"] == ["h1-db-0"] and len(planned["summary"]["keep"]) == 5


def test_a_config_change_recreates_that_container_and_its_sidecars_only():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    changed = rendered_for(specs, {DATA + "/h1-api-0/config/0-api.conf": "log_level = debug\n"})
    second = rollout(HOST, specs, changed, as_deployed(first))
    actions = {c["name"]: c["action"] for c in second["containers"]}
    assert actions == {"h1-db-0": "keep", "h1-api-0": "recreate", "h1-api-0-log": "recreate", "h1-api-1": "keep",
                       "h1-api-1-log": "keep", "h1-infer-0": "keep"}
    assert second["summary"]["restart"] == ["h1-api-0", "h1-api-0-log"]
    before, after = by_name(first["containers"]), by_name(second["containers"])
    assert after["h1-api-0"]["labels"][CONFIG_HASH] != before["h1-api-0"]["labels"][CONFIG_HASH]
    assert after["h1-api-0"]["labels"][SPEC_HASH] != before["h1-api-0"]["labels"][SPEC_HASH]
    assert after["h1-api-0-log"]["labels"][CONFIG_HASH] == before["h1-api-0-log"]["labels"][CONFIG_HASH]
    assert after["h1-api-0-log"]["labels"][SPEC_HASH] != before["h1-api-0-log"]["labels"][SPEC_HASH]
    assert after["h1-api-1"]["labels"] == before["h1-api-1"]["labels"]


def test_a_sidecar_change_does_not_recreate_its_instance():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    services = copy.deepcopy(SERVICES)
    services["log"]["image"] = "localhost/log:2"
    second = rollout(HOST, containers(services=services), rendered_for(specs), as_deployed(first))
    assert second["summary"]["restart"] == ["h1-api-0-log", "h1-api-1-log"]


def test_a_spec_change_recreates_every_instance_of_the_service():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    services = copy.deepcopy(SERVICES)
    services["api"]["env"]["API_LOG_LEVEL"] = "debug"
    second = rollout(HOST, containers(services=services), rendered_for(specs), as_deployed(first))
    assert second["summary"]["restart"] == ["h1-api-0", "h1-api-0-log", "h1-api-1", "h1-api-1-log"]
    assert second["summary"]["keep"] == ["h1-db-0", "h1-infer-0"]


def test_hashes_ignore_the_order_of_mappings():
    specs = containers()
    reordered = copy.deepcopy(specs)
    for spec in reordered:
        spec["env"] = dict(reversed(list(spec["env"].items())))
        spec["labels"] = dict(reversed(list(spec["labels"].items())))
    first = rollout(HOST, specs, rendered_for(specs), [])
    second = rollout(HOST, reordered, rendered_for(specs), [])
    assert [c["labels"][SPEC_HASH] for c in first["containers"]] == [c["labels"][SPEC_HASH] for c in second["containers"]]


def test_stale_containers_of_this_host_only_sidecars_first():
    specs = containers()
    managed = {"gangplank.io/managed": "true", "gangplank.io/node": HOST}
    existing = as_deployed(rollout(HOST, specs, rendered_for(specs), [])) + [
        inspect("h1-web-0", labels=dict(managed, **{"gangplank.io/instance": "web-0"})),
        inspect("h1-web-0-log", running=False, labels=dict(managed, **{"gangplank.io/sidecar-of": "h1-web-0"})),
        inspect("h1-api-2", labels=dict(managed, **{"gangplank.io/instance": "api-2"})),
        inspect("h2-web-0", labels={"gangplank.io/managed": "true", "gangplank.io/node": "h2"}),
        inspect("postgres", labels={"maintainer": "me"}),
        inspect("h1-old", labels=None),
        inspect("h1-half", labels={"gangplank.io/managed": "false", "gangplank.io/node": HOST}),
    ]
    planned = rollout(HOST, specs, rendered_for(specs), existing)
    assert planned["stale"] == ["h1-web-0-log", "h1-api-2", "h1-web-0"]
    assert planned["summary"]["stop"] == planned["stale"]
    assert len(planned["summary"]["keep"]) == 6


def test_a_name_taken_by_an_unmanaged_container():
    specs = containers()
    for labels in (None, {"gangplank.io/node": HOST}, {"gangplank.io/managed": "false"}):
        with pytest.raises(DeployError) as caught:
            rollout(HOST, specs, rendered_for(specs), [inspect("h1-api-0", labels=labels)])
        assert str(caught.value) == "container h1-api-0 exists but is not managed by gangplank; rename or remove it, then run again"


def test_docker_inspect_names_start_with_a_slash():
    specs = containers()
    existing = as_deployed(rollout(HOST, specs, rendered_for(specs), []))
    for item in existing:
        item["Name"] = "/" + item["Name"]
    assert len(rollout(HOST, specs, rendered_for(specs), existing)["summary"]["keep"]) == 6


def docker_listed(item):
    """A container as Docker's container list (community.docker.docker_host_info, verbose) shows it."""
    return {"Id": "0123", "Names": ["/" + item["Name"]], "State": "running" if item["State"]["Running"] else "exited",
            "Labels": item["Config"]["Labels"] or {}, "Ports": [{"IP": "0.0.0.0", "PrivatePort": 8080, "PublicPort": 8080, "Type": "tcp"}]}


def test_dockers_container_list_reads_like_inspect_data():
    specs = containers()
    deployed = as_deployed(rollout(HOST, specs, rendered_for(specs), []))
    listed = [docker_listed(item) for item in deployed]
    assert len(rollout(HOST, specs, rendered_for(specs), listed)["summary"]["keep"]) == 6
    listed[0]["State"] = "exited"
    assert rollout(HOST, specs, rendered_for(specs), listed)["containers"][0]["action"] == "start"


def test_a_stale_container_in_dockers_list_holding_a_port_is_evicted():
    specs = containers()
    stale = docker_listed(inspect("h1-api-7", labels={"gangplank.io/managed": "true", "gangplank.io/node": HOST,
                                                      "gangplank.io/instance": "api-7"}))
    planned = rollout(HOST, specs, rendered_for(specs), [stale])
    assert planned["stale"] == ["h1-api-7"] and planned["evict"] == [{"rank": 1, "name": "h1-api-7"}]


# -- status -----------------------------------------------------------------------------------------------------------

def test_status_rows_states_and_health():
    specs = containers()
    existing = [inspect("h1-db-0"), inspect("h1-api-0", running=False), inspect("h1-api-0-log"), inspect("h1-infer-0")]
    probes = {"h1-db-0": {"healthy": True}, "h1-api-0": {"healthy": False, "last_output": "connection refused " * 10},
              "h1-api-0-log": {"healthy": None}}
    rows = {row["container"]: row for row in status_rows(HOST, specs, existing, probes)}
    assert rows["h1-db-0"] == {"node": "h1", "rank": 0, "instance": "db-0", "container": "h1-db-0", "service": "db",
                               "state": "running", "health": "healthy", "ports": "5432:5432"}
    assert rows["h1-api-0"]["state"] == "stopped"
    assert rows["h1-api-0"]["health"] == "unhealthy: " + ("connection refused " * 10)[:60]
    assert rows["h1-api-0"]["ports"] == "8080:8080,9100:9100"
    assert (rows["h1-api-0-log"]["state"], rows["h1-api-0-log"]["health"]) == ("running", "not probed")
    assert (rows["h1-api-1"]["state"], rows["h1-api-1"]["health"]) == ("missing", "not probed")
    assert (rows["h1-infer-0"]["state"], rows["h1-infer-0"]["health"]) == ("running", "no probe")
    assert status_rows(HOST, specs[:1], [], {"h1-db-0": {"healthy": False}})[0]["health"] == "unhealthy: "


def test_render_status():
    rows = [
        {"node": "h2", "rank": 1, "instance": "api-1", "container": "h2-api-1", "service": "api", "state": "running",
         "health": "unhealthy: HTTP 503", "ports": "8080:8080"},
        {"node": "h1", "rank": 1, "instance": "api-0", "container": "h1-api-0", "service": "api", "state": "running",
         "health": "healthy", "ports": "8080:8080"},
        {"node": "h1", "rank": 0, "instance": "db-0", "container": "h1-db-0", "service": "db", "state": "missing",
         "health": "not probed", "ports": ""},
        {"node": "h1", "rank": 2, "instance": "job-0", "container": "h1-job-0", "service": "job", "state": "running",
         "health": "no probe", "ports": ""},
    ]
    assert render_status(rows) == [
        "rank  node  instance  service  container  state    health               ports",
        "0     h1    db-0      db       h1-db-0    missing  not probed",
        "1     h1    api-0     api      h1-api-0   running  healthy              8080:8080",
        "1     h2    api-1     api      h2-api-1   running  unhealthy: HTTP 503  8080:8080",
        "2     h1    job-0     job      h1-job-0   running  no probe",
        "2 of 4 container(s) running and healthy",
    ]


def test_render_status_of_nothing():
    assert render_status([]) == ["rank  node  instance  service  container  state  health  ports",
                                 "0 of 0 container(s) running and healthy"]


def test_status_of_a_stopped_container_that_was_healthy_does_not_count():
    specs = containers(instances={"db-0": INSTANCES["db-0"]})
    rows = status_rows(HOST, specs, [inspect("h1-db-0", running=False)], {"h1-db-0": {"healthy": True}})
    assert render_status(rows)[-1] == "0 of 1 container(s) running and healthy"


def test_a_stale_container_holding_a_port_a_new_one_needs_goes_before_that_rank():
    planned = containers()
    api = by_name(planned)["h1-api-0"]
    # An old "web" instance of this host published 8080, which api-0 (rank 1) now needs; its sidecar goes first.
    old_web = inspect("h1-web-3", labels={"gangplank.io/managed": "true", "gangplank.io/node": "h1", "gangplank.io/instance": "web-3"})
    old_web["HostConfig"] = {"PortBindings": {"8080/tcp": [{"HostIp": "127.0.0.11", "HostPort": "8080"}]}}
    old_side = inspect("h1-web-3-log", labels={"gangplank.io/managed": "true", "gangplank.io/node": "h1",
                                               "gangplank.io/instance": "web-3", "gangplank.io/sidecar-of": "h1-web-3"})
    other = inspect("h1-old-0", labels={"gangplank.io/managed": "true", "gangplank.io/node": "h1", "gangplank.io/instance": "old-0"})
    other["HostConfig"] = {"PortBindings": {"7000/tcp": [{"HostIp": "", "HostPort": "7000"}]}}
    result = rollout("h1", planned, rendered_for(planned), [old_web, old_side, other])
    assert api["rank"] == 1
    assert result["evict"] == [{"rank": 1, "name": "h1-web-3-log"}, {"rank": 1, "name": "h1-web-3"}]
    assert sorted(result["stale"]) == ["h1-old-0", "h1-web-3", "h1-web-3-log"]


def test_nothing_is_evicted_for_a_container_that_is_kept():
    planned = containers()
    deployed = as_deployed(rollout("h1", planned, rendered_for(planned), []))
    old_web = inspect("h1-web-3", labels={"gangplank.io/managed": "true", "gangplank.io/node": "h1", "gangplank.io/instance": "web-3"})
    old_web["HostConfig"] = {"PortBindings": {"8080/tcp": [{"HostIp": "", "HostPort": "8080"}]}}
    result = rollout("h1", planned, rendered_for(planned), deployed + [old_web])
    assert result["evict"] == [] and result["stale"] == ["h1-web-3"]


def test_every_node_instance_container_and_a_preempted_instance_is_removed():
    """An every-node instance <service>@<host> runs as <host>-<service>; a preemptible instance the plan left
    out is no longer bound to the host, so its running container is stale and stopped."""
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
    assert container_name("h1", "agent@h1") == "h1-agent"
    services = dict(SERVICES, agent={"every_node": True, "image": "localhost/agent:1"},
                    batch={"replicas": 2, "preemptible": True, "image": "localhost/batch:1", "resources": {"cpu": 1}})
    keys = ("every_node", "replicas", "preemptible", "resources", "sidecars", "sidecar")
    scheduling = {name: {key: value for key, value in spec.items() if key in keys}
                  for name, spec in services.items() if name in ("agent", "batch", "job")}
    planned = plan({"nodes": {HOST: {"cpu": 1, "memory": "1Gi"}}, "services": scheduling,
                    "previous": {"batch-0": {"node": HOST}, "batch-1": {"node": HOST}}})
    assert list(planned["preempted"]) == ["batch-1"]
    instances = {name: dict(placement, rank=0) for name, placement in planned["placements"].items()}
    specs = containers(instances, services)
    assert sorted(by_name(specs)) == ["h1-agent", "h1-batch-0", "h1-job-0"]
    managed = {"gangplank.io/managed": "true", "gangplank.io/node": HOST}
    existing = as_deployed(rollout(HOST, specs, rendered_for(specs), [])) + [
        inspect("h1-batch-1", labels=dict(managed, **{"gangplank.io/instance": "batch-1"}))]
    assert rollout(HOST, specs, rendered_for(specs), existing)["stale"] == ["h1-batch-1"]


# -- waves ------------------------------------------------------------------------------------------------------------

def _changed_api_configs(specs, instances=("api-0", "api-1")):
    return rendered_for(specs, {DATA + "/h1-%s/config/0-api.conf" % name: "log_level = debug\n" for name in instances})


def test_waves_of_a_first_rollout_and_of_a_rollout_without_changes():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    assert waves([first], SERVICES) == {"active_ranks": [0, 1, 2], "waves": {"0": 1, "1": 1, "2": 1}, "wave_of": {}}
    again = rollout(HOST, containers(), rendered_for(specs), as_deployed(first))
    assert waves([again], SERVICES) == {"active_ranks": [], "waves": {}, "wave_of": {}}


def test_a_config_change_restarts_a_stateless_service_a_quarter_at_a_time_with_its_sidecars():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    second = rollout(HOST, specs, _changed_api_configs(specs), as_deployed(first))
    assert waves([second], SERVICES) == {"active_ranks": [1], "waves": {"1": 2}, "wave_of": {"h1-api-1": 1, "h1-api-1-log": 1}}
    # All at once when the catalog allows it.
    services = dict(SERVICES, api=dict(SERVICES["api"], max_unavailable="100%"))
    assert waves([second], services) == {"active_ranks": [1], "waves": {"1": 1}, "wave_of": {}}


def test_stateful_instances_restart_one_at_a_time_highest_ordinal_first_and_new_ones_start_in_the_first_wave():
    instances = {"db-%d" % n: binding("db", n, 0) for n in range(3)}
    services = dict(SERVICES, db=dict(SERVICES["db"], replicas=4))
    specs = containers(instances, services)
    first = rollout(HOST, specs, rendered_for(specs), [])
    instances["db-3"] = binding("db", 3, 0)
    changed = dict(services, db=dict(services["db"], env={"MODE": "new"}))
    second = rollout(HOST, containers(instances, changed), rendered_for(specs), as_deployed(first))
    assert {c["name"]: c["action"] for c in second["containers"]} == {
        "h1-db-0": "recreate", "h1-db-1": "recreate", "h1-db-2": "recreate", "h1-db-3": "create"}
    assert waves([second], changed) == {"active_ranks": [0], "waves": {"0": 3}, "wave_of": {"h1-db-1": 1, "h1-db-0": 2}}


def test_waves_count_a_service_over_every_host():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    second = rollout(HOST, specs, _changed_api_configs(specs, ["api-1"]), as_deployed(first))
    # Two hosts' rollouts: h1 restarts api-1 only, the other restarts nothing.
    idle = rollout(HOST, specs, rendered_for(specs), as_deployed(first))
    assert waves([idle, second], SERVICES) == {"active_ranks": [1], "waves": {"1": 1}, "wave_of": {}}


def test_waves_name_a_bad_catalog():
    with pytest.raises(DeployError, match="services.api.max_unavailable"):
        waves([], dict(SERVICES, api=dict(SERVICES["api"], max_unavailable="0%")))


def test_desired_on_hosts_is_each_hosts_desired_containers_and_names_the_host_of_an_error():
    settings = {"h1": {"instances": copy.deepcopy(INSTANCES), "data_dir": DATA, "engine": "docker", "limits": False},
                "idle": {"instances": {}, "data_dir": DATA}}
    assert desired_on_hosts(settings, copy.deepcopy(SERVICES)) == {
        "h1": containers(engine="docker", limits=False), "idle": []}
    with pytest.raises(DeployError, match=r"^idle: gpu_mode: got 'x'"):
        desired_on_hosts({"idle": {"instances": {}, "data_dir": DATA, "gpu_mode": "x"}}, SERVICES)
    for bad in ({"instances": {}}, {"instances": {}, "data_dir": DATA, "other": 1}, ["not", "a", "dict"]):
        with pytest.raises(DeployError, match="^h1: expected instances and data_dir, and only data_dir, endpoints, engine"):
            desired_on_hosts({"h1": bad}, SERVICES)
    with pytest.raises(DeployError, match=r"^\"\.\./x\": host .*the inventory name is not"):
        desired_on_hosts({"../x": {"instances": {}, "data_dir": DATA}}, SERVICES)


# -- decide: every host at once ---------------------------------------------------------------------------------------

def test_decide_is_each_hosts_rollout_and_the_waves_over_all_of_them():
    specs = containers()
    first = rollout(HOST, specs, rendered_for(specs), [])
    changed = _changed_api_configs(specs, ["api-1"])
    decision = decide(["h1", "idle"], [specs, []], [changed, {}], [as_deployed(first), []], SERVICES,
                      notes=["", "; no limits"])
    assert decision["rollouts"]["h1"] == rollout(HOST, specs, changed, as_deployed(first))
    assert decision["rollouts"]["idle"] == rollout("idle", [], {}, [])
    assert decision["waves"] == waves([decision["rollouts"]["h1"], decision["rollouts"]["idle"]], SERVICES)
    assert decision["lines"] == {
        "h1": "start 0 [], restart 2 ['h1-api-1', 'h1-api-1-log'], stop 0 [], keep 4",
        "idle": "start 0 [], restart 0 [], stop 0 [], keep 0; no limits"}
    # h1 restarts in the api's rank, so it is not idle; its db (rank 0) is kept, and probed.
    assert decision["idle"] == ["idle"]
    active = set(decision["waves"]["active_ranks"])
    assert decision["kept"] == {"h1": [c for c in decision["rollouts"]["h1"]["containers"]
                                       if c["rank"] not in active and c["probe"]]}
    assert decision["kept"]["h1"]
    # Nothing changes: every host is idle, and each probes what it keeps.
    calm = decide(["h1", "idle"], [specs, []], [rendered_for(specs), {}], [as_deployed(first), []], SERVICES)
    assert calm["idle"] == ["h1", "idle"] and list(calm["kept"]) == ["h1"]


def test_decide_lines_in_check_mode_and_without_notes():
    specs = containers()
    decision = decide(["h1"], [specs], [rendered_for(specs)], [[]], SERVICES, check_mode=True)
    assert decision["lines"]["h1"] == "would start 6 %s, restart 0 [], stop 0 [], keep 0" % [spec["name"] for spec in specs]
    assert summary_line({"start": [], "restart": [], "stop": ["h1-x-0"], "keep": ["a"]}) == "start 0 [], restart 0 [], stop 1 ['h1-x-0'], keep 1"


def test_decide_names_the_host_whose_rollout_fails_and_lists_that_do_not_match():
    specs = containers()
    unmanaged = [{"Name": specs[0]["name"], "State": {"Running": True}, "Config": {"Labels": {}}, "HostConfig": {}}]
    with pytest.raises(DeployError, match="^h2: container h1-db-0 exists but is not managed by gangplank"):
        decide(["h1", "h2"], [[], specs], [{}, rendered_for(specs)], [[], unmanaged], SERVICES)
    with pytest.raises(DeployError, match="2 hosts, but 2/1/2 entries"):
        decide(["h1", "h2"], [[], []], [{}], [[], []], SERVICES)
    assert decide([], [], [], [], SERVICES) == {"rollouts": {}, "waves": {"active_ranks": [], "waves": {}, "wave_of": {}},
                                                "lines": {}, "idle": [], "kept": {}}


def test_redact_masks_the_catalogs_env_values_longest_first_and_not_gangplanks_own():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import MASK, redact

    specs = [{"name": "h1-api-0", "env": {"GANGPLANK_INSTANCE": "api-0", "DB_PASSWORD": "hunter2hunter2", "PART": "hunter2",
                                          "LEVEL": "inf"}},
             {"name": "h1-db-0", "env": {"TOKEN": 12345}}]
    text = "h1-api-0: podman run --env DB_PASSWORD=hunter2hunter2 --env PART=hunter2 --env TOKEN=12345 LEVEL=inf"
    assert redact(text, specs) == "h1-api-0: podman run --env DB_PASSWORD=%s --env PART=%s --env TOKEN=%s LEVEL=inf" % (MASK, MASK, MASK)
    assert redact("nothing here", []) == "nothing here"
    # The catalog's secrets (by variable): their values too, whatever their delivery.
    assert redact("--secret x; value sekrit-file-value; key", [], {"demo_db_password": "sekrit-file-value", "short": "key"}) == \
        "--secret x; value %s; key" % MASK


# --- cpu_pinning numa ------------------------------------------------------------------------------------------------

def _pinned_instances(cpus="0-15,32-47", mems="0"):
    instances = copy.deepcopy(INSTANCES)
    instances["api-0"].update(cpuset_cpus=cpus, cpuset_mems=mems)
    return instances


def test_a_pinned_instance_and_its_sidecar_get_the_cpusets_of_its_placement():
    specs = by_name(containers(instances=_pinned_instances()))
    for name in ("h1-api-0", "h1-api-0-log"):
        assert (specs[name]["cpuset_cpus"], specs[name]["cpuset_mems"]) == ("0-15,32-47", "0")
    assert not any(key.startswith("cpuset") for name in ("h1-api-1", "h1-db-0", "h1-infer-0") for key in specs[name])


def test_unpinned_specs_and_hashes_stay_byte_identical():
    plain = containers()
    pinned = containers(instances=_pinned_instances())
    untouched = [c for c in pinned if c["instance"] != "api-0"]
    assert untouched == [c for c in plain if c["instance"] != "api-0"]
    before = {c["name"]: c["labels"][SPEC_HASH] for c in rollout(HOST, plain, rendered_for(plain), [])["containers"]}
    after = {c["name"]: c["labels"][SPEC_HASH] for c in rollout(HOST, pinned, rendered_for(pinned), [])["containers"]}
    # Pinning recreates the pinned instance with its sidecar; another cpuset would too.
    assert sorted(name for name in before if before[name] != after[name]) == ["h1-api-0", "h1-api-0-log"]
    moved = containers(instances=_pinned_instances("16-31,48-63", "1"))
    again = {c["name"]: c["labels"][SPEC_HASH] for c in rollout(HOST, moved, rendered_for(moved), [])["containers"]}
    assert again["h1-api-0"] != after["h1-api-0"] and again["h1-api-1"] == after["h1-api-1"]


@pytest.mark.parametrize("cpus, mems, message", [
    ("0-3\n", "0", "instances.api-0.cpuset_cpus: got \"0-3\\n\"; expected a Linux cpulist"),
    ("0-99999", "0", "instances.api-0.cpuset_cpus: got \"0-99999\"; expected a Linux cpulist"),
    ("0-3", "1-0", "instances.api-0.cpuset_mems: got \"1-0\"; expected a Linux cpulist"),
    ("0-3", None, "instances.api-0.cpuset_mems: got null; expected a Linux cpulist"),
])
def test_a_corrupted_cpuset_in_a_binding_is_refused(cpus, mems, message):
    with pytest.raises(DeployError) as caught:
        containers(instances=_pinned_instances(cpus, mems))
    assert message in str(caught.value)
    instances = _pinned_instances()
    del instances["api-0"]["cpuset_mems"]
    with pytest.raises(DeployError, match="expected cpuset_cpus and cpuset_mems together"):
        containers(instances=instances)
