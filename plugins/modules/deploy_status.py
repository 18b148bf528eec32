#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: deploy_status
short_description: The deployment status of every host, as a table and a picture
version_added: 0.1.0
description:
  - The gangplank.platform.deploy role's status action (C(deploy_action=status)), in two steps, with the catalog parsed
    once for every host by a first one.
  - O(step=catalog), once (C(run_once)), parses the catalog O(services) and returns it (RV(catalog)), for each host's
    step=host to take as O(catalog); a catalog that is not valid fails it, naming every mistake.
  - O(step=host), on each host, turns the host's bound O(instances) and the catalog (O(catalog), or O(services)) into the containers it
    should run, probes each container that has a probe once on the host (M(gangplank.platform.health_wait), two tries
    half a second apart) and returns the host's rows (rank, node, instance, service, container, state, health, ports),
    its bound instances and its GPUs from the stored hardware facts (O(hardware)). A probe that fails is a row that
    says so; the step does not fail for it.
  - O(step=report), once (C(run_once)), takes each host's step=host result (its entry of O(statuses)) and returns the
    table's lines, by rank, then node, with a count of the healthy containers, then one line per host of O(inventory)
    that the placement O(record) places instances on and that is not among O(hosts) (down), naming the instances that
    wait for it (C(<host> is down; waiting for it) and the instances); with O(picture), the status picture as one HTML
    document.
  - Neither the step=host nor the step=report result holds a container's environment; the step=catalog result and the
    step=host arguments hold the catalog, so run them with C(no_log) where the catalog has secrets (docs/secrets.md). It changes nothing.
options:
  step:
    description: Which step (see the description).
    type: str
    required: true
    choices: [catalog, host, report]
  instances:
    description: O(step=host). The host's bound instances (its fact file's C(instances)).
    type: dict
    default: {}
  existing:
    description: O(step=host). The engine's inspect data of the host's containers (M(gangplank.platform.deploy_read)'s C(containers)).
    type: list
    elements: dict
    default: []
  hardware:
    description: O(step=host). The stored hardware facts file as M(ansible.builtin.slurp) reads it (base64); empty for none.
    type: str
    default: ''
  services:
    description:
      - O(step=catalog), required there, and O(step=host) without O(catalog). The app catalog (C(gangplank_services)).
    type: dict
  catalog:
    description:
      - O(step=host), instead of O(services). The parsed catalog the step=catalog task returned (its RV(catalog)), so
        that the catalog is not parsed again on each host.
    type: dict
  settings:
    description: O(step=host), required there. What the containers are made from.
    type: dict
    suboptions:
      data_dir:
        description: The directory on the host that holds each container's rendered config files.
        type: str
        required: true
      publish_address:
        description: The host address ports are published on; empty for every address.
        type: str
        default: ''
      probe_address:
        description: The address HTTP and TCP probes connect to from the host itself.
        type: str
        default: 127.0.0.1
      gpu_mode:
        description: C(cdi) passes GPUs as CDI devices; C(simulated) passes only the environment (hosts with simulated GPUs).
        type: str
        default: cdi
        choices: [cdi, simulated]
      engine:
        description: The host's container engine, whose command runs command probes.
        type: str
        default: podman
        choices: [podman, docker]
      volume_dir:
        description: Where the disk volumes live on the host (C(cluster_volume_dir)); needed where a service has disk volumes.
        type: str
  hosts:
    description: O(step=report), required there. The live hosts (usually C(ansible_play_hosts)), in order.
    type: list
    elements: str
  inventory:
    description: O(step=report). Every host of the inventory (C(groups['all'])); a recorded host among them that is not live is down.
    type: list
    elements: str
    default: []
  record:
    description: O(step=report). The placement record (M(gangplank.platform.cluster_state)'s C(record)); empty when every host is live.
    type: dict
    default: {}
  picture:
    description: O(step=report). Also return the picture (RV(html)).
    type: bool
    default: false
  statuses:
    description: O(step=report). Each host of O(hosts) mapped to the step=host result it registered.
    type: dict
    default: {}
  watchdog_state:
    description:
      - O(step=host). The GPU watchdog's state file on the host (docs/gpu-sharing.md); read (at most 4 MiB and one byte,
        with C(head) and C(base64) on the host) only when a bound instance has GPUs. Empty for none.
    type: str
    default: ''
  sharing:
    description: O(step=host). The host's GPU sharing mode, for instances the watchdog has not seen (C(mps) enforced, C(none) advisory).
    type: str
    default: none
    choices: [mps, none]
attributes:
  action:
    support: full
    description: Runs on the controller; step=host runs M(gangplank.platform.health_wait) on the host.
  check_mode:
    support: full
    description: It changes nothing; it probes in check mode too.
  diff_mode:
    support: none
    description: It changes nothing, so it has no diff.
  platform:
    support: full
    platforms: posix
    description: Probes POSIX hosts.
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Parse the catalog once for every host
  gangplank.platform.deploy_status:
    step: catalog
    services: "{{ gangplank_services }}"
  register: status_catalog
  run_once: true
  no_log: true

- name: Probe every instance once and make this host's rows
  gangplank.platform.deploy_status:
    step: host
    instances: "{{ node_bindings.instances }}"
    existing: "{{ node_read.containers }}"
    catalog: "{{ status_catalog.catalog }}"
    settings:
      data_dir: /var/lib/gangplank/instances
  register: host_status
  no_log: true

- name: Make the table
  gangplank.platform.deploy_status:
    step: report
    hosts: "{{ ansible_play_hosts }}"
    inventory: "{{ groups['all'] }}"
    statuses: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'host_status'))) }}"
  register: report
  run_once: true
"""

RETURN = r"""
catalog:
  description:
    - O(step=catalog). The parsed catalog (C(scheduling), the scheduler's keys of each service, and C(deploy), each
      service's deploy spec), for O(catalog) of the step=host task. It holds the catalog's env; never a secret's value.
  returned: with O(step=catalog)
  type: dict
rows:
  description: O(step=host). One row per container, with node, rank, instance, container, service, state, health, ports.
  returned: with O(step=host)
  type: list
  elements: dict
bound:
  description: O(step=host). The host's bound instances, as given in O(instances).
  returned: with O(step=host)
  type: dict
gpus:
  description: O(step=host). The host's GPUs from its stored hardware facts; empty without them.
  returned: with O(step=host)
  type: list
  elements: dict
lines:
  description: O(step=report). The table's lines, then one line per host that is down (see the description).
  returned: with O(step=report)
  type: list
  elements: str
  sample: ["rank  node  instance  service  container  state    health  ports", "0 of 1 container(s) running and healthy",
           "gone is down; waiting for it: db-0"]
down:
  description: O(step=report). Each down host mapped to its recorded instances (instance to its placement).
  returned: with O(step=report)
  type: dict
shares:
  description:
    - O(step=host), with O(watchdog_state) and GPU instances. One row per GPU of each GPU instance, with node, instance, gpu,
      used (bytes, the watchdog's last NVML reading; null without one), granted (bytes), cores (the SM share in percent,
      or null), sharing (C(enforced (mps)) or C(advisory)) and watchdog (C(ok), C(over), C(warned), C(stopped), C(no data)).
  returned: with O(step=host)
  type: list
  elements: dict
watchdog_lines:
  description: O(step=host). The GPU watchdog's findings on the host (not polling, over a grant, bypasses), one line each.
  returned: with O(step=host)
  type: list
  elements: str
gpu_lines:
  description: O(step=report). The GPU share table over every host (used/granted GiB, SM share, enforced or advisory), then every watchdog line.
  returned: with O(step=report)
  type: list
  elements: str
html:
  description: O(step=report). The status picture, one self-contained HTML document.
  returned: with O(picture)
  type: str
"""
