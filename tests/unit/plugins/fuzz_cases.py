# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile inputs for every entry point, and how to judge what each entry point did with them.

Shared by the hypothesis fuzz tests (tests/unit/plugins/test_fuzz.py) and benchmarks/fuzz_benchmark.py.
A case is built by mutating a valid input: one value somewhere in it is replaced by a hostile one (NaN,
a number with hundreds of digits, a billion-laughs structure, a path that escapes, ...), a key is dropped,
or a list is multiplied. ``choose(options)`` picks among options: hypothesis' ``data.draw(sampled_from)``
in the tests, ``random.Random.choice`` in the benchmark.

Each ``run_<entry point>(case)`` returns an outcome: ``ok`` (accepted), ``rejected`` (the documented
error), or ``violation: ...`` (accepted although it breaks a rule: a plan the checker refuses, a dangerous
value let through). Any other exception is a traceback the user would see: the callers count it.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import resource
import subprocess
import tempfile
import time

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import (
    CHANGE_SIGNALS, CONFIG_CHANGES, GPU_VISIBILITY_VARIABLES, split_catalog)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy import engine_driver
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    DeployError, decide, desired_containers, desired_on_hosts, waves,
)
from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import MAX_CACHE_BYTES, cached_facts
from ansible_collections.gangplank.platform.plugins.module_utils.health import ProbeConfigError, normalize_probes
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import (
    NodeFactsError, facts_table, scheduler_node,
)
from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import plan_catalog, rebalance_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_INSTANCES
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import applied_overrides, scale_overrides, takes_replicas
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import parse_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import max_moves_error, max_moves_value
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.secrets import read_values
from ansible_collections.gangplank.platform.plugins.module_utils import cluster_lock
from ansible_collections.gangplank.platform.plugins.modules import facts_cache as facts_cache_module
from ansible_collections.gangplank.platform.plugins.filter.plan_html import FilterModule as PlanHtmlFilters
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLANNER = os.path.join(ROOT, "bin", "gangplank-plan")
CLI_SECONDS = 60
CLI_MEMORY = 2 * 2 ** 30    # address space of one planner run (Python with OR-Tools takes about 0.5 GiB)
EXIT_CODES = (0, 1, 2)      # feasible, bad input, infeasible (bin/gangplank-plan)
GI = 2 ** 30
# Seconds the exact solver may search per fuzz case: enough for these small problems, bounded for the suite.
EXACT_SECONDS = 1.0


def _laughs(levels=9, width=9):
    """A billion-laughs value: 9^9 leaves, built from shared lists as a YAML parser builds aliases."""
    value = ["lol"] * width
    for _level in range(levels - 1):
        value = [value] * width
    return value


def _deep(levels=5000):
    value = []
    for _level in range(levels):
        value = [value]
    return value


LAUGHS = _laughs()
# Values that broke some entry point once, and their neighbours. Built once: shared, not copied.
HOSTILE = (
    float("nan"), float("inf"), float("-inf"), -1, 0, 1.5, 1e20, 10 ** 30, 10 ** 400, -(10 ** 400), 2 ** 63, 65536,
    1000000000, True, False, None, "", " ", "²", "٣", "1" * 5000, "8e9", "1e400", "16Gi", "500m", "-1Gi", "NaN", ".inf",
    "a\nb", "x\x00y", "--privileged", "-node", "../../tmp/evil", "fe80::1", "/", "/cache:U,suid,dev", "/etc/a:z",
    "[N/A]", "false", "no", "NVIDIA_VISIBLE_DEVICES", "é" * 300, [], {}, [1] * 2000, list(range(1, 65536)),
    {"a": 1, "b": [1, 2]}, LAUGHS, _deep(), {str(i): i for i in range(2000)},
)
# What a JSON file can hold: no aliases, so no billion laughs (json.dumps would expand it).
JSON_HOSTILE = tuple(value for value in HOSTILE if value is not LAUGHS)


def hostile_value(choose, pool=HOSTILE):
    return pool[choose(range(len(pool)))]


_HOSTILE_IDS = {id(value) for value in HOSTILE}


def _paths(value, prefix=()):
    """Every path into nested dicts and lists (keys, then list positions), hostile values not entered."""
    yield prefix
    if id(value) in _HOSTILE_IDS or len(prefix) > 12:
        return
    if isinstance(value, dict):
        for key in value:
            yield from _paths(value[key], prefix + (key,))
    elif isinstance(value, list) and len(value) <= 64:
        for position, item in enumerate(value):
            yield from _paths(item, prefix + (position,))


def _set(value, path, new):
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def _delete(value, path):
    for key in path[:-1]:
        value = value[key]
    del value[path[-1]]


def mutate(base, choose, mutations=2, pool=HOSTILE):
    """A deep copy of ``base`` with ``mutations`` changes: a hostile value, a dropped key or a hostile new key."""
    case = copy.deepcopy(base)
    for _step in range(mutations):
        paths = [path for path in _paths(case) if path]
        if not paths:
            return case
        path = paths[choose(range(len(paths)))]
        action = choose(("replace", "replace", "replace", "drop", "add"))
        if action == "replace":
            _set(case, path, hostile_value(choose, pool))
        elif action == "drop" and isinstance(_parent(case, path), dict):
            _delete(case, path)
        elif action == "add" and isinstance(_parent(case, path), dict):
            key = choose(("x", "a\nb", "../x", "", "replicas", "NVIDIA_VISIBLE_DEVICES", "é" * 2000))
            _parent(case, path)[key] = hostile_value(choose, pool)
    return case


def _parent(value, path):
    for key in path[:-1]:
        value = value[key]
    return value


# --- the planner (plan_catalog: problem parser, catalog, scheduler, exact solver) -------------------

PROBLEM = {
    "nodes": {
        "node-a": {"cpu": 16, "memory": "64Gi", "labels": {"zone": "east", "rack": 3, "fast": True},
                   "gpus": [{"index": 0, "uuid": "GPU-a0", "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi", "numa_node": 0},
                            {"index": 1, "uuid": "GPU-a1", "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi", "numa_node": 1}],
                   "gpu_links": [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 12}],
                   "numa_cpus": {"0": "0-7", "1": "8-15"},
                   "nvme": [{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"], "mount": "/mnt/nvme0n1"}],
                   "gpu_sharing": "mps"},
        "node-b": {"cpu": "8", "memory": 34359738368, "labels": {"zone": "west", "version": 1.5},
                   "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
                   "gpus": [{"index": 0, "uuid": "GPU-b0", "model": "NVIDIA L4", "memory": "24Gi"}]},
        "node-c": {"cpu": "4000m", "memory": "16Gi", "unschedulable": False,
                   "taints": [{"key": "spot", "effect": "PreferNoSchedule"}]},
    },
    "services": {
        "db": {"replicas": 1, "stateful": True, "resources": {"cpu": 2, "memory": "8Gi"}, "ports": [5432],
               "tolerations": [{"key": "dedicated", "value": "db"}], "image": "localhost/db:1",
               "restart_policy": "always", "health": {"tcp": {"port": 5432}, "interval": 1, "retries": 3}},
        "infer": {"replicas": 2, "scalable": True, "max_replicas": 4, "quota": "compute", "sidecars": ["log"],
                  "depends_on": ["db"], "cpu_pinning": "numa",
                  "resources": {"cpu": "1", "memory": "4Gi",
                                "gpu": {"count": 1, "memory": "20Gi", "models": ["A100", "L4"], "cores": 40,
                                        "topology": "preferred"},
                                "nvme": {"label": "cache", "size": "10Gi"}},
                  "ports": [8080], "anti_affinity": ["infer"], "node_selector": {"zone": "east"},
                  "image": "registry.local:5000/infer:2", "command": ["serve", "--port", 8080],
                  "env": {"MODE": "fast", "THREADS": 4}, "nvme_path": "/cache",
                  "config": [{"dest": "/etc/infer.conf", "content": "x = 1\n"}],
                  "health": {"http": {"port": 8080, "path": "/ready", "expect_status": [200]}}},
        "log": {"sidecar": True, "resources": {"cpu": "100m", "memory": "128Mi"}, "ports": [9100],
                "image": "localhost/log:1", "env": {"LEVEL": "info"}},
        "web": {"replicas": 2, "resources": {"cpu": "500m", "memory": "512Mi"}, "ports": [80], "anti_affinity": ["db"]},
        "batch": {"replicas": 3, "preemptible": True, "priority": -5, "resources": {"cpu": 1, "memory": "8Gi"}},
        "agent": {"every_node": True, "priority": 100, "resources": {"cpu": "50m", "memory": "32Mi"},
                  "tolerations": [{"key": "dedicated"}], "image": "localhost/agent:1"},
    },
    "quotas": {"compute": {"min": {"gpu": 1}, "max": {"gpu": 3, "gpu_memory": "100Gi", "cpu": 8}}},
    "previous": {"db-0": {"node": "node-b"}, "web-0": {"node": "node-c"}, "batch-2": {"node": "node-c"},
                 "agent@node-a": {"node": "node-a"},
                 "infer-0": {"node": "node-a", "gpus": [{"uuid": "GPU-a0"}], "nvme": {"name": "nvme0n1"}}},
}


def run_planner(problem):
    """The planner in-process: ok with a plan the independent checker accepts, or rejected (ProblemError)."""
    try:
        result = plan_catalog(problem, exact_seconds=EXACT_SECONDS)
    except ProblemError as error:
        _check_errors(error.errors)
        return "rejected"
    violations = check_plan(split_problem(problem), result)
    return "violation: " + "; ".join(violations[:3]) if violations else "ok"


# --- scheduler profiles (parse_profile, then the planner with it) ----------------------------------------

PROFILE = {
    "user_plugins": [os.path.join(ROOT, "docs", "examples", "image_affinity.py")],
    "plugins": {"filter": {"enabled": ["ImageAffinity"], "disabled": ["NodeSelector"]},
                "score": {"enabled": [{"name": "ImageAffinity", "weight": 20}, {"name": "GPU", "weight": 3}],
                          "disabled": ["GPUFragmentation"]}},
    "plugin_config": {"NodeResourcesFit": {"strategy": "LeastAllocated"}},
}


def run_profile(profile):
    """A profile: rejected (ProblemError naming profile.<path>), or a plan of PROBLEM the checker accepts."""
    try:
        parsed = parse_profile(profile)
    except ProblemError as error:
        _check_errors(error.errors)
        if not all(path.startswith("profile") for path, _message in error.errors):
            raise AssertionError("profile error outside profile: %r" % (error.errors[:3],))
        return "rejected"
    result = plan_catalog(copy.deepcopy(PROBLEM), exact_seconds=EXACT_SECONDS, profile=parsed)
    violations = check_plan(split_problem(PROBLEM), result, disabled_filters=parsed.disabled.get("filter", ()))
    return "violation: " + "; ".join(violations[:3]) if violations else "ok"


def split_problem(problem):
    """The problem with the catalog's deploy keys taken out: what the checker reads."""
    return dict(problem, services=split_catalog(problem["services"])[0])


def _check_errors(errors):
    """Every error is one short line naming a path: no newline, no value serialised whole."""
    for path, message in errors:
        line = "%s: %s" % (path, message)
        if "\n" in line or len(line) > 2000:
            raise AssertionError("error line not one short line: %r" % line[:300])


# --- the catalog's deploy keys (split_catalog, desired_containers) ----------------------------------

_SAFE_PATH = re.compile(r"^/[^:,\x00\n\r]+$")


def _judged_catalog(services, judge):
    """split_catalog: rejected (each error one short line), or ``judge(name, spec)``'s violation for the first accepted
    service that has one, else ok."""
    try:
        _scheduling, specs = split_catalog(services)
    except ProblemError as error:
        _check_errors(error.errors)
        return "rejected"
    for name, spec in specs.items():
        violation = judge(name, spec)
        if violation:
            return "violation: " + violation
    return "ok"


def run_catalog(services):
    """split_catalog: rejected, or every accepted value is safe to hand to the engine."""
    def judge(name, spec):
        problems = _dangerous(spec)
        return "services.%s accepted with %s" % (name, problems) if problems else None
    return _judged_catalog(services, judge)


def _dangerous(spec):
    image = spec["image"]
    if image is not None and (image.startswith("-") or not re.fullmatch(r"[a-z0-9][a-zA-Z0-9._:/@-]*", image)):
        return "image %r" % image
    for arg in spec["command"] or []:
        if re.search(r"[\x00\n\r]", arg):
            return "command argument %r" % arg
    for key, value in spec["env"].items():
        if key in GPU_VISIBILITY_VARIABLES or re.search(r"[\x00\n\r=]", key) or re.search(r"[\x00\n\r]", value):
            return "env %r=%r" % (key, value)
    for entry in spec["config"]:
        if not _SAFE_PATH.fullmatch(entry["dest"] or "/"):
            return "config dest %r" % entry["dest"]
    if not _SAFE_PATH.fullmatch(spec["nvme_path"] or "/"):
        return "nvme_path %r" % spec["nvme_path"]
    health = spec["health"]
    if health is not None:
        for key in ("timeout", "interval", "start_period"):
            if not math.isfinite(health[key]) or health[key] > 86400:
                return "health %s %r" % (key, health[key])
    return None


# A config file's change action (``change``, ``signal``): accepted only as one of the allowed words, and the kill the
# deploy role runs for a signal is the engine's with that name and nothing else.
CONFIG_CHANGE_CATALOG = {
    "client": {"image": "localhost/client:1", "config": [
        {"dest": "/etc/upstreams.conf", "content": "u\n", "change": "signal", "signal": "SIGHUP"},
        {"dest": "/etc/notes.conf", "content": "n\n", "change": "none"},
        {"dest": "/etc/client.conf", "content": "c\n", "change": "restart"}]},
}
_CONFIG_CHANGE_POOL = HOSTILE + ("SIGKILL", "SIGSTOP", "HUP", "sighup", "SIGHUP ", "SIGHUP\n", "-9", "SIGHUP;id", 1, 9,
                                 "signal", "none", "restart", "Restart", None, [], {})


def _config_change_violation(name, spec):
    for entry in spec["config"]:
        change = entry.get("change", "restart")
        if change not in CONFIG_CHANGES or (change == "signal") != ("signal" in entry):
            return "services.%s config change %r signal %r accepted" % (name, change, entry.get("signal"))
        if change != "signal":
            continue
        if entry["signal"] not in CHANGE_SIGNALS:
            return "services.%s signal %r accepted" % (name, entry["signal"])
        for engine in ("podman", "docker"):
            argv = engine_driver.driver(engine).kill_argv("n1-%s-0" % name, entry["signal"])
            if argv != [engine, "kill", "--signal", entry["signal"], "n1-%s-0" % name]:
                return "kill %r" % argv
    return None


def run_config_change(services):
    """split_catalog, then each accepted signal's kill (EngineDriver.kill_argv) on both engines."""
    return _judged_catalog(services, _config_change_violation)


def run_deploy(host):
    """desired_containers for an inventory host name: refused, or container names and paths that stay put."""
    services = {"web": {"image": "localhost/web:1", "config": [{"dest": "/etc/web.conf", "content": "x"}]}}
    instances = {"web-0": {"service": "web", "ordinal": 0, "node": host, "rank": 0, "gpus": [], "nvme": None,
                           "sidecars": []}}
    try:
        containers = desired_containers(host, instances, services, "/var/lib/gangplank")
    except DeployError:
        return "rejected"
    for container in containers:
        if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", container["name"]):
            return "violation: container name %r" % container["name"]
        for entry in container["config"]:
            if os.path.normpath(entry["path"]) != entry["path"] or not entry["path"].startswith("/var/lib/gangplank/"):
                return "violation: config file at %r" % entry["path"]
    return "ok"


# --- every host at once: the deploy role's run_once steps ------------------------------------------------

_DEPLOY_SERVICES = {"web": {"image": "localhost/web:1", "config": [{"dest": "/etc/web.conf", "content": "x"}]}}


def deploy_hosts_case(choose):
    """Each host's settings as the deploy role fills them (deploy_plan.containers_step), one value or host name hostile."""
    settings = {}
    for host in ("node-a", "node-b"):
        settings[host] = {"instances": {"web-%s" % host[-1]: {"service": "web", "ordinal": 0, "node": host, "rank": 0,
                                                              "gpus": [], "nvme": None, "sidecars": []}},
                          "data_dir": "/var/lib/gangplank/instances", "publish_address": "", "probe_address": "127.0.0.1",
                          "gpu_mode": "cdi", "engine": "podman", "limits": True, "secret_dir": "/run/gangplank/secrets"}
    what = choose(("value", "value", "drop", "host", "entry", "whole"))
    if what == "value":
        settings["node-b"][choose(sorted(settings["node-b"]))] = hostile_value(choose)
    elif what == "drop":
        del settings["node-b"][choose(sorted(settings["node-b"]))]
    elif what == "host":
        settings[hostile_value(choose, tuple(value for value in HOSTILE if isinstance(value, (str, int, float))))] = \
            settings.pop("node-b")
    elif what == "entry":
        settings["node-b"] = hostile_value(choose)
    else:
        settings = hostile_value(choose)
    return settings


def run_deploy_hosts(settings):
    """desired_on_hosts, then decide over every host: DeployError, or each host's containers named after it, its
    config files under its data_dir, and a line for every host."""
    try:
        desired = desired_on_hosts(settings, _DEPLOY_SERVICES)
        hosts = list(desired)
        rendered = [{entry["path"]: "x" for container in desired[host] for entry in container["config"]} for host in hosts]
        decision = decide(hosts, [desired[host] for host in hosts], rendered, [[] for _host in hosts], _DEPLOY_SERVICES)
    except DeployError as error:
        if "\n" in str(error):
            raise AssertionError("error not on one line: %r" % str(error)[:200])
        return "rejected"
    for host in hosts:
        for container in desired[host]:
            if not container["name"].startswith(host + "-"):
                return "violation: container %r on host %r" % (container["name"], host)
            for entry in container["config"]:
                if os.path.normpath(entry["path"]) != entry["path"] or not entry["path"].startswith(settings[host]["data_dir"]):
                    return "violation: config file at %r" % entry["path"]
    if sorted(decision["lines"]) != sorted(hosts) or sorted(decision["rollouts"]) != sorted(hosts):
        return "violation: lines for %r, hosts %r" % (sorted(decision["lines"]), sorted(hosts))
    return "ok"


# --- secrets: the catalog's secrets key, their layout and the reading of their values ----------------------

SECRETS_CATALOG = {
    "api": {"image": "localhost/api:1", "ports": [8080], "sidecars": ["log"], "env": {"MODE": "x"},
            "config": [{"dest": "/etc/api.conf", "content": "x", "mode": "0640", "group": 101}],
            "secrets": {"db_password": "vault_db", "token": {"var": "vault_token", "env": "API_TOKEN"},
                        "tls.key": {"var": "vault_tls", "target": "/etc/tls/key.pem", "mode": "0440", "uid": 0, "gid": 101}}},
    "log": {"sidecar": True, "image": "localhost/log:1", "secrets": {"token": {"var": "vault_token", "env": "LOG_TOKEN"}}},
}
_SECRET_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# A value that must never reach an error message, a spec or a label.
SECRET_VALUE = "CANARY-fuzz-2c7e"


def run_secrets(services):
    """split_catalog and the layout of the secrets: rejected, or every accepted name, path and mode safe; the values
    read (with hostile ones) appear in no error, container spec or label."""
    try:
        _scheduling, specs = split_catalog(services)
    except ProblemError as error:
        _check_errors(error.errors)
        return "rejected"
    for name, spec in specs.items():
        for secret in spec["secrets"]:
            if not _SECRET_NAME_OK.fullmatch(secret["name"]) or not _NAME_OK.fullmatch(secret["var"]):
                return "violation: services.%s secret %r" % (name, secret)
            if secret["delivery"] == "env":
                if not _NAME_OK.fullmatch(secret["env"]) or secret["env"] in GPU_VISIBILITY_VARIABLES:
                    return "violation: services.%s env secret %r" % (name, secret)
            elif not _SAFE_PATH.fullmatch(secret["target"] or "/") or int(secret["mode"], 8) & 0o137:
                return "violation: services.%s file secret %r" % (name, secret)
    instances = {"%s-0" % name: {"service": name, "ordinal": 0, "rank": 0, "gpus": [], "nvme": None,
                                 "sidecars": [side for side in (spec.get("sidecars") if isinstance(spec.get("sidecars"), list) else [])
                                              if isinstance(side, str) and side in specs]}
                 for name, spec in services.items() if isinstance(spec, dict) and not spec.get("sidecar")}
    try:
        built = [container for engine in ("podman", "docker")
                 for container in desired_containers("h1", instances, services, "/var/lib/gangplank", engine=engine,
                                                     gpu_mode="simulated", secret_dir="/run/gangplank/secrets")]
    except DeployError:
        return "rejected"
    for container in built:
        for entry in container["secrets"]:
            if entry["path"] is not None and os.path.dirname(entry["path"]) != "/run/gangplank/secrets/" + container["name"]:
                return "violation: secret file at %r" % entry["path"]
    values, hashes, errors = read_values(specs, lambda var: SECRET_VALUE + var, "k" * 32)
    found = json.dumps([built, hashes, errors])
    if SECRET_VALUE in found:
        return "violation: a value in the specs, hashes or errors"
    return "ok"


def secret_value_case(choose):
    """A value as a variable may hold it: hostile, or the canary with hostile text around it."""
    value = hostile_value(choose, JSON_HOSTILE)
    text = str(value)[:100] if isinstance(value, (str, int, float)) else ""
    return choose((value, SECRET_VALUE + text, SECRET_VALUE + "\x00", SECRET_VALUE * 40000))


def run_secret_value(value):
    """read_values on a hostile value: read, or refused by an error that names the path and never the value."""
    services = {"api": {"image": "localhost/api:1", "secrets": {"f": "v", "e": {"var": "v", "env": "E"}}}}
    values, hashes, errors = read_values(split_catalog(services)[1], lambda var: value, "k" * 32)
    _check_errors(errors)
    if isinstance(value, str) and value and SECRET_VALUE in json.dumps([errors, hashes]):
        return "violation: the value in an error or a hash"
    if not errors and set(values) != {"v"}:
        return "violation: accepted without its value"
    return "ok"


# --- scale requests (playbooks/scale.yml) -------------------------------------------------------------

SCALE_REQUEST = {"service": "infer", "replicas": "3", "reset": False}


def run_scale(request):
    """scale_overrides: rejected, or a replica count from 0 to MAX_INSTANCES."""
    try:
        overrides = scale_overrides(PROBLEM["services"], {"web": 1}, request)
    except ProblemError as error:
        _check_errors(error.errors)
        return "rejected"
    for service, count in overrides.items():
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_INSTANCES:
            return "violation: replicas of %s is %r" % (service, count)
    return "ok"


# --- host facts (scheduler_node, node_labels, facts_table) --------------------------------------------

HOSTVARS = {
    "inventory_hostname": "node-a",
    "gangplank_labels": {"zone": "east", "gpu": True, "version": 1.5},
    "gangplank_taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    "gangplank_unschedulable": "false",
    "gangplank_reserved": {"cpu": "1", "memory": "2Gi"},
    "gangplank_gpu_sharing": "mps",
    "ansible_facts": {
        "processor_vcpus": 64, "memtotal_mb": 524288, "architecture": "x86_64", "system": "Linux",
        "gangplank_gpus": [{"index": 0, "uuid": "GPU-0", "model": "NVIDIA A100", "memory_total": 80 * GI,
                            "memory_used": 0, "compute_capability": "8.0", "mig_mode": {"current": False},
                            "mig_devices": [], "source": "nvml", "error": None}],
        "gangplank_nvme": [{"name": "nvme0n1", "size": 4 * 2 ** 40, "mount": "/mnt/nvme0n1", "free": 2 ** 40,
                            "labels": ["cache"], "model": "M", "source": "sysfs"}],
        "gangplank_gpu_driver": {"driver_version": "550", "cuda_version": "12.4", "source": "nvml",
                                 "mps_control": "/usr/bin/nvidia-cuda-mps-control"},
    },
}


def run_facts(hostvars):
    """scheduler_node and facts_table: a message naming the host and field, or a node the parser accepts."""
    try:
        node = scheduler_node(hostvars)
        facts_table(hostvars)
    except NodeFactsError as error:
        if "\n" in str(error):
            raise AssertionError("error not on one line: %r" % str(error)[:300])
        return "rejected"
    if hostvars.get("gangplank_unschedulable") in ("false", "no", "off", "0", False, 0) and node["unschedulable"]:
        return "violation: gangplank_unschedulable=%r cordons the node" % hostvars.get("gangplank_unschedulable")
    try:
        parse_problem({"nodes": {"node-a": node}, "services": {}})
    except ProblemError as error:
        _check_errors(error.errors)
        return "rejected"
    return "ok"


# --- state files (cluster_state's lock and record) ----------------------------------------------------

LOCK = {"owner": "root@ctl pid 1", "job_id": "old-job", "started_at": "2025-01-31T11:59:00Z", "started_epoch": 1738324740}


def run_lock_file(content):
    """A lock file holding ``content`` (bytes): break_lock always takes it once it is older than lock_timeout."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, cluster_lock.LOCK_FILE)
        with open(path, "wb") as handle:
            handle.write(content)
        os.utime(path, (1000000000, 1000000000))        # an old file: the lock is stale by any clock
        cluster_lock.read_state(directory)
        messages = []
        try:
            cluster_lock.take_lock(directory, "me", "new-job", 3600, False, False)
        except cluster_lock.StateError as error:
            messages.append(str(error))
        taken = cluster_lock.take_lock(directory, "me", "new-job", 3600, True, False)
        if taken["lock"]["job_id"] != "new-job":
            return "violation: break_lock did not take the lock: %r" % taken
        # The file's values are shown in one bounded line (messages.printable).
        for message in messages + taken.get("warnings", []):
            if len(message) > 1000 or not message.isprintable():
                return "violation: a message of %d characters, not one printable line: %r" % (len(message), message[:200])
        json.dumps(taken, allow_nan=False)
        return "ok"


def lock_contents(choose):
    """A lock file's bytes: a mutated lock, or bytes that are not a lock at all."""
    kind = choose(("mutated", "mutated", "text"))
    if kind == "text":
        return choose((b"", b"\xff\xfe", b"NaN", b"[" * 100000, b'{"started_epoch": 1e400}', b'{"started_epoch": NaN}',
                       b'{"started_epoch": -Infinity, "job_id": null}', b'{"started_epoch": 1e20}',
                       b'{"started_epoch": ' + b"9" * 5000 + b"}", b'{"job_id": "new-job", "started_epoch": "x"}'))
    lock = mutate(LOCK, choose, mutations=1, pool=JSON_HOSTILE)
    try:
        return json.dumps(lock).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return b'{"started_epoch": NaN}'


def run_record_file(content):
    """A placement record holding ``content``: every action either works or fails with StateError; unlock works."""
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, cluster_lock.PLACEMENT_FILE), "wb") as handle:
            handle.write(content)
        outcome = "ok"
        for action in (lambda: cluster_lock.read_state(directory),
                       lambda: cluster_lock.take_lock(directory, "me", "job", 3600, False, False),
                       lambda: cluster_lock.write_record(directory, "job", {"placement": {"web-0": {"node": "a"}}}, 5, False)):
            try:
                action()
            except cluster_lock.StateError:
                outcome = "rejected"
        cluster_lock.release_lock(directory, "job", False)      # unlock works whatever the record holds
        if os.path.exists(os.path.join(directory, cluster_lock.LOCK_FILE)):
            return "violation: unlock left the lock in place"
        return outcome


RECORD = {"revision": 3, "written_at": "2025-01-31T11:59:00Z", "job_id": "j", "owner": "o",
          "placement": {"web-0": {"node": "a"}}, "node_labels": {"a": {}}, "replicas": {"web": 2}, "ranks": [["web"]],
          "history": [{"revision": 2, "placement": {}}]}


def record_contents(choose):
    record = mutate(RECORD, choose, mutations=1, pool=JSON_HOSTILE)
    try:
        return json.dumps(record).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return b'{"revision": NaN}'


# --- health probes (health_wait) ----------------------------------------------------------------------

PROBES = [{"name": "web", "type": "http", "url": "http://127.0.0.1:8080/ready", "expect_status": [200], "timeout": 2.0,
           "interval": 1.0, "retries": 3, "start_period": 0.0},
          {"name": "db", "type": "tcp", "host": "127.0.0.1", "port": 5432},
          {"name": "q", "type": "command", "argv": ["true"]}]


def run_probes(probes):
    """normalize_probes: rejected, or timings that a wait can end with."""
    try:
        normalized = normalize_probes(probes)
    except ProbeConfigError:
        return "rejected"
    for probe in normalized:
        for key in ("timeout", "interval", "start_period"):
            if not math.isfinite(probe[key]) or not 0 <= probe[key] <= 86400:
                return "violation: %s %s=%r" % (probe["name"], key, probe[key])
        if not 1 <= probe["retries"] <= 100000:
            return "violation: %s retries=%r" % (probe["name"], probe["retries"])
    return "ok"


# --- the planner command (bin/gangplank-plan), in a subprocess with limits ---------------------------

def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (CLI_MEMORY, CLI_MEMORY))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_command(text, *args):
    """bin/gangplank-plan on standard input ``text``, with limits: (exit code or None on a hang, stdout, stderr, seconds)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    start = time.monotonic()
    try:
        process = subprocess.run([PLANNER, "-", "--exact-timeout", "1", *args], input=text.encode("utf-8", "surrogatepass"),
                                 capture_output=True, env=env, timeout=CLI_SECONDS, preexec_fn=_limits, check=False)
    except subprocess.TimeoutExpired:
        return None, "", "", time.monotonic() - start
    return (process.returncode, process.stdout.decode("utf-8", "replace"), process.stderr.decode("utf-8", "replace"),
            time.monotonic() - start)


def judge_command(problem, code, stdout, stderr):
    """What fuzz tests and the benchmark assert of one run; None when all is well."""
    if "Traceback" in stderr or "MemoryError" in stderr:
        return "traceback: " + stderr[-500:]
    if code not in EXIT_CODES:
        return "exit code %d: %s" % (code, stderr[-300:])
    if code in (0, 2) and problem is not None:
        violations = check_plan(split_problem(problem), json.loads(stdout))
        if violations:
            return "violation: " + "; ".join(violations[:3])
    return None


def as_text(problem, choose):
    """The problem as JSON, or as YAML text with a hostile twist: duplicate keys, aliases, deep nesting, a cut."""
    try:
        text = json.dumps(problem, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return "nodes: {a: {cpu: 1, memory: 1Gi}}\nservices: {web: {replicas: 1e9}}\n", False    # JSON cannot hold it
    twist = choose(("json",) * 6 + ("duplicate", "laughs", "deep", "cut", "yaml-nan"))
    if twist == "duplicate":
        return text.replace('"services": {', '"services": {"web": {"replicas": 0}, ', 1), False
    if twist == "laughs":
        lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        lines += ["%s: &%s [%s]" % (chr(98 + level), chr(98 + level), ",".join(["*" + chr(97 + level)] * 9))
                  for level in range(8)]
        return "\n".join(lines) + "\nnodes: {a: {cpu: 1, memory: 1Gi, labels: {x: *i}}}\nservices: {web: {ports: *i}}\n", False
    if twist == "deep":
        return "nodes: " + "[" * 20000 + "\n", False
    if twist == "cut":
        return text[:choose(range(len(text)))], False
    if twist == "yaml-nan":
        return "nodes: {a: {cpu: .nan, memory: .inf}}\nservices: {web: {replicas: 1e9}}\n", False
    return text, True


# --- rebalance (with a profile), waves, scale of sidecars and every-node services, the facts cache ----

def _fragmented():
    """A feasible, fragmented cluster: inference spread one instance per GPU, web one per node, an every-node agent,
    a sidecar, preemptible batch work, a stateful database and a node reserved for CAD images (for ImageAffinity)."""
    gpu = {"model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"}
    nodes = {"n%d" % index: {"cpu": 32, "memory": "128Gi", "labels": {"zone": "east" if index < 3 else "west"},
                             "gpus": [dict(gpu, index=position, uuid="GPU-%d-%d" % (index, position)) for position in range(2)],
                             "nvme": [{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"]}]}
             for index in range(4)}
    nodes["n3"]["labels"]["gangplank.io/image"] = "cad"
    nodes["n2"]["taints"] = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    services = {
        "infer": {"replicas": 4, "scalable": True, "sidecars": ["log"], "image": "localhost/infer:1",
                  "resources": {"cpu": 2, "memory": "8Gi", "gpu": {"memory": "20Gi"}, "nvme": {"label": "cache", "size": "10Gi"}}},
        "web": {"replicas": 3, "image": "localhost/web:1", "resources": {"cpu": 1, "memory": "1Gi"}, "ports": [8080],
                "node_selector": {"zone": "east"}},
        "log": {"sidecar": True, "image": "localhost/log:1", "resources": {"cpu": "100m", "memory": "64Mi"}},
        "db": {"stateful": True, "image": "localhost/db:1", "resources": {"cpu": 2, "memory": "4Gi"},
               "tolerations": [{"key": "dedicated"}]},
        "agent": {"every_node": True, "image": "localhost/agent:1", "resources": {"cpu": "50m", "memory": "32Mi"},
                  "tolerations": [{"key": "dedicated"}]},
        "batch": {"replicas": 2, "preemptible": True, "priority": 1, "image": "localhost/batch:1", "resources": {"cpu": 4}},
    }
    previous = {"infer-%d" % index: {"node": "n%d" % index, "gpus": [{"uuid": "GPU-%d-%d" % (index, index % 2)}],
                                     "nvme": {"name": "nvme0n1"}} for index in range(4)}
    previous.update({"web-0": {"node": "n0"}, "web-1": {"node": "n1"}, "web-2": {"node": "n2"}, "db-0": {"node": "n2"},
                     "batch-0": {"node": "n3"}, "agent@n0": {"node": "n0"}})
    return {"nodes": nodes, "services": services, "previous": previous}


FRAGMENTED = _fragmented()


def rebalance_case(choose):
    """A problem (mutated or not), a max_moves (valid, hostile or a string) and a profile (none, or one with a filter)."""
    problem = mutate(FRAGMENTED, choose, mutations=1) if choose((True, False)) else copy.deepcopy(FRAGMENTED)
    max_moves = choose((0, 1, 2, 3, 10, "2", " 1 ")) if choose((True, True, False)) else \
        choose(("²", "٣", "1\n", -1, 1.5, None, True, 10 ** 30, "9" * 40, "", [], float("nan")))
    profile = choose((None, "selector_off", "image"))
    return problem, max_moves, profile


_REBALANCE_PROFILES = {
    None: None,
    "selector_off": {"plugins": {"filter": {"disabled": ["NodeSelector"]}}},
    "image": dict(PROFILE, plugins={"filter": {"enabled": ["ImageAffinity"]}}),
}


def run_rebalance(case):
    """rebalance_catalog: rejected, or a plan the checker accepts whose own disruptions stay within max_moves."""
    problem, max_moves, which = case
    profile = parse_profile(_REBALANCE_PROFILES[which], base=ROOT) if which else None
    max_moves = max_moves_value(max_moves)
    if max_moves_error(max_moves):
        return "rejected"
    try:
        result = rebalance_catalog(problem, max_moves, EXACT_SECONDS, profile=profile)
    except ProblemError as error:
        _check_errors(error.errors)
        return "rejected"
    disabled = profile.disabled.get("filter", ()) if profile else ()
    violations = check_plan(split_problem(problem), result, disabled_filters=disabled)
    report = result.get("rebalance") or {}
    # The current plan's own moves and restarts (the catalog does not fit as it runs) are not the rebalance's.
    own = report.get("current_moves", 0) + report.get("current_restarts", 0)
    if result.get("path") == "rebalance" and report.get("moves", 0) + report.get("restarts", 0) > max_moves + own:
        violations.append("rebalance: %d moves and %d restarts with max_moves %d (the current plan's own: %d)" % (
            report["moves"], report["restarts"], max_moves, own))
    return "violation: " + "; ".join(violations[:3]) if violations else "ok"


WAVE_VALUES = (1, 2, 100000, 100001, 0, -1, "25%", "100%", "1%", "0%", "101%", "50%\n", "\n50%", "50 %", "٥٠%", "²%",
               "1000%", "%", "", None, 1.5, True, float("nan"), [], {})


def waves_case(choose):
    """The catalog's services with a max_unavailable each (valid or hostile), and rollouts restarting some instances."""
    services = copy.deepcopy(PROBLEM["services"])
    for name in ("db", "infer", "web"):
        value = WAVE_VALUES[choose(range(len(WAVE_VALUES)))] if choose((True, False, False)) else choose((1, 2, "25%", "100%", None))
        if value is not None:
            services[name]["max_unavailable"] = value
    if choose((True, False)):
        services = mutate(services, choose, mutations=1)
    count = choose((1, 2, 5, 40))
    ordinals = [choose(("0", "1", "7", "²", "٣", "", "-1", "01")) for _unused in range(3)] + [str(n) for n in range(count)]
    containers = []
    for position, ordinal in enumerate(ordinals):
        service = choose(("infer", "web", "db"))
        name = "node-a-%s-%s-%d" % (service, ordinal, position)
        containers.append({"name": name, "action": choose(("recreate", "recreate", "keep", "create", "start")),
                           "rank": choose((0, 1, 2)), "labels": {}, "sidecar": False, "service": service,
                           "instance": "%s-%s" % (service, ordinal)})
    return [{"containers": containers, "evict": []}], services


def run_waves(case):
    """deploy.waves (the waves of gangplank.platform.deploy_plan): DeployError, or waves of at least 1 and wave numbers below them."""
    rollouts, services = case
    try:
        result = waves(rollouts, services)
    except DeployError as error:
        if "\n" in str(error).split("\n", 1)[0]:
            raise AssertionError("error not on one line")
        return "rejected"
    for rank, count in result["waves"].items():
        if not isinstance(count, int) or count < 1:
            return "violation: rank %s takes %r waves" % (rank, count)
    for name, wave in result["wave_of"].items():
        if not isinstance(wave, int) or wave < 1:
            return "violation: %s in wave %r" % (name, wave)
    return "ok"


def scale_kinds_case(choose):
    """A scale request for any kind of service (app, sidecar, every-node, unknown) over overrides that may be stale
    (recorded while a service was scalable, before it became an every-node service or a sidecar)."""
    services = copy.deepcopy(FRAGMENTED["services"])
    if choose((True, False, False, False)):
        services["log"]["scalable"] = True          # the parser refuses it; the scale request must too
    if choose((True, False, False, False)):
        services["agent"]["scalable"] = choose((True, False))
    if choose((True, False)):
        # A recorded override may be above it (max_replicas lowered since): it applies as max_replicas.
        services["infer"].update(replicas=1, max_replicas=choose((1, 2, 3, 10 ** 9)))
    overrides = {name: 3 for name in ("agent", "log", "infer", "gone") if choose((True, False))}
    service = choose(("infer",) * 6 + ("log", "agent", "batch", "web", "gone", "", None))
    if choose((True, True, False)):
        request = {"service": service, "replicas": choose((0, 1, 3, "2"))} if choose((True, False)) else \
            {"service": service, "reset": True}
    else:
        request = {"service": service, "replicas": choose(("²", -1, None, 10 ** 9, 1.5, "3\n")), "reset": choose((False, True, "yes"))}
    return services, overrides, request


def run_scale_kinds(case):
    """scale_overrides, then the plan with the overrides that apply: a sidecar or an every-node service never gets a
    count; a stale override neither fails the plan nor refuses its reset; the plan passes the checker."""
    services, overrides, request = case
    try:
        after = scale_overrides(services, overrides, request)
    except ProblemError as error:
        _check_errors(error.errors)
        if request.get("reset") is True and request.get("replicas") is None and request.get("service") in overrides:
            return "violation: the reset of a recorded override was refused: %r" % (error.errors,)
        return "rejected"
    service = request.get("service")
    if request.get("reset") is not True and not takes_replicas(services.get(service)):
        return "violation: a scale request for %r (not an app with replicas) was recorded" % service
    problem = copy.deepcopy(FRAGMENTED)
    problem["services"] = services
    for name, count in applied_overrides(services, after).items():
        if name in services:
            services[name]["replicas"] = count
    try:
        result = plan_catalog(problem, exact_seconds=EXACT_SECONDS)
    except ProblemError as error:
        _check_errors(error.errors)
        if any(path.endswith(".replicas") for path, _message in error.errors):
            return "violation: an applied override fails the plan: %r" % (error.errors[:2],)
        return "rejected"
    violations = check_plan(split_problem(problem), result)
    return "violation: " + "; ".join(violations[:3]) if violations else "ok"


def every_node_case(choose):
    """A generated cluster with every-node services (selectors, tolerations, sidecars), plain and preemptible work,
    taints of every effect and running instances, then maybe one hostile mutation."""
    nodes, services, previous = {}, {}, {}
    zones, keys = ("east", "west", "gpu"), ("dedicated", "spot", "maint")
    for index in range(choose((1, 2, 3, 5, 8, 20, 60))):
        node = {"cpu": choose((1, 4, 16)), "memory": choose(("2Gi", "16Gi", "64Gi")), "labels": {"zone": choose(zones)}}
        taints = [{"key": choose(keys), "value": choose((None, "a", "b")), "effect": choose(("NoSchedule", "NoExecute", "PreferNoSchedule"))}
                  for _unused in range(choose((0, 0, 1, 2)))]
        node["taints"] = [{k: v for k, v in taint.items() if v is not None} for taint in taints]
        if choose((True, False, False)):
            node["gpus"] = [{"index": 0, "uuid": "GPU-%d" % index, "model": "NVIDIA L4", "memory": "24Gi"}]
        node["unschedulable"] = choose((False, False, True))
        nodes["n%02d" % index] = node
    services["log"] = {"sidecar": True, "resources": {"cpu": "10m", "memory": "16Mi"}, "ports": [choose((9100, 9200))]}
    for index in range(choose((1, 2, 3))):
        spec = {"every_node": True, "priority": choose((0, 100, -5)), "resources": {"cpu": choose(("10m", "1", "8")), "memory": "32Mi"}}
        if choose((True, False)):
            spec["node_selector"] = {"zone": choose(zones)}
        if choose((True, False)):
            spec["tolerations"] = [{"key": choose(keys)} if choose((True, False)) else
                                   {"key": choose(keys), "value": choose(("a", "b")), "effect": choose(("NoSchedule", "NoExecute"))}]
        if choose((True, False)):
            spec["sidecars"] = ["log"]
        services["agent%d" % index] = spec
    services["web"] = {"replicas": choose((0, 1, 3)), "resources": {"cpu": "500m", "memory": "256Mi"}, "sidecars": ["log"],
                       "ports": [8080], "anti_affinity": choose(([], ["web"]))}
    services["batch"] = {"replicas": choose((1, 4)), "preemptible": True, "priority": choose((-1, 2)), "resources": {"cpu": 1}}
    services["spot"] = {"replicas": choose((1, 2)), "preemptible": True, "priority": choose((1, 3)), "resources": {"cpu": 2}}
    for name in list(nodes)[:6]:
        for instance in ("agent0@%s" % name, "batch-0", "spot-1", "web-0"):
            if choose((True, False, False)):
                previous[instance] = {"node": name}
    problem = {"nodes": nodes, "services": services, "previous": previous}
    return mutate(problem, choose, mutations=1) if choose((True, False, False)) else problem


def run_every_node(problem):
    return run_planner(problem)


def facts_cache_case(choose):
    """What the facts cache path holds: a cache (mutated or not), bytes that are not one, or no regular file at all."""
    kind = choose(("cache", "cache", "bytes", "fifo", "zero", "urandom", "directory", "missing", "huge", "dangling"))
    content = None
    if kind == "cache":
        facts = dict(HOSTVARS["ansible_facts"])
        content = mutate({"version": 1, "fingerprint": "f" * 64, "facts": facts}, choose, mutations=1, pool=JSON_HOSTILE)
    elif kind == "bytes":
        content = choose((b"", b"\xff\xfe", b"NaN", b"[" * 100000, b'{"version": 1e400}', b'{"version": NaN}', b"{}",
                          b'{"version": 1, "fingerprint": "x", "facts": []}', b"\x00" * 100))
    return kind, content


def run_facts_cache(case):
    """read_cache and cached_facts: None or a mapping of facts, never a block, a traceback or a whole device read."""
    kind, content = case
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "facts.json")
        if kind == "cache":
            try:
                text = json.dumps(content, allow_nan=False).encode("utf-8")
            except (TypeError, ValueError, RecursionError):
                text = b'{"version": 1, "facts": NaN}'
            with open(path, "wb") as handle:
                handle.write(text)
        elif kind == "bytes":
            with open(path, "wb") as handle:
                handle.write(content)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind in ("zero", "urandom"):
            os.symlink("/dev/" + kind, path)
        elif kind == "directory":
            os.mkdir(path)
        elif kind == "huge":
            with open(path, "wb") as handle:
                handle.truncate(MAX_CACHE_BYTES + 1)
        elif kind == "dangling":
            os.symlink(os.path.join(directory, "nowhere"), path)
        current = facts_cache_module.read_cache(path)
        if kind in ("fifo", "zero", "urandom", "directory", "huge", "missing", "dangling") and current is not None:
            return "violation: %s read as %r" % (kind, str(current)[:80])
        facts, reason = cached_facts(current, "f" * 64)
        if not isinstance(reason, str) or (facts is not None and not isinstance(facts, dict)):
            return "violation: cached_facts gave %r, %r" % (facts, reason)
        return "ok" if facts is not None else "rejected"


# --- the status picture: the plan_html filter's status mode with each host's GPUs and their links ------------------

STATUS_PICTURE = {
    "bindings": {"g": {"train-0": {"service": "train", "gpus": [{"index": 0, "uuid": "GPU-0", "memory": 80 * GI}]}}},
    "gpus": {"g": [{"index": index, "uuid": "GPU-%d" % index, "model": "NVIDIA A100", "memory_total": 80 * GI,
                    "numa_node": index // 2} for index in range(4)]},
    "gpu_links": {"g": [{"gpus": [a, b], "level": "nvlink" if (a, b) in ((0, 1), (2, 3)) else "system", "nvlinks": 4 if
                         (a, b) in ((0, 1), (2, 3)) else 0} for a in range(4) for b in range(a + 1, 4)]},
}


def run_status_picture(case):
    """plan_html(status=true, gpus=, gpu_links=): a page or the filter's one-line error, never another exception."""
    plan_html = PlanHtmlFilters().filters()["plan_html"]
    if not isinstance(case, dict):
        case = {}
    try:
        page = plan_html(case.get("bindings"), status=True, gpus=case.get("gpus"), gpu_links=case.get("gpu_links"))
    except AnsibleFilterError as error:
        if "\n" in str(error) or len(str(error)) > 4000:
            return "violation: error not one bounded line: %r" % str(error)[:300]
        return "rejected"
    if not isinstance(page, str) or not page.startswith("<!DOCTYPE html>"):
        return "violation: not a page: %r" % str(page)[:80]
    return "ok"


# --- every in-process entry point: name -> (make a case from choose, run it) --------------------------

ENTRY_POINTS = {
    "planner": (lambda choose: mutate(PROBLEM, choose, mutations=1), run_planner),
    "catalog": (lambda choose: mutate(PROBLEM["services"], choose), run_catalog),
    "scale": (lambda choose: mutate(SCALE_REQUEST, choose, mutations=1), run_scale),
    "profile": (lambda choose: mutate(PROFILE, choose, mutations=1), run_profile),
    "facts": (lambda choose: mutate(HOSTVARS, choose), run_facts),
    "lock_file": (lock_contents, run_lock_file),
    "record_file": (record_contents, run_record_file),
    "health_probes": (lambda choose: mutate(PROBES, choose), run_probes),
    "deploy_host": (hostile_value, run_deploy),
    "rebalance": (rebalance_case, run_rebalance),
    "waves": (waves_case, run_waves),
    "deploy_hosts": (deploy_hosts_case, run_deploy_hosts),
    "scale_kinds": (scale_kinds_case, run_scale_kinds),
    "every_node": (every_node_case, run_every_node),
    "facts_cache": (facts_cache_case, run_facts_cache),
    "secrets": (lambda choose: mutate(SECRETS_CATALOG, choose), run_secrets),
    "secret_value": (secret_value_case, run_secret_value),
    "status_picture": (lambda choose: mutate(STATUS_PICTURE, choose), run_status_picture),
    "config_change": (lambda choose: mutate(CONFIG_CHANGE_CATALOG, choose, pool=_CONFIG_CHANGE_POOL), run_config_change),
}

# The GPU watchdog (its cgroup, process and state inputs) and the MPS directories: tests/unit/plugins/fuzz_watchdog_cases.py.
from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_watchdog_cases  # noqa: E402  pylint: disable=wrong-import-position

ENTRY_POINTS.update(fuzz_watchdog_cases.ENTRY_POINTS)
# The local proxy (its catalog field and the site's proxy inputs): tests/unit/plugins/fuzz_proxy_cases.py.
from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_proxy_cases  # noqa: E402  pylint: disable=wrong-import-position

ENTRY_POINTS.update(fuzz_proxy_cases.ENTRY_POINTS)
