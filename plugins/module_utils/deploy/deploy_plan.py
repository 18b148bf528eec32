# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy of every host at once, decided on the controller (gangplank.platform.deploy_plan), in two steps around the
one thing that must happen per host, the rendering of the config files (a template sees the host's variables):

- ``containers_step`` parses the catalog, once, and turns each host's read (gangplank.platform.deploy_read: its
  settings and instances) into its containers, the config files to render, and what the waves need of the catalog;
- ``rollout_step`` takes that result (the catalog is not parsed again), every host's read and rendered files, and
  returns ready lists per host: the line it shows, whether it ends the role early, the kept containers to probe, and
  per rank and wave what to make, write, clear, start and probe, then the stale containers and secrets to remove.

Lists hold names, paths, variables and specs, never a secret's value: the tasks that deliver a secret look the value
up by its variable. Standard library only; plain data in and out (what Ansible registers).
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import EndpointError, endpoints
from ansible_collections.gangplank.platform.plugins.module_utils.deploy import mps
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import catalog_secrets
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    MPS_OF, DeployError, decide, desired_on_hosts, in_place, make_directory_argv, parse_catalog, restart_settings,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import EngineError, driver
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_read import stale_secrets
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.nvme_adoption import adoptions
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.proxy import (
    DEFAULT_ADDRESS, host_settings, proxy_config, proxy_directories, proxy_frontends)

# What a read names a leftover of a container by (deploy_read.parse): a monitor's "<pid>:<container id>:" prefix.
_MONITOR_PREFIX = re.compile(r"[0-9]+:[0-9a-f]+:")
# A published port "address:host:container" or "host:container", as a read names a forwarding rule's destination.
_CONTAINER_PORT = re.compile(r":[0-9]+\Z")


def _read_of(reads, host):
    read = reads.get(host)
    if not isinstance(read, dict) or not isinstance(read.get("settings"), dict):
        raise DeployError("%s: no read of the host with its settings (gangplank.platform.deploy_read with settings)"
                          % host)
    return read


def containers_step(hosts, reads, services, everywhere=None, catalog=None, proxy=None):
    """Every host's containers from its read, the catalog parsed once (or taken as ``catalog``, the parse of
    ``services`` an earlier task of the run handed along: gangplank.platform.catalog's).

    Returns ``missing`` (why some host cannot be deployed, one sentence per host; '' when every host can: then nothing
    else is worked out), ``containers`` (host -> its containers, deploy.desired_containers()), ``render`` (host -> the
    config files to render there: ``path``, ``dest``, ``src`` or ``content``, and the container's spec as ``instance``,
    which the template sees as ``deploy_instance``) and ``restarts`` (what the waves read of each service, so that
    rollout_step does not parse the catalog again), ``endpoints`` (service -> where its instances answer,
    module_utils/deploy/endpoints.py, from every host's bindings: config templates see them as ``gangplank_endpoints``) and
    ``secrets`` (each service's secrets, catalog.catalog_secrets(): what the secret_values action reads the values by,
    so that it does not parse the catalog again); and, where some service asks for the local proxy, ``proxy``: its
    ``config`` (the same text on every host, deploy/proxy.proxy_config() of the endpoints, with the site's settings
    ``proxy``), its ``frontends`` (service -> port -> address:listen, deploy/proxy.proxy_frontends(): config
    templates see them as ``gangplank_proxy``) and ``directories`` (the argv that makes the directories of its pid file
    and socket, root's on every component, deploy/proxy.proxy_directories()); where hosts set their own address,
    socket or pid file (``proxy`` in a read's settings: several hosts on one machine), ``hosts`` instead: host -> its
    own ``config``, ``frontends`` and ``directories``. A value that cannot go into the configuration raises ProxyError
    (naming the host, for a host's own setting). Where some config file changes in place (``change`` signal or none), ``in_place``:
    host -> the host paths of those files, compared with the SHA-256 the host's read found (``config_files``)."""
    hosts = list(hosts)
    missing = " ".join(_read_of(reads, host)["missing"] for host in hosts if _read_of(reads, host).get("missing"))
    if missing:
        return {"missing": missing, "containers": {}, "render": {}, "restarts": {}, "secrets": {}}
    catalog = parse_catalog(services, handed=catalog)
    # A host's own proxy settings (``proxy`` in its read's settings) are the proxy's, not its containers'.
    settings = {host: _without_proxy(reads[host]["settings"]) for host in hosts}
    # ``everywhere`` (host -> instances and publish_address, every host of the plan): the endpoints of the whole plan;
    # else those of the hosts deployed here. A host deployed here counts with its read settings.
    found = _endpoints(dict(everywhere or {}, **settings), services)
    if any(spec.get("dynamic_ports") for spec in catalog[1].values()):
        # Only a site with dynamic ports hands them to the instances (GANGPLANK_ENDPOINTS_<SERVICE>): other specs stay
        # as they were.
        settings = {host: dict(entry, endpoints=found) if isinstance(entry, dict) else entry
                    for host, entry in settings.items()}
    desired = desired_on_hosts(settings, services, catalog=catalog)
    render = {host: [{"path": entry["path"], "dest": entry["dest"], "src": entry.get("src"),
                      "content": entry.get("content"), "instance": container}
                     for container in desired[host] for entry in container["config"]] for host in hosts}
    result = {"missing": "", "containers": desired, "render": render, "restarts": restart_settings(catalog),
              "endpoints": found, "secrets": catalog_secrets(catalog[1])}
    in_place_files = {host: [entry["path"] for container in desired[host] for entry in container["config"] if in_place(entry)]
                      for host in hosts}
    if any(in_place_files.values()):
        # Only a site with config files that change in place (change: signal or none) reads them on the hosts.
        result["in_place"] = in_place_files
    if any((spec or {}).get("proxy") for spec in catalog[1].values()):
        # Only a site that asks for the local proxy gets its configuration (module_utils/deploy/proxy.py).
        result["proxy"] = _proxy(hosts, reads, found, catalog[1], proxy)
    return result


def _without_proxy(settings):
    if isinstance(settings, dict) and "proxy" in settings:
        return {key: value for key, value in settings.items() if key != "proxy"}
    return settings


def _proxy(hosts, reads, found, deploy, site):
    """The local proxy of every host: one ``config``, ``frontends`` and ``directories`` where every host's settings are
    the same (a site that sets them once), else ``hosts``: host -> its own (several hosts on one machine)."""
    own = {host: reads[host]["settings"].get("proxy") for host in hosts if reads[host]["settings"].get("proxy")}
    per_host = host_settings(hosts, site, own)
    made = []
    for host in hosts:
        if not any(settings == per_host[host] for settings, _made in made):
            made.append((per_host[host], _proxy_of(found, deploy, per_host[host])))
    if len(made) <= 1:
        return made[0][1] if made else _proxy_of(found, deploy, dict(site or {}))
    return {"hosts": {host: next(entry for settings, entry in made if settings == per_host[host]) for host in hosts}}


def _proxy_of(found, deploy, settings):
    return {"config": proxy_config(found, deploy, settings),
            "frontends": proxy_frontends(deploy, settings.get("address", DEFAULT_ADDRESS)),
            "directories": proxy_directories(settings)}


def _endpoints(settings, services):
    """The endpoints of every service from each host's bindings and publish address; DeployError for a bad one."""
    hosts, addresses = {}, {}
    for host, entry in settings.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("instances"), dict):
            continue        # desired_on_hosts names the host
        hosts[host] = {"instances": entry["instances"]}
        addresses[host] = entry.get("publish_address")
    try:
        return endpoints(hosts, services, addresses)
    except EndpointError as error:
        raise DeployError(str(error)) from None


def hosts_stale_secrets(hosts, reads, desired, engines=None):
    """Host -> the secrets on it that no container uses any more (deploy_read.stale_secrets), for the hosts that have
    some: ``reads`` and ``engines`` in the order of ``hosts`` (without ``engines``, each read's ``settings.engine``),
    ``desired`` each host's containers. A host whose read found no engine has none."""
    hosts, reads = list(hosts), list(reads)
    engines = list(engines) if engines is not None else [
        ((read.get("settings") or {}).get("engine") if isinstance(read, dict) else None) for read in reads]
    if not len(hosts) == len(reads) == len(engines) or not isinstance(desired, dict):
        raise DeployError("stale secrets: %d hosts, but %d reads and %d engines"
                          % (len(hosts), len(reads), len(engines)))
    stale = {}
    for host, read, engine in zip(hosts, reads, engines):
        if not isinstance(read, dict) or not read.get("engine_found"):
            continue
        names = stale_secrets(read, desired.get(host) or [], engine)
        if names:
            stale[host] = names
    return stale


def rollout_step(hosts, reads, rendered, containers, secret_hashes=None, hash_key=None, check_mode=False,
                 probe_kept=True):
    """The decision over every host, as ready lists (the module's documentation, RETURN, describes each).

    ``containers`` is containers_step()'s result; ``reads`` and ``rendered`` map each host to its read and its rendered
    config files (path -> text). ``probe_kept``: probe the kept containers of the unchanged ranks (not in check mode).
    The config files that change in place (containers_step's ``in_place``) are compared with what each host's read
    found (deploy_read's ``config_files``: path -> SHA-256; a file it did not find is missing).
    """
    hosts = list(hosts)
    desired = containers["containers"]
    host_reads = [_read_of(reads, host) for host in hosts]
    unused = hosts_stale_secrets(hosts, host_reads, desired)
    paths = containers.get("in_place") or {}
    now = [{path: (read.get("config_files") or {}).get(path) for path in paths.get(host) or []}
           for host, read in zip(hosts, host_reads)] if paths else None
    decision = decide(hosts, [desired.get(host) or [] for host in hosts], [rendered.get(host) or {} for host in hosts],
                      [read.get("containers") or [] for read in host_reads], secret_hashes=secret_hashes,
                      hash_key=hash_key, notes=[read.get("note") or "" for read in host_reads], check_mode=check_mode,
                      restarts=containers["restarts"], stale_secrets=unused, files_now=now)
    order = decision["waves"]
    plans = {}
    lines = dict(decision["lines"])
    for host, read in zip(hosts, host_reads):
        # The local proxy of a catalog that no longer asks for one: removed from the host in this run.
        remove_proxy = "proxy" not in containers and (read.get("proxy") or {}).get("found") is True
        if remove_proxy:
            lines[host] = (lines.get(host) or "") + "; %s the local proxy (no service asks for it)" % (
                "would remove" if check_mode else "remove")
        kept = decision["kept"].get(host) or []
        # A host whose proxy goes stays in the role for the removal.
        done = host in decision["idle"] and not remove_proxy
        probed = kept if probe_kept and not check_mode else []
        plans[host] = {
            "end_before_probe": done and not probed,
            "end_after_probe": done,
            "kept": _report_entries(probed),
            "kept_probes": [container["probe"] for container in probed],
            "ranks": {str(rank): _rank(decision["rollouts"][host], rank, order, read)
                      for rank in order["active_ranks"]},
            "stale": decision["rollouts"][host]["stale"],
            "stale_secrets": unused.get(host) or [],
            "stale_mps_dirs": _stale_mps_dirs(decision["rollouts"][host]["stale"], read),
            # The per-service NVMe directories a site had before volumes (module_utils/deploy/nvme_adoption.py).
            "nvme_adoptions": adoptions(desired.get(host) or []),
            "remove_proxy": remove_proxy,
        }
    _keep_one_for_the_lock(hosts, plans)
    return {"lines": lines, "waves": order, "hosts": plans}


def _stale_mps_dirs(stale, read):
    """The MPS directories (mps.host_dir) of the stale MPS daemons of a host, removed with them."""
    labels = {}
    for item in read.get("containers") or []:
        name = str(item.get("Name") or (item.get("Names") or [""])[0]).lstrip("/")
        labels[name] = (item.get("Config") or {}).get("Labels") or item.get("Labels") or {}
    directory = read["settings"].get("mps_dir") or mps.DEFAULT_DIR
    found = [mps.stale_dir(name, labels.get(name) or {}, directory) for name in stale]
    return [path for path in found if path]


def _keep_one_for_the_lock(hosts, plans):
    """The lock is released by a run_once task at the role's end, which only a host still in the role runs: when every
    host would end the role early, the play's first host stays (``releases_lock``) to run it."""
    if hosts and all(plans[host]["end_after_probe"] for host in hosts):
        plans[hosts[0]].update(end_before_probe=False, end_after_probe=False, releases_lock=True)
    for host in hosts:
        plans[host].setdefault("releases_lock", False)


def _report_entries(containers):
    """What the failure report (module_utils/deploy/rank_failure.py) reads of each container, by name."""
    return {container["name"]: {"instance": container["instance"], "probe": container["probe"]}
            for container in containers}


def _unique(items):
    return list(dict.fromkeys(items))


def _rank(plan, rank, order, read):
    """One rank on one host: what its tasks (tasks/rank.yml) make, write and remove, and its waves."""
    settings = read["settings"]
    data_dir = settings.get("data_dir")
    here = [container for container in plan["containers"] if container["rank"] == rank]
    files = [entry for container in here for entry in container["config"]]
    config_dirs = [posixpath.dirname(entry["path"]) for entry in files]
    # Rewritten in place, so that a kept container reads the new text through its bind mount (the inode it holds), and
    # only where the host's file differs (a second run writes nothing): deploy.in_place_update.
    in_place_files = [entry for entry in files if in_place(entry)]
    # A container that starts gets all of them; a kept one those that changed (``update``); one kept as it is, none.
    written = {path for container in here for path in (
        container["update"]["files"] if container["action"] == "update"
        else [] if container["action"] == "keep" else [entry["path"] for entry in container["config"] if in_place(entry)])}
    count = order["waves"][str(rank)]
    result = {
        "containers": _report_entries(here),
        # Each instance's directory and its config directory, private: the rendered files may hold secrets.
        "config_dirs": _unique(([data_dir] if config_dirs else []) + [posixpath.dirname(path) for path in config_dirs]
                               + config_dirs),
        "nvme_dirs": _unique(path for container in here for path in container["directories"]),
        # Each volume's own directory, made once with its mode and owner (deploy.make_directory_argv), after the root of
        # the disk volumes (private: 0700).
        "volume_dirs": _volume_dirs(here, settings.get("volume_dir")),
        "config_files": [entry for entry in files if not entry.get("diff") and not in_place(entry)],
        "config_files_shown": [entry for entry in files if entry.get("diff") and not in_place(entry)],
        "evict": [entry["name"] for entry in plan["evict"] if entry["rank"] == rank],
        "waves": [_wave([container for container in here
                         if order["wave_of"].get(container["name"], 0) == wave], read) for wave in range(count)],
    }
    if in_place_files:
        # Only in a rank with such files: every other rank's lists stay as they were.
        result["config_files_in_place"] = [entry for entry in in_place_files if entry["path"] in written]
    return result


def _volume_dirs(containers, volume_dir):
    entries = [entry for container in containers for entry in container.get("data_dirs") or []]
    if volume_dir and any(entry["where"] == "disk" for entry in entries):
        entries = [{"path": volume_dir, "mode": "0700", "uid": None, "gid": None}] + entries
    return [{"path": entry["path"], "argv": make_directory_argv(entry)} for entry in entries]


def _wave(containers, read):
    """One wave of a rank on one host (tasks/wave.yml)."""
    engine = read["settings"].get("engine")
    # A container whose config files change in place (``update``) is kept: it is signalled, not started.
    starting = [container for container in containers if container["action"] not in ("keep", "update")]
    # Without the engine (check mode before the runtime role ran), the host's line already says what would start.
    started = starting if read.get("engine_found") else []
    # An MPS daemon made anew: Podman does not remove a container that another requires, so its instance (recreated
    # with it: the spec hash chains them) goes first.
    daemons = {container["labels"][MPS_OF] for container in containers
               if MPS_OF in container["labels"] and container["action"] == "recreate"}
    result = {
        # A sidecar shares its instance's network namespace, which the engine will not remove under it.
        "remove_sidecars": [container["name"] for container in containers
                            if container["sidecar"] and container["action"] == "recreate"]
        + [container["name"] for container in containers if container["name"] in daemons and container["action"] == "recreate"],
        "leftovers": _leftovers(starting, read) if engine == "podman" else [],
        "start": started,
        "probes": [container["probe"] for container in containers if container["probe"]],
    }
    signalled = [container for container in containers if container["action"] == "update" and container["update"]["signals"]]
    if signalled:
        # Only where a kept container's config file with change: signal was rewritten: every other wave stays as it was.
        result["signal"] = [_signal(container, signal, engine) for container in signalled
                            for signal in container["update"]["signals"]]
    return result


def _signal(container, signal, engine):
    """The kill of a kept container with ``signal`` (engine_driver.kill_argv), as the role runs it."""
    try:
        argv = driver(engine).kill_argv(container["name"], signal)
    except EngineError as error:
        raise DeployError("%s: %s" % (container["name"], error)) from None
    return {"name": container["name"], "signal": signal, "argv": argv}


def _leftovers(starting, read):
    """What a killed run left of the containers that start (deploy_read.parse: ``leftovers``, ``forwards``): a
    leftover named after one of them (as is, ``broken:<name>`` or ``<pid>:<id>:<name>``), then ``forward:<rule>`` for
    each stale forwarding rule to an address and port they publish."""
    names = {container["name"] for container in starting}

    def theirs(leftover):
        candidates = [leftover]
        if leftover.startswith("broken:"):
            candidates.append(leftover[len("broken:"):])
        monitor = _MONITOR_PREFIX.match(leftover)
        if monitor:
            candidates.append(leftover[monitor.end():])
        return any(candidate in names for candidate in candidates)

    publishing = {_CONTAINER_PORT.sub("", port) for container in starting for port in container["ports"]}
    return ([leftover for leftover in read.get("leftovers") or [] if theirs(leftover)]
            + ["forward:" + entry["rule"] for entry in read.get("forwards") or [] if entry["published"] in publishing])
