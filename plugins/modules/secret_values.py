#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: secret_values
short_description: Read the values of the catalog's secrets from their (vaulted) variables, on the controller
version_added: 0.1.0
description:
  - Each secret of the app catalog (C(services.<name>.secrets), documented in the collection's C(docs/catalog.md)) names
    the Ansible variable that holds its value. This reads every such variable as the targeted host sees it (inventory,
    group and host variables, C(-e @file), Ansible Vault values decrypted with the run's vault password) and returns
    the values and their keyed hashes (HMAC-SHA256 under the site's key).
  - It never fails on a secret. A variable that is not defined, cannot be decrypted (no or a wrong vault password),
    is empty, is not a string or is too large is returned in C(errors), each naming the catalog path
    (C(services.api.secrets.db_password)) and the variable, never a value, so that the task can be C(no_log) and a next
    task can still say what is wrong. The deploy role (through the gangplank.platform.cluster role's C(secrets.yml))
    fails on them on every host before anything changes.
  - This is an action plugin. It runs on the controller, whatever host the task targets.
options:
  services:
    description: The app catalog (C(gangplank_services)). One of O(services) and O(secret_specs) is required.
    type: dict
  secret_specs:
    description:
      - Instead of O(services), the catalog's secrets as an earlier step of the run parsed them (the C(secrets) that
        M(gangplank.platform.deploy_plan) returns with C(step=containers), service name to its list of secrets), so that
        the catalog is not parsed again.
    type: dict
  hash_key:
    description: The site's secret hash key (at least 32 characters), kept private on the control hosts.
    type: str
    required: true
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: Reads only, so check mode returns the same values.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: all
    description: Needs nothing from the targeted host.
author:
  - Gangplank maintainers (@gangplank)
notes:
  - Always use it with C(no_log) true; its result holds the values.
  - Values are strings (numbers are read as text) of 1 to 512,000 bytes (Podman's bound); an env secret cannot hold NUL.
"""

EXAMPLES = r"""
- name: Read the catalog's secrets
  gangplank.platform.secret_values:
    services: "{{ gangplank_services }}"
    hash_key: "{{ cluster_secret_hash_key }}"
  register: secrets
  no_log: true

- name: Say what is wrong with them
  ansible.builtin.fail:
    msg: "{{ secrets.msg }}"
  when: secrets.errors | length > 0
"""

RETURN = r"""
secrets:
  description: Each secret's variable name mapped to its value; empty when there are errors.
  returned: always
  type: dict
hashes:
  description: Each secret's variable name mapped to its keyed hash, C(hmac-sha256:<hex>); empty when there are errors.
  returned: always
  type: dict
errors:
  description: One entry per secret that cannot be read, with its catalog path and a message without the value.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "services.api.secrets.db_password", "message": "the variable vault_db_password is not defined ..."}]
msg:
  description: The errors, one line each.
  returned: when there are errors
  type: str
"""
