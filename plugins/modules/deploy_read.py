#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: deploy_read
short_description: Read what a host's deploy starts from, in one shell on the host
version_added: 0.1.0
description:
  - Runs one shell command on the host, as M(ansible.builtin.raw) does (no module, no Python on the host), and reads its
    output on the controller. It finds the container engine, lists the containers whose names contain
    O(name_prefix) and projects their inspect data (name, running, labels, published ports; never the env), and, with
    Podman, what a run killed inside the engine left of them (a container in the image store only, one whose storage
    is gone, a monitor process of a container the engine does not run, of root and of a C(conmon) binary only), and
    the secrets gangplank made for this host's containers, by name only (RV(secrets)).
  - The output is read section by section (each after its marker line, in a fixed order). A line outside its section,
    a section twice or out of order, or a container's data of another shape than the engine's fails the read, naming
    the host and the line.
  - With O(limit_probe), also whether the engine can enforce CPU and memory limits, from the answer the runtime role
    stored in O(state_file), else by asking the engine now.
  - With O(fact_file), also the node's bindings that the schedule role wrote there.
  - With O(settings), also what the deploy decides from for this host (RV(settings), RV(ranks), RV(missing),
    RV(note)), so that the decision over every host (the gangplank.platform.deploy role) reads one result per host.
  - This is an action plugin. The gangplank.platform.deploy role runs it once per host and run; each task on each host
    costs a worker of the controller (docs/deploy.md, day 2 at 30 hosts).
options:
  engine:
    description: The container engine (C(cluster_engine)).
    type: str
    required: true
    choices: [podman, docker]
  name_prefix:
    description:
      - The start of every name of this host's containers, C(<host>-). Only what was left of containers named so
        counts as left over. The engine is asked for names that contain it (a superset, narrowed by the deploy's
        comparison).
    type: str
    required: true
  state_file:
    description: The runtime role's state file, whose line C(limits <engine> <answer>) holds the engine's stored answer.
    type: path
    required: true
  limit_probe:
    description:
      - The command that asks the engine which limits it can enforce (C(cluster_limit_probe[engine])), run only when
        O(state_file) holds no answer. Empty, limits are not asked about and RV(enforce_limits) is false.
    type: list
    elements: str
    default: []
  fact_file:
    description: The node's fact file (C(cluster_fact_file)); given, its bindings are read into RV(bindings).
    type: path
  settings:
    description:
      - This host's settings as M(gangplank.platform.deploy_plan) takes them (data_dir,
        publish_address, probe_address, gpu_mode, engine, secret_dir, volume_dir, and for GPU shares gpu_sharing,
        mps_control, mps_dir, mps_image, mps_ready_timeout; see docs/deploy.md), and C(proxy), the host's own local proxy
        settings (C(address), C(socket), C(pid_file); docs/connecting-services.md). Given, the result adds RV(settings),
        RV(ranks), RV(missing) and RV(note).
    type: dict
  instances:
    description: This run's instances of the host (the schedule role's); with O(fact_file), the file's win.
    type: dict
    default: {}
  ranks:
    description: This run's ranks (the schedule role's); with O(fact_file), the file's win.
    type: list
    elements: list
    default: []
  proxy:
    description:
      - The local proxy's paths (docs/connecting-services.md). Given, the result adds RV(proxy).
    type: dict
    suboptions:
      address:
        description: Its address with the prefix, as C(ip address) prints it on the loopback interface (C(169.254.30.1/32)).
        type: str
        required: true
      pid_file:
        description: Its master's pid file, trusted only where it is a regular file of root.
        type: path
        required: true
      config:
        description: Its live configuration file.
        type: path
        required: true
attributes:
  action:
    support: full
    description: The shell runs on the host, its output is read on the controller.
  check_mode:
    support: full
    description: Reads only; check mode reads too, so that the deploy shows what would change.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: The shell needs C(sh), C(base64), C(awk), C(sed), C(grep), C(readlink) and, with Docker, C(find) on the host.
notes:
  - Over SSH the command runs on a terminal, which joins stderr to stdout; the engine's warnings are kept out of the
    output, and untagged lines are ignored.
  - Fails when the engine answers but cannot list or inspect the containers, with its error line.
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Read the containers that exist
  gangplank.platform.deploy_read:
    engine: podman
    name_prefix: "{{ inventory_hostname }}-"
    state_file: /var/lib/gangplank/runtime-state
  register: read

- name: Read what this host's deploy starts from, with its bindings from the fact file
  gangplank.platform.deploy_read:
    engine: "{{ cluster_engine }}"
    name_prefix: "{{ inventory_hostname }}-"
    state_file: "{{ cluster_runtime_state_file }}"
    limit_probe: "{{ cluster_limit_probe[cluster_engine] }}"
    fact_file: "{{ cluster_fact_file }}"
    settings:
      data_dir: /var/lib/gangplank/instances
      publish_address: 10.0.0.5
      probe_address: 10.0.0.5
      gpu_mode: cdi
      engine: "{{ cluster_engine }}"
      secret_dir: /var/lib/gangplank/secrets
  register: read
"""

RETURN = r"""
engine_found:
  description: Whether the host has the engine. Without it, nothing else of the engine is read.
  returned: always
  type: bool
containers:
  description: One object per container whose name contains O(name_prefix), in the engine's inspect shape, projected.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "node1-db-0", "State": {"Running": true}, "Config": {"Labels": {"gangplank.io/service": "db"}},
            "HostConfig": {"PortBindings": {"5432/tcp": [{"HostIp": "10.0.0.5", "HostPort": "5432"}]}},
            "NetworkSettings": {"Networks": {"podman": {"IPAddress": "10.88.0.7"}}}}]
forwards:
  description:
    - Podman's port forwarding rules (netavark's iptables DNAT rules, C(iptables -t nat -S)) that no running container
      of this host owns. A rule is a running container's when that container publishes its address and port and has
      the address it forwards to. A run killed while Podman set up or tore down a container's network can leave one,
      which then comes before the rule of the next container publishing the same address and port.
    - The deploy role deletes one only just before it starts a container of this host publishing the same address and
      port.
    - Empty with Docker, or where the host has no C(iptables) command.
  returned: always
  type: list
  elements: dict
  contains:
    published:
      description: The address and port the rule serves, as a container spec publishes them (C(address:port) or C(port)).
      type: str
    rule:
      description: The rule as C(iptables -S) prints it, without C(-A).
      type: str
  sample: [{"published": "10.0.0.5:8080",
            "rule": "NETAVARK-DN-1D8721804F16F -d 10.0.0.5/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.129:8080"}]
leftovers:
  description:
    - What a run killed inside the engine left of the containers named C(<name_prefix>...) (Podman), each as
      C(<name>) (in the image store only),
      C(broken:<name>) (its storage is gone) or C(<pid>:<container id>:<name>) (a monitor of one of this host's
      containers that the engine does not run; a process of root whose program is a C(conmon) binary).
  returned: always
  type: list
  elements: str
secrets:
  description:
    - The secrets gangplank made for the containers named C(<name_prefix>...), by name only, never a value, sorted.
      With Podman, the engine's secrets C(<container>.<secret>) (C(podman secret ls)); with Docker, the private files
      C(<container>/<secret>) below O(settings)'s C(secret_dir).
    - The deploy role removes those that no container uses any more (M(gangplank.platform.deploy_plan) finds them).
  returned: always
  type: list
  elements: str
  sample: ["node1-db-0.db_password"]
secrets_of:
  description:
    - Each container of RV(containers) and RV(leftovers) mapped to its own secrets, as M(gangplank.platform.container)
      removes them after it (O(gangplank.platform.container#module:secrets)), by the names of RV(secrets), never listed on
      the host again; with Podman those named C(<container>.<secret>), with Docker the container's private directory
      C(<container>) below the secret directory.
  returned: always
  type: dict
  sample: {"node1-db-0": ["node1-db-0.db_password"]}
limits:
  description: The engine's answer to O(limit_probe); empty when not asked.
  returned: always
  type: str
  sample: "cgroup controllers: [cpuset cpu io memory pids]"
enforce_limits:
  description: Whether limits were asked about and the engine can enforce CPU and memory limits.
  returned: always
  type: bool
proxy:
  description: The local proxy as found on the host.
  returned: when O(proxy) is given
  type: dict
  contains:
    address:
      description: Whether the loopback interface has its address.
      type: bool
    master:
      description:
        - Its master's pid; 0 for none. Read from O(proxy.pid_file) only where that file is a regular file of root (not a
          link) and only where the pid is a process of root (real and effective uid 0) running a C(haproxy) binary.
      type: int
    systemd:
      description: Whether systemd runs on the host (the proxy is then its unit).
      type: bool
    config_sha1:
      description: The SHA-1 of O(proxy.config); empty when there is no such file.
      type: str
    found:
      description:
        - Whether O(proxy.config) (or a link there) or the proxy's systemd unit
          C(/etc/systemd/system/gangplank-proxy.service) is on the host (a deploy ran the local proxy here); a catalog
          that no longer asks for the proxy has it removed.
      type: bool
  sample: {"address": true, "master": 4242, "systemd": false, "config_sha1": "0f2c1a9e5d6b7c8f9a0b1c2d3e4f5a6b7c8d9e0f",
           "found": true}
config_files:
  description:
    - The config files of this host's containers (C(<data_dir>/<name_prefix>*/config/*), regular files only, at most
      4096), each path mapped to the SHA-256 of its text; what a config file that changes in place (C(change) C(signal)
      or C(none), docs/catalog.md) is compared with.
  returned: when O(settings) has C(data_dir) and O(name_prefix) is a host name and C(-)
  type: dict
  sample: {"/var/lib/gangplank/node1-gateway-0/config/0-upstreams.conf": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"}
bindings:
  description: The node's bindings from O(fact_file) (revision, labels, instances, ranks); empty when it cannot be read.
  returned: when O(fact_file) is given
  type: dict
bindings_error:
  description: Why O(fact_file) could not be read; empty when it was.
  returned: when O(fact_file) is given
  type: str
settings:
  description: O(settings) with the host's C(instances) and C(limits) (RV(enforce_limits)).
  returned: when O(settings) is given
  type: dict
ranks:
  description: The deployment ranks, from O(fact_file) when given, else O(ranks).
  returned: when O(settings) is given
  type: list
  elements: list
missing:
  description: Why this host cannot be deployed (no bindings; no engine, outside check mode); empty when it can.
  returned: when O(settings) is given
  type: str
note:
  description: What the host's line adds when limits were asked for and the engine cannot enforce them; else empty.
  returned: when O(settings) is given
  type: str
"""
