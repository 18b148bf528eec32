# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: deploy_containers
short_description: The containers one host should run for its scheduled instances
version_added: 0.1.0
description:
  - Turns a host's instance bindings (from the gangplank.platform.schedule role or the node's fact file) and
    the app catalog into container specs, in rank order, each instance before its sidecars.
  - Each spec has the image, command, environment (C(GANGPLANK_INSTANCE), C(GANGPLANK_SERVICE), C(GANGPLANK_ORDINAL),
    C(GANGPLANK_NODE), C(GANGPLANK_PORTS), C(NVIDIA_VISIBLE_DEVICES) and C(GANGPLANK_GPU_MEMORY) for GPU instances,
    C(GANGPLANK_NVME_DIR), then the catalog's C(env)), published ports, GPU devices by CDI name
    (C(nvidia.com/gpu=<uuid>)), volumes (config files read-only, the NVMe directory C(<mount>/gangplank/<service>)),
    labels, the config files to render and the health probe for gangplank.platform.health_wait.
  - A sidecar joins its instance's network namespace; the instance's container publishes the sidecar's ports.
  - Fails, naming the path, when the catalog's deploy keys are not valid or a placed service has no image.
options:
  _input:
    description: The host's instances, as the gangplank.platform.schedule role publishes them in C(schedule_node_instances) (node -> its instances).
    type: dict
    required: true
  host:
    description: The host's inventory name; it prefixes container names and fills the C(gangplank.io/node) label.
    type: str
    required: true
  services:
    description: The app catalog (C(gangplank_services)).
    type: dict
    required: true
  data_dir:
    description: The directory on the host that holds each container's rendered config files.
    type: str
    required: true
  publish_address:
    description: The host address to publish ports on; empty publishes on every address.
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
    description: The host's container engine (C(podman) or C(docker)), whose command runs command probes (C(<engine> exec <container> ...)).
    type: str
    default: podman
    choices: [podman, docker]
  limits:
    description:
      - Give each container the CPU and memory the scheduler reserved for it as limits (C(cpus) in cores, C(memory) in bytes).
      - False where the engine cannot enforce them; both are then null.
    type: bool
    default: true
  secret_dir:
    description:
      - The private directory on the host (C(cluster_secret_dir), under /run) that holds a Docker container's file secrets,
        one directory per container. Podman keeps them as Podman secrets instead.
    type: str
    default: /run/gangplank/secrets
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Work out this host's containers
  ansible.builtin.set_fact:
    containers: "{{ schedule_node_instances[inventory_hostname] | gangplank.platform.deploy_containers(host=inventory_hostname,
      services=gangplank_services, data_dir='/var/lib/gangplank/instances') }}"
"""

RETURN = r"""
_value:
  description: >-
    One entry per container with name, instance, service, rank, sidecar, image, command, env, ports, devices, volumes,
    directories, network, init, stop_timeout, restart_policy, cpus, memory, labels, config (dest, src or content, mode, group,
    path), secrets (name, var, delivery, env, target, mode, uid, gid, engine_name, option, path: never a value), mounts
    (Docker's file secrets), podman_secrets (Podman's --secret options) and probe.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import DeployError, desired_containers
from ansible_collections.gangplank.platform.plugins.module_utils.secrets import DEFAULT_SECRET_DIR


def deploy_containers(instances, host, services, data_dir, publish_address="", probe_address="127.0.0.1",
                      gpu_mode="cdi", engine="podman", limits=True, secret_dir=DEFAULT_SECRET_DIR):
    try:
        return desired_containers(host, instances, services, data_dir, publish_address=publish_address,
                                  probe_address=probe_address, gpu_mode=gpu_mode, engine=engine, limits=limits,
                                  secret_dir=secret_dir)
    except DeployError as error:
        raise AnsibleFilterError(str(error)) from None


class FilterModule:
    def filters(self):
        return {"deploy_containers": deploy_containers}
