#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: role_inputs
short_description: Check the inputs of roles of this collection against their argument specs, in one task
version_added: 0.1.0
description:
  - Does what Ansible's own check of a role's inputs does (M(ansible.builtin.validate_argument_spec) with the options of
    the role's entry point C(main) from its C(meta/argument_specs.yml)) for several roles of this collection at once,
    on the values the task sees (the play's variables, the roles' defaults where the play imports them).
  - For a play that imports the roles with C(rolespec_validate=false), as playbooks/site.yml and scale.yml do through
    the gangplank.platform.cluster role's C(check.yml), one task per host instead of one per role and host.
  - A bad value fails the task with Ansible's messages, in RV(argument_errors), naming the option.
  - This is an action plugin. It runs on the controller; the specs are read from the collection's C(roles) directory.
options:
  roles:
    description:
      - The roles whose options are checked, by short name (C(deploy)). A name that is not a plain role name
        (lowercase letters, digits and C(_), starting with a letter, the whole name, at most 64 characters; C(deploy) followed by a line break is not one)
        reads no file and fails the task (after the check of the others, which may name the option that gave it), as
        does a role without an entry point C(main).
    type: list
    elements: str
    required: true
  select:
    description: Check only the options whose names match this regular expression (from their start).
    type: str
  reject:
    description: Leave out the options whose names match this regular expression (from their start).
    type: str
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: Checks only.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Check the inputs of the roles this play imports
  gangplank.platform.role_inputs:
    roles: [runtime, facts, schedule, deploy]

- name: Check the options that are read once for every host, on the play's first host
  gangplank.platform.role_inputs:
    roles: [schedule, deploy]
    select: "^(schedule_.*|deploy_services)$"
  run_once: true
"""

RETURN = r"""
msg:
  description: That the check passed, or the validation errors.
  returned: always
  type: str
argument_errors:
  description: One message per bad input, naming the option.
  returned: failure
  type: list
  elements: str
argument_spec_data:
  description: The options checked, as their specs define them.
  returned: failure
  type: dict
validate_args_context:
  description: What was checked (the roles).
  returned: always
  type: dict
"""
