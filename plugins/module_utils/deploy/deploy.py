# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From one host's bindings to the containers it should run, and what to do to get there.

Pure functions behind the deploy role (docs/deploy.md):

- ``desired_containers`` turns the host's instances and the catalog into container specs:
  image, command, env, published ports, GPUs by CDI name, the NVMe directory, config files,
  labels and the health probe. A sidecar shares its instance's network namespace, so the
  instance's container publishes the sidecar's ports too. On a host that enforces GPU shares
  with CUDA MPS (``gpu_sharing="mps"``), each share instance gets its own MPS control daemon
  container (module_utils/deploy/mps.py says why and how), listed just before the instance.
- ``rollout`` compares them with the containers that exist and says, per container, whether it
  is created, recreated, started, kept, or kept and updated (a config file with ``change`` signal or none whose text
  changed: rewritten in place, and signalled), and which containers of this host are stale.
- ``waves`` looks at every host's rollout at once and says which ranks have anything to do and, within
  a rank, in which wave each restarted instance goes: at most ``max_unavailable`` instances of a service
  restart at a time (stateful ones in descending ordinal order, as a StatefulSet does).

A container's ``gangplank.io/spec-hash`` label is the hash of everything it is made from,
its rendered config files included (kapp's versioned ConfigMaps): a change to any of them
changes the label, and only that container (with its sidecars) is recreated.
"""

from __future__ import annotations

import hashlib
import json
import posixpath

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import endpoint_value, endpoint_variable
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import (
    checked_catalog, handed_catalog, split_catalog, unavailable_count,
)
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.deploy import mps
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import HOST_NAME_EXPECTED, valid_host_name
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import (
    format_cpulist, parse_cpu, parse_cpulist, parse_size,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.secrets import (
    DEFAULT_SECRET_DIR, SecretError, container_secrets, keyed_hash,
)

LABEL = "gangplank.io/"
MANAGED, NODE, INSTANCE, SERVICE, RANK, SIDECAR_OF = (LABEL + key for key in (
    "managed", "node", "instance", "service", "rank", "sidecar-of"))
CONFIG_HASH, SPEC_HASH = LABEL + "config-hash", LABEL + "spec-hash"
# A share instance's MPS control daemon (module_utils/deploy/mps.py): the name of the instance's container.
MPS_OF = mps.MPS_OF
GPU_MODES = ("cdi", "simulated")
ENGINES = ("podman", "docker")


class DeployError(ValueError):
    """The bindings, the catalog or the existing containers do not allow a deployment."""


def _ascii_digits(text):
    """Whether int() reads ``text`` as written: str.isdigit() also accepts "²", which int() refuses."""
    return text.isascii() and text.isdigit()


def _digest(value, key=None):
    """The hash of ``value``; keyed (secrets.keyed_hash) when ``key`` is given, for what may hold a secret."""
    text = json.dumps(value, sort_keys=True)
    if key is not None:
        return keyed_hash(key, text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def container_name(host, instance, sidecar=None):
    """Unique per host and instance, so several test-bed hosts can share one engine. An every-node instance,
    ``<service>@<node>``, runs on its node, the host: its container is ``<host>-<service>`` ('@' is not
    allowed in container names, and a service's name is unique)."""
    return "%s-%s" % (host, instance.partition("@")[0]) + ("-" + sidecar if sidecar else "")


def _config_files(spec, data_dir, name):
    files = []
    for position, entry in enumerate(spec["config"]):
        host_path = posixpath.join(data_dir, name, "config", "%d-%s" % (position, posixpath.basename(entry["dest"])))
        files.append(dict(entry, path=host_path))
    return files


def _probe(spec, name, probe_address, engine, host_ports=None):
    health = spec["health"]
    if health is None:
        return None
    if health.get("port_name"):
        # A dynamic port's probe asks the host port the plan gave the instance.
        health = dict(health, port=(host_ports or {})[health["port_name"]])
    probe = {key: health[key] for key in ("timeout", "interval", "retries", "start_period")}
    probe.update(name=name, type=health["type"])
    if health["type"] == "http":
        probe["url"] = "http://%s:%d%s" % (probe_address, health["port"], health["path"])
        if health["expect_status"]:
            probe["expect_status"] = health["expect_status"]
    elif health["type"] == "tcp":
        probe.update(host=probe_address, port=health["port"])
    else:
        # Command probes run inside the container, as argv: no shell on either side.
        probe["argv"] = [engine, "exec", name] + health["argv"]
    return probe


def _dynamic_host_ports(instance, binding, spec):
    """port name -> host port of the instance's dynamic ports (its placement's host_ports); {} without any. The
    binding may come from a host's fact file: each port is checked."""
    wanted = spec.get("dynamic_ports") or []
    if not wanted:
        return {}
    given = binding.get("host_ports")
    chosen = {}
    for port in wanted:
        value = given.get(port["name"]) if isinstance(given, dict) else None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise DeployError("instances.%s.host_ports.%s: got %s; expected the host port the plan gave it (1 to 65535)"
                              % (instance, port["name"], show(value)))
        chosen[port["name"]] = value
    return chosen


def _endpoint_environment(service, scheduling, endpoints):
    """GANGPLANK_ENDPOINTS_<SERVICE> for each service ``service`` depends on that has dynamic ports
    (module_utils/deploy/endpoints.py), from ``endpoints`` (the plan's, service -> entries); {} without them."""
    if not endpoints:
        return {}
    env = {}
    for other in (scheduling.get(service) or {}).get("depends_on") or []:
        value = endpoint_value(endpoints.get(other) or [], scheduling.get(other))
        if value is not None:
            env[endpoint_variable(other)] = value
    return env


def _environment(binding, name, service, ports, host, gpus=True):
    env = {
        "GANGPLANK_INSTANCE": name,
        "GANGPLANK_SERVICE": service,
        "GANGPLANK_ORDINAL": str(binding["ordinal"]),
        "GANGPLANK_NODE": host,
        "GANGPLANK_PORTS": ",".join(str(port) for port in ports),
    }
    # Only the instance gets its GPUs: with NVIDIA's runtime hook the variable alone would hand them to a sidecar.
    gpus = (binding.get("gpus") or []) if gpus else []
    if gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(gpu["uuid"] for gpu in gpus)
        # A shared GPU: the app should keep to the memory it was granted on each device.
        env["GANGPLANK_GPU_MEMORY"] = ",".join("%s=%d" % (gpu["uuid"], gpu["memory"]) for gpu in gpus)
    return env


# The variables gangplank sets itself (_environment): names, ports and GPU ids, not secrets.
_OWN_VARIABLES = ("GANGPLANK_INSTANCE", "GANGPLANK_SERVICE", "GANGPLANK_ORDINAL", "GANGPLANK_NODE", "GANGPLANK_PORTS",
                  "GANGPLANK_HOST_PORTS",
                  "GANGPLANK_GPU_MEMORY", "GANGPLANK_GPU_ENFORCED", "GANGPLANK_NVME_DIR", "NVIDIA_VISIBLE_DEVICES")
MASK = "********"
_SHORTEST_MASKED = 4


def redact(text, containers, secret_values=None):
    """``text`` with every catalog env value of ``containers`` and every value of ``secret_values`` (the catalog's
    secrets, variable -> value) of at least _SHORTEST_MASKED characters replaced by MASK.

    For an engine's error message about a container it could not start: such a message may quote its arguments.
    Longest values first, so that a value inside another is not left half masked."""
    values = {str(value) for container in containers for key, value in (container.get("env") or {}).items()
              if key not in _OWN_VARIABLES}
    values |= {str(value) for value in (secret_values or {}).values()}
    values = {value for value in values if len(value) >= _SHORTEST_MASKED}
    for value in sorted(values, key=lambda item: (-len(item), item)):
        text = text.replace(value, MASK)
    return text


def parse_catalog(services, handed=None):
    """(the scheduler's services, each service's deploy spec), or DeployError naming every mistake of the catalog.
    ``handed``: ``services`` as an earlier task of the run parsed it (gangplank.platform.catalog's ``catalog``), taken
    instead of parsing them again, with the same checks."""
    try:
        if handed is not None:
            catalog = checked_catalog(handed_catalog(handed))
            return catalog.scheduling, catalog.deploy
        return split_catalog(services)
    except ValueError as error:
        raise DeployError("the catalog is not valid; nothing was changed:\n%s" % error) from None


def desired_containers(host, instances, services, data_dir, publish_address="", probe_address="127.0.0.1",
                       gpu_mode="cdi", engine="podman", limits=True, secret_dir=DEFAULT_SECRET_DIR, catalog=None,
                       gpu_sharing=None, mps_control="", mps_dir=mps.DEFAULT_DIR, mps_image="",
                       mps_ready_timeout=mps.DEFAULT_READY_TIMEOUT, volume_dir=None, endpoints=None):
    """The containers ``host`` should run, in rank order, each instance before its sidecars.

    With ``limits``, each container is limited to the CPU and memory the scheduler reserved for it
    (its ``cpus`` and ``memory``); without, both are None. ``catalog``: ``services`` as parse_catalog() returns it,
    for a caller that parsed it once for every host (``services`` is then not read).

    ``volume_dir`` is the host directory of the instances' disk volumes (the catalog's ``volumes``, docs/catalog.md):
    each instance's volume is its own directory, ``<volume_dir>/<service>/<instance>/<volume>`` on the node's disk or
    ``<mount>/gangplank/<service>/<instance>/<volume>`` on its NVMe device, listed in the container's ``data_dirs``
    (with the mode, uid and gid it is made with) and bind-mounted at the volume's path. A service with NVMe volumes
    gets them instead of the per-service NVMe directory.

    ``gpu_sharing`` is the host's sharing mode (``mps`` or ``none``; the deploy role always gives it): each share
    instance (a GPU request with ``memory``) gets ``GANGPLANK_GPU_ENFORCED`` (``true`` or ``false``), and with ``mps``
    its own MPS control daemon container just before it (module_utils/deploy/mps.py): ``mps_control`` is the control binary's
    path on the host, ``mps_dir`` the host directory of the daemons' directories, ``mps_image`` the daemon's image
    (empty: the instance's), ``mps_ready_timeout`` the seconds an instance waits for its daemon's limits. Without
    ``gpu_sharing`` (None) the specs are those of a collection without MPS.
    """
    if gpu_mode not in GPU_MODES:
        raise DeployError("gpu_mode: got %r; expected one of %s" % (gpu_mode, ", ".join(GPU_MODES)))
    if engine not in ENGINES:
        raise DeployError("engine: got %r; expected one of %s" % (engine, ", ".join(ENGINES)))
    if gpu_sharing is not None and gpu_sharing not in mps.SHARING_MODES:
        raise DeployError("gpu_sharing: got %s; expected one of %s" % (show(gpu_sharing), ", ".join(mps.SHARING_MODES)))
    if gpu_sharing == "mps":
        try:
            mps.check_settings(mps_control, mps_dir, mps_image, mps_ready_timeout)
        except mps.MpsError as error:
            raise DeployError(str(error)) from None
        if gpu_mode == "simulated" and not mps_control:
            raise DeployError("mps_control: simulated GPUs under MPS need the path of a control binary (the test bed's "
                              "stand-in) to mount in the daemons")
    if not valid_host_name(host):
        # The host names containers and the directories of their config files: "../x" must not reach a path.
        raise DeployError("host %s: the inventory name is not %s" % (show(host), HOST_NAME_EXPECTED))
    scheduling, specs = catalog if catalog is not None else parse_catalog(services)
    missing = sorted({binding["service"] for binding in instances.values() if not (specs.get(binding["service"]) or {}).get("image")}
                     | {sidecar for binding in instances.values() for sidecar in binding.get("sidecars") or []
                        if not (specs.get(sidecar) or {}).get("image")})
    if missing:
        raise DeployError("; ".join("services.%s.image: is required to deploy it (an image reference such as localhost/app:1)" % name
                                    for name in missing))
    containers = []
    for instance in sorted(instances, key=lambda name: (instances[name]["rank"], name)):
        binding = instances[instance]
        spec = specs[binding["service"]]
        sidecars = list(binding.get("sidecars") or [])
        ports = list(spec["ports"]) + [port for sidecar in sidecars for port in specs[sidecar]["ports"]]
        main = _container(host, instance, binding, binding["service"], spec, data_dir, probe_address, engine, secret_dir)
        main.update(_limits(binding["service"], scheduling, limits))
        main["ports"] = ["%s:%d:%d" % (publish_address, port, port) if publish_address else "%d:%d" % (port, port)
                         for port in ports]
        host_ports = _dynamic_host_ports(instance, binding, spec)
        for port in spec.get("dynamic_ports") or []:
            host_port = host_ports[port["name"]]
            main["ports"].append("%s:%d:%d" % (publish_address, host_port, port["container_port"]) if publish_address
                                 else "%d:%d" % (host_port, port["container_port"]))
        main["env"] = dict(_environment(binding, instance, binding["service"], ports, host), **spec["env"])
        if host_ports:
            # Only an instance with dynamic ports gets them: name=host port, in the order of the catalog.
            main["env"]["GANGPLANK_HOST_PORTS"] = ",".join("%s=%d" % item for item in host_ports.items())
        for key, value in _endpoint_environment(binding["service"], scheduling, endpoints).items():
            main["env"].setdefault(key, value)      # the catalog's env wins, as everywhere
        cpusets = _cpusets(instance, binding)
        main.update(cpusets)
        if gpu_mode == "cdi":
            main["devices"] = ["nvidia.com/gpu=%s" % gpu["uuid"] for gpu in binding.get("gpus") or []]
        nvme = binding.get("nvme")
        if spec.get("volumes"):
            _volumes(main, instance, binding, spec, volume_dir)
        if nvme and not any(volume["where"] == "nvme" for volume in spec.get("volumes") or []):
            source = posixpath.join(nvme["mount"], "gangplank", binding["service"])
            main["directories"].append(source)
            main["volumes"].append("%s:%s" % (source, spec["nvme_path"]))
            main["env"].setdefault("GANGPLANK_NVME_DIR", spec["nvme_path"])     # the catalog's env wins, as everywhere
        gpu_request = ((scheduling.get(binding["service"]) or {}).get("resources") or {}).get("gpu")
        if gpu_sharing is not None and mps.is_share(gpu_request, binding):
            # Whether the host holds the instance to its grant: set by the host, over the catalog's env.
            main["env"]["GANGPLANK_GPU_ENFORCED"] = "true" if gpu_sharing == "mps" else "false"
            if gpu_sharing == "mps":
                containers.append(_mps_daemon(instance, binding, gpu_request, main, gpu_mode, mps_control, mps_dir,
                                              mps_image, mps_ready_timeout))
        containers.append(main)
        for sidecar in sidecars:
            side = _container(host, instance, binding, sidecar, specs[sidecar], data_dir, probe_address, engine, secret_dir)
            side.update(_limits(sidecar, scheduling, limits))
            side["network"] = "container:" + main["name"]
            side["labels"][SIDECAR_OF] = main["name"]
            side["env"] = dict(_environment(binding, instance, sidecar, ports, host, gpus=False),
                               **specs[sidecar]["env"])
            side.update(cpusets)        # the instance's pinned CPU request counts its sidecars: they run on its CPUs too
            containers.append(side)
    return containers


def volume_source(volume, service, instance, volume_dir, nvme):
    """The host directory of one instance's volume: its own, never shared with another instance."""
    if volume["where"] == "nvme":
        return posixpath.join(nvme["mount"], "gangplank", service, instance, volume["name"])
    return posixpath.join(volume_dir, service, instance, volume["name"])


def _volumes(main, instance, binding, spec, volume_dir):
    """The instance's volumes: a bind mount of each one's own directory (volume_source), and the directories to make."""
    service, nvme = binding["service"], binding.get("nvme")
    main["data_dirs"] = []
    for volume in spec["volumes"]:
        if volume["where"] == "disk" and not volume_dir:
            raise DeployError("services.%s.volumes: disk volumes need the host's volume directory (volume_dir)" % service)
        if volume["where"] == "nvme" and not (isinstance(nvme, dict) and isinstance(nvme.get("mount"), str)
                                              and nvme["mount"].startswith("/")):
            raise DeployError("instances.%s: volume %s lives on NVMe, but the instance has no NVMe placement with a mount"
                              % (instance, volume["name"]))
        source = volume_source(volume, service, instance, volume_dir, nvme)
        main["volumes"].append("%s:%s" % (source, volume["path"]))
        main["data_dirs"].append({"path": source, "volume": volume["name"], "where": volume["where"],
                                  "size": volume["size"], "mode": volume["mode"], "uid": volume["uid"],
                                  "gid": volume["gid"]})
        if volume["where"] == "nvme":
            # The first NVMe volume is the instance's NVMe directory; the catalog's env wins, as everywhere.
            main["env"].setdefault("GANGPLANK_NVME_DIR", volume["path"])


def make_directory_argv(entry):
    """The command that makes a volume's directory with its mode, owner and group, once: it runs only where the
    directory does not exist (``creates``), so what the app later sets on it stays, and nothing is chowned again."""
    argv = ["install", "-d", "-m", entry["mode"]]
    if entry.get("uid") is not None:
        argv += ["-o", str(entry["uid"])]
    if entry.get("gid") is not None:
        argv += ["-g", str(entry["gid"])]
    return argv + ["--", entry["path"]]


def _cpusets(instance, binding):
    """cpu_pinning numa: the CPUs and memory nodes of the instance's GPUs' NUMA node(s) that its placement names
    (``cpuset_cpus``, ``cpuset_mems``, canonical cpulists); {} for an unpinned instance, whose specs stay as they were.
    The binding may come from a host's fact file: each is checked as the problem's cpulists are."""
    cpusets = {}
    for key in ("cpuset_cpus", "cpuset_mems"):
        if key not in binding:
            continue
        try:
            cpusets[key] = format_cpulist(parse_cpulist(binding[key]))
        except ValueError as error:
            raise DeployError("instances.%s.%s: got %s; expected %s" % (instance, key, show(binding[key]), error)) from None
    if len(cpusets) == 1:
        raise DeployError("instances.%s: got only %s; expected cpuset_cpus and cpuset_mems together" % (instance, list(cpusets)[0]))
    return cpusets


def _mps_daemon(instance, binding, gpu_request, main, gpu_mode, control, directory, image, ready_timeout):
    """The MPS control daemon of the share instance ``main`` (mps.daemon), and ``main`` made its client."""
    try:
        entries, cores = mps.limits(instance, binding, gpu_request)
    except mps.MpsError as error:
        raise DeployError(str(error)) from None
    daemon = mps.daemon(main, entries, cores, control, directory, image, gpu_mode == "simulated")
    mps.client(main, daemon, ready_timeout)
    return daemon


def desired_on_hosts(settings, services, catalog=None):
    """``desired_containers()`` of every host at once: ``settings`` maps each host to its ``instances``, ``data_dir``
    and the optional arguments of ``desired_containers()`` (``publish_address``, ``probe_address``, ``gpu_mode``,
    ``engine``, ``limits``, ``secret_dir``). Returns host -> its containers; an error names the host. ``catalog``: as
    for desired_containers(); otherwise ``services`` is parsed once, for the first host."""
    if not isinstance(settings, dict):
        raise DeployError("expected a mapping of hosts to their settings, got %s" % type(settings).__name__)
    desired = {}
    for host, entry in settings.items():
        try:
            entry = _settings(entry)
            # Parsed once for every host; an error still names the first host, as each host's own parse did.
            catalog = catalog or parse_catalog(services)
            desired[host] = desired_containers(host, entry["instances"], services, catalog=catalog, **{
                key: value for key, value in entry.items() if key != "instances"})
        except DeployError as error:
            # A name that could mislead is shown quoted and bounded, as the error for it says.
            raise DeployError("%s: %s" % (host if valid_host_name(host) else show(host), error)) from None
    return desired


# What desired_on_hosts() takes per host, and the type of each (the deploy role fills them from the host's variables).
_SETTING_TYPES = {"endpoints": dict, "instances": dict, "data_dir": str, "publish_address": str, "probe_address": str, "gpu_mode": str,
                  "engine": str, "limits": bool, "secret_dir": str, "gpu_sharing": str, "mps_control": str,
                  "mps_dir": str, "mps_image": str, "mps_ready_timeout": int, "volume_dir": str}


def _settings(entry):
    if not isinstance(entry, dict) or not {"instances", "data_dir"} <= set(entry) or set(entry) - set(_SETTING_TYPES):
        raise DeployError("expected instances and data_dir, and only %s" % ", ".join(sorted(_SETTING_TYPES)))
    for key, value in entry.items():
        if not isinstance(value, _SETTING_TYPES[key]):
            raise DeployError("%s: got %s; expected a %s" % (key, show(value), _SETTING_TYPES[key].__name__))
    for name, binding in entry["instances"].items():
        # The schedule role's bindings, or the node's fact file (which a host may hold corrupted).
        if not (isinstance(binding, dict) and isinstance(binding.get("service"), str)
                and isinstance(binding.get("rank"), int) and not isinstance(binding.get("rank"), bool)):
            raise DeployError("instances.%s: got %s; expected a binding with a service and a rank" % (show(name), show(binding)))
    if not entry["data_dir"].startswith("/"):
        raise DeployError("data_dir: got %s; expected an absolute path" % show(entry["data_dir"]))
    volume_dir = entry.get("volume_dir")
    if volume_dir is not None and not (volume_dir.startswith("/") and posixpath.normpath(volume_dir) == volume_dir
                                       and volume_dir != "/"):
        raise DeployError("volume_dir: got %s; expected an absolute, normalised path other than /" % show(volume_dir))
    return entry


def _limits(service, scheduling, enforce):
    """The CPU (cores, as the engines' --cpus takes them) and memory (bytes) the scheduler reserved; None for none."""
    resources = (scheduling.get(service) or {}).get("resources") or {}
    cpus = memory = None
    if enforce:
        try:
            millicores = parse_cpu(resources.get("cpu", 0))
            memory = parse_size(resources.get("memory", 0)) or None
        except ValueError as error:
            raise DeployError("services.%s.resources: %s" % (service, error)) from None
        cpus = "%d.%03d" % divmod(millicores, 1000) if millicores else None
    return {"cpus": cpus, "memory": memory}


def _container(host, instance, binding, service, spec, data_dir, probe_address, engine, secret_dir):
    name = container_name(host, instance, None if service == binding["service"] else service)
    files = _config_files(spec, data_dir, name)
    secrets = container_secrets(name, spec.get("secrets") or [], engine, secret_dir)
    return {
        "name": name,
        "instance": instance,
        "service": service,
        "rank": binding["rank"],
        "sidecar": service != binding["service"],
        "image": spec["image"],
        "command": spec["command"],
        "env": {},
        "ports": [],
        "devices": [],
        "volumes": ["%s:%s:ro" % (entry["path"], entry["dest"]) for entry in files],
        "directories": [],
        "network": None,
        "init": spec["init"],
        "stop_timeout": spec["stop_timeout"],
        "restart_policy": spec["restart_policy"],
        "labels": {MANAGED: "true", NODE: host, INSTANCE: instance, SERVICE: service, RANK: str(binding["rank"])},
        "config": files,
        # Names, places and variables only: the deploy role adds the values in the tasks that create the container.
        "secrets": secrets,
        # Docker's file secrets, bind-mounted read-only: a missing file fails the start rather than becoming a directory.
        "mounts": [{"type": "bind", "source": entry["path"], "target": entry["target"], "read_only": True}
                   for entry in secrets if entry["path"]],
        "podman_secrets": [entry["option"] for entry in secrets if entry["option"]],
        "probe": _probe(spec, name, probe_address, engine,
                        _dynamic_host_ports(instance, binding, spec) if service == binding["service"] else None),
    }


def _existing_entry(item):
    """Name, running, labels and published host ports from a container's inspect data (podman or docker)
    or from an entry of Docker's container list (docker_host_info), which is shaped otherwise."""
    if "Names" in item:
        ports = {int(port["PublicPort"]) for port in item.get("Ports") or [] if isinstance(port.get("PublicPort"), int)}
        return ((item.get("Names") or [""])[0].lstrip("/"),
                {"running": item.get("State") == "running", "labels": item.get("Labels") or {}, "ports": ports})
    name = item.get("Name") or ""
    state = item.get("State") or {}
    bindings = (item.get("HostConfig") or {}).get("PortBindings") or {}
    ports = {int(binding["HostPort"]) for entries in bindings.values() for binding in entries or []
             if _ascii_digits(str(binding.get("HostPort") or ""))}
    return name.lstrip("/"), {"running": bool(state.get("Running")), "labels": (item.get("Config") or {}).get("Labels") or {},
                              "ports": ports}


def _host_ports(container):
    """The host ports a container spec publishes ("addr:host:container" or "host:container")."""
    return {int(port.split(":")[-2]) for port in container["ports"]}


def _evictions(planned, stale, current):
    """Stale containers holding a host port that a container started in some rank needs: they go before that rank.

    Otherwise the new container could not start, its rank would fail, and the stale one, removed
    only after every rank is healthy, would block every later run too.
    """
    evict = []
    for name in stale:
        needed = [container["rank"] for container in planned
                  if container["action"] not in ("keep", "update") and _host_ports(container) & current[name]["ports"]]
        if needed:
            evict.append({"rank": min(needed), "name": name})
    evicted = {entry["name"] for entry in evict}
    # A sidecar shares its instance's network: it goes first, in the same rank.
    sidecars = [{"rank": entry["rank"], "name": name} for entry in evict for name in stale
                if current[name]["labels"].get(SIDECAR_OF) == entry["name"] and name not in evicted]
    return sidecars + evict


def _removal_order(name, labels):
    # Sidecars first: an instance cannot be removed while a sidecar shares its network. Then, per
    # service, the highest ordinals first, as a scale-down takes them. MPS daemons last: Podman does not
    # remove a container that another (its instance) requires.
    service, _dash, ordinal = labels.get(INSTANCE, "").rpartition("-")
    kind = 2 if MPS_OF in labels else int(SIDECAR_OF not in labels)
    return (kind, service, -int(ordinal) if _ascii_digits(ordinal) else 0, name)


def _secret_trace(container, secret_hashes):
    """What the spec hash holds of the container's secrets: where each goes and its keyed hash, never the value."""
    trace = []
    for secret in container.get("secrets") or []:
        if secret["var"] not in secret_hashes:
            raise DeployError("services.%s.secrets.%s: the value of %s was not read; nothing was changed"
                              % (container["service"], secret["name"], secret["var"]))
        trace.append([secret["name"], secret["delivery"], secret["env"], secret["target"], secret["mode"], secret["uid"],
                      secret["gid"], secret_hashes[secret["var"]]])
    return trace


def _restart_mps_clients(planned):
    """An MPS daemon that starts anew (killed, removed, stopped) leaves its running instance without a server: the
    instance is made anew (with its sidecars, which share its network namespace) in the same wave, after the daemon."""
    daemons = {container["labels"][MPS_OF] for container in planned
               if MPS_OF in container["labels"] and container["action"] != "keep"}
    restart = {container["name"] for container in planned if container["name"] in daemons
               and container["action"] in ("keep", "update")}
    for container in planned:
        if container["action"] in ("keep", "update") and (container["name"] in restart or container["labels"].get(SIDECAR_OF) in restart):
            container["action"] = "recreate"
            container.pop("update", None)


def in_place(entry):
    """Whether a config file is rewritten in place when its text changes (``change`` signal or none), the container
    kept: the file bind-mounted into a container is the same inode, so the container reads the new text."""
    return entry.get("change") in ("signal", "none")


def text_digest(text):
    """The SHA-256 (hex) of a rendered file's text, as ``sha256sum`` prints it for the file on the host."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def in_place_update(container, rendered, files_now):
    """For a container that is otherwise kept: its in-place files whose host file (``files_now``: path -> SHA-256 hex of
    the file on the host, None where it is missing; a path not there was not read) does not hold the rendered text, and
    the signals they send (each once, in ``config`` order); None when none differs."""
    files_now = files_now or {}
    changed = [entry for entry in container["config"]
               if in_place(entry) and files_now.get(entry["path"]) != text_digest(rendered[entry["path"]])]
    if not changed:
        return None
    signals = list(dict.fromkeys(entry["signal"] for entry in changed if entry.get("change") == "signal"))
    return {"files": [entry["path"] for entry in changed], "signals": signals}


def rollout(host, containers, rendered, existing, secret_hashes=None, hash_key=None, files_now=None):
    """Hash labels and an action per container, and the stale containers of ``host``.

    ``rendered`` maps each config file's host path to its rendered text; ``existing`` is the
    engine's inspect data of every container. Actions: create, recreate, start, keep, and update (kept, its config files
    that change in place rewritten and its signals sent).
    ``secret_hashes`` maps each secret's variable to its keyed hash (secrets.read_values); with the
    site's ``hash_key``, the config hash is keyed too, since a rendered file may hold a secret.
    ``files_now`` maps the host path of each in-place config file (``change`` signal or none) to the SHA-256 of the file
    on the host (None: missing): a kept container whose in-place file differs is ``update``d instead (its files rewritten
    in place, its signals sent; ``update``: in_place_update()). Without ``files_now`` the files were not read: nothing is
    updated.
    """
    current = dict(_existing_entry(item) for item in existing)
    planned, spec_hash_of = [], {}
    for container in containers:
        labels = dict(container["labels"])
        unrendered = [entry["path"] for entry in container["config"] if entry["path"] not in rendered]
        if unrendered:
            raise DeployError("container %s: config file %s was not rendered" % (container["name"], unrendered[0]))
        # A file rewritten in place (change signal or none) counts by how it changes, not by its text: its text changing
        # keeps the container (in_place_update below). A file that restarts keeps its entry as it always had.
        config = [[entry["dest"], rendered[entry["path"]]] if not in_place(entry)
                  else [entry["dest"], {key: entry[key] for key in ("change", "signal") if key in entry}]
                  for entry in container["config"]]
        try:
            # No config files, nothing to hide: the plain digest of [], so such containers keep their hash.
            labels[CONFIG_HASH] = _digest(config, hash_key if config else None)
            secrets = _secret_trace(container, secret_hashes or {})
        except SecretError as error:
            raise DeployError("%s; nothing was changed" % error) from None
        shape = {key: container[key] for key in ("image", "command", "env", "ports", "devices", "volumes", "network",
                                                 "init", "stop_timeout", "restart_policy")}
        # Limits (and an MPS daemon's user) count only when set, so hosts whose engine cannot enforce them keep their
        # hashes.
        shape.update({key: container[key] for key in ("cpus", "memory", "user") if container.get(key) is not None})
        # CPU pinning (cpu_pinning numa) counts only when pinned, so every other container keeps its hash.
        shape.update({key: container[key] for key in ("cpuset_cpus", "cpuset_mems") if key in container})
        # A share instance is an MPS client of its daemon: it is recreated with it (its connection would be gone).
        if container.get("mps_client"):
            shape["mps"] = spec_hash_of.get(container["mps_client"]["daemon"])
        # Secrets count only when there are some, so containers without them keep their hashes.
        if secrets:
            shape["secrets"] = secrets
        # A sidecar lives in its instance's network namespace, so it is recreated with it.
        shape.update(labels=labels, instance=spec_hash_of.get(labels.get(SIDECAR_OF)))
        labels[SPEC_HASH] = _digest(shape)
        spec_hash_of[container["name"]] = labels[SPEC_HASH]
        now = current.get(container["name"])
        if now is not None and now["labels"].get(MANAGED) != "true":
            raise DeployError("container %s exists but is not managed by gangplank; rename or remove it, then run again"
                              % container["name"])
        if now is None:
            action = "create"
        elif now["labels"].get(SPEC_HASH) != labels[SPEC_HASH]:
            action = "recreate"
        elif not now["running"]:
            action = "start"
        else:
            action = "keep"
        entry = dict(container, labels=labels, action=action)
        if action == "keep" and files_now is not None:
            update = in_place_update(container, rendered, files_now)
            if update:
                entry.update(action="update", update=update)
        planned.append(entry)
    _restart_mps_clients(planned)
    wanted = {container["name"] for container in containers}
    stale = sorted((name for name, now in current.items()
                    if now["labels"].get(MANAGED) == "true" and now["labels"].get(NODE) == host and name not in wanted),
                   key=lambda name: _removal_order(name, current[name]["labels"]))
    summary = {"start": [c["name"] for c in planned if c["action"] in ("create", "start")],
               "restart": [c["name"] for c in planned if c["action"] == "recreate"],
               "stop": stale,
               "keep": [c["name"] for c in planned if c["action"] == "keep"]}
    updated = [c for c in planned if c["action"] == "update"]
    if updated:
        # Only where a file changes in place: every other summary stays as it was.
        summary["signal"] = {}
        for container in updated:
            for signal in container["update"]["signals"]:
                summary["signal"].setdefault(signal, []).append(container["name"])
        summary["updated"] = [c["name"] for c in updated if not c["update"]["signals"]]
    return {"containers": planned, "stale": stale, "evict": _evictions(planned, stale, current), "summary": summary}


def _ordinal(instance):
    _service, _dash, ordinal = instance.rpartition("-")
    return int(ordinal) if _ascii_digits(ordinal) else 0


def restart_settings(catalog):
    """What the waves of a rollout read of each service, from parse_catalog()'s result: whether it is ``stateful`` and
    its ``max_unavailable``. Plain data, so that a later step decides the waves without the catalog."""
    scheduling, specs = catalog
    return {name: {"stateful": (scheduling.get(name) or {}).get("stateful") is True,
                   "max_unavailable": spec.get("max_unavailable", 1)} for name, spec in specs.items()}


def waves(rollouts, services):
    """rollout_waves() with the catalog ``services``."""
    return rollout_waves(rollouts, restart_settings(parse_catalog(services)))


def _owner(container):
    """The instance container a container belongs to: a sidecar's or an MPS daemon's instance, else itself."""
    return container["labels"].get(SIDECAR_OF) or container["labels"].get(MPS_OF) or container["name"]


def rollout_waves(rollouts, restarts):
    """The cluster-wide order of a rollout, from every host's ``rollout()`` and each service's restart_settings().

    Returns ``active_ranks`` (the ranks where some host creates, recreates or starts a container, or evicts a
    stale one: only these need a rollout step), ``waves`` (per active rank, as a string key, how many waves it
    takes; at least 1) and ``wave_of`` (container name -> wave, for the restarted instances after the first
    wave; every other container is in wave 0).

    An instance restarts when its container or one of its sidecars is recreated. The restarting instances of a
    service go in waves of at most ``max_unavailable`` (of the service's instances, counted over all hosts),
    stateless ones in ascending ordinal order, stateful ones in descending order. New and stopped instances start
    in wave 0, with the first restarts.
    """
    replicas, restarting, members, active = {}, {}, {}, set()
    for plan in rollouts:
        for entry in plan.get("evict") or []:
            active.add(entry["rank"])
        for container in plan["containers"]:
            if container["action"] != "keep":
                active.add(container["rank"])
            main = _owner(container)
            members.setdefault(main, []).append(container["name"])
            if not container["sidecar"] and MPS_OF not in container["labels"]:
                replicas[container["service"]] = replicas.get(container["service"], 0) + 1
        for container in plan["containers"]:
            if container["action"] == "recreate":
                main = _owner(container)
                owner = next(item for item in plan["containers"] if item["name"] == main)
                restarting[main] = (owner["rank"], owner["service"], owner["instance"])
    by_service = {}
    for main, (rank, service, instance) in restarting.items():
        by_service.setdefault((rank, service), []).append((instance, main))
    wave_of, count = {}, {}
    for (rank, service), entries in sorted(by_service.items()):
        settings = restarts.get(service) or {}
        stateful = settings.get("stateful") is True
        entries.sort(key=lambda entry: (-_ordinal(entry[0]) if stateful else _ordinal(entry[0]), entry[0]))
        size = unavailable_count(settings.get("max_unavailable", 1), replicas.get(service, len(entries)))
        for position, (_instance, main) in enumerate(entries):
            wave = position // size
            count[rank] = max(count.get(rank, 1), wave + 1)
            for name in members[main]:
                if wave:
                    wave_of[name] = wave
    ranks = sorted(active)
    return {"active_ranks": ranks, "waves": {str(rank): count.get(rank, 1) for rank in ranks}, "wave_of": wave_of}


def summary_line(summary, check_mode=False, note=""):
    """The line the deploy role shows for a host: what starts, restarts, stops and stays, then the kept containers whose
    config files change in place: ``signal SIGHUP [...]`` per signal and ``file updated [...]``."""
    updates = "".join(", signal %s %s" % (signal, _names(names)) for signal, names in sorted(summary.get("signal", {}).items()))
    if summary.get("updated"):
        updates += ", file updated %s" % _names(summary["updated"])
    return "%sstart %d %s, restart %d %s, stop %d %s, keep %d%s%s" % (
        "would " if check_mode else "", len(summary["start"]), _names(summary["start"]), len(summary["restart"]),
        _names(summary["restart"]), len(summary["stop"]), _names(summary["stop"]), len(summary["keep"]), updates, note)


def _names(names):
    # As Jinja prints a list of strings, which the line showed before it was made here.
    return "[%s]" % ", ".join(repr(str(name)) for name in names)


def decide(hosts, containers, rendered, existing, services=None, secret_hashes=None, hash_key=None, notes=None,
           check_mode=False, restarts=None, stale_secrets=None, files_now=None):
    """The rollout of every host at once, on the controller (one task instead of one per host).

    ``containers``, ``rendered``, ``existing`` and ``notes`` are lists in the order of ``hosts``: each host's
    desired containers, rendered config files, existing containers (as for ``rollout()``) and the note its line
    ends with (the engine that cannot enforce limits). The waves read the catalog ``services``, or, where it was
    parsed before, its ``restarts`` (restart_settings()). ``stale_secrets`` maps a host to the secrets no container
    uses any more there (deploy_read.stale_secrets): its line names them, and it is not idle. ``files_now``, where given,
    is a list in the order of ``hosts``: each host's in-place config files as ``rollout()`` takes them.

    Returns ``rollouts`` (host -> ``rollout()``), ``waves`` (``rollout_waves()`` over all of them), ``lines`` (host ->
    its summary line), ``idle`` (the hosts with no container in a rank that changes and nothing to remove) and
    ``kept`` (host -> its containers with a probe in the ranks that do not change, for the hosts that have some: what
    the kept containers' probe checks), so that the tasks per host decide on one lookup.
    """
    columns = [containers, rendered, existing] + ([notes] if notes is not None else [])
    if any(len(column) != len(hosts) for column in columns):
        raise DeployError("decide: %d hosts, but %s entries" % (len(hosts), "/".join(str(len(c)) for c in columns)))
    stale_secrets = stale_secrets or {}
    rollouts, lines = {}, {}
    for index, host in enumerate(hosts):
        try:
            plan = rollout(host, containers[index], rendered[index], existing[index], secret_hashes=secret_hashes,
                           hash_key=hash_key, files_now=files_now[index] if files_now is not None else None)
        except DeployError as error:
            raise DeployError("%s: %s" % (host, error)) from None
        rollouts[host] = plan
        lines[host] = summary_line(plan["summary"], check_mode, notes[index] if notes is not None else "")
        if stale_secrets.get(host):
            verb = "would remove" if check_mode else "remove"
            lines[host] += "; %s unused secrets: %s" % (verb, ", ".join(stale_secrets[host]))
    if restarts is None:
        restarts = restart_settings(parse_catalog(services))
    order = rollout_waves(list(rollouts.values()), restarts)
    active = set(order["active_ranks"])
    idle, kept = [], {}
    for host in hosts:
        containers_here = rollouts[host]["containers"]
        changes = any(c["rank"] in active for c in containers_here)
        if not rollouts[host]["stale"] and not stale_secrets.get(host) and not changes:
            idle.append(host)
        probed = [c for c in containers_here if c["rank"] not in active and c["probe"]]
        if probed:
            kept[host] = probed
    return {"rollouts": rollouts, "waves": order, "lines": lines, "idle": idle, "kept": kept}


def status_rows(host, containers, existing, probes):
    """One row per container: where it should run, whether it runs, and whether its probe passes now."""
    current = dict(_existing_entry(item) for item in existing)
    rows = []
    for container in containers:
        now = current.get(container["name"])
        result = probes.get(container["name"])
        if now is None:
            state = "missing"
        else:
            state = "running" if now["running"] else "stopped"
        if container["probe"] is None:
            health = "no probe"
        elif result is None or result.get("healthy") is None:
            health = "not probed"
        else:
            health = "healthy" if result["healthy"] else "unhealthy: " + (result.get("last_output") or "")[:60]
        rows.append({"node": host, "rank": container["rank"], "instance": container["instance"],
                     "container": container["name"], "service": container["service"], "state": state, "health": health,
                     "ports": ",".join(container["ports"])})
    return rows


def render_status(rows):
    """The status table, by rank, then node, then container."""
    columns = ("rank", "node", "instance", "service", "container", "state", "health", "ports")
    ordered = sorted(rows, key=lambda row: (row["rank"], row["node"], row["container"]))
    cells = [[str(row[column]) for column in columns] for row in ordered]
    widths = [max([len(column)] + [len(line[index]) for line in cells]) for index, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths)).rstrip()]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
    healthy = sum(1 for row in rows if row["state"] == "running" and row["health"] in ("healthy", "no probe"))
    lines.append("%d of %d container(s) running and healthy" % (healthy, len(rows)))
    return lines
