# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An independent checker for the gang scheduler's results.

``check_plan(problem, result)`` returns every constraint of docs/problem-format.md
that ``result`` violates for the raw ``problem`` mapping, one readable line each;
an empty list means the result is valid.

Deliberately independent of the scheduler: nothing is imported from
``plugins/module_utils/scheduler``. Quantities are parsed here, defaults are applied
here, and every rule is re-derived from the problem mapping and the documentation.
It assumes the problem itself is valid (the scheduler accepted it).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter, defaultdict
from fractions import Fraction

LABEL_PREFIX = "gangplank.io/service."
QUOTA_DIMENSIONS = ("cpu", "memory", "gpu", "gpu_memory", "nvme")
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"
# docs: a share on a node with gpu_sharing mps also takes its MPS server's memory on each device (66 MiB); the shares on
# one device ask at most 100 cores (percent of its SMs) in sum.
MPS_SERVER_MEMORY = 66 * 1024 * 1024
MAX_GPU_CORES = 100

_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_SIZE_RE = re.compile(r"^" + _NUMBER + r"(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?$")
_CPU_RE = re.compile(r"^" + _NUMBER + r"(m)?$")
_COUNTED = re.compile(r"^[0-9]+ [^0-9]")
_SIZE_SCALE = {
    None: 1,
    "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5,
    "k": 1000, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4, "P": 1000 ** 5,
}


# --- quantities (docs: "Quantities") ------------------------------------------------------

def _fraction(number):
    if isinstance(number, bool):
        raise ValueError("booleans are not quantities: %r" % (number,))
    if isinstance(number, int):
        return Fraction(number)
    if isinstance(number, float):
        return Fraction(repr(number))
    raise ValueError("not a number: %r" % (number,))


def _ceil(value):
    if value < 0:
        raise ValueError("negative quantity: %s" % value)
    return math.ceil(value)


def cpu_millicores(value):
    """CPU: cores (4, 0.5, "2") or millicores ("500m"), in millicores rounded up."""
    if isinstance(value, str):
        match = _CPU_RE.match(value.strip())
        if not match:
            raise ValueError("not a CPU amount: %r" % value)
        number, milli = match.groups()
        amount = Fraction(number) if milli else Fraction(number) * 1000
        return _ceil(amount)
    return _ceil(_fraction(value) * 1000)


def size_bytes(value):
    """Size: bytes or a number with a binary/decimal suffix, in bytes rounded up."""
    if isinstance(value, str):
        match = _SIZE_RE.match(value.strip())
        if not match:
            raise ValueError("not a size: %r" % value)
        number, suffix = match.groups()
        return _ceil(Fraction(number) * _SIZE_SCALE[suffix])
    return _ceil(_fraction(value))


def label_text(value):
    """Label values (and taint/toleration values) are compared as strings; YAML booleans are true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- the problem, re-read ------------------------------------------------------------------

class _Model:
    def __init__(self, problem):
        self.nodes = {}
        for name, spec in (problem.get("nodes") or {}).items():
            spec = spec or {}
            gpus = {}
            for gpu in spec.get("gpus") or []:
                gpus[gpu["uuid"]] = {"index": gpu["index"], "model": gpu["model"],
                                     "memory": size_bytes(gpu["memory"]), "numa_node": gpu.get("numa_node")}
            nvme = {}
            for device in spec.get("nvme") or []:
                nvme[device["name"]] = {"size": size_bytes(device["size"]),
                                        "labels": set(device.get("labels") or []),
                                        "mount": device.get("mount")}
            self.nodes[name] = {
                "cpu": cpu_millicores(spec["cpu"]),
                "memory": size_bytes(spec["memory"]),
                "labels": {k: label_text(v) for k, v in (spec.get("labels") or {}).items()},
                "taints": [(t["key"], None if t.get("value") is None else label_text(t["value"]), t["effect"])
                           for t in spec.get("taints") or []],
                "unschedulable": bool(spec.get("unschedulable", False)),
                "gpus": gpus,
                "nvme": nvme,
                "gpu_sharing": spec.get("gpu_sharing") or "none",
                # docs: pairs of GPU indices joined by NVLink (level nvlink); a pair not listed is unknown.
                "nvlinked": {frozenset(link["gpus"]) for link in spec.get("gpu_links") or [] if link["level"] == "nvlink"},
                # docs: NUMA node id (a decimal string) -> its CPUs as a cpulist.
                "numa_cpus": {int(key): _cpus(text) for key, text in (spec.get("numa_cpus") or {}).items()},
                # docs: the size of the node's data filesystem (bytes); absent: not reported (no disk volume fits).
                "disk": None if spec.get("disk") is None else size_bytes(spec["disk"]),
            }
        self.services = {}
        # docs: dynamic host ports come from port_range [first, last], 20000-32000 unless said.
        self.port_range = tuple(problem.get("port_range") or (20000, 32000))
        for name, spec in (problem.get("services") or {}).items():
            spec = spec or {}
            sidecar = bool(spec.get("sidecar", False))
            resources = spec.get("resources") or {}
            gpu = None
            if resources.get("gpu") is not None:
                g = resources["gpu"]
                gpu = {"count": 1 if g.get("count") is None else g["count"],
                       "memory": None if g.get("memory") is None else size_bytes(g["memory"]),
                       "models": list(g.get("models") or []),
                       "cores": g.get("cores"),
                       "topology": g.get("topology") or "preferred"}
            nvme = None
            if resources.get("nvme") is not None:
                n = resources["nvme"]
                nvme = {"label": n["label"], "size": 0 if n.get("size") is None else size_bytes(n["size"])}
            self.services[name] = {
                "sidecar": sidecar,
                "replicas": 0 if sidecar else (1 if spec.get("replicas") is None else spec["replicas"]),
                "stateful": bool(spec.get("stateful", False)),
                "cpu": 0 if resources.get("cpu") is None else cpu_millicores(resources["cpu"]),
                "memory": 0 if resources.get("memory") is None else size_bytes(resources["memory"]),
                "gpu": gpu,
                "nvme": nvme,
                "disk": 0 if resources.get("disk") is None else size_bytes(resources["disk"]),
                # docs: a port is a static host port (an integer) or dynamic ({name, container_port}).
                "ports": [port for port in spec.get("ports") or [] if not isinstance(port, dict)],
                "dynamic_ports": [port["name"] for port in spec.get("ports") or [] if isinstance(port, dict)],
                "sidecars": list(spec.get("sidecars") or []),
                "anti_affinity": list(spec.get("anti_affinity") or []),
                "node_selector": {k: label_text(v) for k, v in (spec.get("node_selector") or {}).items()},
                "tolerations": [(t["key"], None if t.get("value") is None else label_text(t["value"]),
                                 t.get("effect")) for t in spec.get("tolerations") or []],
                "depends_on": list(spec.get("depends_on") or []),
                "quota": spec.get("quota"),
                "priority": spec.get("priority") or 0,
                "preemptible": bool(spec.get("preemptible", False)),
                "every_node": bool(spec.get("every_node", False)),
                "pinned": spec.get("cpu_pinning") == "numa",
                # docs: topology_spread, each with max_skew, topology_key (none: the node itself), when_unsatisfiable.
                "spread": [(item["max_skew"], item.get("topology_key"), item.get("when_unsatisfiable") or "DoNotSchedule")
                           for item in spec.get("topology_spread") or []],
            }
        self.quotas = {}
        for name, spec in (problem.get("quotas") or {}).items():
            spec = spec or {}
            self.quotas[name] = {"min": _quota_amounts(spec.get("min")), "max": _quota_amounts(spec.get("max"))}
        self.previous = {name: entry["node"] for name, entry in (problem.get("previous") or {}).items()}
        self.previous_devices = {name: (sorted(gpu["uuid"] for gpu in entry.get("gpus") or []),
                                        (entry.get("nvme") or {}).get("name"))
                                 for name, entry in (problem.get("previous") or {}).items()}
        self.instances = {}
        self.own_node = {}      # every-node instance -> its node
        for name, service in self.services.items():
            if service["sidecar"]:
                continue
            if service["every_node"]:
                # docs: <service>@<node> on every node whose labels match the selector and whose NoSchedule
                # and NoExecute taints are tolerated; cordoned nodes included.
                eligible = [node for node in sorted(self.nodes) if self.eligible(service, node)]
                for ordinal, node in enumerate(eligible):
                    self.instances["%s@%s" % (name, node)] = (name, ordinal)
                    self.own_node["%s@%s" % (name, node)] = node
                continue
            for ordinal in range(service["replicas"]):
                self.instances["%s-%d" % (name, ordinal)] = (name, ordinal)
        self.gang = {name for name, (service, _ordinal) in self.instances.items()
                     if not self.services[service]["preemptible"]}

    def eligible(self, service, node_name):
        node = self.nodes[node_name]
        if any(node["labels"].get(key) != value for key, value in service["node_selector"].items()):
            return False
        return all(any(_tolerates(toleration, taint) for toleration in service["tolerations"])
                   for taint in node["taints"] if taint[2] in (NO_SCHEDULE, NO_EXECUTE))

    def capacity(self):
        """The cluster's totals per quota dimension."""
        capacity = dict.fromkeys(QUOTA_DIMENSIONS, 0)
        for node in self.nodes.values():
            capacity["cpu"] += node["cpu"]
            capacity["memory"] += node["memory"]
            capacity["gpu"] += len(node["gpus"])
            capacity["gpu_memory"] += sum(device["memory"] for device in node["gpus"].values())
            capacity["nvme"] += sum(device["size"] for device in node["nvme"].values())
        return capacity

    def reservations_exceed_cluster(self):
        capacity = self.capacity()
        return any(sum(quota["min"].get(dim, 0) for quota in self.quotas.values()) > capacity[dim]
                   for dim in QUOTA_DIMENSIONS)

    def pod(self, service_name):
        """The instance's service followed by its sidecars."""
        return [service_name] + self.services[service_name]["sidecars"]

    def pod_cpu(self, service_name):
        return sum(self.services[member]["cpu"] for member in self.pod(service_name))

    def pod_memory(self, service_name):
        return sum(self.services[member]["memory"] for member in self.pod(service_name))


def _cpus(text):
    """A cpulist ("0-3,8") as a set of CPU ids."""
    cpus = set()
    for part in text.split(","):
        low, _sep, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _cpulist(numbers):
    """A set of ids as the canonical cpulist the docs show: ascending ranges."""
    parts, run = [], []
    for number in sorted(numbers):
        if run and number == run[-1] + 1:
            run.append(number)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [number]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
    return ",".join(parts)


def _check_numa(model, node_name, pinned, violations):
    """docs (cpu_pinning numa): the pinned instances of a node can spread their CPU requests over the NUMA nodes of their
    GPUs with no NUMA node giving more than its CPUs (1,000 millicores each). Hall's condition, checked on every set of the
    NUMA nodes in use: the instances whose NUMA nodes all lie in the set ask at most the set's CPUs."""
    node = model.nodes[node_name]
    used = sorted({numa for numa_nodes, _cpu, _name in pinned for numa in numa_nodes})
    assert len(used) <= 16, "the checker tries every set of NUMA nodes: too many here"
    for mask in range(1, 1 << len(used)):
        chosen = {numa for bit, numa in enumerate(used) if mask >> bit & 1}
        inside = [(cpu, name) for numa_nodes, cpu, name in pinned if numa_nodes <= chosen]
        capacity = 1000 * sum(len(node["numa_cpus"][numa]) for numa in chosen)
        if sum(cpu for cpu, _name in inside) > capacity:
            violations.append("node %s NUMA node(s) %s: pinned instances ask %dm, their CPUs are %dm (%s)" % (
                node_name, _cpulist(chosen), sum(cpu for cpu, _name in inside), capacity,
                ", ".join(name for _cpu, name in inside)))
            return


def _quota_amounts(spec):
    amounts = {}
    for dim, value in (spec or {}).items():
        if dim == "cpu":
            amounts[dim] = cpu_millicores(value)
        elif dim == "gpu":
            amounts[dim] = int(value)
        else:
            amounts[dim] = size_bytes(value)
    return amounts


def _tolerates(toleration, taint):
    key, value, effect = toleration
    t_key, t_value, t_effect = taint
    return key == t_key and (value is None or value == t_value) and (effect is None or effect == t_effect)


def _model_matches(models, model):
    return not models or any(wanted.lower() in model.lower() for wanted in models)


# --- ranks ---------------------------------------------------------------------------------

def _check_ranks(model, result, violations):
    ranks = result.get("ranks")
    if not isinstance(ranks, list):
        violations.append("ranks: missing or not a list: %r" % (ranks,))
        return
    level_of = {}
    for level, names in enumerate(ranks):
        if not isinstance(names, list) or not names:
            violations.append("ranks[%d]: expected a non-empty list, got %r" % (level, names))
            continue
        for name in names:
            if name in level_of:
                violations.append("ranks: service %s listed twice" % name)
            level_of[name] = level
    for name, service in sorted(model.services.items()):
        if service["sidecar"]:
            if name in level_of:
                violations.append("ranks: sidecar %s must not have a rank" % name)
        elif name not in level_of:
            violations.append("ranks: service %s missing" % name)
    for name in sorted(level_of):
        if name not in model.services:
            violations.append("ranks: unknown service %s" % name)
            continue
        deps = model.services[name]["depends_on"]
        if any(dep not in level_of for dep in deps):
            continue
        expected = 1 + max(level_of[dep] for dep in deps) if deps else 0
        if level_of[name] != expected:
            violations.append("ranks: service %s at rank %d, expected %d (depends on %s)"
                              % (name, level_of[name], expected, ", ".join(deps) or "nothing"))


# --- the checker ---------------------------------------------------------------------------

def reservations_exceed_cluster(problem):
    """Whether the quotas' min reservations alone exceed the cluster's totals."""
    return _Model(problem).reservations_exceed_cluster()


def check_plan(problem, result, disabled_filters=(), refused=None):
    """Every violated constraint of ``result`` for ``problem``, as readable strings. ``disabled_filters``: the
    static filters a scheduler profile turned off (NodeUnschedulable, TaintToleration, NodeSelector), whose
    rules are then not checked. ``refused``: service name -> the nodes an HTTP extender refuses for it (the
    test's own knowledge of its extender); docs/extenders.md: an every-node instance on such a node is not
    made, and the result names it in ``left_out``; nothing else is ever left out."""
    model = _Model(problem)
    model.disabled = frozenset(disabled_filters)
    violations = []
    if not isinstance(result, dict):
        return ["result: not a mapping: %r" % (result,)]
    # Every-node instances the extender's verdict may leave out: on a node it refuses for the service.
    optional = {name for name, node in model.own_node.items()
                if node in (refused or {}).get(model.instances[name][0], ())}
    left_out = result.get("left_out") or {}
    if not isinstance(left_out, dict):
        return ["left_out: not a mapping: %r" % (left_out,)]
    for name in sorted(set(left_out) - optional):
        violations.append("left_out: %s is not an every-node instance on a node the extender refused" % name)
    for name, reason in sorted(left_out.items()):
        if name in optional and (not isinstance(reason, str) or model.own_node[name] not in reason):
            violations.append("left_out %s: the reason %r does not name the node %s" % (name, reason, model.own_node[name]))
    for name in set(left_out) & optional:
        # Not an instance of this plan: neither in the gang nor a preemptible instance to place or preempt.
        del model.instances[name], model.own_node[name]
        model.gang.discard(name)
    for name in sorted(set(left_out) & set(result.get("placements") or {})):
        violations.append("left_out: %s is placed too" % name)
    if result.get("feasible") is True:
        for name in sorted(optional - set(left_out)):
            if name not in (result.get("placements") or {}):
                violations.append("every-node instance %s (on a node the extender refused) is neither placed nor in "
                                  "left_out" % name)
    _check_ranks(model, result, violations)
    feasible = result.get("feasible")
    _check_path(result, feasible, violations)
    if feasible is False:
        _check_infeasible(model, result, violations)
    elif feasible is True:
        _check_feasible(model, result, violations)
    else:
        violations.append("feasible: expected true or false, got %r" % (feasible,))
    return violations


def _check_path(result, feasible, violations):
    """Which path answered, and for the exact solver a verdict that agrees with the answer."""
    path = result.get("path")
    # rebalance: a feasible plan of scheduler/rebalance.py that moves something.
    if path not in ("greedy", "greedy_with_moves", "exact") and not (path == "rebalance" and feasible is True):
        violations.append("path: expected greedy, greedy_with_moves or exact, got %r" % (path,))
    verdict = result.get("exact")
    if path != "exact":
        if verdict is not None:
            violations.append("exact: present although path is %r" % (path,))
        return
    status = (verdict or {}).get("status")
    expected = ("optimal", "feasible") if feasible is True else ("infeasible", "timeout", "unavailable", "skipped")
    if status not in expected:
        violations.append("exact.status: expected one of %s for feasible=%r, got %r" % (expected, feasible, status))
    summary = result.get("summary", "")
    if status == "infeasible" and "no placement exists" not in summary:
        violations.append("summary: a proof of infeasibility must say 'no placement exists': %r" % (summary,))
    if status == "timeout" and ("no plan found within" not in summary or "no placement exists" in summary):
        violations.append("summary: a timeout must say 'no plan found within' and claim no proof: %r" % (summary,))


def _check_infeasible(model, result, violations):
    if result.get("placements") != {}:
        violations.append("infeasible result has placements: %r" % (result.get("placements"),))
    if "node_labels" in result:
        violations.append("infeasible result has node_labels")
    unschedulable = result.get("unschedulable")
    # Nobody to blame only when there is no instance, or when the quotas' min reservations
    # alone exceed the cluster (docs: "unschedulable may be empty").
    if not isinstance(unschedulable, dict) or (
            not unschedulable and model.gang and not model.reservations_exceed_cluster()):
        violations.append("infeasible result names no unschedulable instance: %r" % (unschedulable,))
        return
    prefix = "0/%d nodes are available" % len(model.nodes)
    for name, message in unschedulable.items():
        if name not in model.gang:
            violations.append("unschedulable: %s is not a (non-preemptible) instance of the problem" % name)
        if not isinstance(message, str) or not message.startswith(prefix):
            violations.append("unschedulable %s: message %r does not start with %r" % (name, message, prefix))
            continue
        # "0/3 nodes are available: 1 Insufficient GPU memory, 2 node(s) didn't match node selector."
        # counts each node once (the first filter that rejected it). A message without counts is a
        # reason that holds for the whole cluster.
        body = message[len(prefix):].lstrip(":").strip().rstrip(".")
        if _COUNTED.match(body):
            counts = [int(part.split(" ", 1)[0]) for part in re.split(r", (?=[0-9]+ )", body)]
            if sum(counts) != len(model.nodes):
                violations.append("unschedulable %s: counts %s add up to %d, not to the %d nodes: %r" % (
                    name, counts, sum(counts), len(model.nodes), message))


def _check_feasible(model, result, violations):  # noqa: C901 (one rule after the other, on purpose)
    placements = result.get("placements")
    if not isinstance(placements, dict):
        violations.append("placements: not a mapping: %r" % (placements,))
        return
    if result.get("unschedulable"):
        violations.append("feasible result lists unschedulable instances: %r" % (result["unschedulable"],))

    # Every instance of the gang exactly once, nothing else; placements name the right service and ordinal.
    for name in sorted(model.gang - set(placements)):
        violations.append("instance %s is not placed" % name)
    _check_preempted(model, result, placements, violations)
    for name in sorted(set(placements) - set(model.instances)):
        violations.append("placement %s is not an instance of the problem" % name)
    ordered = [name for name in placements if name in model.instances]
    if ordered != sorted(ordered, key=lambda n: model.instances[n]):
        violations.append("placements are not ordered by service then ordinal: %s" % ", ".join(ordered))

    on_node = defaultdict(list)  # node -> [(instance, service)]
    for name in sorted(placements, key=lambda n: model.instances.get(n, (n, 0))):
        if name not in model.instances:
            continue
        placement = placements[name]
        service_name, ordinal = model.instances[name]
        if placement.get("service") != service_name or placement.get("ordinal") != ordinal:
            violations.append("%s: service/ordinal %r/%r, expected %s/%d" % (
                name, placement.get("service"), placement.get("ordinal"), service_name, ordinal))
        node = placement.get("node")
        if node not in model.nodes:
            violations.append("%s: placed on unknown node %r" % (name, node))
            continue
        if list(placement.get("sidecars") or []) != model.services[service_name]["sidecars"]:
            violations.append("%s: sidecars %r, expected %r" % (
                name, placement.get("sidecars"), model.services[service_name]["sidecars"]))
        on_node[node].append((name, service_name))

    gpu_taken = defaultdict(list)     # (node, uuid) -> [(instance, bytes, whole)]
    gpu_overhead = Counter()          # (node, uuid) -> bytes of MPS servers (a share on an mps node each)
    gpu_cores = defaultdict(list)     # (node, uuid) -> [(instance, cores)] of the shares that ask cores
    nvme_taken = defaultdict(list)    # (node, device) -> [(instance, bytes)]
    instance_gpu_memory = {}          # instance -> bytes taken on GPUs (for quotas)

    for node_name in sorted(on_node):
        node = model.nodes[node_name]
        members = on_node[node_name]
        pinned = []         # (NUMA nodes, millicores, instance) of the cpu_pinning numa instances here
        # CPU and memory: instances plus their sidecars.
        cpu = sum(model.pod_cpu(service) for _unused, service in members)
        memory = sum(model.pod_memory(service) for _unused, service in members)
        # Disk volumes: the instances' disk requests within the node's data filesystem.
        disk = sum(model.services[service]["disk"] for _unused, service in members)
        if disk and (node["disk"] is None or disk > node["disk"]):
            violations.append("node %s: disk over-committed: %d bytes requested, data filesystem %r (%s)" % (
                node_name, disk, node["disk"], ", ".join(n for n, _unused in members)))
        if cpu > node["cpu"]:
            violations.append("node %s: CPU over-committed: %dm requested, %dm allocatable (%s)" % (
                node_name, cpu, node["cpu"], ", ".join(n for n, _unused in members)))
        if memory > node["memory"]:
            violations.append("node %s: memory over-committed: %d requested, %d allocatable (%s)" % (
                node_name, memory, node["memory"], ", ".join(n for n, _unused in members)))

        # Host ports: one user per node, sidecars included.
        users = defaultdict(list)
        for name, service in members:
            for member in model.pod(service):
                for port in model.services[member]["ports"]:
                    users[port].append(name if member == service else "%s/%s" % (name, member))
            wanted = model.services[service]["dynamic_ports"]
            host_ports = placements[name].get("host_ports")
            if not wanted:
                if host_ports is not None:
                    violations.append("%s: host_ports %r without dynamic ports" % (name, host_ports))
                continue
            if not isinstance(host_ports, dict) or sorted(host_ports) != sorted(wanted):
                violations.append("%s: host_ports %r, expected one per dynamic port %r" % (name, host_ports, wanted))
                continue
            for port_name, port in sorted(host_ports.items()):
                if not model.port_range[0] <= port <= model.port_range[1]:
                    violations.append("%s: host port %s=%r outside the range %r"
                                      % (name, port_name, port, model.port_range))
                users[port].append("%s:%s" % (name, port_name))
        for port in sorted(users):
            if len(users[port]) > 1:
                violations.append("node %s: host port %d used %d times (%s)" % (
                    node_name, port, len(users[port]), ", ".join(users[port])))

        # Anti-affinity: symmetric, sidecars included, self = at most one per node.
        present = Counter(member for _unused, service in members for member in model.pod(service))
        for service_name in sorted(present):
            for other in model.services[service_name]["anti_affinity"]:
                if other == service_name and present[service_name] > 1:
                    violations.append("node %s: anti-affinity: %d instances of %s (it lists itself)" % (
                        node_name, present[service_name], service_name))
                elif other != service_name and present.get(other):
                    violations.append("node %s: anti-affinity: %s and %s share the node (%s lists %s)" % (
                        node_name, service_name, other, service_name, other))

        for name, service_name in members:
            service = model.services[service_name]
            placement = placements[name]
            staying = model.previous.get(name) == node_name
            # Node selector: the node's own labels.
            for key, value in sorted(service["node_selector"].items() if "NodeSelector" not in model.disabled else ()):
                if node["labels"].get(key) != value:
                    violations.append("%s on %s: node selector %s=%s not matched (node has %r)" % (
                        name, node_name, key, value, node["labels"].get(key)))
            # Taints.
            for taint in node["taints"] if "TaintToleration" not in model.disabled else ():
                if any(_tolerates(toleration, taint) for toleration in service["tolerations"]):
                    continue
                if taint[2] == NO_EXECUTE or (taint[2] == NO_SCHEDULE and not staying):
                    violations.append("%s on %s: untolerated %s taint %s=%s%s" % (
                        name, node_name, taint[2], taint[0], taint[1],
                        "" if taint[2] == NO_EXECUTE else " (not its previous node)"))
            # Every-node instances: on their own node, nowhere else.
            if name in model.own_node and model.own_node[name] != node_name:
                violations.append("%s on %s: an every-node instance must run on %s" % (name, node_name, model.own_node[name]))
            # Unschedulable nodes (every-node services run on cordoned nodes too).
            if node["unschedulable"] and not staying and not service["every_node"] and "NodeUnschedulable" not in model.disabled:
                violations.append("%s on %s: node is unschedulable and is not the instance's previous node" % (
                    name, node_name))

            # GPUs.
            request = service["gpu"]
            claims = placement.get("gpus") or []
            whole_memory = 0
            if request is None:
                if claims:
                    violations.append("%s: has GPUs %r but requests none" % (name, claims))
            else:
                if len(claims) != request["count"]:
                    violations.append("%s: %d GPU(s) claimed, %d requested" % (name, len(claims), request["count"]))
                uuids = [claim.get("uuid") for claim in claims]
                if len(set(uuids)) != len(uuids):
                    violations.append("%s: the same GPU claimed twice: %r" % (name, uuids))
                for claim in claims:
                    uuid = claim.get("uuid")
                    device = node["gpus"].get(uuid)
                    if device is None:
                        violations.append("%s: GPU %r is not a GPU of its node %s" % (name, uuid, node_name))
                        continue
                    if claim.get("index") != device["index"] or claim.get("model") != device["model"]:
                        violations.append("%s: GPU %s reported as index %r model %r, node says %r %r" % (
                            name, uuid, claim.get("index"), claim.get("model"), device["index"], device["model"]))
                    if not _model_matches(request["models"], device["model"]):
                        violations.append("%s: GPU %s model %r matches none of %r" % (
                            name, uuid, device["model"], request["models"]))
                    whole = request["memory"] is None
                    expected = device["memory"] if whole else request["memory"]
                    if claim.get("memory") != expected:
                        violations.append("%s: GPU %s claim of %r bytes, expected %d%s" % (
                            name, uuid, claim.get("memory"), expected, " (whole device)" if whole else ""))
                    gpu_taken[(node_name, uuid)].append((name, expected, whole))
                    if not whole and node["gpu_sharing"] == "mps":
                        gpu_overhead[(node_name, uuid)] += MPS_SERVER_MEMORY
                    if request["cores"] is not None:
                        gpu_cores[(node_name, uuid)].append((name, request["cores"]))
                    if claim.get("cores") != request["cores"] or ("cores" in claim) != (request["cores"] is not None):
                        violations.append("%s: GPU %s claim of %r cores, requested %r" % (
                            name, uuid, claim.get("cores"), request["cores"]))
                    whole_memory += device["memory"]
                if request["topology"] == "required":
                    # docs: every pair of the instance's GPUs NVLinked.
                    indices = sorted(node["gpus"][uuid]["index"] for uuid in set(uuids) if uuid in node["gpus"])
                    for position, first in enumerate(indices):
                        for second in indices[position + 1:]:
                            if frozenset((first, second)) not in node["nvlinked"]:
                                violations.append("%s: GPUs %d and %d of %s are not NVLinked (topology required)" % (
                                    name, first, second, node_name))
                if request["cores"] is not None and node["gpu_sharing"] != "mps":
                    violations.append("%s on %s: asks GPU cores on a node that cannot enforce them (gpu_sharing %s)" % (
                        name, node_name, node["gpu_sharing"]))
                # Quota gpu_memory: count x memory, or the whole memory of the devices taken.
                instance_gpu_memory[name] = whole_memory if request["memory"] is None \
                    else request["count"] * request["memory"]

            # CPU pinning (docs: cpu_pinning numa): the CPUs and memory nodes of the GPUs' NUMA nodes; nothing otherwise.
            if service["pinned"]:
                devices = [node["gpus"][claim.get("uuid")] for claim in claims if claim.get("uuid") in node["gpus"]]
                numa_nodes = {device["numa_node"] for device in devices}
                if None in numa_nodes or not numa_nodes <= set(node["numa_cpus"]):
                    violations.append("%s on %s: pinned to GPUs whose NUMA node's CPUs are not known (%r)" % (
                        name, node_name, sorted(numa_nodes, key=str)))
                else:
                    cpus = set().union(*(node["numa_cpus"][numa] for numa in numa_nodes))
                    if placement.get("cpuset_cpus") != _cpulist(cpus) or placement.get("cpuset_mems") != _cpulist(numa_nodes):
                        violations.append("%s on %s: cpuset %r/%r, expected %r/%r" % (
                            name, node_name, placement.get("cpuset_cpus"), placement.get("cpuset_mems"), _cpulist(cpus),
                            _cpulist(numa_nodes)))
                    pinned.append((frozenset(numa_nodes), model.pod_cpu(service_name), name))
            elif "cpuset_cpus" in placement or "cpuset_mems" in placement:
                violations.append("%s: has a cpuset but is not pinned" % name)

            # NVMe.
            nvme_request = service["nvme"]
            claim = placement.get("nvme")
            if nvme_request is None:
                if claim is not None:
                    violations.append("%s: has NVMe %r but requests none" % (name, claim))
            elif not isinstance(claim, dict):
                violations.append("%s: requests NVMe (%s) but got %r" % (name, nvme_request["label"], claim))
            else:
                device = node["nvme"].get(claim.get("name"))
                if device is None:
                    violations.append("%s: NVMe %r is not a device of its node %s" % (
                        name, claim.get("name"), node_name))
                else:
                    if nvme_request["label"] not in device["labels"]:
                        violations.append("%s: NVMe %s on %s lacks label %s" % (
                            name, claim.get("name"), node_name, nvme_request["label"]))
                    if claim.get("mount") != device["mount"]:
                        violations.append("%s: NVMe %s mount %r, device has %r" % (
                            name, claim.get("name"), claim.get("mount"), device["mount"]))
                    nvme_taken[(node_name, claim["name"])].append((name, nvme_request["size"]))
                if claim.get("size") != nvme_request["size"]:
                    violations.append("%s: NVMe claim of %r bytes, requested %d" % (
                        name, claim.get("size"), nvme_request["size"]))

        if pinned:
            _check_numa(model, node_name, pinned, violations)

    for (node_name, uuid), takers in sorted(gpu_taken.items()):
        device = model.nodes[node_name]["gpus"][uuid]
        total = sum(amount for _unused, amount, _unused in takers) + gpu_overhead[(node_name, uuid)]
        if total > device["memory"]:
            violations.append("node %s GPU %s: %d bytes taken (MPS servers included), device has %d (%s)" % (
                node_name, uuid, total, device["memory"], ", ".join(n for n, _unused, _unused in takers)))
        cores = sum(amount for _unused, amount in gpu_cores.get((node_name, uuid), []))
        if cores > MAX_GPU_CORES:
            violations.append("node %s GPU %s: %d cores asked, at most %d (%s)" % (
                node_name, uuid, cores, MAX_GPU_CORES, ", ".join(n for n, _unused in gpu_cores[(node_name, uuid)])))
        if any(whole for _unused, _unused, whole in takers) and len(takers) > 1:
            violations.append("node %s GPU %s: whole-GPU claim shared with others (%s)" % (
                node_name, uuid, ", ".join(n for n, _unused, _unused in takers)))
    for (node_name, device_name), takers in sorted(nvme_taken.items()):
        device = model.nodes[node_name]["nvme"][device_name]
        total = sum(amount for _unused, amount in takers)
        if total > device["size"]:
            violations.append("node %s NVMe %s: %d bytes taken, device has %d (%s)" % (
                node_name, device_name, total, device["size"], ", ".join(n for n, _unused in takers)))

    _check_quotas(model, placements, instance_gpu_memory, violations)
    _check_spread(model, placements, violations)

    # Previous placements: stateful instances stay; moves are exactly the instances that changed node, restarts those
    # that stay with other GPUs or another NVMe device (the key only where there is one).
    expected_moves = []
    expected_restarts = []
    for name in sorted(model.instances, key=lambda n: model.instances[n]):
        if name not in placements or name not in model.previous:
            continue
        node = placements[name].get("node")
        previous = model.previous[name]
        service = model.services[model.instances[name][0]]
        if service["stateful"]:
            if previous not in model.nodes:
                violations.append("stateful %s ran on node %s, which is gone: the plan must fail" % (name, previous))
            elif node != previous:
                violations.append("stateful %s moved from %s to %s" % (name, previous, node))
        if node != previous:
            expected_moves.append({"instance": name, "from": previous, "to": node})
        else:
            gpus, nvme = model.previous_devices[name]
            restart = {}
            taken = sorted(entry.get("uuid") for entry in placements[name].get("gpus") or [])
            if gpus and taken != gpus:
                restart["gpus"] = {"from": gpus, "to": taken}
            device = (placements[name].get("nvme") or {}).get("name")
            if nvme is not None and device != nvme:
                restart["nvme"] = {"from": nvme, "to": device}
            if restart:
                expected_restarts.append(dict({"instance": name, "node": node}, **restart))
    restarts = result.get("restarts", [])
    if sorted(map(repr, restarts)) != sorted(map(repr, expected_restarts)):
        violations.append("restarts: got %r, expected %r" % (restarts, expected_restarts))
    moves = result.get("moves")
    if not isinstance(moves, list):
        violations.append("moves: not a list: %r" % (moves,))
    else:
        def key(move):
            return tuple(sorted((str(k), str(v)) for k, v in move.items())) if isinstance(move, dict) else (str(move),)
        got = sorted(moves, key=key)
        want = sorted(expected_moves, key=key)
        if got != want:
            violations.append("moves: got %r, expected %r" % (moves, expected_moves))

    # node_labels: every node, exactly the services (and sidecars) running on it.
    node_labels = result.get("node_labels")
    if not isinstance(node_labels, dict):
        violations.append("node_labels: not a mapping: %r" % (node_labels,))
    else:
        for node_name in sorted(set(node_labels) - set(model.nodes)):
            violations.append("node_labels: unknown node %s" % node_name)
        for node_name in sorted(model.nodes):
            present = {member for _unused, service in on_node.get(node_name, []) for member in model.pod(service)}
            expected = {LABEL_PREFIX + member: "true" for member in present}
            if node_name not in node_labels:
                violations.append("node_labels: node %s missing" % node_name)
            elif node_labels[node_name] != expected:
                violations.append("node_labels %s: got %r, expected %r" % (
                    node_name, node_labels[node_name], expected))

    _check_usage(model, result.get("usage"), on_node, gpu_taken, nvme_taken, violations, gpu_overhead)


def _spread_counts(model, service_name):
    """Per node, whether it counts for the spread of ``service_name`` (docs: its node_selector matched, its NoSchedule and
    NoExecute taints tolerated, not cordoned, enough GPUs of its models and an NVMe device of its label when it asks)."""
    service = model.services[service_name]
    counting = {}
    for node_name, node in model.nodes.items():
        ok = model.eligible(service, node_name) and not node["unschedulable"]
        if ok and service["gpu"] is not None:
            ok = sum(1 for device in node["gpus"].values()
                     if _model_matches(service["gpu"]["models"], device["model"])) >= service["gpu"]["count"]
        if ok and service["nvme"] is not None:
            ok = any(service["nvme"]["label"] in device["labels"] for device in node["nvme"].values())
        counting[node_name] = ok
    return counting


def _check_spread(model, placements, violations):
    """topology_spread DoNotSchedule: every instance in a domain of a counting node (unless it stays on its previous
    node), and no domain more than max_skew instances above the emptiest counting domain."""
    for service_name in sorted(model.services):
        service = model.services[service_name]
        hard = [(skew, key) for skew, key, mode in service["spread"] if mode == "DoNotSchedule"]
        if not hard:
            continue
        counting = _spread_counts(model, service_name)
        mine = [(name, placement.get("node")) for name, placement in sorted(placements.items())
                if model.instances.get(name, (None,))[0] == service_name and placement.get("node") in model.nodes]
        for skew, key in hard:
            def domain(node_name, key=key):
                return node_name if key is None else model.nodes[node_name]["labels"].get(key)
            domains = {domain(node_name) for node_name, ok in counting.items() if ok and domain(node_name) is not None}
            counts = Counter({value: 0 for value in domains})
            for name, node_name in mine:
                where = domain(node_name)
                if where not in domains and model.previous.get(name) != node_name:
                    violations.append("%s on %s: outside the domains of topology key %s that count for %s" % (
                        name, node_name, key or "(the node)", service_name))
                if where is not None:
                    counts[where] += 1
            if domains:
                least = min(counts[value] for value in domains)
                for value in sorted(counts, key=str):
                    if counts[value] - least > skew:
                        violations.append("%s: %d instance(s) in %s %s, %d in the emptiest: skew above max_skew %d" % (
                            service_name, counts[value], key or "node", value, least, skew))


def _check_preempted(model, result, placements, violations):
    """Preemptible instances: placed, or listed in preempted (never both); evictions are the preempted ones that
    ran; the ones left out are the lowest priority (within a service, the highest ordinals)."""
    preempted = result.get("preempted")
    if not isinstance(preempted, dict):
        violations.append("preempted: not a mapping: %r" % (preempted,))
        return
    for name in sorted(preempted):
        if name not in model.instances or name in model.gang:
            violations.append("preempted: %s is not a preemptible instance of the problem" % name)
        elif name in placements:
            violations.append("preempted: %s is placed too" % name)
        elif not isinstance(preempted[name], str) or not preempted[name]:
            violations.append("preempted %s: no reason given: %r" % (name, preempted[name]))
    for name in sorted(set(model.instances) - model.gang - set(placements) - set(preempted)):
        violations.append("preemptible instance %s is neither placed nor preempted" % name)
    expected = [{"instance": name, "from": model.previous[name]} for name in preempted if name in model.previous]
    if result.get("evictions") != expected:
        violations.append("evictions: got %r, expected %r" % (result.get("evictions"), expected))
    # Priority order, for new work only (a running instance keeps its node; it is not evicted for other
    # preemptible work). Within a service the same request goes in ordinal order.
    # Placed instances are grouped once (ordinals per service; names per service and node), and the groups a service's
    # left-out instance could have taken are found once per service: n log n, where pairs were n squared (65,536
    # replicas of one service: 125 s).
    fresh = [name for name in model.instances if name not in model.gang and name not in model.previous]
    ordinals, on_node = defaultdict(list), defaultdict(list)
    for placed in sorted(name for name in fresh if name in placements):
        other, other_ordinal = model.instances[placed]
        ordinals[other].append((other_ordinal, placed))
        on_node[(other, placements[placed].get("node"))].append(placed)
    for entries in ordinals.values():
        entries.sort()
    groups = sorted(on_node.items(), key=lambda item: (item[0][0], str(item[0][1])))
    lower_and_larger = {}
    for left_out in sorted(name for name in fresh if name in preempted):
        service_name, ordinal = model.instances[left_out]
        entries = ordinals.get(service_name, [])
        for _other_ordinal, placed in entries[bisect.bisect_right(entries, ordinal, key=lambda entry: entry[0]):]:
            violations.append("preempted %s while %s of the same service is placed" % (left_out, placed))
        priority = model.services[service_name]["priority"]
        if service_name not in lower_and_larger:
            lower_and_larger[service_name] = [
                (other, node, names) for (other, node), names in groups
                if other != service_name and model.services[other]["priority"] < priority
                and _would_fit_instead(model, service_name, other, node)]
        for other, node, names in lower_and_larger[service_name]:
            violations += ["preempted %s (priority %d) while %s (priority %d, a larger request) is placed on %s" % (
                left_out, priority, placed, model.services[other]["priority"], node) for placed in names]


def _plain(model, service_name):
    """A service whose instances need CPU and memory only: no devices, ports, anti-affinity or quota."""
    service = model.services[service_name]
    listed = any(service_name in other["anti_affinity"] for other in model.services.values())
    return not listed and service["gpu"] is None and service["nvme"] is None and service["quota"] is None and not any(
        model.services[member]["ports"] or model.services[member]["anti_affinity"] for member in model.pod(service_name))


def _would_fit_instead(model, wanted, placed, node_name):
    """Whether an instance of ``wanted`` surely fits where an instance of ``placed`` went (both plain, and no larger)."""
    if node_name not in model.nodes or not _plain(model, wanted) or not _plain(model, placed):
        return False
    if model.pod_cpu(wanted) > model.pod_cpu(placed) or model.pod_memory(wanted) > model.pod_memory(placed):
        return False
    node = model.nodes[node_name]
    service = model.services[wanted]
    if model.disabled:
        return False
    return not node["unschedulable"] and model.eligible(service, node_name)


def _check_quotas(model, placements, instance_gpu_memory, violations):
    if not model.quotas:
        return
    used = {name: dict.fromkeys(QUOTA_DIMENSIONS, 0) for name in model.quotas}
    ungrouped = dict.fromkeys(QUOTA_DIMENSIONS, 0)
    # docs: gpu counts the devices a group occupies, wholly or in part (a shared device once).
    devices = {name: set() for name in model.quotas}
    ungrouped_devices = set()
    for name, (service_name, _unused) in model.instances.items():
        if name not in placements or placements[name].get("node") not in model.nodes:
            continue
        service = model.services[service_name]
        bucket = used[service["quota"]] if service["quota"] is not None else ungrouped
        bucket["cpu"] += model.pod_cpu(service_name)
        bucket["memory"] += model.pod_memory(service_name)
        if service["gpu"] is not None:
            occupied = devices[service["quota"]] if service["quota"] is not None else ungrouped_devices
            occupied.update((placements[name]["node"], gpu.get("uuid")) for gpu in placements[name].get("gpus") or [])
            bucket["gpu"] = len(occupied)
            bucket["gpu_memory"] += instance_gpu_memory.get(name, 0)
        if service["nvme"] is not None:
            bucket["nvme"] += service["nvme"]["size"]
    for group in sorted(model.quotas):
        for dim, cap in sorted(model.quotas[group]["max"].items()):
            if used[group][dim] > cap:
                violations.append("quota %s: %s used %d, above its max %d" % (group, dim, used[group][dim], cap))
    capacity = model.capacity()
    reserved = sorted({dim for quota in model.quotas.values() for dim in quota["min"]})
    for dim in reserved:
        total = ungrouped[dim] + sum(max(quota["min"].get(dim, 0), used[group][dim])
                                     for group, quota in model.quotas.items())
        if total > capacity[dim]:
            violations.append("quota min reservations: %s needs %d (groups: %s; ungrouped %d), cluster has %d" % (
                dim, total, ", ".join("%s max(min %d, used %d)" % (g, q["min"].get(dim, 0), used[g][dim])
                                      for g, q in sorted(model.quotas.items())), ungrouped[dim], capacity[dim]))


def _check_usage(model, usage, on_node, gpu_taken, nvme_taken, violations, gpu_overhead):
    if not isinstance(usage, dict):
        violations.append("usage: not a mapping: %r" % (usage,))
        return
    if set(usage) != set(model.nodes):
        violations.append("usage: nodes %r, expected %r" % (sorted(usage), sorted(model.nodes)))
    for node_name in sorted(set(usage) & set(model.nodes)):
        node = model.nodes[node_name]
        entry = usage[node_name]
        members = on_node.get(node_name, [])
        want = {
            "cpu_millicores": {"used": sum(model.pod_cpu(s) for _unused, s in members), "total": node["cpu"]},
            "memory": {"used": sum(model.pod_memory(s) for _unused, s in members), "total": node["memory"]},
        }
        for key, expected in want.items():
            if entry.get(key) != expected:
                violations.append("usage %s %s: got %r, expected %r" % (node_name, key, entry.get(key), expected))
        gpus = {gpu.get("uuid"): gpu for gpu in entry.get("gpus") or []}
        if set(gpus) != set(node["gpus"]):
            violations.append("usage %s gpus: devices %r, expected %r" % (node_name, sorted(gpus), sorted(node["gpus"])))
        for uuid in sorted(set(gpus) & set(node["gpus"])):
            # What the device holds: the grants and the shares' MPS servers.
            used = sum(amount for _unused, amount, _unused in gpu_taken.get((node_name, uuid), [])) + gpu_overhead[(node_name, uuid)]
            device = node["gpus"][uuid]
            expected = {"index": device["index"], "uuid": uuid, "model": device["model"],
                        "used": used, "total": device["memory"]}
            if gpus[uuid] != expected:
                violations.append("usage %s GPU %s: got %r, expected %r" % (node_name, uuid, gpus[uuid], expected))
        devices = {device.get("name"): device for device in entry.get("nvme") or []}
        if set(devices) != set(node["nvme"]):
            violations.append("usage %s nvme: devices %r, expected %r" % (
                node_name, sorted(devices), sorted(node["nvme"])))
        for name in sorted(set(devices) & set(node["nvme"])):
            used = sum(amount for _unused, amount in nvme_taken.get((node_name, name), []))
            expected = {"name": name, "used": used, "size": node["nvme"][name]["size"]}
            if devices[name] != expected:
                violations.append("usage %s NVMe %s: got %r, expected %r" % (node_name, name, devices[name], expected))
        if sorted(entry.get("instances") or []) != sorted(n for n, _unused in members):
            violations.append("usage %s instances: got %r, expected %r" % (
                node_name, entry.get("instances"), sorted(n for n, _unused in members)))
