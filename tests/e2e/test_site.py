# -*- coding: utf-8 -*-
"""site.yml end to end on a copy of the local test bed (inventories/local): three hosts that are
all this machine, real Podman containers from the offline demo image, real probes over real
sockets. The tests run in order on one deployment: deploy, re-run, check mode, a config change,
a failing probe, a run killed mid-rank, teardown.

Needs what scripts/lib/testbed.sh sets up (podman, the demo image bundle); scripts/test.sh
sources it before this step. The hosts are renamed (e2e-n1, ...) and publish on 127.0.0.21-23,
so a demo deployment on the same machine is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
LOCAL = os.path.join(ROOT, "inventories", "local")
BUNDLE = os.path.join(ROOT, ".build", "testbed", "images", "gangplank-demo.tar")
HOSTS = {"node1": ("e2e-n1", "127.0.0.21"), "node2": ("e2e-n2", "127.0.0.22"), "node3": ("e2e-n3", "127.0.0.23")}
NAMES = tuple(name for name, _address in HOSTS.values())
# The demo catalog: 1 db, 2 queues, 2 apis, 3 workers, 2 infers with a sidecar each.
INSTANCES = 10
CONTAINERS = 12


class Bed:
    def __init__(self, base):
        self.base = base
        shutil.copytree(os.path.join(LOCAL, "group_vars"), str(base / "group_vars"))
        shutil.copytree(os.path.join(LOCAL, "templates"), str(base / "templates"))
        inventory = yaml.safe_load(open(os.path.join(LOCAL, "hosts.yml")))
        hosts = {}
        for old, spec in inventory["all"]["hosts"].items():
            name, address = HOSTS[old]
            hosts[name] = dict(spec, gangplank_publish_address=address)
        inventory["all"]["hosts"] = hosts
        inventory["all"]["children"]["gangplank_control"]["hosts"] = {HOSTS["node1"][0]: {}}
        self.inventory = base / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump(inventory))
        (base / "group_vars" / "all" / "zz_e2e.yml").write_text(yaml.safe_dump({
            "gangplank_testbed_dir": str(base / "testbed"),
            "gangplank_image_bundles": [{"path": BUNDLE, "images": ["localhost/gangplank-demo:1"]}],
        }))

    def state(self, host="e2e-n1"):
        return self.base / "testbed" / host

    def playbook(self, name, *extra, timeout=600):
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1")
        completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(self.inventory),
                                    os.path.join(ROOT, "playbooks", name), *extra],
                                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        try:
            report = json.loads(completed.stdout)
        except ValueError:
            pytest.fail("no JSON report:\n%s\n%s" % (completed.stdout[-3000:], completed.stderr[-3000:]))
        return completed.returncode, report

    def popen(self, name, *extra):
        env = dict(os.environ, ANSIBLE_NOCOLOR="1")
        return subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", str(self.inventory),
                                 os.path.join(ROOT, "playbooks", name), *extra],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)


def containers():
    """This test bed's containers as podman sees them: name -> (state, started_at, labels)."""
    out = subprocess.run(["podman", "ps", "-a", "--filter", "label=gangplank.io/managed=true", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for item in json.loads(out or "[]"):
        labels = item.get("Labels") or {}
        if labels.get("gangplank.io/node") in NAMES:
            found[item["Names"][0]] = (item["State"], item["StartedAt"], labels)
    return found


def task_results(report, name):
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].split(" : ", 1)[-1] == name:
                yield task["hosts"]


def summaries(report):
    """Per host: the deploy role's 'start ..., restart ..., stop ...' line."""
    lines = {}
    for hosts in task_results(report, "Show what changes on this host"):
        lines.update({host: result["msg"] for host, result in hosts.items()})
    return lines


def failures(report):
    messages = []
    for play in report["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                if result.get("failed"):
                    # A loop's failure is in its items.
                    messages += [result.get("msg", "")] + [item.get("msg", "") for item in result.get("results") or []]
    return messages


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    if shutil.which("podman") is None or not os.path.exists(BUNDLE):
        pytest.fail("the test bed is not set up: source scripts/lib/testbed.sh first (scripts/test.sh does)")
    bed = Bed(tmp_path_factory.mktemp("e2e"))
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def test_site_deploys_every_instance_healthy(bed):
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    bed.first_seconds = time.monotonic() - started
    found = containers()
    assert len(found) == CONTAINERS and all(state == "running" for state, _at, _labels in found.values()), found
    instances = {labels["gangplank.io/instance"] for _state, _at, labels in found.values()}
    assert len(instances) == INSTANCES
    record = json.loads((bed.state() / "placement.json").read_text())
    for name, placement in record["placement"].items():
        node = placement["node"]
        assert (node + "-" + name) in found
        address = dict(HOSTS.values())[node]
        if placement["service"] in ("api", "infer"):
            port = 8080 if placement["service"] == "api" else 9000
            assert get("http://%s:%d/health" % (address, port)) == (200, "%s ok\n" % name)
    api = [name for name in record["placement"] if name.startswith("api-")][0]
    node = record["placement"][api]["node"]
    status, body = get("http://%s:8080/api.conf" % dict(HOSTS.values())[node])
    assert status == 200 and "instance = %s" % api in body and "log_level = info" in body
    # A sidecar shares its instance's network namespace; the GPU instance sees its simulated GPU.
    for name, placement in record["placement"].items():
        if placement["service"] == "infer":
            main = found["%s-%s" % (placement["node"], name)][2]
            side = found["%s-%s-logshipper" % (placement["node"], name)][2]
            assert side["gangplank.io/sidecar-of"] == "%s-%s" % (placement["node"], name)
            assert main["gangplank.io/rank"] == "2"
            gpus = bed.state(placement["node"]) / "nvme0n1" / "gangplank" / "infer" / (name + ".gpus")
            assert gpus.read_text().strip() == placement["gpus"][0]["uuid"]
    returncode, report = bed.playbook("status.yml")
    assert returncode == 0
    table = next(task_results(report, "Show the status table"))
    lines = next(iter(table.values()))["msg"]
    assert lines[-1] == "%d of %d container(s) running and healthy" % (CONTAINERS, CONTAINERS), lines


def test_second_run_changes_nothing(bed):
    before = containers()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    assert containers() == before
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") for line in summaries(report).values())


def test_check_mode_shows_the_restart_and_changes_nothing(bed):
    before = containers()
    returncode, report = bed.playbook("site.yml", "--check", "-e", "demo_api_log_level=debug")
    assert returncode == 0, failures(report)
    lines = summaries(report)
    restarted = [line for line in lines.values() if "restart 1" in line]
    assert len(restarted) + sum("restart 2" in line for line in lines.values()) >= 1
    assert all(line.startswith("would ") for line in lines.values())
    assert containers() == before
    assert not (bed.state() / "lock.json").exists()


def test_config_change_restarts_only_its_instances(bed):
    before = containers()
    returncode, report = bed.playbook("site.yml", "-e", "demo_api_log_level=debug")
    assert returncode == 0, failures(report)
    after = containers()
    assert set(after) == set(before)
    changed = sorted(name for name in after if after[name][1] != before[name][1])
    assert changed and all("-api-" in name for name in changed), changed
    assert len(changed) == 2
    record = json.loads((bed.state() / "placement.json").read_text())
    for name, placement in record["placement"].items():
        if placement["service"] == "api":
            _status, body = get("http://%s:8080/api.conf" % dict(HOSTS.values())[placement["node"]])
            assert "log_level = debug" in body


def test_failing_probe_stops_at_its_rank_with_a_report(bed):
    before = containers()
    catalog = yaml.safe_load(open(os.path.join(LOCAL, "group_vars", "all", "catalog.yml")))
    services = catalog["gangplank_services"]
    services["api"]["health"] = {"http": {"port": 8080, "path": "/missing"}, "interval": 0.2, "retries": 3}
    broken = bed.base / "broken.yml"
    broken.write_text(yaml.safe_dump({"gangplank_services": services}))
    returncode, report = bed.playbook("site.yml", "-e", "@%s" % broken, "-e", "demo_api_log_level=debug")
    assert returncode != 0
    reports = [message for message in failures(report) if message.startswith("Rank 1 (api) failed on")]
    assert reports, failures(report)
    text = reports[0]
    assert "later ranks were not started" in text and "probe: http http://127.0.0.2" in text
    assert "/missing, 3 attempt(s)" in text and "last probe output: HTTP 404" in text and "log lines:" in text
    # Rank 2 was not touched, and the lock is released for the next run.
    after = containers()
    assert all(after[name][1] == before[name][1] for name in after if after[name][2]["gangplank.io/rank"] == "2")
    assert not (bed.state() / "lock.json").exists()
    returncode, report = bed.playbook("site.yml", "-e", "demo_api_log_level=debug")
    assert returncode == 0, failures(report)
    assert containers() == after


def test_a_run_killed_mid_rank_is_repaired_by_the_next(bed):
    bed.playbook("teardown.yml")
    assert containers() == {}
    process = bed.popen("site.yml")
    deadline = time.monotonic() + 300
    try:
        # Kill it once rank 1 has begun: the apis exist, the workers and infers do not yet.
        while time.monotonic() < deadline and not any("-api-" in name for name in containers()):
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    partial = containers()
    assert any("-api-" in name for name in partial) and not any("-worker-" in name for name in partial), partial
    assert (bed.state() / "lock.json").exists()
    returncode, report = bed.playbook("site.yml")
    assert returncode != 0 and any("locked by" in message for message in failures(report))
    returncode, report = bed.playbook("site.yml", "-e", "gangplank_break_lock=true", "-e", "schedule_lock_timeout=0",
                                      "-e", "deploy_lock_timeout=0")
    assert returncode == 0, failures(report)
    found = containers()
    assert len(found) == CONTAINERS and all(state == "running" for state, _at, _labels in found.values())
    kept = [name for name in partial if name in found and partial[name][1] == found[name][1]]
    assert kept, "the containers started before the kill are kept, not started twice"


def test_teardown_leaves_nothing_behind(bed):
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
    assert containers() == {}
    for name in NAMES:
        state = bed.state(name)
        left = sorted(str(path.relative_to(state)) for path in state.rglob("*") if path.is_file())
        assert left == [], left
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0 and all(report["stats"][host]["changed"] == 0 for host in NAMES)
