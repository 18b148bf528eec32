# -*- coding: utf-8 -*-
"""Each class of bad input (numbers, strings, the catalog, scale requests, host facts, state files), at the boundary
that now refuses it: a clear error, nothing changed."""

from __future__ import annotations

import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils import state_files
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import DeployError, desired_containers
from ansible_collections.gangplank.platform.plugins.module_utils.health import ProbeConfigError, normalize_probes
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import NodeFactsError, scheduler_node
from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import exact_seconds_error
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import scale_overrides
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import parse_cpu, parse_size
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import build_problem
from ansible_collections.gangplank.platform.plugins.module_utils import cluster_lock
from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases

NODE = {"cpu": 4, "memory": "8Gi"}


def errors_of(problem):
    with pytest.raises(ProblemError) as caught:
        parse_problem(problem)
    return dict(caught.value.errors)


def catalog_errors(services):
    with pytest.raises(ProblemError) as caught:
        split_catalog(services)
    return dict(caught.value.errors)


# --- numbers ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, reason", [
    (float("nan"), "not NaN"), (float("inf"), "not infinite"), (-1, "not negative"), (10 ** 30, "at most 1Pi"),
    (10 ** 400, "at most 1Pi"), ("1025Ti", "at most 1Pi"), ("1" * 100, "(e.g. 16Gi)"),
])
def test_sizes_are_finite_and_bounded(value, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_size(value)


def test_cpu_is_finite_and_bounded():
    assert parse_cpu(1000000) == 10 ** 9 and parse_size("1Pi") == 2 ** 50
    for value in (float("nan"), float("-inf"), 1000001, "1000001", 10 ** 400):
        with pytest.raises(ValueError):
            parse_cpu(value)


def test_every_number_of_a_problem_is_checked():
    errors = errors_of({"nodes": {"a": {"cpu": float("nan"), "memory": float("inf"),
                                        "gpus": [{"index": 10 ** 500, "uuid": "u", "model": "m", "memory": 1e300}]}},
                        "services": {"web": {"replicas": 1e9, "resources": {"gpu": {"count": 10 ** 20}}}},
                        "quotas": {"q": {"max": {"gpu": 2 ** 64, "memory": float("nan")}}}})
    assert errors["nodes.a.cpu"].startswith("got NaN; expected a CPU amount")
    assert errors["nodes.a.memory"].startswith("got Infinity; expected a size")
    assert errors["nodes.a.gpus[0].index"] == "got an integer of about 501 digits; expected an integer >= 0, at most 1023"
    assert errors["nodes.a.gpus[0].memory"].endswith("at most 1Pi")
    assert errors["services.web.replicas"] == "got 1000000000.0; expected an integer >= 0"
    assert errors["services.web.resources.gpu.count"] == "got 100000000000000000000; expected an integer >= 1, at most 64"
    assert errors["quotas.q.max.gpu"].endswith("at most 640000")
    assert errors["quotas.q.max.memory"].startswith("got NaN")


def test_instances_and_totals_are_bounded():
    errors = errors_of({"nodes": {"a": NODE}, "services": {"a": {"replicas": 60000}, "b": {"replicas": 60000}}})
    assert errors == {"services": "ask for 120000 instances in total (the sum of replicas); expected at most 100000"}
    nodes = {"n%d" % i: {"cpu": 1, "memory": "1Pi", "nvme": [{"name": "d%d" % j, "size": "1Pi"} for j in range(64)]}
             for i in range(65)}
    assert list(errors_of({"nodes": nodes, "services": {}})) == ["nodes"]
    services = {"web": {"replicas": 5000, "resources": {"memory": "1Pi"}, "sidecars": ["log"]},
                "log": {"sidecar": True, "resources": {"memory": "1Pi"}}}
    assert errors_of({"nodes": {"a": NODE}, "services": services})["services"].startswith(
        "the instances' requested memory (bytes) add up to 11258999068426240000; expected at most 2^62")


def test_lists_are_bounded_and_checked_in_linear_time():
    start = time.monotonic()
    web = {"ports": list(range(1, 65536)), "anti_affinity": ["x"] * 100000}
    errors = errors_of({"nodes": {"a": NODE}, "services": {"web": web}})
    assert errors == {"services.web.ports": "has 65535 items; expected at most 1024",
                      "services.web.anti_affinity": "has 100000 items; expected at most 1024"}
    # A guard against quadratic checking (hours at these sizes), wide enough for a loaded machine.
    assert time.monotonic() - start < 30


def test_aliases_cannot_multiply_the_work():
    """A billion-laughs document: each error shows 80 characters of the value, and reading stops early."""
    start = time.monotonic()
    laughs = fuzz_cases.LAUGHS
    problem = {"nodes": {"n%d" % i: {"cpu": 1, "memory": 1, "labels": {"k%d" % j: laughs for j in range(1000)}}
                         for i in range(5000)}, "services": {}}
    with pytest.raises(ProblemError) as caught:
        parse_problem(problem)
    assert len(caught.value.errors) == 101 and caught.value.errors[-1] == ("problem", "reading stopped after 100 mistakes")
    assert caught.value.errors[0][1].startswith('got [[[[[[[[["lol", "lol"') and len(caught.value.errors[0][1]) < 200
    valid = {"nodes": {"n%d" % i: {"cpu": 1, "memory": 1, "labels": {"k%d" % j: "v" for j in range(1000)}}
                       for i in range(1001)}, "services": {}}
    with pytest.raises(ProblemError, match="more than 1000000 list items and mapping entries"):
        parse_problem(valid)
    # A hang guard, not a speed figure: expanding the aliases would take hours; reading them takes seconds
    # (6-16 s on a loaded 2-core machine), so the bound is wide enough for any load.
    assert time.monotonic() - start < 180


def test_show_is_bounded():
    assert show(10 ** 5000) == "an integer of about 5001 digits"
    assert show(fuzz_cases.LAUGHS).endswith("...")
    assert len(show(fuzz_cases._deep())) == 80              # pylint: disable=protected-access
    assert show({"b": 1, "a": "x\ny"}) == '{"a": "x\\ny", "b": 1}' and show(float("nan")) == "NaN"


# --- strings ----------------------------------------------------------------------------------------

def test_label_values_are_text():
    problem = parse_problem({"nodes": {"a": dict(NODE, labels={"version": 1.5, "gpu": True, "rack": 3})},
                             "services": {"web": {"node_selector": {"version": "1.5"}}}})
    assert problem.nodes["a"].labels == {"gpu": "true", "rack": "3", "version": "1.5"}
    errors = errors_of({"nodes": {"a": dict(NODE, labels={"x": float("nan"), "y": 10 ** 100})}, "services": {}})
    assert errors == {"nodes.a.labels.x": "got NaN; expected a string, boolean or finite number",
                      "nodes.a.labels.y": "got an integer of about 101 digits; expected a string, boolean or number, of at most 64 digits"}


def test_an_empty_label_key_is_refused_not_dropped():
    # Dropped, the label meant would be missing from the plan without a word (found by fuzzing: a deep list under "").
    deep = []
    for _level in range(2000):
        deep = [deep]
    errors = errors_of({"nodes": {"a": dict(NODE, labels={"": deep, "zone": "east"})},
                        "services": {"web": {"node_selector": {"": "x"}}}})
    assert errors == {"nodes.a.labels": 'got the key ""; expected non-empty label keys',
                      "services.web.node_selector": 'got the key ""; expected non-empty label keys'}


def test_paths_with_newlines_stay_on_one_line():
    errors = errors_of({"nodes": {"a\nb": dict(NODE, colour="red")}, "services": {}})
    assert errors == {'nodes."a\\nb".colour': "unknown key; expected one of: cpu, memory, labels, taints, unschedulable, "
                                              "gpus, nvme, gpu_sharing, gpu_links, numa_cpus, disk",
                      # A name is one line: the newline is refused, not only shown safely.
                      'nodes."a\\nb"': 'got "a\\nb"; expected a key of text without control characters (line breaks, tabs, '
                                       'NUL, U+0085, U+2028, bidi overrides, lone surrogates)'}


def test_a_node_must_be_a_mapping():
    assert errors_of({"nodes": {"a": None}, "services": {}}) == {"nodes.a": "got null; expected a mapping"}


# --- the catalog ------------------------------------------------------------------------------------

def test_restart_policy_no_as_yaml_reads_it():
    _scheduling, specs = split_catalog({"web": {"image": "localhost/web:1", "restart_policy": False}})
    assert specs["web"]["restart_policy"] == "no"


@pytest.mark.parametrize("image", ["--privileged", "-it", "Web", "a b", "localhost/app:1\n", "x" * 600, "app@sha256:1",
                                   "r:5000/app@sha256:" + "a" * 63, "r:5000/app@sha256:" + "a" * 65,
                                   "r:5000/app@sha256:" + "A" * 64, "r:5000/app:1@sha256:" + "a" * 64 + "\n"])
def test_images_are_references(image):
    assert list(catalog_errors({"web": {"image": image}})) == ["services.web.image"]


@pytest.mark.parametrize("image", ["localhost/app:1", "app", "registry.local:5000/team/app:v1.2-rc_3",
                                   "docker.io/library/nginx@sha256:" + "a" * 64,
                                   "127.0.0.1:5443/team/app@sha256:" + "0f" * 32, "harbor.example.com/team/app:2@sha256:" + "b" * 64])
def test_valid_images(image):
    assert split_catalog({"web": {"image": image}})[1]["web"]["image"] == image


def test_no_volume_options_no_root_mount_no_control_characters():
    errors = catalog_errors({"web": {"image": "localhost/web:1", "nvme_path": "/cache:U,suid,dev",
                                     "command": ["serve", "a\nb", "c\x00d"], "env": {"A": "x\ny", "B\x00": "1"},
                                     "config": [{"dest": "/", "content": ""}, {"dest": "/etc/a:z", "content": ""},
                                                {"dest": "/etc/a,b", "content": ""}]}})
    separators = "got %s; expected a path in the container other than /, without ':', ',', NUL or line breaks"
    assert errors == {
        "services.web.nvme_path": separators % '"/cache:U,suid,dev"',
        "services.web.command[1]": 'got "a\\nb"; expected text without NUL or line breaks',
        "services.web.command[2]": 'got "c\\u0000d"; expected text without NUL or line breaks',
        "services.web.env.A": "got a value of type str (not shown: it may be a secret); expected a string, a boolean or a number "
                              "of at most 64 digits, as text without NUL, line breaks or lone surrogates",
        'services.web.env."B\\u0000"':
            'got "B\\u0000"; expected a key of text without control characters (line breaks, '
            'tabs, NUL, U+0085, U+2028, bidi overrides, lone surrogates)',
        "services.web.config[0].dest": separators % '"/"',
        "services.web.config[1].dest": separators % '"/etc/a:z"',
        "services.web.config[2].dest": separators % '"/etc/a,b"',
    }


def test_gpu_visibility_belongs_to_the_scheduler():
    errors = catalog_errors({"web": {"image": "localhost/web:1", "sidecars": ["log"]},
                             "log": {"sidecar": True, "image": "localhost/log:1",
                                     "env": {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": 0}}})
    assert sorted(errors) == ["services.log.env.CUDA_VISIBLE_DEVICES", "services.log.env.NVIDIA_VISIBLE_DEVICES"]
    # The name and that it is reserved, never the value (env values may be secrets).
    assert errors["services.log.env.NVIDIA_VISIBLE_DEVICES"].startswith(
        "is reserved (the value is not shown): GPU visibility is set by the scheduler")
    assert all('"all"' not in message for message in errors.values())


def test_health_timings_are_finite():
    errors = catalog_errors({"web": {"image": "localhost/web:1", "ports": [80],
                                     "health": {"tcp": {"port": 80}, "interval": float("nan"), "timeout": float("inf"),
                                                "start_period": 10 ** 400, "retries": 10 ** 9}}})
    assert errors == {
        "services.web.health.interval": "got NaN; expected a number of seconds >= 0",
        "services.web.health.timeout": "got Infinity; expected a number of seconds >= 0.1",
        "services.web.health.start_period": "got an integer of about 401 digits; expected a number of seconds >= 0, at most 86400",
        "services.web.health.retries": "got 1000000000; expected an integer >= 1, at most 100000",
    }
    for key, value in (("interval", float("nan")), ("start_period", float("inf")), ("timeout", float("nan")),
                       ("retries", 10 ** 9)):
        with pytest.raises(ProbeConfigError, match=r"probes\[0\]\.%s: got " % key):
            normalize_probes([{"name": "a", "type": "tcp", "port": 1, key: value}])


# --- scale requests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("replicas", ["²", "٣", "1" * 5000, 10 ** 5000, 100001, "100001", -1, 1.0, True],
                         ids=["superscript", "arabic", "5000-digits", "10^5000", "100001", "100001-text", "-1", "1.0", "true"])
def test_scale_requests_are_ascii_and_bounded(replicas):
    with pytest.raises(ProblemError) as caught:
        scale_overrides({"web": {"scalable": True}}, {}, {"service": "web", "replicas": replicas})
    assert caught.value.errors[0][0] == "scale.replicas" and "at most 100000" in caught.value.errors[0][1]


def test_scale_request_from_extra_vars():
    assert scale_overrides({"web": {"scalable": True}}, {}, {"service": "web", "replicas": " 7 "}) == {"web": 7}


# --- host facts and inventory variables -------------------------------------------------------------

def hostvars(**changes):
    values = json.loads(json.dumps(fuzz_cases.HOSTVARS))
    values.update(changes)
    return values


@pytest.mark.parametrize("text, cordoned", [("false", False), ("no", False), ("0", False), ("off", False),
                                            ("true", True), ("Yes", True), (1, True), (False, False)])
def test_booleans_as_ansible_reads_them(text, cordoned):
    assert scheduler_node(hostvars(gangplank_unschedulable=text))["unschedulable"] is cordoned


@pytest.mark.parametrize("gpu, field", [
    ({"memory_total": "[N/A]"}, "gangplank_gpus[0].memory_total: got \"[N/A]\""),
    ({"model": None}, "gangplank_gpus[0].model: got null"),
    ({"uuid": "[N/A]"}, "gangplank_gpus[0].uuid"),
    ({"index": "[N/A]"}, "gangplank_gpus[0].index"),
])
def test_gpu_facts_missing_or_not_available(gpu, field):
    values = hostvars()
    values["ansible_facts"]["gangplank_gpus"][0].update(gpu)
    with pytest.raises(NodeFactsError, match=r"^node-a: ansible_facts\.%s" % field.replace("[", r"\[").replace("]", r"\]")):
        scheduler_node(values)


def test_nvme_and_cpu_facts_missing_or_not_numbers():
    values = hostvars()
    del values["ansible_facts"]["gangplank_nvme"][0]["size"]
    with pytest.raises(NodeFactsError, match=r"gangplank_nvme\[0\]\.size: got null; expected the device's size in bytes"):
        scheduler_node(values)
    values = hostvars()
    values["ansible_facts"]["processor_vcpus"] = "many"
    with pytest.raises(NodeFactsError, match=r"ansible_facts\.processor_vcpus: got \"many\"; expected a whole number"):
        scheduler_node(values)


@pytest.mark.parametrize("host", ["../../tmp/evil", "-node", "fe80::1", "a/b", "", ".hidden", "a b"])
def test_host_names_that_would_become_paths_are_refused(host):
    with pytest.raises(DeployError, match="the inventory name is not a host name of letters"):
        desired_containers(host, {}, {}, "/var/lib/gangplank")
    with pytest.raises(NodeFactsError, match="the inventory name is not a host name"):
        build_problem({}, {}, [host], {host: hostvars(inventory_hostname=host)}, {})


# --- state files ------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b'{"job_id": "x", "started_epoch": NaN}', b'{"job_id": "x", "started_epoch": Infinity}',
                                     b'{"job_id": "x", "started_epoch": 1e20}', b'{"job_id": "x", "started_epoch": 1e400}',
                                     b'{"job_id": "x", "started_epoch": -5}', b"[" * 100000])
def test_a_lock_with_any_timestamp_can_be_broken(tmp_path, content):
    path = tmp_path / cluster_lock.LOCK_FILE
    path.write_bytes(content)
    os.utime(path, (1000000000, 1000000000))
    holder = cluster_lock.read_state(str(tmp_path))["lock"]
    assert holder["started_epoch"] == 1000000000
    with pytest.raises(cluster_lock.StateError, match="locked by"):
        cluster_lock.take_lock(str(tmp_path), "me", "new", 3600, False, False)
    taken = cluster_lock.take_lock(str(tmp_path), "me", "new", 3600, True, False)
    assert taken["lock"]["job_id"] == "new" and json.loads(path.read_text())["job_id"] == "new"


def test_state_files_hold_only_json(tmp_path):
    path = tmp_path / "x.json"
    for text in (b'{"a": NaN}', b'{"a": -Infinity}', b'{"a": 1e400}', b"[" * 100000):
        path.write_bytes(text)
        with pytest.raises(ValueError, match="is not valid JSON"):
            state_files.read_json(str(path))
    with pytest.raises(cluster_lock.StateError, match="cannot be stored as JSON"):
        cluster_lock.check_content({"placement": {"a": math.nan}}, cluster_lock.empty_record())


def test_a_write_killed_midway_is_cleaned_up_by_the_next(tmp_path):
    target = str(tmp_path / "placement.json")
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys; sys.path[:0] = %r\n"
        "from ansible_collections.gangplank.platform.plugins.module_utils import state_files\n"
        "fd, path = state_files._locked_temporary(%r, 'placement.json')\n"
        "os.write(fd, b'{\"half')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n") % (sys.path, str(tmp_path))], check=False, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    leftovers = [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    assert len(leftovers) == 1
    # A temporary file whose writer is alive (it holds the lock) is left alone.
    live = tmp_path / ".placement.json.live.tmp"
    live.write_bytes(b"")
    with open(live, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        state_files.atomic_write(target, "{}", 0o600)
        assert sorted(os.listdir(tmp_path)) == [".placement.json.live.tmp", "placement.json"]
    state_files.atomic_write(target, "{}", 0o600)
    assert os.listdir(tmp_path) == ["placement.json"]


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1, 3601, True, "5"])
def test_the_exact_time_limit_is_bounded(seconds):
    assert exact_seconds_error(seconds).endswith("expected seconds from 0 to 3600")
    assert exact_seconds_error(0) is None and exact_seconds_error(2.5) is None
