# -*- coding: utf-8 -*-
"""site.yml end to end on the fresh-host bed (scripts/lib/freshbed.sh): three hosts that have never
seen this project, reached over real SSH as a sudo user with become. Two run Podman and one Docker,
each installed by the runtime role from Debian's repositories; the demo image comes from the offline
bundle. The tests run in order on one deployment: check mode on the brand-new hosts, a cold deploy, a
re-run that changes nothing, a rotation of the vaulted canary the catalog carries (tests/e2e/canary.py), a failing
probe, a run killed mid-rank and repaired, a scale job through ansible-runner (AWX's executor) and the same scale at
-vvv, teardown, and the search for the canary in all they printed and in the runner's artifacts. Figures
(times, tasks run with become) go to .build/fresh/e2e-figures.json for the notes.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import ROOT, failures, get, kill_run, summaries, survivors
from ansible_collections.gangplank.platform.tests.e2e.canary import SECRET, SECRET_FILE, Canary, files_under
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed
from ansible_collections.gangplank.platform.tests.e2e.runner import Job, answers

HOSTS = {"fresh1": ("fe2e-1", "127.0.0.71"), "fresh2": ("fe2e-2", "127.0.0.72"), "fresh3": ("fe2e-3", "127.0.0.73")}
NAMES = tuple(name for name, _address in HOSTS.values())
CONTAINERS = 12
INSTANCES = 10
STATE = "/var/lib/gangplank"
FIGURES = os.path.join(ROOT, ".build", "fresh", "e2e-figures.json")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = FreshBed(tmp_path_factory.mktemp("fresh"), HOSTS)
    # The catalog carries a vaulted canary: every run here has it, and the last test searches their output for it.
    bed.canary = Canary(bed.base)
    bed.canary.install()
    bed.environment = bed.canary.environment
    bed.transcripts = bed.canary.transcripts
    bed.down()
    bed.up()
    bed.figures = {}
    yield bed
    with open(FIGURES, "w") as handle:
        json.dump(bed.figures, handle, indent=2, sort_keys=True)
    bed.down()


def modules_run(report):
    """Module runs on the hosts (each loop item counts): with this inventory every one is made with become."""
    runs = 0
    for play in report["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                items = result.get("results") if isinstance(result.get("results"), list) else [result]
                runs += sum(1 for item in items if isinstance(item, dict) and "invocation" in item and not item.get("skipped"))
    return runs


def timed_site(bed, key, *extra):
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml", *extra)
    bed.figures[key] = {"seconds": round(time.monotonic() - started, 1), "module_runs_with_become": modules_run(report)}
    return returncode, report


def untouched(bed):
    """Hosts with no engine and none of the product's paths, as the bed made them."""
    return all(bed.sh(host, "command -v podman docker dockerd || true; ls -d %s /etc/containers /etc/ansible /etc/docker "
                            "2>/dev/null || true" % STATE).strip() == "" for host in NAMES)


def test_check_mode_on_brand_new_hosts_shows_what_would_start_and_changes_nothing(bed):
    assert untouched(bed), "a fresh host starts without any container engine"
    returncode, report = bed.playbook("site.yml", "--check")
    assert returncode == 0, failures(report)
    lines = summaries(report)
    assert sorted(lines) == sorted(NAMES) and all(line.startswith("would start") for line in lines.values()), lines
    assert sum(int(line.split()[2]) for line in lines.values()) == CONTAINERS
    assert untouched(bed)


def test_site_deploys_every_instance_healthy_on_fresh_hosts(bed):
    returncode, report = timed_site(bed, "site_cold")
    assert returncode == 0, failures(report)
    found = bed.containers()
    assert len(found) == CONTAINERS and all(state == "running" for state, _at, _labels, _engine in found.values()), found
    assert len({labels["gangplank.io/instance"] for _state, _at, labels, _engine in found.values()}) == INSTANCES
    # The Docker host's containers run in Docker, the others' in Podman.
    assert {engine for _state, _at, labels, engine in found.values() if labels["gangplank.io/node"] == "fe2e-3"} == {"docker"}
    assert {engine for _state, _at, labels, engine in found.values() if labels["gangplank.io/node"] != "fe2e-3"} == {"podman"}
    record = json.loads(bed.sh(NAMES[0], "cat %s/placement.json" % STATE))
    for name, placement in record["placement"].items():
        if placement["service"] in ("api", "infer"):
            port = 8080 if placement["service"] == "api" else 9000
            assert get("http://%s:%d/health" % (bed.addresses[placement["node"]], port)) == (200, "%s ok\n" % name)
    # Limits: what the scheduler reserved (worker 100m CPU, 32Mi) on both engines.
    for name, (_state, _at, labels, engine) in found.items():
        if labels["gangplank.io/service"] == "worker":
            limits = bed.sh(labels["gangplank.io/node"], "%s inspect -f '{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}' %s"
                            % (engine, name)).split()
            assert limits == ["100000000", str(32 * 2 ** 20)], (name, engine, limits)
    # The product's default paths, made by the roles on a host that had none of them.
    assert bed.sh(NAMES[0], "test -f /etc/ansible/facts.d/gangplank.fact && stat -c %a /etc/containers/containers.conf.d").strip()


def test_second_run_changes_nothing(bed):
    before = bed.containers()
    returncode, report = timed_site(bed, "site_no_change")
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    assert bed.containers() == before


def test_a_rotated_canary_restarts_the_apis_and_leaks_nowhere_on_the_hosts(bed):
    """The vaulted canary rotated: --check --diff names the changed files without their text and changes nothing, the
    rotation restarts exactly the apis on both engines, status reports; all with -vvv. On the hosts, only the api's own
    config file (0600, in 0700 directories), its container's env and its file secret (Podman's, or Docker's private
    file, 0400) hold the canary: not the state and fact files, nor any container's labels. The output of every run is
    searched by test_teardown_leaves_nothing_behind."""
    canary = bed.canary
    rotated = canary.rotated()
    before = bed.containers()
    returncode, output = canary.run("site --check --diff -vvv", bed.inventory, "site.yml", "--check", "--diff", "-vvv",
                                    "-e", "@%s" % rotated)
    assert returncode == 0 and output.count("/config/0-api.conf: content changed") == 2, output[-3000:]
    assert bed.containers() == before
    returncode, output = canary.run("site rotation -vvv", bed.inventory, "site.yml", "-vvv", "-e", "@%s" % rotated)
    assert returncode == 0, output[-3000:]
    after = bed.containers()
    apis = sorted(name for name, entry in after.items() if entry[2]["gangplank.io/service"] == "api")
    assert sorted(name for name in after if after[name][1] != before[name][1]) == apis
    assert {after[name][3] for name in apis} == {"podman", "docker"}
    returncode, output = canary.run("status -vvv", bed.inventory, "status.yml", "-vvv", "-e", "@%s" % rotated)
    assert returncode == 0 and "12 of 12 container(s) running and healthy" in output, output[-3000:]
    for name in apis:
        host, engine = after[name][2]["gangplank.io/node"], after[name][3]
        assert canary.value in bed.sh(host, "%s exec %s env; %s exec %s cat /etc/api/api.conf" % (engine, name, engine, name))
        assert bed.sh(host, "%s exec %s cat %s" % (engine, name, SECRET_FILE)) == canary.value
        if engine == "docker":
            # Docker's file secret: a private file on the host (tmpfs), bind-mounted read-only.
            assert bed.sh(host, "stat -c %%a /run/gangplank/secrets/%s/%s" % (name, SECRET)).strip() == "400"
        modes = bed.sh(host, "stat -c '%%a %%n' %s/instances %s/instances/%s %s/instances/%s/config %s/instances/%s/config/*"
                       % (STATE, STATE, name, STATE, name, STATE, name)).split("\n")
        # The directories private, and each rendered file (api.conf, the upstreams page) readable by root only.
        modes = [line.split()[0] for line in modes if line]
        assert modes[:3] == ["700", "700", "700"] and len(modes) > 3 and set(modes[3:]) == {"600"}, modes
    hits = {host: bed.sh(host, "grep -rlF -e %s %s /etc/ansible/facts.d --exclude-dir=config || true" % (
        " -e ".join(canary.values), STATE)).split() for host in NAMES}
    assert hits == {host: [] for host in NAMES}
    assert canary.leaks({"labels": json.dumps({name: entry[2] for name, entry in after.items()})}) == []


def test_a_failing_probe_stops_at_its_rank_with_a_report_from_each_engine(bed):
    before = bed.containers()
    services = yaml.safe_load((bed.base / "group_vars" / "all" / "catalog.yml").read_text())["gangplank_services"]
    services["api"]["health"] = {"http": {"port": 8080, "path": "/missing"}, "interval": 0.2, "retries": 3}
    # Both apis in one wave, so each engine's host reports (a rolling restart would stop after the first).
    services["api"]["max_unavailable"] = "100%"
    broken = bed.base / "broken.yml"
    broken.write_text(yaml.safe_dump({"gangplank_services": services}))
    returncode, report = bed.playbook("site.yml", "-e", "@%s" % broken, "-e", "demo_api_log_level=debug")
    assert returncode != 0
    reports = {message.split(" failed on ", 1)[1].split(";", 1)[0]: message for message in failures(report)
               if message.startswith("Rank 1 (api) failed on")}
    api_hosts = {labels["gangplank.io/node"] for _state, _at, labels, _engine in before.values()
                 if labels["gangplank.io/service"] == "api"}
    assert set(reports) == api_hosts and {bed.engines[host] for host in api_hosts} == {"podman", "docker"}, reports
    for host, text in reports.items():
        # Probed where the instance publishes: its host's address in the bed's network.
        assert "probe: http http://%s:8080/missing, 3 attempt(s)" % bed.publish[host] in text, text
        assert "last probe output: HTTP 404" in text
        assert "log lines:" in text
    after = bed.containers()
    assert all(after[name][1] == before[name][1] for name in after if after[name][2]["gangplank.io/rank"] == "2")
    assert bed.sh(NAMES[0], "test -e %s/lock.json && echo locked || echo free" % STATE).strip() == "free"
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)


def test_a_run_killed_mid_rank_is_repaired_by_the_next(bed):
    returncode, report = bed.playbook("teardown.yml")
    assert returncode == 0, failures(report)
    assert bed.containers() == {}
    process = bed.popen("site.yml")
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and not any("-api-" in name for name in bed.containers()):
            time.sleep(0.5)
    finally:
        # As AWX stops a cancelled job: the whole run, with the workers that left its process group (kill_run).
        escaped = kill_run(process)
    # Nothing of the killed run is left that could still act (a worker left by os.killpg slept for 43 minutes).
    assert survivors(process) == {}, (survivors(process), escaped)
    partial = bed.containers()
    assert any("-api-" in name for name in partial) and not any("-worker-" in name for name in partial), partial
    assert bed.sh(NAMES[0], "test -e %s/lock.json && echo locked" % STATE).strip() == "locked"
    returncode, report = bed.playbook("site.yml", "-e", "gangplank_break_lock=true", "-e", "cluster_lock_timeout=0")
    assert returncode == 0, failures(report)
    found = bed.containers()
    assert len(found) == CONTAINERS and all(state == "running" for state, _at, _labels, _engine in found.values())
    assert any(name in found and partial[name][1] == found[name][1] for name in partial), \
        "the containers started before the kill are kept, not started twice"


def recap(output):
    """The default callback's PLAY RECAP: host -> its counts (ok, changed, failed, ...)."""
    return {host: dict((key, int(value)) for key, value in re.findall(r"(\w+)=(\d+)", counts))
            for host, counts in re.findall(r"^(\S+)\s+: (ok=.*)$", output.split("PLAY RECAP", 1)[-1], re.M)}


def test_a_scale_job_through_the_runner_adds_a_worker_and_the_same_scale_at_vvv_changes_nothing(bed):
    """scale.yml as AWX runs it (ansible-runner, the survey's answers) starts one more worker and restarts nothing;
    the same scale again at -vvv changes nothing. Every file the job left (job events, stdout, ...) joins the output
    that test_teardown_leaves_nothing_behind searches for the canary."""
    before = bed.containers()
    job = Job(bed, "playbooks/scale.yml", answers(service="worker", replicas=4))
    assert (job.runner.status, job.runner.rc) == ("successful", 0), job.failures()
    result = job.artifacts()["gangplank_scale"]
    assert int(result["replicas"]) == 4 and [item["instance"] for item in result["instances"]] == ["worker-%d" % n for n in range(4)]
    assert all(item["address"] == bed.publish[item["node"]] for item in result["instances"]), result
    after = bed.containers()
    added = sorted(set(after) - set(before))
    assert len(added) == 1 and after[added[0]][2]["gangplank.io/instance"] == "worker-3" and after[added[0]][0] == "running", added
    assert {name: after[name][1] for name in before} == {name: entry[1] for name, entry in before.items()}, "nothing restarted"
    left = {"runner scale: %s" % os.path.relpath(path, str(job.private)): Path(path).read_bytes()
            for path in files_under(job.private)}
    assert any("/job_events/" in key for key in left) and any(key.endswith("/stdout") for key in left), sorted(left)
    bed.canary.transcripts.update(left)
    returncode, output = bed.canary.run("scale again -vvv", bed.inventory, "scale.yml", "-vvv", "-e", "service=worker", "-e", "replicas=4")
    counts = recap(output)
    assert returncode == 0 and sorted(counts) == sorted(NAMES), output[-3000:]
    assert all(count["changed"] == 0 for count in counts.values()), counts
    assert bed.containers() == after


def test_teardown_leaves_nothing_behind(bed):
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
    assert bed.containers() == {}
    for host in NAMES:
        left = bed.sh(host, "find %s /etc/ansible/facts.d /srv/nvme0n1 -type f 2>/dev/null || true" % STATE).split()
        assert left == [], (host, left)
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0 and all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    # Every run of this module, -vvv or not, check mode, the failing probe's report, the runner's job files and teardown:
    # no canary.
    assert len(bed.canary.transcripts) >= 10 and bed.canary.leaks() == []
