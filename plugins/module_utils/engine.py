# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One container spec (deploy.desired_containers, with its rollout labels), as the arguments of the engine's module:
containers.podman.podman_container or community.docker.docker_container (gangplank.platform.container runs it).

An empty option is left out (the module's default), as the deploy role's tasks left it out with ``omit``. Standard
library only.
"""

from __future__ import annotations

MODULES = {"podman": "containers.podman.podman_container", "docker": "community.docker.docker_container"}


class EngineError(ValueError):
    """The spec cannot be turned into the engine module's arguments."""


def _set_if(arguments, key, value):
    if value:
        arguments[key] = value


def podman_arguments(spec, recreate=False):
    """containers.podman.podman_container's arguments that start ``spec`` (made anew with ``recreate``).

    Its secrets are Podman's (``--secret`` options naming the secrets made before, gangplank.platform.deploy role).
    An MPS client (a GPU share, module_utils/mps.py) ``requires`` its daemon: Podman starts the daemon first whenever
    it starts the instance, and does not remove the daemon under it."""
    arguments = {"name": spec["name"], "image": spec["image"], "env": spec["env"]}
    _set_if(arguments, "command", spec["command"])
    _set_if(arguments, "user", spec.get("user"))
    if spec.get("mps_client"):
        arguments["requires"] = [spec["mps_client"]["daemon"]]
    _set_if(arguments, "publish", spec["ports"])
    _set_if(arguments, "device", spec["devices"])
    _set_if(arguments, "volume", spec["volumes"])
    _set_if(arguments, "network", spec["network"])
    _set_if(arguments, "cpus", spec.get("cpus"))
    _set_if(arguments, "cpuset_cpus", spec.get("cpuset_cpus"))
    _set_if(arguments, "cpuset_mems", spec.get("cpuset_mems"))
    if spec.get("memory"):
        arguments["memory"] = str(spec["memory"])
    _set_if(arguments, "secrets", spec["podman_secrets"])
    arguments.update(init=spec["init"], stop_timeout=spec["stop_timeout"], restart_policy=spec["restart_policy"],
                     label=spec["labels"], recreate=bool(recreate), state="started")
    return arguments


def docker_arguments(spec, secret_values, recreate=False):
    """community.docker.docker_container's arguments that start ``spec`` (made anew with ``recreate``).

    Docker has no secrets without Swarm: an env secret is set as a variable (docs/catalog.md: visible to docker
    inspect), its value from ``secret_values`` (variable -> value), winning over the catalog's env; a file secret is a
    private file, bind-mounted read-only (``mounts``). GPUs by CDI name as a device request; images are loaded from a
    bundle, never pulled (air-gapped hosts). Docker has no start dependency: an MPS client starts after its daemon
    because gangplank.platform.container waits for the daemon's limits first."""
    env = dict(spec["env"])
    for secret in spec.get("secrets") or []:
        if secret["delivery"] != "env":
            continue
        if secret["var"] not in secret_values:
            # The variable's name only, never a value.
            raise EngineError("%s: the value of %s (secret %s) was not given"
                              % (spec["name"], secret["var"], secret["name"]))
        env[secret["env"]] = secret_values[secret["var"]]
    arguments = {"name": spec["name"], "image": spec["image"], "pull": "never", "env": env}
    _set_if(arguments, "command", spec["command"])
    _set_if(arguments, "user", spec.get("user"))
    _set_if(arguments, "published_ports", spec["ports"])
    if spec["devices"]:
        arguments["device_requests"] = [{"driver": "cdi", "device_ids": spec["devices"]}]
    _set_if(arguments, "volumes", spec["volumes"])
    _set_if(arguments, "mounts", spec["mounts"])
    _set_if(arguments, "network_mode", spec["network"])
    if spec.get("cpus"):
        arguments["cpus"] = float(spec["cpus"])
    _set_if(arguments, "cpuset_cpus", spec.get("cpuset_cpus"))
    _set_if(arguments, "cpuset_mems", spec.get("cpuset_mems"))
    if spec.get("memory"):
        arguments["memory"] = str(spec["memory"])
    arguments.update(init=spec["init"], stop_timeout=spec["stop_timeout"], restart_policy=spec["restart_policy"],
                     labels=spec["labels"], recreate=bool(recreate), state="started")
    return arguments


def start_call(engine, spec, secret_values=None, recreate=False):
    """(the engine's module, its arguments) that start ``spec``."""
    if engine == "podman":
        return MODULES[engine], podman_arguments(spec, recreate)
    if engine == "docker":
        return MODULES[engine], docker_arguments(spec, secret_values or {}, recreate)
    raise EngineError("engine: got %r; expected one of %s" % (engine, ", ".join(MODULES)))


def remove_call(engine, name):
    """(the engine's module, its arguments) that remove the container ``name``."""
    if engine not in MODULES:
        raise EngineError("engine: got %r; expected one of %s" % (engine, ", ".join(MODULES)))
    return MODULES[engine], {"name": name, "state": "absent"}
