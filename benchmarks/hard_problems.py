# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hard scheduling problems with a known answer, for the exact solver's benchmark and tests.

``generate(seed, kind) -> (problem, answer)`` returns a problem mapping in the format of
docs/problem-format.md and what is known about it; ``suite(seed, count)`` returns
``count`` of them as ``(name, problem, answer)``, the kinds taken in turn. The same
arguments always give the same problems (everything random comes from ``random.Random``).

Problems are small to medium (3-12 nodes, 5-60 instances): mixed GPU models and sizes
(A100 80Gi and 40Gi, H100 80Gi, L4 24Gi), GPUs shared by memory and packed tight, whole-GPU
requests, sidecars (one with a host port), host ports, anti-affinity (self and between
services), quotas (max gpu, gpu_memory, cpu; min reservations), node selectors, a
NoSchedule taint, and previous placements (stateful pins, stateless instances that stay or
must move).

Feasible kinds are built from a planted solution: every instance is first given a node
(and GPUs), then the constraints are derived around that assignment (node CPU and memory
from what is planted on it, selectors only where every replica's node has the label,
anti-affinity only between services whose nodes are disjoint, quota maxima at least what
the plant uses, ...), so the planted assignment satisfies every rule: feasible by
construction. GPU devices are filled by random chunks that add up to (nearly) the device's
memory, which heavy-first best fit often cannot repack.

Infeasible kinds start from such a plant and break it in a way a one-line argument proves
(``answer["reason"]`` states it): more GPU memory asked of a set of devices than they
have; more self-anti-affine replicas than nodes that can run one; a quota max below what
the group needs at least; more whole-GPU devices or more requests above half a device's
memory than matching devices (pigeonhole); stateful instances pinned to a node too small
for them.

``one_move`` and ``two_moves``: every instance has a previous node (its planted one), but
one (two) stateless instance(s) ran on another node, whose CPU is exactly what is planted
there and on which no other such instance is planted. If everything stayed, that node would
hold its whole plant plus the instance that ran there: more than its CPU. So an instance must
leave each such node, one move takes an instance off one node only, and the plant moves
exactly one (two): the minimum number of moves is known.

Answer keys: ``kind``, ``feasible`` (bool), ``reason`` (why, in words), ``min_moves`` (the
known minimum number of moves, or None), ``max_moves`` (moves of the planted solution: an
upper bound on the minimum, None when infeasible), ``planted`` (instance -> node, feasible
kinds only), ``nodes``, ``instances``.

Run it to print one problem and its answer: ``python benchmarks/hard_problems.py SEED KIND``.
"""

from __future__ import annotations

import json
import random
import sys

# kind -> (model name, GiB)
DEVICES = {
    "a100-80": ("NVIDIA A100-SXM4-80GB", 80),
    "a100-40": ("NVIDIA A100-PCIE-40GB", 40),
    "h100": ("NVIDIA H100 80GB HBM3", 80),
    "l4": ("NVIDIA L4", 24),
}
# The narrowest model list for one device kind, and broader lists (case-insensitive substrings).
NARROW = {"a100-80": "A100-SXM4", "a100-40": "A100-PCIE", "h100": "H100", "l4": "L4"}
BROAD = (["A100"], ["80GB"], ["A100", "H100"], ["H100", "L4"], ["A100", "L4"])
LAYOUTS = (
    ("a100-80",) * 2, ("a100-80",) * 4, ("h100",) * 2, ("h100",) * 4, ("a100-40",) * 2, ("l4",) * 4,
    ("a100-80", "a100-80", "a100-40", "a100-40"), ("h100", "h100", "l4", "l4"), ("a100-40", "a100-40", "l4", "l4"),
)
CHUNK_SIZES = (4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 25, 30, 35, 40, 48)   # GiB of a shared GPU request
ZONES = ("zone-a", "zone-b", "zone-c")
SIDECARS = {"logship": (200, 256, []), "exporter": (100, 128, [9100])}    # millicores, MiB, host ports
TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
LETTERS = "abcdefghijklmnopqrstuvwxyz"

FEASIBLE_KINDS = ("pack", "pack_tight", "previous", "one_move", "two_moves")
INFEASIBLE_KINDS = ("inf_gpu_memory", "inf_anti_affinity", "inf_quota", "inf_whole_gpus", "inf_big_gpus", "inf_stateful")
KINDS = FEASIBLE_KINDS + INFEASIBLE_KINDS
# The order suite() takes kinds in: two feasible problems for each infeasible one.
ROTATION = ("pack", "inf_gpu_memory", "pack_tight", "previous", "inf_anti_affinity", "one_move", "pack",
            "inf_quota", "pack_tight", "two_moves", "inf_whole_gpus", "previous", "pack", "inf_big_gpus",
            "pack_tight", "one_move", "inf_stateful")
MAX_INSTANCES = 60


def matches(models, kind):
    """Whether a request's model list takes a device of ``kind`` (the scheduler's rule)."""
    if not models:
        return True
    name = DEVICES[kind][0].lower()
    return any(model.lower() in name for model in models)


class _Service:
    def __init__(self, name):
        self.name = name
        self.gpu = None             # (count, GiB or None for whole devices, models or None)
        self.cpu = 0                # millicores
        self.memory = 0             # MiB
        self.sidecars = []
        self.ports = []
        self.anti = []
        self.selector = None
        self.tolerate = False
        self.stateful = False
        self.quota = None
        self.plant = []             # per ordinal: (node name, [device uuids])

    @property
    def replicas(self):
        return len(self.plant)

    def pod_cpu(self):
        return self.cpu + sum(SIDECARS[name][0] for name in self.sidecars)

    def pod_memory(self):
        return self.memory + sum(SIDECARS[name][1] for name in self.sidecars)

    def pod_ports(self):
        return self.ports + [port for name in self.sidecars for port in SIDECARS[name][2]]

    def spec(self):
        spec = {"replicas": self.replicas}
        if self.stateful:
            spec["stateful"] = True
        resources = {"cpu": "%dm" % self.cpu, "memory": "%dMi" % self.memory}
        if self.gpu is not None:
            count, memory, models = self.gpu
            gpu = {"count": count}
            if memory is not None:
                gpu["memory"] = "%dGi" % memory
            if models:
                gpu["models"] = list(models)
            resources["gpu"] = gpu
        spec["resources"] = resources
        for key, value in (("ports", self.ports), ("sidecars", self.sidecars), ("anti_affinity", self.anti)):
            if value:
                spec[key] = list(value)
        if self.selector:
            spec["node_selector"] = dict(self.selector)
        if self.tolerate:
            spec["tolerations"] = [{"key": TAINT["key"], "value": TAINT["value"]}]
        if self.quota:
            spec["quota"] = self.quota
        return spec


class _Node:
    def __init__(self, name, layout, zone, serial):
        self.name = name
        self.zone = zone
        self.devices = [{"index": index, "uuid": "GPU-%s-%d-%04x" % (name, index, serial + index), "kind": kind,
                         "memory": DEVICES[kind][1]} for index, kind in enumerate(layout)]
        self.cpu = 0                # capacity, millicores (set after planting)
        self.memory = 0             # MiB
        self.tainted = False
        self.unschedulable = False

    def labels(self):
        kinds = sorted({device["kind"] for device in self.devices})
        return {"zone": self.zone, "accelerator": "-".join(kinds) if kinds else "none"}

    def spec(self):
        spec = {"cpu": "%dm" % self.cpu, "memory": "%dMi" % self.memory, "labels": self.labels()}
        if self.tainted:
            spec["taints"] = [dict(TAINT)]
        if self.unschedulable:
            spec["unschedulable"] = True
        if self.devices:
            spec["gpus"] = [{"index": d["index"], "uuid": d["uuid"], "model": DEVICES[d["kind"]][0],
                             "memory": "%dGi" % d["memory"]} for d in self.devices]
        return spec


class _Plant:
    """A cluster, a catalog and an assignment of every instance that satisfies every rule."""

    def __init__(self, rng, tight):
        self.rng = rng
        self.tight = tight
        self.nodes = {}
        self.services = {}
        self.quotas = {}
        self.previous = {}          # instance -> {"node": ..., "gpus": [...]}
        self.gone = []              # (instance): previous nodes that are not in the cluster
        self._names = 0
        self._cluster()
        self.taken = {}             # device uuid -> GiB taken (whole: the device's memory)
        self.whole = set()
        self._whole_gpu_services()
        self._shared_gpu_services()
        self._cpu_services()
        self._sidecars()
        self._derive()
        self._capacities()
        self._quotas()

    # --- cluster ---------------------------------------------------------------------------------
    def _cluster(self):
        rng = self.rng
        count = rng.randint(3, 12)
        gpu_nodes = max(2, min(count, int(round(count * rng.uniform(0.45, 0.85)))))
        self.target = rng.randint(14, 50)
        serial = rng.getrandbits(16)
        zones = ZONES[:rng.choice((2, 2, 3))]
        for position in range(count):
            layout = rng.choice(LAYOUTS) if position < gpu_nodes else ()
            name = "n%02d" % (position + 1)
            self.nodes[name] = _Node(name, layout, zones[position % len(zones)], serial + 16 * position)
        if rng.random() < 0.35:
            rng.choice([node for node in self.nodes.values() if node.devices]).tainted = True

    def device(self, uuid):
        for node in self.nodes.values():
            for device in node.devices:
                if device["uuid"] == uuid:
                    return node, device
        raise KeyError(uuid)

    def all_devices(self):
        return [(node, device) for node in self.nodes.values() for device in node.devices]

    def _name(self, prefix):
        name = "%s-%s" % (prefix, LETTERS[self._names % 26] + (LETTERS[self._names // 26 - 1] if self._names >= 26 else ""))
        self._names += 1
        return name

    def instance_count(self):
        return sum(service.replicas for service in self.services.values())

    # --- GPU work --------------------------------------------------------------------------------
    def _whole_gpu_services(self):
        rng = self.rng
        if rng.random() < 0.45:
            return
        for _unused in range(rng.choice((1, 1, 2))):
            kinds = sorted({device["kind"] for _node, device in self.all_devices()})
            kind = rng.choice(kinds)
            models = self._models([kind])
            count = rng.choice((1, 1, 2, 4))
            service = _Service(self._name("train"))
            for _unused in range(rng.randint(1, 3)):
                options = []
                for node in self.nodes.values():
                    free = [d for d in node.devices if d["uuid"] not in self.taken and matches(models, d["kind"])]
                    if len(free) >= count:
                        options.append((node, free))
                if not options:
                    break
                node, free = rng.choice(options)
                chosen = rng.sample(free, count)
                for device in chosen:
                    self.taken[device["uuid"]] = device["memory"]
                    self.whole.add(device["uuid"])
                service.plant.append((node.name, sorted(d["uuid"] for d in chosen)))
            if service.plant:
                service.gpu = (count, None, models)
                service.cpu = rng.choice((2000, 4000, 6000)) * count
                service.memory = rng.choice((16, 32, 48)) * 1024 * count
                self.services[service.name] = service

    def _shared_gpu_services(self):
        rng = self.rng
        palette = sorted(rng.sample(CHUNK_SIZES, rng.randint(3, 6)))
        if palette[0] > 12:
            palette[0] = rng.choice((4, 6, 8, 12))
            palette.sort()
        budget = max(6, int(self.target * rng.uniform(0.55, 0.8)))
        devices = [(node, device) for node, device in self.all_devices() if device["uuid"] not in self.taken]
        rng.shuffle(devices)
        chunks = []         # (size, node, uuid)
        for node, device in devices:
            if len(chunks) >= budget:
                break
            if rng.random() < 0.1:
                continue        # left whole
            free = device["memory"]
            stop = 0 if self.tight or rng.random() < 0.6 else rng.choice((4, 8, 12))
            while free > stop:
                options = [size for size in palette if size <= free]
                if not options:
                    break
                size = rng.choices(options, weights=options)[0]
                chunks.append((size, node.name, device["uuid"]))
                free -= size
            self.taken[device["uuid"]] = device["memory"] - free
        by_size = {}
        for size, node, uuid in chunks:
            by_size.setdefault(size, []).append((node, uuid))
        for size in sorted(by_size):
            group = by_size[size]
            rng.shuffle(group)
            if rng.random() < 0.3:
                group = self._pairs(size, group)
            if len(group) >= 4 and rng.random() < 0.35:
                cut = rng.randint(1, len(group) - 1)
                parts = [group[:cut], group[cut:]]
            else:
                parts = [group]
            for part in parts:
                service = _Service(self._name("infer"))
                service.plant = [(node, [uuid]) for node, uuid in part]
                kinds = sorted({self.device(uuid)[1]["kind"] for _node, uuid in part})
                service.gpu = (1, size, self._models(kinds))
                service.cpu = rng.choice((500, 1000, 1500, 2000, 3000, 4000))
                service.memory = rng.choice((2, 4, 8, 12, 16, 24)) * 1024
                self.services[service.name] = service

    def _pairs(self, size, group):
        """Chunks of one size on two devices of one node, made into count-2 requests; the rest stay single."""
        by_node = {}
        for node, uuid in group:
            by_node.setdefault(node, []).append(uuid)
        pairs, rest = [], []
        for node in sorted(by_node):
            uuids = by_node[node]
            while len(uuids) >= 2 and len(set(uuids)) >= 2:
                first = uuids.pop(0)
                other = next((u for u in uuids if u != first), None)
                uuids.remove(other)
                pairs.append((node, sorted([first, other])))
            rest.extend((node, uuid) for uuid in uuids)
        if not pairs:
            return group
        service = _Service(self._name("shard"))
        service.plant = pairs
        kinds = sorted({self.device(uuid)[1]["kind"] for _node, uuids in pairs for uuid in uuids})
        service.gpu = (2, size, self._models(kinds))
        service.cpu = self.rng.choice((1000, 2000, 4000))
        service.memory = self.rng.choice((8, 16, 32)) * 1024
        self.services[service.name] = service
        return rest

    def _models(self, kinds):
        """A model list that takes every device kind in ``kinds``: the narrowest, a broader one, or any model."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.55:
            return sorted({NARROW[kind] for kind in kinds})
        broader = [models for models in BROAD if all(matches(models, kind) for kind in kinds)]
        if roll < 0.85 and broader:
            return rng.choice(broader)
        return None

    # --- CPU work --------------------------------------------------------------------------------
    def _cpu_services(self):
        rng = self.rng
        left = max(3, self.target - self.instance_count())
        names = list(self.nodes)
        port = 8080
        for _unused in range(rng.randint(1, 4)):
            if left <= 0:
                break
            service = _Service(self._name(rng.choice(("web", "api", "worker", "cache"))))
            service.cpu = rng.choice((250, 500, 1000, 2000, 4000, 8000))
            service.memory = rng.choice((1, 2, 4, 8, 16, 32)) * 1024
            service.tolerate = rng.random() < 0.3
            allowed = [n for n in names if service.tolerate or not self.nodes[n].tainted]
            if rng.random() < 0.25:
                zone = rng.choice(sorted({self.nodes[n].zone for n in allowed}))
                service.selector = {"zone": zone}
                allowed = [n for n in allowed if self.nodes[n].zone == zone]
            spread = rng.random() < 0.35
            replicas = rng.randint(1, max(1, min(left, 8)))
            if spread:
                replicas = min(replicas, len(allowed))
                service.anti = [service.name]
                if rng.random() < 0.6:
                    service.ports = [port]
                    port += 1
                chosen = rng.sample(allowed, replicas)
            else:
                chosen = [rng.choice(allowed) for _unused in range(replicas)]
            service.plant = [(name, []) for name in chosen]
            left -= replicas
            self.services[service.name] = service

    # --- what follows from the plant -------------------------------------------------------------
    def nodes_of(self, service):
        return [node for node, _uuids in service.plant]

    def _sidecars(self):
        rng = self.rng
        exporter_nodes = set()
        for service in sorted(self.services.values(), key=lambda s: s.name):
            if rng.random() < 0.45:
                service.sidecars.append("logship")
            nodes = self.nodes_of(service)
            if len(set(nodes)) == len(nodes) and exporter_nodes.isdisjoint(nodes) and not service.ports \
                    and rng.random() < 0.4:
                service.sidecars.append("exporter")
                exporter_nodes.update(nodes)

    def _derive(self):
        rng = self.rng
        services = sorted(self.services.values(), key=lambda s: s.name)
        for service in services:
            nodes = self.nodes_of(service)
            if any(self.nodes[n].tainted for n in nodes):
                service.tolerate = True
            if service.gpu is None:
                continue
            zones = {self.nodes[n].zone for n in nodes}
            accelerators = {self.nodes[n].labels()["accelerator"] for n in nodes}
            roll = rng.random()
            if roll < 0.2 and len(zones) == 1:
                service.selector = {"zone": zones.pop()}
            elif roll < 0.35 and len(accelerators) == 1:
                service.selector = {"accelerator": accelerators.pop()}
            if len(set(nodes)) == len(nodes) and len(nodes) >= 2 and rng.random() < 0.4:
                service.anti = [service.name]
            if service.gpu[0] == 1 and len(set(nodes)) == len(nodes) and rng.random() < 0.15:
                service.ports = [7000 + services.index(service)]
        pairs = 0
        for first in services:
            for second in services:
                if first.name < second.name and pairs < 3 and set(self.nodes_of(first)).isdisjoint(self.nodes_of(second)) \
                        and rng.random() < 0.12:
                    first.anti.append(second.name)
                    pairs += 1

    def used(self, name):
        cpu = memory = 0
        for service in self.services.values():
            for node, _uuids in service.plant:
                if node == name:
                    cpu += service.pod_cpu()
                    memory += service.pod_memory()
        return cpu, memory

    def _capacities(self):
        rng = self.rng
        for name, node in self.nodes.items():
            cpu, memory = self.used(name)
            if cpu == 0:
                node.cpu, node.memory = rng.choice((4000, 8000, 16000)), rng.choice((16, 32, 64)) * 1024
                continue
            if self.tight:
                node.cpu = cpu + rng.choice((0, 0, 0, 250, 500))
                node.memory = memory + rng.choice((0, 0, 512, 1024))
            else:
                node.cpu = int(cpu * rng.uniform(1.1, 1.5)) // 250 * 250 + 1000
                node.memory = int(memory * rng.uniform(1.1, 1.5)) // 256 * 256 + 2048

    def gpu_usage(self, names):
        """(devices occupied, GiB taken) by the planted instances of ``names``."""
        devices, memory = set(), 0
        for name in names:
            service = self.services[name]
            count, size, _models = service.gpu
            for _node, uuids in service.plant:
                devices.update(uuids)
                memory += sum(self.device(uuid)[1]["memory"] for uuid in uuids) if size is None else count * size
        return devices, memory

    def _quotas(self):
        rng = self.rng
        gpu_services = sorted(s.name for s in self.services.values() if s.gpu is not None)
        if gpu_services and rng.random() < 0.6:
            group = rng.sample(gpu_services, min(len(gpu_services), rng.randint(1, 3)))
            devices, memory = self.gpu_usage(group)
            self.quotas["gpu-team"] = {"min": {"gpu_memory": "%dGi" % (memory // 2)},
                                       "max": {"gpu": len(devices) + rng.choice((0, 0, 1)),
                                               "gpu_memory": "%dGi" % (memory + rng.choice((0, 0, 8)))}}
            for name in group:
                self.services[name].quota = "gpu-team"
        cpu_services = sorted(s.name for s in self.services.values() if s.gpu is None)
        if cpu_services and rng.random() < 0.4:
            group = rng.sample(cpu_services, min(len(cpu_services), rng.randint(1, 2)))
            cpu = sum(self.services[name].pod_cpu() * self.services[name].replicas for name in group)
            self.quotas["batch"] = {"min": {"cpu": "%dm" % (cpu // 2)},
                                    "max": {"cpu": "%dm" % (cpu + rng.choice((0, 0, 500)))}}
            for name in group:
                self.services[name].quota = "batch"

    # --- previous placements ---------------------------------------------------------------------
    def instances(self):
        """(instance name, service, ordinal) in service then ordinal order."""
        return [("%s-%d" % (name, ordinal), self.services[name], ordinal)
                for name in sorted(self.services) for ordinal in range(self.services[name].replicas)]

    def stay(self, instance, service, ordinal):
        node, uuids = service.plant[ordinal]
        entry = {"node": node}
        if uuids:
            entry["gpus"] = [{"uuid": uuid} for uuid in uuids]
        self.previous[instance] = entry

    def make_stateful(self, count):
        """Up to ``count`` services become stateful, their instances pinned to their planted nodes."""
        names = sorted(self.services)
        for name in self.rng.sample(names, min(count, len(names))):
            service = self.services[name]
            service.stateful = True
            for ordinal in range(service.replicas):
                self.stay("%s-%d" % (name, ordinal), service, ordinal)

    # --- output ----------------------------------------------------------------------------------
    def problem(self):
        services = {name: self.services[name].spec() for name in sorted(self.services)}
        used = {sidecar for service in self.services.values() for sidecar in service.sidecars}
        for sidecar in sorted(used):
            cpu, memory, ports = SIDECARS[sidecar]
            services[sidecar] = {"sidecar": True, "resources": {"cpu": "%dm" % cpu, "memory": "%dMi" % memory}}
            if ports:
                services[sidecar]["ports"] = list(ports)
        problem = {"nodes": {name: self.nodes[name].spec() for name in sorted(self.nodes)}, "services": services}
        if self.quotas:
            problem["quotas"] = {name: self.quotas[name] for name in sorted(self.quotas)}
        if self.previous:
            problem["previous"] = {name: self.previous[name] for name in sorted(self.previous)}
        return problem

    def planted(self):
        return {instance: service.plant[ordinal][0] for instance, service, ordinal in self.instances()}

    # --- facts the infeasible kinds argue from ---------------------------------------------------
    def matching(self, models):
        return [(node, device) for node, device in self.all_devices() if matches(models, device["kind"])]

    def eligible_nodes(self, service):
        """Nodes that pass every per-node rule for one instance alone (a superset of where it can run)."""
        found = []
        for name, node in sorted(self.nodes.items()):
            if node.unschedulable or (node.tainted and not service.tolerate):
                continue
            labels = node.labels()
            if service.selector and any(labels.get(key) != value for key, value in service.selector.items()):
                continue
            if node.cpu < service.pod_cpu() or node.memory < service.pod_memory():
                continue
            if service.gpu is not None:
                count, size, models = service.gpu
                fit = [d for d in node.devices if matches(models, d["kind"]) and (size is None or d["memory"] >= size)]
                if len(fit) < count:
                    continue
            found.append(name)
        return found


def _gi(value):
    return "%dGi" % value


def _feasible(plant, kind):
    answer = {"kind": kind, "feasible": True, "reason": "planted solution", "min_moves": None, "max_moves": None}
    rng = plant.rng
    if kind in ("pack", "pack_tight"):
        if rng.random() < 0.5:
            plant.make_stateful(rng.randint(1, 2))
        # Only stateful instances have a previous node, and they never move.
        answer["min_moves"] = answer["max_moves"] = 0
    elif kind == "previous":
        plant.make_stateful(rng.randint(0, 2))
        instances = [entry for entry in plant.instances() if not entry[1].stateful]
        displaced = 0
        for instance, service, ordinal in instances:
            roll = rng.random()
            if roll < 0.7:
                plant.stay(instance, service, ordinal)
            elif roll < 0.82 and displaced < 2:
                here = service.plant[ordinal][0]
                plant.previous[instance] = {"node": rng.choice([n for n in sorted(plant.nodes) if n != here])}
                displaced += 1
            elif roll < 0.86:
                plant.previous[instance] = {"node": "n99"}          # a node that left the cluster: it must move
                plant.gone.append(instance)
        answer["max_moves"] = displaced + len(plant.gone)
        if displaced == 0:
            answer["min_moves"] = len(plant.gone)
        # An unschedulable node keeps what ran there: only when everything planted on it has it as previous.
        for name in sorted(plant.nodes):
            planted = [i for i, s, o in plant.instances() if s.plant[o][0] == name]
            if planted and all(plant.previous.get(i, {}).get("node") == name for i in planted) and rng.random() < 0.3:
                plant.nodes[name].unschedulable = True
                break
        answer["reason"] = "planted solution with %d stateless instance(s) displaced and %d on a gone node" % (
            displaced, len(plant.gone))
    else:
        wanted = 1 if kind == "one_move" else 2
        plant.make_stateful(rng.randint(0, 2))
        for instance, service, ordinal in plant.instances():
            plant.stay(instance, service, ordinal)
        candidates = [(i, s, o) for i, s, o in plant.instances() if not s.stateful and s.pod_cpu() > 0]
        rng.shuffle(candidates)
        chosen, sources, homes = [], set(), set()
        for instance, service, ordinal in candidates:
            here = service.plant[ordinal][0]
            if here in sources:
                continue
            # The node it "ran on": another node with something planted (so its CPU is set from a plant),
            # where no other chosen instance is planted: in "all stay" it holds all it holds in the plant, and more.
            options = [n for n in sorted(plant.nodes)
                       if n != here and n not in sources and n not in homes and plant.used(n)[0] > 0]
            if not options:
                continue
            source = rng.choice(options)
            chosen.append((instance, source))
            sources.add(source)
            homes.add(here)
            if len(chosen) == wanted:
                break
        if len(chosen) < wanted:
            return None
        for instance, source in chosen:
            plant.previous[instance] = {"node": source}
            plant.nodes[source].cpu = plant.used(source)[0]      # exactly full: staying overfills it
        answer["min_moves"] = answer["max_moves"] = wanted
        answer["reason"] = "%s ran on %s, whose CPU is exactly what is planted there; the plant moves %s" % (
            ", ".join(i for i, _n in chosen), ", ".join(n for _i, n in chosen),
            "it" if wanted == 1 else "them")
    answer["planted"] = plant.planted()
    answer["planted_gpus"] = {instance: list(service.plant[ordinal][1]) for instance, service, ordinal in plant.instances()}
    return answer


def _shared_lower_bound(plant, service):
    """GiB one instance takes at least, and the devices it may use."""
    count, size, models = service.gpu
    devices = plant.matching(models)
    if size is not None:
        return count * size, devices
    return count * min(device["memory"] for _node, device in devices), devices


def _inf_gpu_memory(plant):
    shared = [s for s in sorted(plant.services.values(), key=lambda s: s.name) if s.gpu is not None and s.gpu[1] is not None]
    plant.rng.shuffle(shared)
    for service in shared:
        count, size, models = service.gpu
        domain = {device["uuid"] for _node, device in plant.matching(models)}
        supply = sum(device["memory"] for _node, device in plant.all_devices() if device["uuid"] in domain)
        demand = 0
        for other in plant.services.values():
            if other.gpu is None:
                continue
            take, devices = _shared_lower_bound(plant, other)
            if {device["uuid"] for _node, device in devices} <= domain:
                demand += take * other.replicas
        extra = (supply - demand) // (count * size) + 1
        if extra <= 10 and plant.instance_count() + extra <= MAX_INSTANCES:
            for _unused in range(extra):
                service.plant.append((None, []))
            return "GPU memory: the services that can only use %s devices ask at least %s; those %d devices have %s" % (
                " or ".join(models) if models else "any", _gi(demand + extra * count * size), len(domain), _gi(supply))
    return None


def _inf_anti_affinity(plant):
    services = sorted(plant.services.values(), key=lambda s: s.name)
    plant.rng.shuffle(services)
    for service in services:
        eligible = plant.eligible_nodes(service)
        replicas = len(eligible) + 1
        if replicas < service.replicas or plant.instance_count() - service.replicas + replicas > MAX_INSTANCES:
            continue
        if service.name not in service.anti:
            service.anti.append(service.name)
        service.stateful = False
        for ordinal in range(service.replicas):
            plant.previous.pop("%s-%d" % (service.name, ordinal), None)
        while service.replicas < replicas:
            service.plant.append((None, []))
        return "%s lists itself in anti_affinity (one replica per node) and has %d replicas; only %d node(s) can run one (%s)" % (
            service.name, replicas, len(eligible), ", ".join(eligible) or "none")
    return None


def _inf_quota(plant):
    rng = plant.rng
    members = sorted(s.name for s in plant.services.values() if s.quota == "gpu-team")
    if not members:
        gpu_services = sorted(s.name for s in plant.services.values() if s.gpu is not None)
        if not gpu_services:
            return None
        members = rng.sample(gpu_services, min(2, len(gpu_services)))
        for name in members:
            plant.services[name].quota = "gpu-team"
        plant.quotas["gpu-team"] = {"max": {}}
    quota = plant.quotas["gpu-team"]
    quota.pop("min", None)
    memory = whole_devices = shared_memory = shared_count = 0
    largest = 0
    for name in members:
        service = plant.services[name]
        take, devices = _shared_lower_bound(plant, service)
        memory += take * service.replicas
        if service.gpu[1] is None:
            whole_devices += service.gpu[0] * service.replicas
        else:
            shared_memory += take * service.replicas
            shared_count = max(shared_count, service.gpu[0])
            largest = max([largest] + [device["memory"] for _node, device in devices])
    if rng.random() < 0.5 or memory <= 1:
        shared_devices = max(shared_count, -(-shared_memory // largest)) if shared_memory else 0
        needed = whole_devices + shared_devices
        if needed >= 1:
            quota["max"] = {"gpu": needed - 1}
            return ("quota gpu-team: its services need at least %d GPU device(s) (%d whole, and %s shared on devices of at most %s),"
                    " max gpu is %d" % (needed, whole_devices, _gi(shared_memory), _gi(largest), needed - 1))
    if memory < 1:
        return None     # the team asks no GPU memory (no replicas): no GPU limit can refuse it (seed 1116 made "-1Gi")
    quota["max"] = {"gpu_memory": _gi(memory - 1)}
    return "quota gpu-team: its services take at least %s of GPU memory, max gpu_memory is %s" % (_gi(memory), _gi(memory - 1))


def _inf_whole_gpus(plant):
    rng = plant.rng
    whole = [s for s in sorted(plant.services.values(), key=lambda s: s.name) if s.gpu is not None and s.gpu[1] is None]
    if whole:
        service = rng.choice(whole)
    else:
        kinds = sorted({device["kind"] for _node, device in plant.all_devices()})
        service = _Service(plant._name("train"))
        service.gpu = (1, None, [NARROW[rng.choice(kinds)]])
        service.cpu, service.memory = 2000, 16 * 1024
        plant.services[service.name] = service
    count, _size, models = service.gpu
    domain = {device["uuid"] for _node, device in plant.matching(models)}
    units = 0
    for other in plant.services.values():
        if other.gpu is not None and other.gpu[1] is None and \
                {device["uuid"] for _node, device in plant.matching(other.gpu[2])} <= domain:
            units += other.gpu[0] * other.replicas
    extra = (len(domain) - units) // count + 1
    if plant.instance_count() + extra > MAX_INSTANCES:
        return None
    for _unused in range(extra):
        service.plant.append((None, []))
    return "whole GPUs: requests that can only use %s devices take %d whole device(s); there are %d" % (
        " or ".join(models) if models else "any", units + extra * count, len(domain))


def _inf_big_gpus(plant):
    rng = plant.rng
    kind = rng.choice(sorted({device["kind"] for _node, device in plant.all_devices()}))
    models = [NARROW[kind]]
    domain = {device["uuid"] for _node, device in plant.matching(models)}
    largest = max(device["memory"] for _node, device in plant.matching(models))
    size = largest // 2 + 1
    units = 0
    for other in plant.services.values():
        if other.gpu is None:
            continue
        count, other_size, other_models = other.gpu
        inside = {device["uuid"] for _node, device in plant.matching(other_models)} <= domain
        if inside and (other_size is None or 2 * other_size > largest):
            units += count * other.replicas
    extra = len(domain) + 1 - units
    if extra < 1 or plant.instance_count() + extra > MAX_INSTANCES:
        return None
    service = _Service(plant._name("big"))
    service.gpu = (1, size, models)
    service.cpu, service.memory = 1000, 4 * 1024
    service.plant = [(None, [])] * extra
    plant.services[service.name] = service
    return ("pigeonhole: a %s device (at most %s) holds at most one request above half its memory; %d such request(s) "
            "can only use the %d %s device(s)" % (models[0], _gi(largest), units + extra, len(domain), models[0]))


def _inf_stateful(plant):
    rng = plant.rng
    services = sorted(plant.services.values(), key=lambda s: s.name)
    rng.shuffle(services)
    for service in services:
        if service.replicas < 2:
            continue
        node_name = rng.choice(sorted(plant.nodes))
        node = plant.nodes[node_name]
        extra = service.pod_cpu() - service.cpu
        per = max(service.cpu, (node.cpu - extra * service.replicas) // service.replicas + 100)
        if per + extra > node.cpu:
            continue
        service.cpu = per
        service.stateful = True
        for ordinal in range(service.replicas):
            plant.previous["%s-%d" % (service.name, ordinal)] = {"node": node_name}
        return "stateful %s: its %d instances are pinned to %s and ask %dm CPU with sidecars; %s has %dm" % (
            service.name, service.replicas, node_name, service.pod_cpu() * service.replicas, node_name, node.cpu)
    return None


INFEASIBLE = {
    "inf_gpu_memory": _inf_gpu_memory,
    "inf_anti_affinity": _inf_anti_affinity,
    "inf_quota": _inf_quota,
    "inf_whole_gpus": _inf_whole_gpus,
    "inf_big_gpus": _inf_big_gpus,
    "inf_stateful": _inf_stateful,
}


def generate(seed, kind):
    """(problem mapping, answer) for one problem of ``kind`` (one of KINDS); deterministic in both."""
    if kind not in KINDS:
        raise ValueError("unknown kind %r; expected one of %s" % (kind, ", ".join(KINDS)))
    for attempt in range(100):
        rng = random.Random("%d:%s:%d" % (seed, kind, attempt))
        plant = _Plant(rng, tight=kind == "pack_tight" or (kind not in ("pack", "previous") and rng.random() < 0.4))
        if plant.instance_count() < 5 or plant.instance_count() > MAX_INSTANCES:
            continue
        if kind in FEASIBLE_KINDS:
            answer = _feasible(plant, kind)
            if answer is None:
                continue
        else:
            if rng.random() < 0.4:
                plant.make_stateful(1)
            reason = INFEASIBLE[kind](plant)
            if reason is None:
                continue
            answer = {"kind": kind, "feasible": False, "reason": reason, "min_moves": None, "max_moves": None}
        if not 5 <= plant.instance_count() <= MAX_INSTANCES:
            continue
        answer["nodes"] = len(plant.nodes)
        answer["instances"] = plant.instance_count()
        return plant.problem(), answer
    raise RuntimeError("no %s problem for seed %d" % (kind, seed))


def suite(seed, count):
    """``count`` problems as (name, problem, answer), the kinds taken in turn (ROTATION)."""
    problems = []
    for position in range(count):
        kind = ROTATION[position % len(ROTATION)]
        problem, answer = generate(seed * 100003 + position, kind)
        problems.append(("%s-%d-%02d" % (kind, seed, position), problem, answer))
    return problems


def _amount(text):
    """The generator's own quantity strings ("500m", "256Mi", "80Gi") as millicores or bytes."""
    scale = {"m": 1, "Mi": 1024 ** 2, "Gi": 1024 ** 3}
    for suffix in ("Mi", "Gi", "m"):
        if text.endswith(suffix):
            return int(text[:-len(suffix)]) * scale[suffix]
    raise ValueError(text)


def planted_result(problem, answer):
    """The planted solution of a feasible problem written as a plan() result, for plan_checker.check_plan:
    a check of the generator itself (the plant must satisfy every rule)."""
    nodes, services = problem["nodes"], problem["services"]
    devices = {gpu["uuid"]: gpu for node in nodes.values() for gpu in node.get("gpus", [])}
    placements, usage, labels = {}, {}, {name: {} for name in nodes}
    for name, node in nodes.items():
        usage[name] = {"cpu_millicores": {"used": 0, "total": _amount(node["cpu"])},
                       "memory": {"used": 0, "total": _amount(node["memory"])},
                       "gpus": [{"index": gpu["index"], "uuid": gpu["uuid"], "model": gpu["model"], "used": 0,
                                 "total": _amount(gpu["memory"])} for gpu in node.get("gpus", [])],
                       "nvme": [], "instances": []}
    for service_name in sorted(services):
        spec = services[service_name]
        if spec.get("sidecar"):
            continue
        pod = [service_name] + spec.get("sidecars", [])
        request = spec["resources"].get("gpu")
        for ordinal in range(spec["replicas"]):
            instance = "%s-%d" % (service_name, ordinal)
            node = answer["planted"][instance]
            gpus = []
            for uuid in answer["planted_gpus"][instance]:
                device = devices[uuid]
                take = _amount(device["memory"]) if "memory" not in request else _amount(request["memory"])
                gpus.append({"index": device["index"], "uuid": uuid, "model": device["model"], "memory": take})
                for entry in usage[node]["gpus"]:
                    if entry["uuid"] == uuid:
                        entry["used"] += take
            gpus.sort(key=lambda gpu: gpu["index"])
            placements[instance] = {"service": service_name, "ordinal": ordinal, "node": node, "gpus": gpus,
                                    "nvme": None, "sidecars": list(spec.get("sidecars", []))}
            for member in pod:
                resources = services[member]["resources"]
                usage[node]["cpu_millicores"]["used"] += _amount(resources["cpu"])
                usage[node]["memory"]["used"] += _amount(resources["memory"])
                labels[node]["gangplank.io/service." + member] = "true"
            usage[node]["instances"].append(instance)
    previous = problem.get("previous", {})
    moves = [{"instance": name, "from": previous[name]["node"], "to": placement["node"]}
             for name, placement in placements.items() if name in previous and previous[name]["node"] != placement["node"]]
    ranks = [sorted(name for name, spec in services.items() if not spec.get("sidecar"))]
    return {"feasible": True, "path": "greedy", "placements": placements, "moves": moves, "preempted": {},
            "evictions": [], "node_labels": labels, "usage": usage, "ranks": ranks}


def main(argv):
    seed, kind = (int(argv[1]), argv[2]) if len(argv) > 2 else (1, "pack")
    problem, answer = generate(seed, kind)
    json.dump({"problem": problem, "answer": answer}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
