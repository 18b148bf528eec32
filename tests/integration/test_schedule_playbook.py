# -*- coding: utf-8 -*-
"""playbooks/schedule.yml for real on three inventory hosts that are all this machine (local
connections), each with its own state directory: bind, re-run, check mode, infeasible, a
run that finds the lock held waiting for it (two runs at once both succeed), a lock held past the wait refused, a
stale lock broken, and an interrupted bind repaired."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
HOSTS = ("host-a", "host-b", "host-c")
# Small requests: each test host is this machine, which may have only 2 CPUs.
CATALOG = {
    "db": {"stateful": True, "resources": {"cpu": "500m", "memory": "256Mi"}, "ports": [5432]},
    # The catalog may use Jinja2 from inventory variables (web_replicas is set with the catalog).
    "web": {"replicas": "{{ web_replicas }}", "resources": {"cpu": "250m", "memory": "128Mi"}, "ports": [8080],
            "depends_on": ["db"], "anti_affinity": ["web"]},
    "infer": {"resources": {"cpu": "250m", "gpu": {"memory": "8Gi", "models": ["L4"]}}, "depends_on": ["web"],
              "sidecars": ["log"]},
    "log": {"sidecar": True, "resources": {"cpu": "50m"}},
}


class Cluster:
    def __init__(self, base):
        self.base = base
        hosts = {}
        for host in HOSTS:
            hosts[host] = {
                "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "gangplank_state_dir": str(base / host / "state"),
                "gangplank_fact_path": str(base / host / "facts.d"),
                "gangplank_reserved": {"cpu": 0, "memory": 0},
            }
        hosts["host-b"]["gangplank_simulated_gpus"] = [{"model": "NVIDIA L4", "memory": "24Gi"}]
        shared = {"gangplank_services": CATALOG, "facts_show_table": False, "web_replicas": 2,
                  "gangplank_plan_html": str(base / "plan.html")}
        self.inventory = {"all": {"hosts": hosts, "vars": shared,
                                  "children": {"gangplank_control": {"hosts": {"host-a": {}}}}}}

    def record_path(self):
        return self.base / "host-a" / "state" / "placement.json"

    def record(self):
        return json.loads(self.record_path().read_text())

    def node_file(self, host):
        return self.base / host / "facts.d" / "gangplank.fact"

    def node(self, host):
        return json.loads(self.node_file(host).read_text())

    def lock_path(self):
        return self.base / "host-a" / "state" / "lock.json"

    def run(self, *extra, catalog=None, hosts_file="hosts.yml", env=None, playbook=None):
        inventory = json.loads(json.dumps(self.inventory))
        if catalog is not None:
            inventory["all"]["vars"]["gangplank_services"] = catalog
        path = self.base / hosts_file
        path.write_text(yaml.safe_dump(inventory))
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1", **(env or {}))
        completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(path),
                                    playbook or os.path.join(ROOT, "playbooks", "schedule.yml"), *extra],
                                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
        try:
            report = json.loads(completed.stdout)
        except ValueError:
            pytest.fail("no JSON report:\n%s\n%s" % (completed.stdout[-3000:], completed.stderr[-3000:]))
        tasks = {}
        for play in report["plays"]:
            for task in play["tasks"]:
                tasks[task["task"]["name"].split(" : ", 1)[-1]] = task["hosts"]
        return completed.returncode, tasks, report["stats"]

    def snapshot(self):
        files = [self.record_path()] + [self.node_file(host) for host in HOSTS]
        return {str(f): (f.read_bytes(), f.stat().st_mtime_ns) if f.exists() else None for f in files}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("schedule"))
    returncode, tasks, stats = cluster.run()
    assert returncode == 0, tasks
    cluster.first = (tasks, stats)
    return cluster


def bound_instances(cluster):
    seen = []
    for host in HOSTS:
        seen += [(name, host) for name in cluster.node(host)["instances"]]
    return seen


def test_bind_writes_the_record_and_each_nodes_bindings(cluster):
    record = cluster.record()
    assert record["revision"] == 1
    assert sorted(record["placement"]) == ["db-0", "infer-0", "web-0", "web-1"]
    assert stat.S_IMODE(cluster.record_path().stat().st_mode) == 0o600
    for host in HOSTS:
        assert stat.S_IMODE(cluster.node_file(host).stat().st_mode) == 0o644
        node = cluster.node(host)
        assert node["revision"] == 1 and node["labels"] == record["node_labels"][host]
    assert cluster.node("host-b")["instances"]["infer-0"]["gpus"][0]["uuid"] == "GPU-sim-host-b-0"
    assert cluster.node("host-b")["instances"]["infer-0"]["rank"] == 2
    # Every instance is bound on exactly one node, the one the record names.
    assert sorted(bound_instances(cluster)) == sorted((n, p["node"]) for n, p in record["placement"].items())
    assert not cluster.lock_path().exists()


def test_second_run_changes_nothing(cluster):
    before = cluster.snapshot()
    returncode, _tasks, stats = cluster.run()
    assert returncode == 0
    assert all(stats[host]["changed"] == 0 for host in HOSTS), stats
    assert cluster.snapshot() == before


def test_check_mode_shows_the_change_and_writes_nothing(cluster):
    before = cluster.snapshot()
    catalog = dict(CATALOG, web=dict(CATALOG["web"], replicas="{{ web_replicas + 1 }}"))
    returncode, tasks, _stats = cluster.run("--check", "--diff", catalog=catalog)
    assert returncode == 0
    planned = tasks["Plan every service instance at once"]["host-a"]
    assert planned["changed"] is True and planned["changes"]["added"] == ["web-2"]
    assert cluster.snapshot() == before and not cluster.lock_path().exists()
    # The picture is a report on the controller: written in check mode too, named in the output.
    assert tasks["Show the plan"]["host-a"]["msg"][-1] == "picture: %s" % (cluster.base / "plan.html")
    page = (cluster.base / "plan.html").read_text(encoding="utf-8")
    assert all(name in page for name in HOSTS + ("web-2", "infer-0", "GPU0 L4"))


def test_infeasible_changes_nothing(cluster):
    before = cluster.snapshot()
    catalog = dict(CATALOG, web=dict(CATALOG["web"], replicas=4))
    returncode, tasks, _stats = cluster.run(catalog=catalog)
    assert returncode == 2
    message = tasks["Plan every service instance at once"]["host-a"]["msg"]
    assert "web-3: 0/3 nodes are available: 3 node(s) didn't have free ports for the requested host ports." in message
    assert cluster.snapshot() == before and not cluster.lock_path().exists()


@pytest.mark.parametrize("playbook, extra, option", [
    # site.yml checks the four roles' inputs in one task per host (roles/cluster/tasks/check.yml) instead of Ansible's
    # one per role: a bad value of any of them still stops the run there, naming the option, before anything changes.
    ("site.yml", "site_reuse_facts=maybe", "facts_reuse"),
    ("site.yml", "deploy_log_lines=many", "deploy_log_lines"),
    # The options read once for every host (every schedule option, the deploy role's catalog) are checked once, on the
    # play's first host, and stop every host too.
    ("site.yml", "schedule_history=ten", "schedule_history"),
    ("site.yml", '{"deploy_services": "a catalog"}', "deploy_services"),
    ("site.yml", "gangplank_container_engine=lxc", "cluster_engine"),
    # An inventory variable that a role's default reads: the check sees the roles' defaults.
    ("site.yml", "gangplank_image_bundles=5", "runtime_image_bundles"),
    ("scale.yml", "schedule_exact_timeout=soon", "schedule_exact_timeout"),
    # The check's own option: a name that is none of the collection's roles reads no file and is refused.
    ("site.yml", '{"cluster_check_roles": ["../../../etc", "deploy"]}', "cluster_check_roles"),
])
def test_a_bad_role_input_stops_the_run_before_anything_changes(cluster, playbook, extra, option):
    before = cluster.snapshot()
    returncode, tasks, stats = cluster.run("-e", extra, "-e", "service=web", "-e", "replicas=1",
                                           playbook=os.path.join(ROOT, "playbooks", playbook))
    assert returncode == 2
    failed = [(name, result) for name, results in tasks.items() for result in results.values() if result.get("failed")]
    checks = ("Check against their argument specs the inputs", "Check the roles' inputs on this host",
              "Validating arguments against arg spec")
    assert failed and all(name.startswith(checks) for name, _result in failed), [name for name, _result in failed]
    assert all(option in " ".join(result["argument_errors"]) for _name, result in failed), failed[0][1]["msg"]
    # A host that ran no task (the once-check, the play's first task, stopped every host) is not in the stats.
    assert all(stats.get(host, {}).get("changed", 0) == 0 for host in HOSTS), stats
    assert cluster.snapshot() == before and not cluster.lock_path().exists()


LOCK_TASK = "Take the cluster lock and read the placement record, waiting while another run holds it (cluster_lock_wait)"


def test_a_lock_held_past_the_wait_is_refused_naming_the_holder_and_a_stale_lock_can_be_broken(cluster):
    before = cluster.snapshot()
    cluster.lock_path().write_text(json.dumps({"owner": "alice@awx", "job_id": "job-42",
                                               "started_at": "2026-11-21T00:00:00Z", "started_epoch": 1.0}))
    started = time.monotonic()
    returncode, tasks, _stats = cluster.run("-e", "gangplank_lock_wait=2")
    assert returncode == 2 and time.monotonic() - started >= 2
    message = tasks[LOCK_TASK]["host-a"]["results"][0]["msg"]
    assert "alice@awx" in message and "job-42" in message and "waited 2s for it (lock_wait=2s)" in message
    assert cluster.snapshot() == before and cluster.lock_path().exists()
    returncode, _tasks, _stats = cluster.run("-e", "gangplank_break_lock=true", "-e", "cluster_lock_timeout=60")
    assert returncode == 0 and not cluster.lock_path().exists()


def test_a_run_that_finds_the_lock_held_waits_for_it_and_then_runs(cluster, tmp_path):
    """Another job holds the lock (a fresh one, not breakable) and ends 3 s after this run began to wait for it:
    this run queues, then succeeds."""
    cluster.lock_path().write_text(json.dumps({"owner": "bob@awx", "job_id": "job-43",
                                               "started_at": "2026-11-21T00:00:00Z", "started_epoch": int(time.time())}))
    module_tmp = tmp_path / "ansible-tmp"

    def release_once_the_lock_task_runs():
        # The lock task's module is copied to the run's temporary folder when it starts: then it is waiting.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not list(module_tmp.glob("*/AnsiballZ_cluster_state.py")):
            time.sleep(0.2)
        time.sleep(3)
        cluster.lock_path().unlink()

    releaser = threading.Thread(target=release_once_the_lock_task_runs)
    releaser.start()
    try:
        returncode, tasks, _stats = cluster.run(env={"ANSIBLE_REMOTE_TMP": str(module_tmp), "ANSIBLE_KEEP_REMOTE_FILES": "0"})
    finally:
        releaser.join()
    assert returncode == 0
    result = tasks[LOCK_TASK]["host-a"]["results"][0]
    # The run says that it waited, and for whom (a warning of the lock task).
    assert result["waited"] >= 2 and re.search(r"waited \d+s for the cluster lock at \S+, held by job\(s\) job-43", json.dumps(tasks[LOCK_TASK]))
    assert not cluster.lock_path().exists()


def test_two_runs_at_once_both_succeed_one_after_the_other(cluster):
    """Two real ansible-playbook runs started together: neither fails on the lock, and the record is consistent."""
    revision = cluster.record()["revision"]
    outcomes = []
    runs = [threading.Thread(target=lambda: outcomes.append(cluster.run(hosts_file="hosts-%d.yml" % number)))
            for number in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert [returncode for returncode, _tasks, _stats in outcomes] == [0, 0]
    assert cluster.record()["revision"] == revision and not cluster.lock_path().exists()


def test_an_interrupted_bind_is_repaired_by_the_next_run(cluster):
    # host-c cannot write its fact file (its directory is a file): the bind stops after the record.
    facts_dir = cluster.node_file("host-c").parent
    stale = cluster.node("host-c")
    for entry in facts_dir.iterdir():
        entry.unlink()
    facts_dir.rmdir()
    facts_dir.write_text("in the way")
    catalog = dict(CATALOG, web=dict(CATALOG["web"], replicas="{{ web_replicas + 1 }}"))
    returncode, _tasks, _stats = cluster.run(catalog=catalog)
    assert returncode == 2
    assert cluster.record()["revision"] == 2 and "web-2" in cluster.record()["placement"]
    assert not cluster.lock_path().exists()
    # The fault goes away; the next run rewrites host-c from the record, moving nothing.
    facts_dir.unlink()
    returncode, _tasks, stats = cluster.run(catalog=catalog)
    assert returncode == 0
    assert cluster.record()["revision"] == 2
    node = cluster.node("host-c")
    assert node["revision"] == 2 and node != stale
    assert stats["host-c"]["changed"] >= 1
    record = cluster.record()
    assert sorted(bound_instances(cluster)) == sorted((n, p["node"]) for n, p in record["placement"].items())


def test_a_host_that_is_down_keeps_its_instances_and_the_rest_is_planned(cluster):
    """The host of the stateful db does not answer (ssh to a closed port): the run plans and binds the live hosts,
    the db stays recorded on the down host (it waits for it), a new web instance goes to a live host, the run names
    what waits, and the next run with the host back changes nothing it did not have to."""
    record = cluster.record()
    down = record["placement"]["db-0"]["node"]
    assert down in record["nodes"]            # the record keeps what each host was planned with
    live = [host for host in HOSTS if host != down]
    inventory = cluster.inventory
    saved = json.loads(json.dumps(inventory))
    inventory["all"]["hosts"][down].update({"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                                            "ansible_ssh_common_args": "-o ConnectTimeout=3"})
    inventory["all"]["vars"]["web_replicas"] = 3
    # The control host must answer: the record and lock live there.
    if down == "host-a":
        inventory["all"]["children"]["gangplank_control"]["hosts"] = {live[0]: {}}
        shutil.copytree(cluster.base / "host-a" / "state", cluster.base / live[0] / "state", dirs_exist_ok=True)
    try:
        returncode, tasks, stats = cluster.run()
    finally:
        cluster.inventory = saved
    assert returncode == 4, tasks            # Ansible's unreachable status, after the live hosts are done
    assert stats[down]["unreachable"] and all(not stats[host]["failures"] for host in live)
    control = cluster.base / (live[0] if down == "host-a" else "host-a") / "state" / "placement.json"
    after = json.loads(control.read_text())
    assert after["placement"]["db-0"] == record["placement"]["db-0"]
    assert after["placement"]["web-2"]["node"] in live
    plan_lines = tasks["Show the plan"][live[0]]["msg"]
    assert any(line.startswith("down: %s" % down) and "db-0" in line for line in plan_lines), plan_lines
    assert not (control.parent / "lock.json").exists()


MAINTENANCE_EXTENDER = os.path.join(ROOT, "docs", "examples", "maintenance_extender.py")


def test_schedule_profile_with_an_http_extender_in_check_mode(cluster, tmp_path):
    """The schedule role's ``schedule_profile`` with an HTTP extender: docs/examples/maintenance_extender.py as a real
    process on loopback, with a bearer token, lists a host that holds neither db nor infer in maintenance. In check
    mode (the plan only) nothing is planned there, the extender's calls are reported (once per service and verb), the
    token appears nowhere, and nothing is written."""
    before = cluster.snapshot()
    record = cluster.record()
    refused = next(host for host in HOSTS if host not in (record["placement"]["db-0"]["node"],
                                                          record["placement"]["infer-0"]["node"]))
    listing = tmp_path / "maintenance.txt"
    listing.write_text("%s   # in maintenance\n" % refused)
    token = tmp_path / "token.txt"
    token.write_text("playbook-t0ken\n")
    token.chmod(0o600)
    process = subprocess.Popen([sys.executable, MAINTENANCE_EXTENDER, "--maintenance", str(listing), "--port", "0",
                                "--token-file", str(token)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        profile = {"schedule_profile": {"extenders": [
            {"urlPrefix": "http://127.0.0.1:%d" % port, "filterVerb": "filter", "prioritizeVerb": "prioritize",
             "weight": 1, "nodeCacheCapable": True, "httpTimeout": "5s", "bearerTokenFile": str(token)}]}}
        (tmp_path / "profile.yml").write_text(yaml.safe_dump(profile))
        returncode, tasks, _stats = cluster.run("--check", "--diff", "-e", "@%s" % (tmp_path / "profile.yml"))
    finally:
        process.kill()
        process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()
    assert returncode == 0, tasks
    planned = tasks["Plan every service instance at once"]["host-a"]
    placements = planned["plan"]["placements"]
    assert sorted(placements) == ["db-0", "infer-0", "web-0", "web-1"]
    assert refused not in {placement["node"] for placement in placements.values()}, placements
    [report] = planned["plan"]["extenders"]
    assert report["urlPrefix"] == "http://127.0.0.1:%d" % port and not report["skipped"]
    # One call per service and verb: db, web, infer (log is infer's sidecar, asked with it).
    assert (report["filter_calls"], report["prioritize_calls"]) == (3, 3), report
    assert "playbook-t0ken" not in json.dumps(tasks)
    assert cluster.snapshot() == before and not cluster.lock_path().exists()


def test_a_control_host_that_is_down_is_left_out_while_another_holds_a_copy(tmp_path):
    """Two control hosts; the first stops answering: the run keeps the record and the lock on the second and says so.
    With no control host answering the run fails naming them and changes nothing."""
    cluster = Cluster(tmp_path)
    cluster.inventory["all"]["children"]["gangplank_control"]["hosts"] = {"host-a": {}, "host-b": {}}
    cluster.inventory["all"]["vars"]["gangplank_control_timeout"] = 2        # seconds to give up on a control host
    returncode, tasks, _stats = cluster.run()
    assert returncode == 0, tasks
    copy_of = {host: tmp_path / host / "state" / "placement.json" for host in ("host-a", "host-b")}
    copies = [json.loads(copy_of[host].read_text()) for host in ("host-a", "host-b")]
    assert [(copy["revision"], copy["placement"]) for copy in copies] == [(1, copies[0]["placement"])] * 2
    saved = json.loads(json.dumps(cluster.inventory))
    unreachable = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                   "ansible_ssh_common_args": "-o ConnectTimeout=3"}
    cluster.inventory["all"]["hosts"]["host-a"].update(unreachable)
    cluster.inventory["all"]["vars"]["web_replicas"] = 3
    try:
        returncode, tasks, stats = cluster.run()
    finally:
        cluster.inventory = saved
    assert returncode == 4 and all(not stats[host]["failures"] for host in ("host-b", "host-c")), tasks
    said = [result["msg"] for result in tasks["Say which control hosts are down"].values()]
    assert said and said[0].startswith("control host(s) host-a down: this run keeps the record and the lock on host-b")
    on_b = json.loads(copy_of["host-b"].read_text())
    on_a = json.loads(copy_of["host-a"].read_text())
    assert on_b["revision"] == on_a["revision"] + 1 and "web-2" in on_b["placement"] and "web-2" not in on_a["placement"]
    assert not (tmp_path / "host-b" / "state" / "lock.json").exists()

    # The deploy role's secrets (the cluster role's secrets.yml, under the lock) read and write the site's hash key on the
    # control hosts that answer: host-b gets it, and the host that is down stops nothing.
    secrets_playbook = tmp_path / "secrets.yml"
    secrets_playbook.write_text(yaml.safe_dump([{
        "name": "Read the secrets under the lock", "hosts": "all", "gather_facts": False,
        "vars": {"canary_secret": "s3cret-canary"},
        "tasks": [{"name": "Take the lock", "ansible.builtin.include_role": {"name": "gangplank.platform.cluster", "tasks_from": "lock.yml"},
                   "run_once": True},
                  {"name": "Read the secrets", "ansible.builtin.include_role": {"name": "gangplank.platform.cluster", "tasks_from": "secrets.yml"},
                   "vars": {"cluster_secret_services": {"web": {"secrets": {"token": "canary_secret"}}}}},
                  {"name": "Release the lock", "ansible.builtin.include_role": {"name": "gangplank.platform.cluster", "tasks_from": "unlock.yml"},
                   "run_once": True}]}]))
    key_of = {host: tmp_path / host / "state" / "secret-hash.key" for host in ("host-a", "host-b")}
    cluster.inventory["all"]["hosts"]["host-a"].update(unreachable)
    try:
        returncode, tasks, stats = cluster.run(playbook=str(secrets_playbook))
    finally:
        cluster.inventory = saved
    # Only the delegated reads and writes of the lock and the key would reach host-a: none does, so no host fails.
    assert returncode == 0 and not any(stats[host]["failures"] or stats[host]["unreachable"] for host in HOSTS), tasks
    assert not key_of["host-a"].exists() and len(key_of["host-b"].read_text()) == 64
    assert stat.S_IMODE(key_of["host-b"].stat().st_mode) == 0o600
    assert "s3cret-canary" not in json.dumps(tasks) and not (tmp_path / "host-b" / "state" / "lock.json").exists()

    # When host-a returns, the next run writes it with host-b's revision + 1 (cluster_state's min_revision, unit-tested),
    # so its older copy never passes for the newest.

    before = {host: path.read_bytes() for host, path in copy_of.items()}
    returncode, tasks, _stats = cluster.run("-e", "gangplank_control_timeout=-1")
    refused = [result.get("msg", "") for result in tasks["Check how long a control host is waited for"].values()]
    assert returncode != 0 and refused == ["cluster_control_timeout (gangplank_control_timeout): got -1; expected a whole "
                                           "number of seconds from 0 to 3600. Nothing was changed."], refused
    for host in ("host-a", "host-b"):
        cluster.inventory["all"]["hosts"][host].update(unreachable)
    try:
        returncode, tasks, _stats = cluster.run()
    finally:
        cluster.inventory = saved
    assert returncode != 0
    refused = [result.get("msg", "") for result in tasks["Require a control host that answers"].values()]
    assert refused and refused[0].startswith("No control host answers (host-a, host-b)"), tasks
    assert {host: path.read_bytes() for host, path in copy_of.items()} == before
