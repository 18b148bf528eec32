#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: deploy_plan
short_description: Decide the deploy of every host at once, as ready lists per host, rank and wave
version_added: 0.1.0
description:
  - The gangplank.platform.deploy role's decision over every host of the play, on the controller, in two steps around
    the rendering of the config files, which stays a task per host (a template sees the host's variables).
  - O(step=containers) parses the catalog O(services) once (or takes O(catalog), the parse an earlier task of the run
    handed along) and turns each host's read (the result of M(gangplank.platform.deploy_read) with C(settings), its
    entry of O(reads)) into its containers and
    the config files to render there. When a host cannot be deployed (no bindings, no engine), it returns why in
    RV(missing) and nothing else.
  - O(step=rollout) takes the first step's result as O(containers) (the catalog is not parsed again), each host's read
    and rendered config files (its entry of O(rendered), path to text) and the secrets' keyed hashes, and returns
    per host the line it shows, whether it ends the role early, the kept containers to probe, and per rank and wave the
    lists the role's tasks loop over. Secrets appear by name, variable, path and mode only, never a value.
  - Both results hold the catalog's C(env) and the second the containers' specs, so run it with C(no_log)
    (docs/secrets.md).
  - This is an action plugin; run it once (C(run_once)). It changes nothing.
options:
  step:
    description: Which step (see the description).
    type: str
    required: true
    choices: [containers, rollout]
  hosts:
    description: The hosts to deploy (usually C(ansible_play_hosts)), in order. Each must have its entry in O(reads).
    type: list
    elements: str
    required: true
  services:
    description: The catalog (C(gangplank_services)). Required with O(step=containers).
    type: dict
  catalog:
    description:
      - Step C(containers) - O(services) as M(gangplank.platform.catalog) parsed it earlier in the run (its C(catalog)),
        taken instead of parsing O(services) again, with the same checks. It must be the parse of O(services).
    type: dict
  reads:
    description:
      - Each host mapped to the result of M(gangplank.platform.deploy_read) it registered (with C(settings)). A host of
        O(hosts) without one fails the task.
    type: dict
    required: true
  rendered:
    description: Step C(rollout) - each host mapped to its rendered config files, host path to text; a host left out has none.
    type: dict
    default: {}
  containers:
    description: The result of O(step=containers). Required with O(step=rollout).
    type: dict
  secret_hashes:
    description: Each secret's variable mapped to its keyed hash (C(cluster_secret_hashes)).
    type: dict
    default: {}
  hash_key:
    description: The site's secret hash key (C(cluster_secret_hash_key)), which keys the config files' hash.
    type: str
  probe_kept:
    description: Probe the kept containers of the ranks that do not change (never in check mode).
    type: bool
    default: true
  plan_instances:
    description:
      - Step C(containers), when this run scheduled the cluster (C(schedule_node_instances)) - every host's instances,
        for the endpoints of the whole plan (config templates see them as C(gangplank_endpoints)); left out, the
        endpoints count the instances of O(hosts) only.
    type: dict
  proxy:
    description:
      - Step C(containers), where some service of the catalog asks for the local proxy (C(proxy),
        docs/connecting-services.md) - the site's proxy settings, C(address) (default C(169.254.30.1)), C(check_interval),
        C(fall), C(rise) (the health checks), C(connect_timeout), C(idle_timeout), C(drain_timeout), C(port_range) and
        C(socket) (the admin socket) and C(pid_file) (the master's pid file), each in a directory other users cannot
        write (not below C(/tmp), C(/var/tmp), C(/dev/shm), C(/run/lock) ...); left out, the defaults. A host's own
        C(address), C(socket) and C(pid_file) (C(proxy) in its read's settings) take the place of these.
    type: dict
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: It changes nothing; in check mode the lines say C(would).
  diff_mode:
    support: none
    description: It changes nothing, so it has no diff.
  platform:
    support: full
    platforms: all
    description: Needs nothing from the hosts; reads their C(gangplank_publish_address).
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Work out every host's containers
  gangplank.platform.deploy_plan:
    step: containers
    hosts: "{{ ansible_play_hosts }}"
    services: "{{ gangplank_services }}"
    # Each host's read, registered as `read` by gangplank.platform.deploy_read on that host.
    reads: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'read'))) }}"
  run_once: true
  no_log: true
  register: containers

- name: Decide what to start, restart and stop
  gangplank.platform.deploy_plan:
    step: rollout
    hosts: "{{ ansible_play_hosts }}"
    reads: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'read'))) }}"
    # Each host's rendered config files (path to text), set on that host as `rendered`; a host without any has none.
    rendered: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'rendered') | map('default', {}))) }}"
    containers: "{{ containers }}"
    secret_hashes: "{{ cluster_secret_hashes }}"
    hash_key: "{{ cluster_secret_hash_key }}"
  run_once: true
  no_log: true
  register: plan
"""

RETURN = r"""
missing:
  description: O(step=containers) only. Why some hosts cannot be deployed, one sentence each; empty when all can.
  returned: with O(step=containers)
  type: str
containers:
  description: O(step=containers) only. Host to its containers' specs, in rank order, each instance before its sidecars.
  returned: with O(step=containers)
  type: dict
render:
  description:
    - O(step=containers) only. Host to the config files to render there, each with C(path) (on the host), C(dest) (in
      the container), C(src) (a template) or C(content), and the container's spec as C(instance).
  returned: with O(step=containers)
  type: dict
restarts:
  description:
    - O(step=containers) only. Per service, what the waves read of the catalog (C(stateful), C(max_unavailable)).
  returned: with O(step=containers)
  type: dict
endpoints:
  description:
    - O(step=containers) only, when every host can be deployed. Per service, its instances as others reach them, in
      instance order, each with C(instance), C(node), C(address) and C(ports) (host port by name; docs/connecting-services.md).
  returned: with O(step=containers)
  type: dict
proxy:
  description:
    - O(step=containers) only, and only where some service of the catalog asks for the local proxy (C(proxy),
      docs/connecting-services.md). C(config) (the proxy's configuration, the same text on every host, from
      RV(endpoints) and O(proxy)), C(frontends) (per proxied service, per port, its C(address:listen), which config
      templates see as C(gangplank_proxy)) and C(directories) (the argv that makes the directories of the proxy's pid
      file and admin socket on a host, every component root's and writable by nobody else, failing naming the first
      that is not). Where hosts set their own proxy address, socket or pid file (C(proxy) in the settings of their
      reads, for several hosts on one machine), C(hosts) instead, host to its own C(config), C(frontends) and
      C(directories); a host's bad setting is refused naming the host and the variable.
  returned: with O(step=containers), when a service asks for the local proxy
  type: dict
in_place:
  description:
    - O(step=containers) only, and only where some config file has C(change) C(signal) or C(none) (docs/catalog.md).
      Host to the host paths of those files; O(step=rollout) compares each with its SHA-256 in the host's read
      (M(gangplank.platform.deploy_read)'s C(config_files)); a kept container whose file differs is updated in place.
  returned: with O(step=containers), when a config file changes in place
  type: dict
secrets:
  description:
    - O(step=containers) only. Per service that has secrets, its secrets as the catalog names them (C(name), C(var),
      C(delivery) ...; never a value), for O(gangplank.platform.secret_values#module:secret_specs), so that reading their
      values does not parse the catalog again.
  returned: with O(step=containers)
  type: dict
lines:
  description:
    - O(step=rollout) only. Host to its line, C(start N [...], restart N [...], stop N [...], keep N), then, for the
      kept containers whose config files change in place, C(signal SIGHUP [...]) per signal and C(file updated [...]),
      with C(would) before it in check mode, C(; remove unused secrets) followed by their names where some secret is no
      longer used, and C(; remove the local proxy) where the host has the local proxy and no service asks for it.
  returned: with O(step=rollout)
  type: dict
waves:
  description:
    - O(step=rollout) only. C(active_ranks) (the ranks where some host starts or restarts a container, or removes one
      that holds a port), C(waves) (per active rank, as a string, its number of waves) and C(wave_of) (container to
      its wave, for the restarts after the first wave).
  returned: with O(step=rollout)
  type: dict
hosts:
  description:
    - O(step=rollout) only. Per host, C(end_before_probe) and C(end_after_probe) (it has nothing to change, and nothing
      to probe), C(releases_lock) (every host would end the role early, and this one, the play's first, stays to
      release the lock), C(kept) and C(kept_probes) (the kept containers to probe, name to instance and probe, and
      their probes), C(stale) (containers no longer placed here, in removal order), C(stale_secrets) (secrets no
      container uses any more), C(stale_mps_dirs) (the host directories of the stale MPS daemons), C(remove_proxy)
      (the host has the local proxy, RV(gangplank.platform.deploy_read#module:proxy.found), and no service of the
      catalog asks for it; its unit or process, its address and its files are removed) and C(ranks).
    - C(ranks) maps each active rank (a string) to C(containers) (name to instance and probe, for the failure report),
      C(config_dirs), C(nvme_dirs), C(volume_dirs) (each volume's own directory as C(path) and the C(argv) that makes it
      with its mode and owner, run only where it does not exist), C(config_files) (written with their text hidden),
      C(config_files_shown) (opted into diffs), C(config_files_in_place) (only in a rank with config files that change
      in place - those to rewrite in place, for a container that starts all of its own, for a kept one those that
      changed), C(evict) (stale containers holding a port this rank needs) and
      C(waves), one entry per wave of the rank.
    - Each wave has C(remove_sidecars) (recreated sidecars, then the instances whose MPS daemon is recreated, removed
      first), C(leftovers) (what a killed run left of the containers that start, as the role's C(clear_leftovers.sh)
      takes them), C(start) (the specs to create, recreate or start, each with its secrets, which
      M(gangplank.platform.container) makes first; none without the engine), C(probes) and, only where a kept container's
      config file with C(change) C(signal) was rewritten, C(signal) (each with C(name), C(signal) and the engine's C(argv)).
  returned: with O(step=rollout)
  type: dict
"""
