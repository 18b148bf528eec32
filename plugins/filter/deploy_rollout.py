# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: deploy_rollout
short_description: What to do to each of a host's containers, and which are stale
version_added: 0.1.0
description:
  - Adds the C(gangplank.io/config-hash) label (the hash of the rendered config files) and the C(gangplank.io/spec-hash)
    label (the hash of everything the container is made from) to each container from
    a host's container specs (C(containers) of M(gangplank.platform.deploy_plan) with O(gangplank.platform.deploy_plan#module:step=containers)), and compares
    them with the containers that exist.
  - 'Each container gets an action: C(create) (missing), C(recreate) (its spec hash changed, or its instance was recreated,
    for a sidecar), C(start) (same spec, not running) or C(keep).'
  - Stale containers are those labelled as managed on this host that are no longer wanted, sidecars first, then the highest ordinals.
  - C(evict) lists the stale containers that publish a host port a created, recreated or started container needs,
    each with the earliest such rank (its sidecars with it, first), to be removed before that rank.
  - Fails when a wanted name is taken by a container that gangplank does not manage.
options:
  _input:
    description: The host's container specs (C(containers) of M(gangplank.platform.deploy_plan) with O(gangplank.platform.deploy_plan#module:step=containers)).
    type: list
    elements: dict
    required: true
  host:
    description: The host's inventory name.
    type: str
    required: true
  rendered:
    description: Each config file's host path mapped to its rendered text.
    type: dict
    required: true
  existing:
    description:
      - The engine's inspect data of every container, or only its C(Name), C(State.Running), C(Config.Labels) and
        C(HostConfig.PortBindings), as the deploy role reads them (never the env, docs/secrets.md).
    type: list
    elements: dict
    required: true
  secret_hashes:
    description:
      - Each secret's variable mapped to its keyed hash (C(hashes) from gangplank.platform.secret_values).
      - A changed hash recreates exactly the containers that use the secret.
    type: dict
    default: {}
  hash_key:
    description:
      - The site's secret hash key (C(cluster_secret_hash_key)); with it the config hash label is keyed (HMAC-SHA256),
        since a rendered config file may hold a secret. Without it, a plain SHA-256.
    type: str
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Decide what changes on this host
  ansible.builtin.set_fact:
    rollout: "{{ containers | gangplank.platform.deploy_rollout(host=inventory_hostname, rendered=rendered,
      existing=podman_info.containers) }}"
"""

RETURN = r"""
_value:
  description: >-
    C(containers) (each with C(action) and its hash labels), C(stale) (names, sidecars first), C(evict) (C(rank) and C(name)) and C(summary)
    (lists of names to C(start), C(restart), C(stop) and C(keep)).
  type: dict
"""

from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


# ValueError: the rollout's DeployError is one. The deploy's modules (the scheduler's model among them) are imported
# when the filter runs, not with this file: Ansible loads every filter file of the collection in each worker that
# templates any of them, once per task and host.
@filter_errors(ValueError)
def deploy_rollout(containers, host, rendered, existing, secret_hashes=None, hash_key=None):
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import rollout
    return rollout(host, containers, rendered, existing, secret_hashes=secret_hashes, hash_key=hash_key)


class FilterModule:
    def filters(self):
        return {"deploy_rollout": deploy_rollout}
