#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: gang_plan
short_description: Plan a gang placement offline, on the controller
version_added: 0.1.0
description:
  - Runs the gang scheduler on a problem (nodes, services, quotas, previous placement) and returns the plan.
  - Every instance is placed, or none is. Nothing on any host is read or changed.
  - The problem format is documented in the collection's C(docs/problem-format.md).
  - This is an action plugin. It runs on the controller, whatever host the task targets.
  - When the services are a catalog with C(secrets), every secret's variable must be readable as the deploy reads it
    (defined, decrypted, a valid value), or the task fails with the deploy's message, naming
    C(services.<name>.secrets.<key>) and the variable, never a value. Nothing is planned then.
options:
  problem:
    description:
      - The scheduling problem, a mapping with C(nodes) and C(services), and optionally C(quotas) and C(previous).
    type: dict
    required: true
  fail_on_infeasible:
    description:
      - Fail the task when the gang does not fit. The result still carries the report.
    type: bool
    default: true
  scale:
    description:
      - A scale preview, as C(playbooks/scale.yml) asks it, applied to the catalog before planning, with the keys
        C(service) and C(replicas). The service must be C(scalable) and the count within its C(max_replicas); else the
        task fails naming C(scale.service) or C(scale.replicas).
    type: dict
extends_documentation_fragment:
  - gangplank.platform.scheduler
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: Planning changes nothing, so check mode returns the same plan.
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
  - A malformed problem fails with one line per mistake, naming the path, the value and what was expected.
"""

EXAMPLES = r"""
- name: Plan the catalog on the example cluster
  gangplank.platform.gang_plan:
    problem: "{{ lookup('ansible.builtin.file', 'cluster.yml') | from_yaml }}"
  register: gangplank_plan

- name: Show the plan
  ansible.builtin.debug:
    var: gangplank_plan.table

- name: Plan without failing when it does not fit
  gangplank.platform.gang_plan:
    problem:
      nodes:
        node-a: {cpu: 8, memory: 32Gi}
      services:
        web: {replicas: 2, resources: {cpu: 2, memory: 4Gi}, ports: [8080]}
    fail_on_infeasible: false
  register: gangplank_plan
"""

RETURN = r"""
feasible:
  description: Whether every instance was placed.
  returned: always
  type: bool
  sample: true
path:
  description: Which attempt produced the result, C(greedy), C(greedy_with_moves) or C(exact).
  returned: always
  type: str
  sample: greedy
exact:
  description:
    - The exact solver's verdict when it ran, C(status) (C(optimal), C(feasible), C(infeasible), C(timeout) or C(unavailable)),
      C(seconds) and C(time_limit).
  returned: when the greedy pass could not place the gang and O(exact_timeout) is above 0
  type: dict
  sample: {"status": "optimal", "seconds": 0.03, "time_limit": 5.0}
seconds:
  description: How long planning took, in seconds.
  returned: always
  type: float
  sample: 0.052
steps:
  description:
    - The steps the plan took, in order, each with C(step) and C(seconds) - C(greedy), C(exact), C(counting_proof),
      C(reordering:<ordering>). The last one found the plan or the proof, or was the last tried.
  returned: always
  type: list
  elements: dict
  sample: [{"step": "greedy", "seconds": 1.305}, {"step": "counting_proof", "seconds": 0.071}]
placements:
  description:
    - Per instance its service, ordinal, node, GPUs (index, uuid, model, memory taken), NVMe device and sidecars.
    - With C(cpu_pinning) C(numa) also C(cpuset_cpus) and C(cpuset_mems). Empty when infeasible.
  returned: always
  type: dict
  sample: {"web-0": {"service": "web", "ordinal": 0, "node": "node-a", "gpus": [], "nvme": null, "sidecars": []}}
moves:
  description: Stateless instances that moved from their previous node.
  returned: when feasible
  type: list
  elements: dict
  sample: [{"instance": "web-1", "from": "node-b", "to": "node-a"}]
preempted:
  description: Preemptible instances left out (no room after the gang and higher priorities), each with the reason.
  returned: when feasible
  type: dict
  sample: {"batch-3": "0/3 nodes are available: 3 Insufficient cpu."}
evictions:
  description: The preempted instances that ran before, and the node they ran on.
  returned: when feasible
  type: list
  elements: dict
  sample: [{"instance": "batch-3", "from": "node-b"}]
node_labels:
  description: Per node, every gangplank.io/service.* label it must carry.
  returned: when feasible
  type: dict
  sample: {"node-a": {"gangplank.io/service.web": "true"}}
usage:
  description:
    - Per node, CPU, memory, GPU and NVMe used and total, and its instances.
    - A node that lists gpu_links also has C(gpu_groups), its GPUs by link (C(nvlink) groups, C(numa) groups).
    - See docs/problem-format.md, Result. An infeasible plan gives every node with nothing placed on it.
  returned: always
  type: dict
ranks:
  description: Deployment ranks, lists of service names from depends_on.
  returned: always
  type: list
  elements: list
  sample: [["db"], ["web"]]
unschedulable:
  description: Per instance that could not be placed, why, as "0/N nodes are available ...".
  returned: when infeasible
  type: dict
  sample: {"web-1": "0/1 nodes are available: 1 node(s) didn't have free ports for the requested host ports."}
summary:
  description: One line on why the gang does not fit.
  returned: when infeasible
  type: str
table:
  description: The plan as lines of a table, for people.
  returned: always
  type: list
  elements: str
errors:
  description: When the problem is malformed, one entry per mistake with its path and message.
  returned: on bad input
  type: list
  elements: dict
  sample: [{"path": "services.web.replicas", "message": "got -1; expected an integer >= 0"}]
"""
