#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: catalog
short_description: Parse the app catalog once for a run, for the later steps that take the parse
version_added: 0.1.0
description:
  - Reads the app catalog (C(services), documented in the collection's C(docs/catalog.md)) once, as the scheduler's half
    of each service and its deploy spec, with the mistakes of its deploy keys. M(gangplank.platform.gang_schedule) and
    M(gangplank.platform.deploy_plan) (C(step=containers)) take the result as their C(catalog) instead of parsing
    the catalog again; the schedule role runs it before its plan and the deploy role takes its result.
  - It never fails on a mistake of the catalog. The mistakes are in the result (C(catalog.errors), each with its path and
    a message that never shows a value), and M(gangplank.platform.gang_schedule) reports them with the scheduler's,
    so that this task can be C(no_log) and the run still says what is wrong.
  - This is an action plugin. It runs on the controller, whatever host the task targets.
options:
  services:
    description: The app catalog (usually the C(gangplank_services) variable).
    type: dict
    required: true
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: Reads only, so check mode returns the same parse.
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
  - Use it with C(no_log) true where the catalog's C(env) or config contents may hold secrets (docs/secrets.md); its
    result holds them. It holds no value of the catalog's C(secrets), which name their variables only.
"""

EXAMPLES = r"""
- name: Parse the catalog once for this run
  gangplank.platform.catalog:
    services: "{{ gangplank_services }}"
  register: parsed
  run_once: true
  no_log: true

- name: Plan every service instance at once
  gangplank.platform.gang_schedule:
    services: "{{ gangplank_services }}"
    catalog: "{{ parsed.catalog }}"
    hosts: "{{ ansible_play_hosts }}"
  run_once: true
"""

RETURN = r"""
catalog:
  description:
    - The parse, for the C(catalog) option of M(gangplank.platform.gang_schedule) and M(gangplank.platform.deploy_plan).
    - C(scheduling) (service name to what the scheduler places), C(deploy) (service name to its deploy spec) and
      C(errors) (each mistake as a list of its path and its message).
  returned: always
  type: dict
  sample: {"scheduling": {"api": {"replicas": 2}}, "deploy": {"api": {"image": "localhost/api:1"}}, "errors": []}
"""
