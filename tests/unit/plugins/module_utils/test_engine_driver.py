# -*- coding: utf-8 -*-
"""The engine drivers: one container spec as the engine modules' arguments (``omit`` for an empty option, memory as a
string, Docker's cpus as a float, pull never, GPUs as a CDI device request, Docker's env secrets merged into the env),
the same for representative specs as before the option table (fixtures/container_specs_pinned.json); a container's
secrets before it, and after it on removal, by the names given."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import desired_containers, rollout
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import (
    BRIDGE_COMMAND, OPTIONS, Call, EngineError, bridge_warnings, driver,
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


def podman_arguments(spec, recreate=False):
    return driver("podman").container_arguments(spec, recreate=recreate)


def docker_arguments(spec, secret_values, recreate=False):
    return driver("docker").container_arguments(spec, secret_values, recreate=recreate)


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


def test_an_unknown_engine_is_refused():
    with pytest.raises(EngineError, match="^engine: got 'lxc'; expected one of docker, podman$"):
        driver("lxc")


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


# --- start and remove calls --------------------------------------------------------------------------------------

def test_podman_makes_a_created_containers_secrets_first_then_the_container():
    api = specs("podman")["h1-api-0"]
    calls = driver("podman").start_calls(api, SECRETS)
    assert [call.module for call in calls] == ["containers.podman.podman_secret"] * 2 + ["containers.podman.podman_container"]
    assert calls[0] == Call("containers.podman.podman_secret", {"name": "h1-api-0.db_password", "data": "db-secret-value",
                                                                "force": True, "state": "present"}, True)
    assert calls[1].args["name"] == "h1-api-0.token" and calls[1].args["data"] == "token-secret-value" and calls[1].no_log
    assert calls[2] == Call("containers.podman.podman_container", podman_arguments(api), False)
    # A container that only starts keeps the secrets it was made with; the retry (recreate) makes them anew.
    started = dict(api, action="start")
    assert [call.module for call in driver("podman").start_calls(started, SECRETS)] == ["containers.podman.podman_container"]
    assert len(driver("podman").start_calls(started, SECRETS, recreate=True)) == 3
    # Without secrets, the container alone.
    assert driver("podman").start_calls(specs("podman")["h1-gpu-0"]) == [
        Call("containers.podman.podman_container", podman_arguments(specs("podman")["h1-gpu-0"]), False)]


def test_docker_writes_the_private_directories_and_files_first_then_the_container():
    api = specs("docker")["h1-api-0"]
    calls = driver("docker").start_calls(dict(api, action="start"), SECRETS)
    assert calls == [
        Call("ansible.builtin.file", {"path": "/run/gangplank/secrets", "state": "directory", "mode": "0700"}, False),
        Call("ansible.builtin.file", {"path": "/run/gangplank/secrets/h1-api-0", "state": "directory", "mode": "0700"}, False),
        Call("ansible.builtin.copy", {"dest": "/run/gangplank/secrets/h1-api-0/db_password", "content": "db-secret-value",
                                      "mode": api["secrets"][0]["mode"]}, True),
        Call("community.docker.docker_container", docker_arguments(dict(api, action="start"), SECRETS), False)]
    owned = dict(api, secrets=[dict(api["secrets"][0], uid=1000, gid=0), api["secrets"][1]])
    assert driver("docker").start_calls(owned, SECRETS)[2].args == {
        "dest": "/run/gangplank/secrets/h1-api-0/db_password", "content": "db-secret-value",
        "mode": api["secrets"][0]["mode"], "owner": 1000, "group": 0}


def test_a_missing_secret_value_stops_before_any_call():
    for engine in ("podman", "docker"):
        with pytest.raises(EngineError, match="^h1-api-0: the value of vault_db \\(secret db_password\\) was not given$"):
            driver(engine).start_calls(specs(engine)["h1-api-0"], {"vault_token": "token-secret-value"})


def test_removal_is_the_container_then_its_secrets_by_the_names_given():
    podman, docker = driver("podman"), driver("docker", "/run/gangplank/secrets")
    found = ["h1-api-0.db_password", "h1-api-0.token", "h1-api-0-log.key", "h1-api-01.token", "h1-api-0x"]
    assert podman.owned_secrets("h1-api-0", found) == ["h1-api-0.db_password", "h1-api-0.token"]
    assert podman.owned_secrets("h1-api-0.x", ["h1-api-0.x.y", "h1-api-0.xy"]) == ["h1-api-0.x.y"]
    # An MPS daemon (<instance>.mps) owns no secret: <instance>.mps.key is its instance's secret named mps.key.
    assert podman.owned_secrets("h1-api-0.mps", ["h1-api-0.mps.key", "h1-api-0.token"]) == []
    assert podman.remove_calls("h1-api-0", podman.owned_secrets("h1-api-0", found)) == [
        Call("containers.podman.podman_container", {"name": "h1-api-0", "state": "absent"}, False),
        Call("containers.podman.podman_secret", {"name": "h1-api-0.db_password", "state": "absent"}, False),
        Call("containers.podman.podman_secret", {"name": "h1-api-0.token", "state": "absent"}, False)]
    # Docker's are the container's private directory, whatever the read found in it.
    assert docker.owned_secrets("h1-api-0", []) == ["h1-api-0"]
    assert docker.remove_calls("h1-api-0", ["h1-api-0"]) == [
        Call("community.docker.docker_container", {"name": "h1-api-0", "state": "absent"}, False),
        Call("ansible.builtin.file", {"path": "/run/gangplank/secrets/h1-api-0", "state": "absent"}, False)]
    # Secrets no container uses any more, without a container.
    assert docker.remove_calls(None, ["h1-web-0/token"]) == [
        Call("ansible.builtin.file", {"path": "/run/gangplank/secrets/h1-web-0/token", "state": "absent"}, False)]
    assert podman.remove_calls(None, []) == []
    with pytest.raises(EngineError, match="^secret_dir: not given"):
        driver("docker").remove_calls("h1-api-0", ["h1-api-0"])


def test_every_option_names_an_engines_option_once():
    for engine in ("podman", "docker"):
        names = [option.engines[engine][0] for option in OPTIONS.options if engine in option.engines]
        assert len(names) == len(set(names)) and "recreate" not in names and "state" not in names


# --- representative specs, pinned ---------------------------------------------------------------------------------
# The specs (spec hashes in their labels) and the engines' arguments of these specs as the code before the option table
# made them: a change here restarts containers on a running site.
PINNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "container_specs_pinned.json")
MPS_SERVICES = {
    "infer": {"replicas": 1, "ports": [9000], "sidecars": ["log"], "image": "localhost/infer:1",
              "resources": {"gpu": {"count": 1, "memory": "1536Mi"}, "cpu": 2, "memory": "1Gi"}},
    "log": {"sidecar": True, "image": "localhost/log:1"},
}


def representative_specs():
    """name -> spec for both engines, with and without limits, pinned CPUs and GPU shares under MPS."""
    out = {}
    for engine in ("podman", "docker"):
        for limits in (True, False):
            for name, spec in specs(engine, limits).items():
                out["%s/%s/%s" % (engine, limits, name)] = spec
        pinned = {"gpu-0": {"service": "gpu", "ordinal": 0, "rank": 0, "cpuset_cpus": "0-15,32-47", "cpuset_mems": "0",
                            "gpus": [{"uuid": "GPU-aaa", "memory": 1024 * MIB}]}}
        for spec in rollout("h1", desired_containers("h1", pinned, SERVICES, "/data", engine=engine,
                                                     secret_dir="/run/gangplank/secrets"), {}, [])["containers"]:
            out["%s/cpuset/%s" % (engine, spec["name"])] = spec
        shared = {"infer-0": {"service": "infer", "ordinal": 0, "rank": 0, "sidecars": ["log"], "node": "h1", "nvme": None,
                              "gpus": [{"index": 0, "uuid": "GPU-aaa", "memory": 1536 * MIB}]}}
        for spec in rollout("h1", desired_containers("h1", shared, MPS_SERVICES, "/data", engine=engine, gpu_sharing="mps",
                                                     mps_control="/usr/bin/nvidia-cuda-mps-control"), {}, [])["containers"]:
            out["%s/mps/%s" % (engine, spec["name"])] = spec
    return out


def pinned_entries(arguments):
    """``arguments(engine, spec)``: the engine module's arguments, for each representative spec."""
    return {key: {"spec": spec, "arguments": arguments(key.split("/")[0], spec)}
            for key, spec in sorted(representative_specs().items())}


def test_specs_hashes_and_arguments_are_the_pinned_ones():
    with open(PINNED, encoding="utf-8") as handle:
        pinned = json.load(handle)
    now = json.loads(json.dumps(pinned_entries(
        lambda engine, spec: driver(engine).container_arguments(spec, SECRETS, recreate=spec.get("action") == "recreate"))))
    assert sorted(now) == sorted(pinned) and len(pinned) == 20
    for key, entry in pinned.items():
        assert now[key]["spec"] == entry["spec"], key
        assert now[key]["spec"]["labels"]["gangplank.io/spec-hash"] == entry["spec"]["labels"]["gangplank.io/spec-hash"]
        assert now[key]["arguments"] == entry["arguments"], key


def test_only_a_podman_container_on_podmans_own_network_fixes_the_bridges_address_first():
    spec = {"name": "h1-api-0", "network": None}
    assert driver("podman").bridge_command(spec) == BRIDGE_COMMAND
    assert driver("docker").bridge_command(spec) is None
    for network in ("none", "container:h1-api-0"):
        assert driver("podman").bridge_command(dict(spec, network=network)) is None


def test_the_bridge_commands_output_becomes_a_warning_per_bridge_it_could_not_fix():
    assert bridge_warnings("kept podman0 52:22:85:6d:e2:8f\n") == []
    warnings = bridge_warnings("no-ip podman0\nfailed cni-podman1 RTNETLINK answers: Operation not permitted\n"
                               "kept podman2 0a:00:00:00:00:10\n")
    assert len(warnings) == 2
    assert warnings[0].startswith("Podman's bridge podman0 keeps no fixed MAC address (the host has no ip command")
    assert "cni-podman1" in warnings[1] and "ip link set failed: RTNETLINK answers: Operation not permitted" in warnings[1]
    # Lines not of its shape (another bridge's name, a line break in a name) are no warning.
    assert bridge_warnings("no-ip eth0\nfailed podman0x\n" + "x" * 300) == []
