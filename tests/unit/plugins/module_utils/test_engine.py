# -*- coding: utf-8 -*-
"""One container spec as the engine modules' arguments: exactly what the deploy role's YAML tasks passed before
(roles/deploy/tasks/wave.yml with YAML anchors: ``omit`` for an empty option, memory as a string, Docker's cpus as a
float, pull never, GPUs as a CDI device request, Docker's env secrets merged into the env)."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import desired_containers, rollout
from ansible_collections.gangplank.platform.plugins.module_utils.engine import (
    EngineError, docker_arguments, podman_arguments, remove_call, start_call,
)

MIB = 1024 * 1024
SERVICES = {
    "api": {"ports": [8080], "sidecars": ["log"], "image": "localhost/api:1", "command": ["serve", "--port", 8080],
            "env": {"LEVEL": "info"}, "resources": {"cpu": "500m", "memory": "64Mi"},
            "config": [{"dest": "/etc/api.conf", "content": "x\n"}],
            "secrets": {"db_password": {"var": "vault_db", "target": "/run/secrets/db"},
                        "token": {"var": "vault_token", "env": "API_TOKEN"}}},
    "log": {"sidecar": True, "image": "localhost/log:1"},
    "gpu": {"image": "localhost/gpu:1", "resources": {"gpu": {"count": 1}}},
}
SECRETS = {"vault_db": "db-secret-value", "vault_token": "token-secret-value"}


def specs(engine, limits=True):
    instances = {
        "api-0": {"service": "api", "ordinal": 0, "rank": 0, "sidecars": ["log"]},
        "gpu-0": {"service": "gpu", "ordinal": 0, "rank": 1,
                  "gpus": [{"uuid": "GPU-aaa", "memory": 1024 * MIB}]},
    }
    containers = desired_containers("h1", instances, SERVICES, "/data", publish_address="127.0.0.2", engine=engine,
                                    limits=limits, secret_dir="/run/gangplank/secrets")
    rendered = {entry["path"]: "x\n" for container in containers for entry in container["config"]}
    hashes = {"vault_db": "hmac-sha256:1", "vault_token": "hmac-sha256:2"}
    return {c["name"]: c for c in rollout("h1", containers, rendered, [], secret_hashes=hashes)["containers"]}


def test_podman_arguments_are_what_the_yaml_passed():
    planned = specs("podman")
    api, log, gpu = planned["h1-api-0"], planned["h1-api-0-log"], planned["h1-gpu-0"]
    assert podman_arguments(api) == {
        "name": "h1-api-0", "image": "localhost/api:1", "command": ["serve", "--port", "8080"], "env": api["env"],
        "publish": ["127.0.0.2:8080:8080"], "volume": api["volumes"], "cpus": "0.500", "memory": str(64 * MIB),
        "init": False, "stop_timeout": api["stop_timeout"], "restart_policy": api["restart_policy"],
        "label": api["labels"], "secrets": api["podman_secrets"], "recreate": False, "state": "started"}
    assert api["podman_secrets"] and all("db-secret" not in option for option in api["podman_secrets"])
    # The sidecar: no ports, devices, volumes, limits or secrets (omitted), in its instance's network.
    assert podman_arguments(log, recreate=True) == {
        "name": "h1-api-0-log", "image": "localhost/log:1", "env": log["env"], "network": "container:h1-api-0",
        "init": False, "stop_timeout": log["stop_timeout"], "restart_policy": log["restart_policy"],
        "label": log["labels"], "recreate": True, "state": "started"}
    assert podman_arguments(gpu)["device"] == ["nvidia.com/gpu=GPU-aaa"]
    assert "command" not in podman_arguments(gpu)
    # Without limits (an engine that cannot enforce them): neither cpus nor memory.
    unlimited = podman_arguments(specs("podman", limits=False)["h1-api-0"])
    assert "cpus" not in unlimited and "memory" not in unlimited


def test_docker_arguments_are_what_the_yaml_passed_env_secrets_merged():
    planned = specs("docker")
    api, log, gpu = planned["h1-api-0"], planned["h1-api-0-log"], planned["h1-gpu-0"]
    assert docker_arguments(api, SECRETS) == {
        "name": "h1-api-0", "image": "localhost/api:1", "pull": "never", "command": ["serve", "--port", "8080"],
        "env": dict(api["env"], API_TOKEN="token-secret-value"), "published_ports": ["127.0.0.2:8080:8080"],
        "volumes": api["volumes"], "mounts": api["mounts"], "cpus": 0.5, "memory": str(64 * MIB),
        "init": False, "stop_timeout": api["stop_timeout"], "restart_policy": api["restart_policy"],
        "labels": api["labels"], "recreate": False, "state": "started"}
    assert api["mounts"] == [{"type": "bind", "source": "/run/gangplank/secrets/h1-api-0/db_password",
                              "target": "/run/secrets/db", "read_only": True}]
    assert "API_TOKEN" not in api["env"], "the spec holds no value"
    assert docker_arguments(log, {}, recreate=True) == {
        "name": "h1-api-0-log", "image": "localhost/log:1", "pull": "never", "env": log["env"],
        "network_mode": "container:h1-api-0", "init": False, "stop_timeout": log["stop_timeout"],
        "restart_policy": log["restart_policy"], "labels": log["labels"], "recreate": True, "state": "started"}
    assert docker_arguments(gpu, {})["device_requests"] == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=GPU-aaa"]}]


def test_a_missing_secret_value_names_the_variable_not_a_value():
    api = specs("docker")["h1-api-0"]
    with pytest.raises(EngineError, match="^h1-api-0: the value of vault_token \\(secret token\\) was not given$"):
        docker_arguments(api, {"vault_db": "db-secret-value"})


def test_calls_name_the_module_and_refuse_an_unknown_engine():
    api = specs("podman")["h1-api-0"]
    assert start_call("podman", api) == ("containers.podman.podman_container", podman_arguments(api))
    assert start_call("docker", api, SECRETS, True)[0] == "community.docker.docker_container"
    assert remove_call("docker", "h1-x") == ("community.docker.docker_container", {"name": "h1-x", "state": "absent"})
    assert remove_call("podman", "h1-x") == ("containers.podman.podman_container", {"name": "h1-x", "state": "absent"})
    for call in (lambda: start_call("lxc", api), lambda: remove_call("lxc", "x")):
        with pytest.raises(EngineError, match="engine: got 'lxc'"):
            call()


def test_cpusets_passed_to_both_engines_only_when_pinned():
    instances = {"gpu-0": {"service": "gpu", "ordinal": 0, "rank": 0, "gpus": [{"uuid": "GPU-aaa", "memory": 1024 * MIB}],
                           "cpuset_cpus": "0-15,32-47", "cpuset_mems": "0"},
                 "api-0": {"service": "api", "ordinal": 0, "rank": 0, "sidecars": ["log"]}}
    for engine in ("podman", "docker"):
        built = {c["name"]: c for c in desired_containers("h1", instances, SERVICES, "/data", engine=engine,
                                                          secret_dir="/run/gangplank/secrets")}
        arguments = podman_arguments(built["h1-gpu-0"]) if engine == "podman" else docker_arguments(built["h1-gpu-0"], {})
        assert (arguments["cpuset_cpus"], arguments["cpuset_mems"]) == ("0-15,32-47", "0")
        plain = podman_arguments(built["h1-api-0"]) if engine == "podman" else docker_arguments(built["h1-api-0"], SECRETS)
        assert "cpuset_cpus" not in plain and "cpuset_mems" not in plain
