#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: container
short_description: Start or remove one container and its secrets from its spec, with Podman or Docker
version_added: 0.1.0
description:
  - Turns one container spec (as M(gangplank.platform.deploy_plan) returns them) into the calls of the engine's driver
    (one option table, a converter per engine; plugins/module_utils/deploy/engine_driver.py) and runs them on the host in
    order, stopping at the first failure, as M(ansible.builtin.package) runs the host's package module; the container's
    secrets first, then M(containers.podman.podman_container) or M(community.docker.docker_container). An empty option
    of the spec is left out (the module's default).
  - "With Podman, one Podman secret per container and secret (M(containers.podman.podman_secret), named
    C(<container>.<secret>)), made anew for a container that is created or recreated (the spec's C(action), or
    O(recreate)), its value from O(secret_values); the spec names them in its C(--secret) options."
  - With Docker (no secrets without Swarm), a file secret is a private file C(<secret_dir>/<container>/<secret>)
    (directories 0700), written by M(ansible.builtin.copy) as M(ansible.builtin.template) hands it its text and
    bind-mounted read-only; an env secret becomes a variable of the container, its value from O(secret_values).
  - A step that carries a secret's value reports only whether it changed and, on failure, a message that names the
    module and the secret, never the value.
  - With O(state=absent), the container O(name) (when given), then the secrets O(secrets), by name (the removal never
    lists secrets on the host).
  - A GPU share's MPS control daemon and its instance (docs/deploy.md, GPU shares under MPS) take one step each on the
    host first, not in check mode. Before the daemon starts, its directories are made (C(<dir>) 0700, its C(pipe),
    C(shm) and C(log) 1777) and an earlier daemon's ready file is removed; before the instance starts, the action waits
    for the daemon's ready file (its limits are set), at most the spec's timeout, and fails without starting the
    instance when it does not come, with the daemon's last log lines. With Podman the instance C(requires) its daemon.
  - With Podman, before a container that joins Podman's own network starts (not one with C(network) C(none) or a
    sidecar's C(container:<name>)), each of Podman's bridges (C(podman<N>), C(cni-podman<N>)) whose MAC address nobody
    set gets its present one, with C(ip link set) (docs/connecting-services.md); otherwise the bridge takes the lowest
    address of its ports, which changes as containers come and go, and the other containers lose their gateway until
    their ARP entry is renewed. A bridge whose address cannot be fixed (no C(ip) on the host) is a warning. Not in check
    mode.
  - "Returns the module's result. A failure to start says C(<name>: <message>[ stderr: <its end>]), with every value of
    the spec's env and of O(secret_values) masked; the inspect data the module returns is never in it. Run it with
    C(no_log) all the same: the module's arguments and result hold the env."
  - "With O(state=pulled), the images O(images) are brought onto the host before any container that runs them is created,
    each only when the host does not hold it (an image loaded from a bundle is never pulled). One command on the host
    first asks the engine which of them it lacks (C(image inspect) of each); with none missing no module runs. For
    the missing ones: first a login to each registry of O(registries) that one of them names
    (M(containers.podman.podman_login) or
    M(community.docker.docker_login), its password from O(registry_passwords), the step's result never shown), then
    M(containers.podman.podman_image) or M(community.docker.docker_image_pull) per image, then a logout of each
    registry logged in to (M(containers.podman.podman_logout), or M(community.docker.docker_login) with
    C(state=absent)), whatever the pulls gave: no credentials stay on the host. A failure says
    C(cannot pull <image> from registry <registry>: ...), never a password."
  - This is an action plugin.
options:
  engine:
    description: The host's container engine (C(cluster_engine)).
    type: str
    required: true
    choices: [docker, podman]
  state:
    description:
      - C(started) creates, recreates or starts the container of O(spec); C(absent) removes the container O(name);
        C(pulled) pulls the O(images) the host does not hold.
    type: str
    default: started
    choices: [started, absent, pulled]
  images:
    description: With O(state=pulled), the image references to pull, in order; one named twice is pulled once.
    type: list
    elements: str
    default: []
  registries:
    description:
      - With O(state=pulled), the registries that need a login (C(deploy_registries), docs/deploy.md), each a dict
        with C(registry) (C(host[:port]), as the image references name it), C(username), C(password_var) (the variable
        that holds the password, a key of O(registry_passwords)) and, for Podman, C(ca_cert_dir) (a directory on the
        host with the registry's CA certificate, C(*.crt)).
    type: list
    elements: dict
    default: []
  registry_passwords:
    description: Each C(password_var) of O(registries) -> its value.
    type: dict
    default: {}
  spec:
    description: The container's spec. Required with O(state=started).
    type: dict
  name:
    description: The container to remove, with O(state=absent). Without it, only O(secrets) are removed.
    type: str
  secrets:
    description:
      - With O(state=absent), the secrets to remove after the container, as the engine names them (C(secrets_of) and
        C(stale_secrets) of the deploy read and plan), never listed on the host.
      - Podman's secret names C(<container>.<secret>); Docker's paths below O(secret_dir), a container's private
        directory C(<container>) or a file C(<container>/<secret>).
    type: list
    elements: str
    default: []
  secret_dir:
    description: The directory of Docker's private secret files (C(cluster_secret_dir)); needed to remove them.
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

- name: Remove a container, then its secrets
  gangplank.platform.container:
    engine: podman
    name: node1-web-0
    secrets: [node1-web-0.db_password]
    state: absent

- name: Pull a rank's images, logging in to the site's registry with a vaulted password
  gangplank.platform.container:
    engine: podman
    state: pulled
    images: ["registry.example.com:5000/team/app@sha256:9b2c0d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c"]
    registries:
      - registry: registry.example.com:5000
        username: deployer
        password_var: vault_registry_password
    registry_passwords:
      vault_registry_password: "{{ vault_registry_password }}"
  no_log: true

- name: Remove Docker secret files no container uses any more
  gangplank.platform.container:
    engine: docker
    secrets: [node1-web-0/token]
    secret_dir: /run/gangplank/secrets
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
