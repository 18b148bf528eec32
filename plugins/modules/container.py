#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: container
short_description: Start or remove one container from its spec, with Podman or Docker
version_added: 0.1.0
description:
  - Turns one container spec (as M(gangplank.platform.deploy_plan) returns them) into the arguments of the engine's
    module and runs it on the host, as M(ansible.builtin.package) runs the host's package module, either
    M(containers.podman.podman_container) or M(community.docker.docker_container). An empty option of the spec is left
    out (the module's default).
  - With Docker, an env secret becomes a variable of the container, its value from O(secret_values) (Docker has no
    secrets without Swarm); a file secret is bind-mounted read-only from its private file. With Podman, the spec names
    the Podman secrets made before.
  - A GPU share's MPS control daemon and its instance (docs/deploy.md, GPU shares under MPS) take one step each on the
    host first, not in check mode. Before the daemon starts, its directories are made (C(<dir>) 0700, its C(pipe),
    C(shm) and C(log) 1777) and an earlier daemon's ready file is removed; before the instance starts, the action waits
    for the daemon's ready file (its limits are set), at most the spec's timeout, and fails without starting the
    instance when it does not come, with the daemon's last log lines. With Podman the instance C(requires) its daemon.
  - "Returns the module's result. A failure to start says C(<name>: <message>[ stderr: <its end>]), with every value of
    the spec's env and of O(secret_values) masked; the inspect data the module returns is never in it. Run it with
    C(no_log) all the same: the module's arguments and result hold the env."
  - This is an action plugin.
options:
  engine:
    description: The host's container engine (C(cluster_engine)).
    type: str
    required: true
    choices: [docker, podman]
  state:
    description:
      - C(started) creates, recreates or starts the container of O(spec); C(absent) removes the container O(name).
    type: str
    default: started
    choices: [started, absent]
  spec:
    description: The container's spec. Required with O(state=started).
    type: dict
  name:
    description: The container to remove. Required with O(state=absent).
    type: str
  recreate:
    description: Make the container anew even when the engine's module would keep it.
    type: bool
    default: false
  secret_values:
    description:
      - The values of the catalog's secrets by variable (C(cluster_secret_values)); Docker's env secrets read them.
    type: dict
    default: {}
attributes:
  action:
    support: full
    description: Runs the engine's module on the host.
  check_mode:
    support: full
    description: As the engine's module.
  diff_mode:
    support: full
    description: As the engine's module.
  platform:
    support: full
    platforms: posix
    description: Runs on POSIX hosts with Podman or Docker.
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Create, recreate or start the containers
  gangplank.platform.container:
    engine: "{{ cluster_engine }}"
    spec: "{{ item }}"
    recreate: "{{ item.action == 'recreate' }}"
    secret_values: "{{ cluster_secret_values }}"
  loop: "{{ wave.start }}"
  no_log: true

- name: Remove a container
  gangplank.platform.container:
    engine: podman
    name: node1-web-0
    state: absent
"""

RETURN = r"""
msg:
  description:
    - "On a failure to start, C(<name>: <message>[ stderr: <its end>]), the env's and the secrets' values masked."
  returned: on failure
  type: str
container:
  description: The engine module's inspect data of the container (it holds the env).
  returned: success, with O(state=started)
  type: dict
"""
