# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Synthetic, feasible scheduling problems for the benchmark.

``generate(nodes, instances, seed)`` returns a problem mapping in the format of
docs/problem-format.md: a mixed GPU/CPU cluster and a service catalog whose
replicas add up to exactly ``instances``, sized so the cluster ends up about
60-75% used in CPU, memory and GPU memory. The same arguments always give the
same mapping (everything random comes from ``random.Random(seed)``).

Run it to print a problem as JSON: ``python benchmarks/generate.py 20 300 1``.
"""

from __future__ import annotations

import copy
import json
import math
import random
import sys

GI = 1024          # MiB per GiB: requests are computed in MiB

# name, memory (GiB), model class
GPU_MODELS = {
    "a100-80": ("NVIDIA A100-SXM4-80GB", 80),
    "a100-40": ("NVIDIA A100-PCIE-40GB", 40),
    "h100": ("NVIDIA H100 80GB HBM3", 80),
    "l40s": ("NVIDIA L40S", 48),
    "l4": ("NVIDIA L4", 24),
}
# Eight GPUs per node, models mixed within the node.
GPU_LAYOUTS = (
    (("h100", 4), ("a100-80", 4)),
    (("h100", 4), ("l40s", 4)),
    (("a100-80", 4), ("a100-40", 4)),
    (("a100-80", 4), ("l40s", 2), ("l4", 2)),
    (("a100-40", 4), ("l40s", 4)),
    (("l40s", 4), ("l4", 4)),
    (("h100", 2), ("a100-80", 2), ("l40s", 2), ("l4", 2)),
)
ZONES = ("zone-a", "zone-b", "zone-c")

# Model lists as services write them, and the device kinds each one matches
# (case-insensitive substring, as the scheduler matches them).
BIG_MODELS = ["A100", "H100"]                  # 80Gi and 40Gi A100s, H100s
TRAIN80_MODELS = ["H100", "A100-SXM4"]          # the 80Gi devices only
TRAIN48_MODELS = ["L40S"]
SMALL_MODEL_LISTS = (None, ["L4", "L40S"], None, ["L40S", "A100"])

STATEFUL_KINDS = (   # base name, port, Gi of memory per core
    ("postgres", 5432, 8), ("redis", 6379, 8), ("kafka", 9092, 6), ("etcd", 2379, 4),
    ("cassandra", 9042, 8), ("mongodb", 27017, 8), ("rabbitmq", 5672, 4), ("zookeeper", 2181, 4),
    ("elasticsearch", 9200, 8), ("nats", 4222, 2), ("clickhouse", 8123, 8), ("minio", 9000, 4),
)
DOMAINS = ("orders", "users", "billing", "catalog", "search", "events", "auth", "media", "ledger",
           "metrics", "chat", "inventory", "shipping", "reviews", "ads", "feeds", "maps", "payments",
           "profile", "notify", "reports", "pricing", "fraud", "social", "video", "audio", "email",
           "graph", "vault", "tenant", "audit", "ranker", "geo", "booking", "loyalty", "support")
API_KINDS = (("api", 3), ("frontend", 2), ("worker", 4), ("gateway", 2), ("grpc", 3), ("web", 2))
INFER_KINDS = ("llm", "embed", "rerank", "vision", "asr", "tts", "ocr", "detect")
TRAIN_KINDS = ("finetune", "pretrain", "distill", "rlhf", "sweep")
BATCH_KINDS = ("etl", "indexer", "transcode", "crawler", "compactor")


def _size(mib):
    """MiB as a quantity string: whole GiB where it is one."""
    mib = int(mib)
    return "%dGi" % (mib // GI) if mib % GI == 0 else "%dMi" % mib


def _cpu(millicores):
    millicores = int(millicores)
    return millicores // 1000 if millicores % 1000 == 0 else "%dm" % millicores


def _split(rng, total, count, floor=1):
    """``total`` split into ``count`` random positive parts (each >= floor) that add up exactly."""
    if count == 0:
        return []
    floor = min(floor, total // count)
    weights = [rng.uniform(0.3, 1.7) for _unused in range(count)]
    spare = total - floor * count
    parts = [floor + int(spare * w / sum(weights)) for w in weights]
    for position in range(total - sum(parts)):
        parts[position % count] += 1
    return parts


def _water_fill(items, budget, cap, step):
    """Amounts per name: weight x one common factor so the total meets the budget, each
    amount capped; rounded down to ``step`` (at least one step)."""
    capped = {}
    factor = 0.0
    for _unused in range(len(items) + 1):
        free = budget - sum(cap * replicas for name, _unused, replicas in items if name in capped)
        weights = sum(weight * replicas for name, weight, replicas in items if name not in capped)
        factor = free / weights if weights else 0.0
        over = [name for name, weight, _unused in items if name not in capped and weight * factor > cap]
        if not over:
            break
        capped.update(dict.fromkeys(over))
    return {name: max(step, min(cap, int(weight * factor) // step * step)) for name, weight, _unused in items}


def _nodes(rng, count):
    """Half GPU nodes (8 mixed GPUs, NVMe), half CPU-only nodes; a few taints."""
    nodes = {}
    gpu_count = (count + 1) // 2
    cpu_count = count - gpu_count
    gpu_serial = 0
    db_tainted = set(rng.sample(range(cpu_count), max(1, cpu_count // 20))) if cpu_count >= 4 else set()
    gpu_tainted = set(rng.sample(range(gpu_count), gpu_count // 10))
    for position in range(gpu_count):
        name = "gpu-%04d" % position
        cores = rng.choice((64, 96, 128))
        layout = rng.choice(GPU_LAYOUTS)
        kinds = [kind for kind, number in layout for _unused in range(number)]
        rng.shuffle(kinds)
        gpus = []
        for index, kind in enumerate(kinds):
            gpu_serial += 1
            model, memory = GPU_MODELS[kind]
            gpus.append({"index": index, "uuid": "GPU-%08x-%04x" % (rng.getrandbits(32), gpu_serial),
                         "model": model, "memory": "%dGi" % memory})
        if rng.random() < 0.75:
            nvme = [{"name": "nvme0n1", "size": "3576Gi", "labels": ["cache"], "mount": "/mnt/nvme0n1"},
                    {"name": "nvme1n1", "size": "7152Gi", "labels": ["dataset"], "mount": "/mnt/nvme1n1"}]
        else:
            nvme = [{"name": "nvme0n1", "size": "7152Gi", "labels": ["cache", "dataset"],
                     "mount": "/mnt/nvme0n1"}]
        node = {
            "cpu": cores,
            "memory": _size(cores * 8 * GI),                 # 512Gi, 768Gi or 1Ti
            "labels": {"zone": ZONES[position % 3], "rack": "rack-g%02d" % (position // 8),
                       "node-type": "gpu", "accelerator": "nvidia"},
            "gpus": gpus,
            "nvme": nvme,
        }
        if position in gpu_tainted:
            node["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "PreferNoSchedule"}]
        nodes[name] = node
    for position in range(cpu_count):
        name = "cpu-%04d" % position
        cores = rng.choice((32, 48, 64))
        node = {
            "cpu": cores,
            "memory": _size(cores * rng.choice((4, 8)) * GI),  # 128Gi .. 512Gi
            "labels": {"zone": ZONES[position % 3], "rack": "rack-c%02d" % (position // 16),
                       "node-type": "cpu"},
        }
        if rng.random() < 0.4:
            node["nvme"] = [{"name": "nvme0n1", "size": "1788Gi", "labels": ["cache"], "mount": "/mnt/nvme0n1"}]
            node["labels"]["disk"] = "nvme"
        if position in db_tainted:
            node["taints"] = [{"key": "dedicated", "value": "database", "effect": "NoSchedule"}]
            node["labels"]["dedicated"] = "database"
        nodes[name] = node
    return nodes


def _gpu_capacity(nodes):
    """GiB of GPU memory per device kind, and in all."""
    by_model = {}
    for node in nodes.values():
        for gpu in node.get("gpus", ()):
            by_model[gpu["model"]] = by_model.get(gpu["model"], 0) + int(gpu["memory"][:-2])
    return by_model


def _matching(by_model, models):
    if models is None:
        return sum(by_model.values())
    return sum(memory for model, memory in by_model.items()
               if any(pattern.lower() in model.lower() for pattern in models))


class _Namer:
    def __init__(self, rng):
        self.rng = rng
        self.used = set()

    def __call__(self, base):
        domains = list(DOMAINS)
        self.rng.shuffle(domains)
        for domain in domains:
            name = "%s-%s" % (base, domain)
            if name not in self.used:
                self.used.add(name)
                return name
        for serial in range(1000):      # more services than domains: a letter suffix
            name = "%s-x%s" % (base, "".join(chr(ord("a") + int(d)) for d in str(serial)))
            if name not in self.used:
                self.used.add(name)
                return name
        raise ValueError("too many services named %s" % base)


def generate(nodes, instances, seed):
    """A feasible problem mapping: ``nodes`` nodes, services with ``instances`` instances in all."""
    if nodes < 2 or instances < 8:
        raise ValueError("need at least 2 nodes and 8 instances")
    rng = random.Random(seed)
    cluster = _nodes(rng, nodes)
    node_count = len(cluster)
    total_cpu = sum(node["cpu"] for node in cluster.values()) * 1000                  # millicores
    total_memory = sum(int(node["memory"][:-2]) * (GI * GI if node["memory"].endswith("Ti") else GI)
                       for node in cluster.values())                                     # MiB
    by_model = _gpu_capacity(cluster)
    gpu_total = sum(by_model.values())                                                  # GiB
    c80 = sum(m for model, m in by_model.items() if "80" in model)
    c40 = _matching(by_model, ["A100-PCIE-40GB"])
    c48 = _matching(by_model, ["L40S"])
    target = rng.uniform(0.64, 0.70)
    name = _Namer(rng)

    app_count = max(8, min(60, int(round(instances / 100.0))))
    n_stateful = max(2, int(round(0.2 * app_count)))
    n_infer = max(2, int(round(0.2 * app_count))) if gpu_total else 0
    n_train = max(1, int(round(0.1 * app_count))) if c80 or _matching(by_model, TRAIN48_MODELS) else 0
    n_batch = max(1, int(round(0.1 * app_count)))
    n_api = app_count - n_stateful - n_infer - n_train - n_batch
    if n_api < 2:
        raise ValueError("too few services for the catalog")

    services = {
        "logshipper": {"sidecar": True, "resources": {"cpu": "100m", "memory": "128Mi"}},
        "envoy": {"sidecar": True, "resources": {"cpu": "250m", "memory": "256Mi"}},
        "db-exporter": {"sidecar": True, "resources": {"cpu": "100m", "memory": "64Mi"}, "ports": [9187]},
    }
    sidecar_cost = {"logshipper": (100, 128), "envoy": (250, 256), "db-exporter": (100, 64)}
    specs = []          # (name, kind, spec); replicas and sizes filled in below

    # Stateful datastores and queues: a host port, one replica per node.
    kinds = list(STATEFUL_KINDS)
    rng.shuffle(kinds)
    for position in range(n_stateful):
        base, port, ratio = kinds[position % len(kinds)]
        service = name(base)
        spec = {"stateful": True, "ports": [port + position // len(kinds)],
                "anti_affinity": [service], "sidecars": ["logshipper"],
                "tolerations": [{"key": "dedicated", "value": "database", "effect": "NoSchedule"}],
                "replicas": max(1, min(node_count // 3, rng.choice((3, 3, 5)) if node_count < 200
                                       else rng.choice((5, 7, 9))))}
        if position == 0:
            spec["sidecars"].append("db-exporter")       # its port: one per node, as the datastore
        specs.append((service, "stateful", spec, rng.uniform(2.0, 4.0), ratio))

    # GPU work, sized from the cluster's GPU memory by device kind (GiB).
    gpu_specs = []
    train_names = []
    for position in range(n_train):
        whole80 = (position % 2 == 0 or c48 == 0) and c80 > 0
        models = TRAIN80_MODELS if whole80 else TRAIN48_MODELS
        count = rng.choice((1, 2, 4)) if whole80 else rng.choice((1, 2))
        service = name(rng.choice(TRAIN_KINDS))
        train_names.append(service)
        spec = {"resources": {"gpu": {"count": count, "models": list(models)},
                              "nvme": {"label": "dataset", "size": "%dGi" % rng.choice((256, 512, 768))}},
                "node_selector": {"accelerator": "nvidia"}, "sidecars": ["logshipper"], "quota": "training",
                "tolerations": [{"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}]}
        device = 80 if whole80 else 48
        gpu_specs.append((service, "train80" if whole80 else "train48", spec, count * device, count))
    n_big = (n_infer + 1) // 2
    for position in range(n_infer):
        big = position < n_big
        if big:
            memory = rng.choice((32, 40))
            models = BIG_MODELS
        else:
            memory = rng.choice((10, 12, 16, 20, 24))
            models = SMALL_MODEL_LISTS[(position - n_big) % len(SMALL_MODEL_LISTS)]
        gpu = {"count": 1, "memory": "%dGi" % memory}
        if models is not None:
            gpu["models"] = list(models)
        service = name(rng.choice(INFER_KINDS))
        cache = {"label": "cache", "size": "%dGi" % rng.choice((50, 100, 150))}
        spec = {"scalable": True, "resources": {"gpu": gpu, "nvme": cache},
                "sidecars": ["logshipper", "envoy"],
                "tolerations": [{"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}]}
        gpu_specs.append((service, "infer-big" if big else "infer-small", spec, memory, 1))

    # GPU memory budget (GiB) per group of services, about `target` of every device kind.
    budgets = {
        "train80": 0.35 * c80,
        "train48": 0.30 * c48,
        "infer-big": 0.30 * (c80 + c40),
    }
    budgets["infer-small"] = max(0.0, target * gpu_total - sum(
        budgets[kind] for kind in ("train80", "train48", "infer-big")
        if any(s[1] == kind for s in gpu_specs)))
    gpu_replicas = {}
    for kind in ("train80", "train48", "infer-big", "infer-small"):
        members = [s for s in gpu_specs if s[1] == kind]
        if not members:
            continue
        weights = [rng.uniform(0.6, 1.4) for _unused in members]
        for (service, _unused, _unused, per_instance, _unused), weight in zip(members, weights):
            share = budgets[kind] * weight / sum(weights)
            gpu_replicas[service] = max(1, int(share / per_instance))
    # A model list narrower than "any" takes at most a third of the devices it matches;
    # what it cannot take goes to the first service that takes any model.
    anywhere = [s for s in gpu_specs if s[1] == "infer-small" and "models" not in s[2]["resources"]["gpu"]]
    narrow = {}
    for service, kind, spec, per_instance, _unused in gpu_specs:
        models = spec["resources"]["gpu"].get("models")
        if kind == "infer-small" and models is not None and anywhere:
            narrow.setdefault(tuple(models), []).append((service, per_instance))
    for models, members in sorted(narrow.items()):
        demand = sum(gpu_replicas[service] * per_instance for service, per_instance in members)
        limit = _matching(by_model, models) / 3.0
        if demand > limit:
            for service, per_instance in members:
                keep = max(1, int(gpu_replicas[service] * limit / demand))
                moved = (gpu_replicas[service] - keep) * per_instance
                gpu_replicas[service] = keep
                gpu_replicas[anywhere[0][0]] += int(moved / anywhere[0][3])

    # The ingress: host ports, one per node on a share of the nodes.
    ingress = name("ingress")
    ingress_spec = {"ports": [80, 443], "anti_affinity": [ingress], "sidecars": ["logshipper"],
                    "replicas": max(2, min(node_count // 8, 16))}

    fixed = sum(spec["replicas"] for _unused, _unused, spec, _unused, _unused in specs) + ingress_spec["replicas"]
    flexible_count = (n_api - 1) + n_batch
    room = instances - fixed - flexible_count
    if room < 0:
        raise ValueError("too few instances for the catalog's fixed replicas")
    gpu_wanted = sum(gpu_replicas.values())
    if gpu_wanted > room * 0.6:       # keep most of the catalog's instances CPU work
        scale = room * 0.6 / gpu_wanted
        for service in gpu_replicas:
            gpu_replicas[service] = max(1, int(gpu_replicas[service] * scale))
    for service, kind, spec, per_instance, count in gpu_specs:
        spec["replicas"] = gpu_replicas[service]
        cores_per_gpu = rng.choice((4, 6)) if kind.startswith("train") else rng.choice((2, 3, 4))
        ratio = 8
        specs.append((service, kind, spec, cores_per_gpu * count, ratio))

    # Stateless APIs and batch: the rest of the instances.
    flexible = []
    for position in range(n_api - 1):
        base, ratio = rng.choice(API_KINDS)
        service = name(base)
        spec = {"scalable": True, "sidecars": ["logshipper", "envoy"]}
        if position % 5 == 1:
            spec["node_selector"] = {"zone": rng.choice(ZONES)}
        flexible.append((service, "api", spec, rng.uniform(0.5, 2.0), ratio))
    for position in range(n_batch):
        service = name(rng.choice(BATCH_KINDS))
        spec = {"sidecars": ["logshipper"], "quota": "batch",
                "resources": {"nvme": {"label": "cache", "size": "%dGi" % rng.choice((32, 64, 128))}}}
        flexible.append((service, "batch", spec, rng.uniform(1.0, 3.0), 4))
    left = instances - fixed - sum(gpu_replicas.values())
    # A zone-pinned API stays small: its zone is a third of the cluster.
    pinned = [entry for entry in flexible if "node_selector" in entry[2]]
    for service, kind, spec, _unused, _unused in pinned:
        spec["replicas"] = max(1, min(left // 50, node_count // 3))
        left -= spec["replicas"]
    unpinned = [entry for entry in flexible if "node_selector" not in entry[2]]
    for (service, kind, spec, _unused, _unused), part in zip(unpinned, _split(rng, left, len(unpinned))):
        spec["replicas"] = part
    specs.extend(flexible)
    specs.append((ingress, "ingress", ingress_spec, 3.0, 2))

    # CPU (millicores) and memory (MiB) per instance. GPU work asks for fixed amounts
    # (cores per GPU, 8Gi per core); the rest is relative sizes scaled to the target,
    # capped so one instance stays a small part of the smallest node.
    cpu, memory = {}, {}
    for service, kind, spec, weight, ratio in specs:
        if kind.startswith("train") or kind.startswith("infer"):
            cpu[service] = int(weight) * 1000
            memory[service] = int(weight) * ratio * GI
    used_cpu = used_memory = 0
    for service, kind, spec, _unused, _unused in specs:
        used_cpu += cpu.get(service, 0) * spec["replicas"]
        used_memory += memory.get(service, 0) * spec["replicas"]
        for sidecar in spec.get("sidecars", ()):
            used_cpu += sidecar_cost[sidecar][0] * spec["replicas"]
            used_memory += sidecar_cost[sidecar][1] * spec["replicas"]
    scaled = [s for s in specs if s[0] not in cpu]
    cpu_budget = target * total_cpu - used_cpu
    memory_budget = rng.uniform(0.64, 0.70) * total_memory - used_memory
    cpu_cap, memory_cap = 8000, 64 * GI
    cpu.update(_water_fill([(s[0], s[3], s[2]["replicas"]) for s in scaled], cpu_budget, cpu_cap, 100))
    memory.update(_water_fill([(s[0], cpu[s[0]] * s[4], s[2]["replicas"]) for s in scaled],
                              memory_budget, memory_cap, 256))

    # Dependency ranks: datastores first, then 2 to 4 more levels.
    levels = rng.randint(3, 5)
    ordered = [s for s in specs if s[1] == "stateful"]
    upper = [s for s in specs if s[1] != "stateful" and s[0] != ingress]
    rng.shuffle(upper)
    level_of = {s[0]: 0 for s in ordered}
    by_level = {0: [s[0] for s in ordered]}
    for position, entry in enumerate(upper):
        level = 1 + position if position < levels - 2 else rng.randint(1, levels - 2)
        level_of[entry[0]] = level
        by_level.setdefault(level, []).append(entry[0])
    level_of[ingress] = levels - 1
    by_level.setdefault(levels - 1, []).append(ingress)
    for service, kind, spec, _unused, _unused in specs:
        level = level_of[service]
        if level == 0:
            continue
        below = sorted(by_level[level - 1])
        depends = rng.sample(below, min(len(below), rng.choice((1, 1, 2))))
        lower = [s for l in range(level - 1) for s in sorted(by_level[l])]
        if lower and rng.random() < 0.3:
            extra = rng.choice(lower)
            if extra not in depends:
                depends.append(extra)
        spec["depends_on"] = depends

    for service, kind, spec, _unused, _unused in specs:
        resources = spec.setdefault("resources", {})
        resources["cpu"] = _cpu(cpu[service])
        resources["memory"] = _size(memory[service])
        services[service] = spec

    # Quotas: the training group reserves part of its GPU memory and is capped a bit above
    # what it asks; the batch group is capped on CPU, memory and NVMe.
    train_gpus = sum(services[s]["replicas"] * services[s]["resources"]["gpu"]["count"] for s in train_names)
    train_memory = sum(spec["replicas"] * per_instance for service, kind, spec, per_instance, _unused in gpu_specs
                       if service in train_names)
    quotas = {}
    if train_names:
        quotas["training"] = {
            "min": {"gpu_memory": "%dGi" % (train_memory // 2)},
            "max": {"gpu": int(math.ceil(train_gpus * 1.25)) + 1,
                    "gpu_memory": "%dGi" % (int(math.ceil(train_memory * 1.25)) + 80)},
        }
    batch = [s for s in specs if s[1] == "batch"]
    batch_cpu = sum(spec["replicas"] * (cpu[s] + 100) for s, _unused, spec, _unused, _unused in batch)
    batch_memory = sum(spec["replicas"] * (memory[s] + 128) for s, _unused, spec, _unused, _unused in batch)
    batch_nvme = sum(spec["replicas"] * int(spec["resources"]["nvme"]["size"][:-2]) for _unused, _unused, spec, _unused, _unused in batch)
    quotas["batch"] = {"max": {"cpu": _cpu(int(batch_cpu * 1.2) // 100 * 100 + 1000),
                               "memory": _size(int(batch_memory * 1.2) // 256 * 256 + GI),
                               "nvme": "%dGi" % (int(batch_nvme * 1.2) + 1)}}

    problem = {"nodes": cluster, "services": dict(sorted(services.items())), "quotas": quotas}
    count = sum(s.get("replicas", 0) for s in services.values() if not s.get("sidecar"))
    assert count == instances, (count, instances)
    return problem


def main(argv):
    nodes, instances, seed = (int(argv[1]), int(argv[2]), int(argv[3])) if len(argv) > 3 else (20, 300, 1)
    json.dump(generate(nodes, instances, seed), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)


def with_kinds(problem, seed, share=0.2):
    """The problem with ``share`` of its instances preemptible (stateless services without GPUs, the last one
    split in two, with priorities from -10 to 10) and one every-node service (a node agent tolerating every taint), as
    benchmarks/plan_benchmark.py --kinds plans it. Deterministic for a seed."""
    rng = random.Random(seed)
    problem = copy.deepcopy(problem)
    services = problem["services"]
    total = sum(spec.get("replicas", 1) for spec in services.values() if not spec.get("sidecar"))
    candidates = sorted(name for name, spec in services.items()
                        if not spec.get("sidecar") and not spec.get("stateful")
                        and "gpu" not in (spec.get("resources") or {}))
    rng.shuffle(candidates)
    remaining = int(round(share * total))
    for name in candidates:
        if remaining <= 0:
            break
        replicas = services[name].get("replicas", 1)
        if replicas > remaining:
            # Split the service: <name>-spot takes the replicas still wanted, as preemptible work.
            services[name]["replicas"] = replicas - remaining
            services[name + "-spot"] = copy.deepcopy(services[name])
            name, replicas = name + "-spot", remaining
            services[name]["replicas"] = replicas
            services[name].pop("scalable", None)
        services[name]["preemptible"] = True
        services[name]["priority"] = rng.randint(-10, 10)
        remaining -= replicas
    taint_keys = sorted({taint["key"] for node in problem["nodes"].values() for taint in node.get("taints") or []})
    services["node-agent"] = {"every_node": True, "priority": 100, "resources": {"cpu": "100m", "memory": "128Mi"},
                              "tolerations": [{"key": key} for key in taint_keys]}
    return problem
