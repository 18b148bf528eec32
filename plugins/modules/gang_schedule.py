#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: gang_schedule
short_description: Place every service instance on the cluster at once, from live facts
version_added: 0.1.0
description:
  - Builds the gang scheduler's problem from every host given in O(hosts) (their facts and gangplank_* host variables,
    through the P(gangplank.platform.scheduler_node#filter) filter), the catalog O(services), the O(quotas) and the last
    placement O(record) read back from the cluster, and plans all instances at once, all or nothing.
  - Returns the plan, what it changes against the record (instances added, removed, moved, labels), the new record to
    write, and per host its labels and instances (service, ordinal, GPUs with uuids, NVMe device and mount, sidecars,
    rank). It passes the placement to the job's stats (as M(ansible.builtin.set_stats) does) for AWX artifacts.
  - This is an action plugin. It runs once on the controller and changes nothing on any host; the
    gangplank.platform.schedule role takes the lock and writes the record and the bindings around it.
  - An infeasible plan fails the task with one "0/N nodes are available" line per unplaced instance.
  - Every secret the catalog's C(secrets) name must be readable as the deploy reads it (defined, decrypted, a valid
    value), or the task fails before planning with the deploy's message, naming C(services.<name>.secrets.<key>) and
    the variable, never a value; so a misspelt vaulted variable fails C(site.yml --check) and the plan, not the deploy.
options:
  services:
    description: The catalog, as in the collection's docs/problem-format.md (usually the C(gangplank_services) variable).
    type: dict
    required: true
  catalog:
    description:
      - O(services) as M(gangplank.platform.catalog) parsed it earlier in the run (its C(catalog)), so that it is not
        parsed again. It must be the parse of O(services); its mistakes are reported with the scheduler's, as when
        O(services) is parsed here.
    type: dict
  quotas:
    description: Quota groups (usually the C(gangplank_quotas) variable).
    type: dict
    default: {}
  hosts:
    description: The hosts that form the cluster (usually C(ansible_play_hosts)). Their facts must have been gathered.
    type: list
    elements: str
    required: true
  down_hosts:
    description:
      - Hosts of the inventory that are not live in this run (unreachable, or left out with C(--limit)); usually
        C(groups['all'] | difference(ansible_play_hosts)).
      - Each one that the record knows keeps its place, like a NotReady node in Kubernetes - the node entry it was last
        planned with (the record's C(nodes)), cordoned, and its recorded instances and what they reserve. Nothing new
        is placed there (but every-node services); its instances wait for it (RV(waiting)); everything else is planned
        on the live hosts. A host the record has no node entry for counts as removed.
    type: list
    elements: str
    default: []
  down_grace:
    description:
      - Seconds a host may be down before its stateless instances are placed again on the live hosts (like the
        eviction of a NotReady node's pods in Kubernetes, after 300 s by default). A service's own C(down_grace) in
        O(services) wins.
      - It counts from when the host was first seen down, kept in the record (C(down_since)); within it the instances
        keep their place and wait. Stateful, every-node and sidecar instances are never replaced; they wait for their
        host. A replacement that does not fit on the live hosts keeps waiting, with a warning.
      - When the host returns, its bindings no longer hold a replaced instance, so the deploy removes its old copy there
        after every rank is up (the replacement is healthy first).
      - A whole number from 0 to 31536000 (a string of digits is taken, as C(-e) gives); anything else fails the task
        and changes nothing.
    type: raw
    default: 300
  move_stateful:
    description:
      - The operator's action that moves one stateful instance (for example C(db-0)) away from its host, which must be
        down in this run. It is placed afresh on a live host and starts there WITHOUT its data, which stays on the
        dead host; when that host returns, its old copy is removed (never started) and its data there is kept.
      - Refused (nothing changes) unless O(move_stateful_confirm) repeats the name, and for a name that is not a
        stateful instance of the record or whose host is live.
    type: str
  move_stateful_confirm:
    description: Must equal O(move_stateful) for the move to be carried out.
    type: str
  remove_retained:
    description:
      - The operator's action that removes the retained volumes of one instance (for example C(db-1)), what a
        stateful instance left on its node when a scale-down took it out of the plan. Its data is deleted for good
        (the caller removes the directories named in RV(removed_retained)).
      - Refused (nothing changes) unless O(remove_retained_confirm) repeats the name, for an instance without retained
        volumes, and for one its service wants again (it would be reattached).
    type: str
    version_added: 0.1.0
  remove_retained_confirm:
    description: Must equal O(remove_retained) for the removal to be carried out.
    type: str
    version_added: 0.1.0
  volume_dir:
    description: Where disk volumes live on the hosts (C(cluster_volume_dir)), to name the directories RV(removed_retained) removes.
    type: str
    version_added: 0.1.0
  port_range:
    description:
      - The host ports dynamic ports are chosen from, V([first, last]) (both included; C(gangplank_port_range)).
      - Left out, V([20000, 32000]). A static port inside it is refused when some service asks a dynamic port.
    type: list
    elements: raw
  now:
    description: The time in seconds since the epoch the grace periods are measured against; the controller's clock when left out.
    type: float
  record:
    description:
      - The placement record read from the cluster by M(gangplank.platform.cluster_state) (its C(record) return).
      - Its C(placement) is the previous placement and its C(replicas) the scale overrides, which win over the catalog.
    type: dict
    default: {}
  fail_on_infeasible:
    description: Fail the task when the gang does not fit.
    type: bool
    default: true
  scale:
    description:
      - A scale request (playbooks/scale.yml), applied to the record's C(replicas) overrides before planning.
      - 'The service must be in O(services) and marked C(scalable: true); O(scale.replicas) must be an integer of 0 or more
        (a string of digits, as C(-e replicas=3) gives, is accepted). Otherwise the task fails naming C(scale.service) or
        C(scale.replicas) and nothing changes.'
      - Whether the new count fits (nodes, quotas) is the plan's answer; an infeasible plan changes nothing.
    type: dict
    suboptions:
      service:
        description: The service to scale.
        type: str
        required: true
      replicas:
        description: The new instance count. Recorded in the replicas of RV(record), where it wins over the catalog until reset.
        type: raw
      reset:
        description: Remove the service's override instead, so the catalog's C(replicas) counts again.
        type: bool
        default: false
  rebalance:
    description:
      - Plan a rebalance (playbooks/rebalance.yml) instead of a plain plan. The exact solver packs stateless instances
        onto fewer nodes and leaves more whole GPUs free, with at most O(rebalance.max_moves) instances moved or restarted
        on other devices; stateful instances never move. A plan that frees nothing is not taken.
      - What it gains (whole GPUs and nodes freed) is in the C(rebalance) key of RV(plan), in RV(rebalance), and leads RV(table).
      - O(exact_timeout) is the solver's time; 0 turns the rebalance off (the current placement stands).
      - A scheduler profile (the C(profile) option) binds the rebalance as it binds a plan, its filters included.
    type: dict
    suboptions:
      max_moves:
        description: At most this many instances move (or restart on other devices). A whole number from 0 to 100000.
        type: raw
        default: 3
extends_documentation_fragment:
  - gangplank.platform.scheduler
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: It never changes anything itself, so check mode returns the same plan and diff.
  diff_mode:
    support: full
    description: Per host, its labels and instances before and after.
  platform:
    support: full
    platforms: all
    description: Needs nothing from the targeted host.
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Plan the catalog on the play's hosts
  gangplank.platform.gang_schedule:
    services: "{{ gangplank_services }}"
    quotas: "{{ gangplank_quotas | default({}) }}"
    hosts: "{{ ansible_play_hosts }}"
    record: "{{ schedule__lock.record }}"
  run_once: true
  register: schedule__plan
"""

RETURN = r"""
plan:
  description: The scheduler's result (docs/problem-format.md).
  returned: unless the input is invalid
  type: dict
rebalance:
  description: With O(rebalance), what it gains as lines (moves, whole GPUs and nodes free before and after).
  returned: when O(rebalance) is given and the input is valid
  type: list
  elements: str
table:
  description: The plan as table lines; with O(rebalance), led by what it gains.
  returned: unless the input is invalid
  type: list
  elements: str
waiting:
  description: Per host that is down (O(down_hosts)), the instances that wait for it; also as lines at the end of RV(table).
  returned: unless the input is invalid
  type: dict
  sample: {"node3": ["db-0", "queue-0"]}
replaced:
  description:
    - The stateless instances of hosts down for longer than the grace period that this plan places on live hosts, each
      with the host it waited on (C(node)), C(down_for) and C(grace) in seconds and where it goes (C(to)).
  returned: unless the input is invalid
  type: dict
  sample: {"worker-1": {"node": "node3", "service": "worker", "down_for": 312, "grace": 300, "to": "node1"}}
volumes:
  description:
    - Per instance of a service with volumes, what the plan does with its data, C(state) C(created) (new, empty
      volumes), C(kept) (stays on its node), C(reattached) (a retained ordinal back on its node, with its data),
      C(moved) (elsewhere, without its data, which stays on C(from)) or C(retained) (left out; its volumes stay on
      C(node)), with C(node), C(volumes) (name, where, size) and C(size) (bytes of its disk volumes).
  returned: when some service has volumes or some volumes are retained
  type: list
  elements: dict
  sample: [{"instance": "db-1", "state": "retained", "node": "node2", "size": 1073741824,
            "volumes": [{"name": "data", "where": "disk", "size": 1073741824}]}]
removed_retained:
  description: The retained volumes removed by O(remove_retained) (C(instance), C(node) and the directories C(dirs)).
  returned: when O(remove_retained) was carried out
  type: dict
  sample: {"instance": "db-1", "node": "node2", "dirs": ["/var/lib/gangplank/volumes/db/db-1/data"]}
moved_stateful:
  description: The stateful instance moved by O(move_stateful), from its down host to a live one.
  returned: when O(move_stateful) was carried out
  type: dict
  sample: {"instance": "db-0", "from": "node3", "to": "node1"}
changes:
  description:
    - Against the record, the instances C(added), C(removed), C(moved) (from, to), C(rebound) (same node, other devices)
      and the hosts whose C(labels) change.
  returned: when feasible
  type: dict
record:
  description:
    - The new record content to write with M(gangplank.platform.cluster_state) (placement, node_labels, replicas, ranks,
      nodes, the node entry of each host, live or down, the plan was made with, and down_since, when each host that is
      down was first seen down).
  returned: when feasible
  type: dict
hosts:
  description:
    - Per host, its C(labels) and C(instances) (service, ordinal, node, gpus, nvme, sidecars, rank), for M(gangplank.platform.node_state).
    - C(cpuset_cpus) and C(cpuset_mems) in an instance when it is pinned.
  returned: when feasible
  type: dict
preempted:
  description: Preemptible instances left out of the plan, each with the reason; the deploy removes their containers.
  returned: when feasible
  type: dict
  sample: {"batch-3": "evicted from node-b: 0/3 nodes are available: 3 Insufficient cpu."}
scale:
  description: For a scale request, the count asked (kept in the record) and how many instances the plan runs.
  returned: when feasible and O(scale) was given without reset
  type: dict
  sample: {"service": "batch", "asked": 6, "running": 4}
ranks:
  description: Deployment ranks.
  returned: when feasible
  type: list
  elements: list
hosts_changed:
  description:
    - The hosts whose instances change against the record (an instance added, removed, moved or rebound there), sorted;
      every host when the ranks change. Only these need a deploy after a scale (playbooks/scale.yml).
  returned: when feasible
  type: list
  elements: str
errors:
  description: On invalid input, one entry per mistake, its path naming the variable (C(gangplank_services.infer.replicas)).
  returned: on invalid input
  type: list
  elements: dict
"""
