# -*- coding: utf-8 -*-
"""site.yml and scale.yml as AWX runs them: through ansible-runner (the Python package AWX's execution
environment uses), in a private data directory laid out as AWX lays it out (inventory/, env/extravars,
env/envvars, project/, artifacts/), with the survey answers of the "Scale service" job template as
extra variables, and the result read back from the runner's artifacts (the playbook_on_stats event's
artifact_data, which AWX shows as the job's artifacts: docs/awx.md). The harness is tests/e2e/runner.py.

Hosts d2-a1..3 publish on 127.0.0.133-135."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import ROOT, Bed, containers as containers_of
from ansible_collections.gangplank.platform.tests.e2e.canary import SECRET_FILE, Canary, files_under
from ansible_collections.gangplank.platform.tests.e2e.runner import Job, answers, survey

HOSTS = {"node1": ("d2-a1", "127.0.0.133"), "node2": ("d2-a2", "127.0.0.134"), "node3": ("d2-a3", "127.0.0.135")}
NAMES = tuple(name for name, _address in HOSTS.values())


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("runner"), HOSTS)
    # The catalog carries a vaulted canary (test_the_vaulted_canary_never_leaks): every job here runs with it.
    bed.canary = Canary(bed.base)
    bed.canary.install()
    bed.environment = bed.canary.environment
    bed.transcripts = bed.canary.transcripts
    job = Job(bed, "playbooks/site.yml", {})
    assert (job.runner.status, job.runner.rc) == ("successful", 0), job.failures()
    assert "gangplank_placement" in job.artifacts()
    bed.torn_down = False
    yield bed
    if not bed.torn_down:                   # test_the_vaulted_canary_never_leaks did not get to its teardown
        bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def test_the_survey_asks_exactly_what_scale_yml_reads():
    assert [question["variable"] for question in survey()] == ["service", "replicas", "reset"]
    with open(os.path.join(ROOT, "playbooks", "scale.yml")) as handle:
        text = handle.read()
    for question in survey():
        assert "-e %s=" % question["variable"] in text, question["variable"]


def test_a_scale_job_returns_the_instances_in_its_artifacts(bed):
    job = Job(bed, "playbooks/scale.yml", answers(service="worker", replicas=4))
    assert (job.runner.status, job.runner.rc) == ("successful", 0), job.failures()
    result = job.artifacts()["gangplank_scale"]
    assert result["service"] == "worker" and int(result["replicas"]) == 4 and int(result["asked"]) == 4
    assert [item["instance"] for item in result["instances"]] == ["worker-%d" % n for n in range(4)]
    addresses = dict(HOSTS.values())
    assert all(item["address"] == addresses[item["node"]] for item in result["instances"])
    running = {labels["gangplank.io/instance"] for state, _at, labels in containers_of(NAMES).values() if state == "running"}
    assert {"worker-%d" % n for n in range(4)} <= running


def test_a_reset_job_returns_the_catalogs_count(bed):
    job = Job(bed, "playbooks/scale.yml", answers(service="worker", reset="true"))
    assert (job.runner.status, job.runner.rc) == ("successful", 0), job.failures()
    result = job.artifacts()["gangplank_scale"]
    assert int(result["asked"]) == 3
    assert int(result["replicas"]) == 3 and [item["instance"] for item in result["instances"]] == ["worker-0", "worker-1", "worker-2"]


def test_a_refused_job_fails_with_the_reason_and_no_artifacts(bed):
    before = containers_of(NAMES)
    job = Job(bed, "playbooks/scale.yml", answers(service="worker", replicas=7))
    assert job.runner.status == "failed" and job.runner.rc != 0
    assert any("would take quota workers to" in message for message in job.failures()), job.failures()
    assert "gangplank_scale" not in job.artifacts()
    assert containers_of(NAMES) == before


def _in_container(name, *argv):
    return subprocess.run(["podman", "exec", name, *argv], capture_output=True, text=True, check=True).stdout


def test_the_vaulted_canary_never_leaks(bed):
    """The vaulted canary (api env, file secret and config template) through --check --diff, a rotation, status, a failing
    probe and teardown, after site.yml and scale.yml through the runner: no byte of output, runner artifact, state or
    fact file, HTML page or container label holds it; only the api's own config file (0600, in a private directory)
    environment and Podman secret do. Every run here with -vvv. Runs last: it tears the deployment down."""
    canary, inventory = bed.canary, bed.inventory
    apis = sorted(name for name, (_state, _at, labels) in containers_of(NAMES).items() if labels["gangplank.io/service"] == "api")
    assert len(apis) == 2 and all(canary.value in _in_container(name, "env") for name in apis)
    rotated = canary.rotated()
    before = containers_of(NAMES)
    returncode, output = canary.run("site --check --diff -vvv", inventory, "site.yml", "--check", "--diff", "-vvv", "-e", "@%s" % rotated)
    assert returncode == 0, output[-3000:]
    assert "would start 0 [], restart 1" in output and containers_of(NAMES) == before
    # The diff names each changed config file and says its content changed, without the text.
    assert output.count("/config/0-api.conf: content changed") == 2, output[-3000:]
    returncode, output = canary.run("site rotation -vvv", inventory, "site.yml", "-vvv", "-e", "@%s" % rotated)
    assert returncode == 0, output[-3000:]
    after = containers_of(NAMES)
    assert sorted(name for name in after if after[name][1] != before[name][1]) == apis, "the rotation restarts exactly the apis"
    assert all(canary.value in _in_container(name, "env") and canary.value in _in_container(name, "cat", "/etc/api/api.conf")
               and _in_container(name, "cat", SECRET_FILE) == canary.value for name in apis)
    returncode, output = canary.run("status -vvv", inventory, "status.yml", "-vvv", "-e", "@%s" % rotated)
    assert returncode == 0 and "12 of 12 container(s) running and healthy" in output, output[-3000:]
    # A failing probe's report, after a second rotation that restarts the apis with a probe that cannot pass.
    services = yaml.safe_load((bed.base / "group_vars" / "all" / "catalog.yml").read_text())["gangplank_services"]
    services["api"]["health"] = {"http": {"port": 8080, "path": "/missing"}, "interval": 0.2, "retries": 3}
    broken = bed.base / "broken.yml"
    broken.write_text(yaml.safe_dump({"gangplank_services": services}))
    rotated = canary.rotated()
    returncode, output = canary.run("site failing probe -vvv", inventory, "site.yml", "-vvv", "-e", "@%s" % broken, "-e", "@%s" % rotated)
    assert returncode != 0 and "Rank 1 (api) failed on" in output and "last probe output: HTTP 404" in output, output[-3000:]
    # Files on the host: the config files 0600, their directories 0700; the container's own file holds the canary.
    state = bed.base / "testbed"
    config = sorted(state.glob("*/instances/*/config/*"))
    assert config and {oct(path.stat().st_mode & 0o777) for path in config} == {"0o600"}, config
    folders = {path.parent for path in config} | {path.parent.parent for path in config}
    assert {oct(path.stat().st_mode & 0o777) for path in folders} == {"0o700"}, folders
    api_files = [path for path in config if path.name == "0-api.conf"]
    assert len(api_files) == 2 and all(canary.leaks({}, [path]) for path in api_files), "the search finds the canary where it is"
    labels = {name: entry[2] for name, entry in containers_of(NAMES).items()}
    inspected = json.loads(subprocess.run(["podman", "inspect", *labels], capture_output=True, text=True, check=True).stdout)
    assert len(inspected) == 12
    # The container's env shows in its inspect data twice: Env, and the engine command that created it (CreateCommand).
    everything = {"labels": json.dumps(labels), "inspect without env": json.dumps(
        [dict(item, Config=dict(item["Config"], Env=None, CreateCommand=None)) for item in inspected])}
    files = list(files_under(bed.base, skip=("/instances/",)))
    assert any(path.endswith("placement.json") for path in files) and any(path.endswith(".html") for path in files)
    assert any("/job_events/" in path for path in files), "the runner's artifacts are searched"
    returncode, output = canary.run("teardown -vvv", inventory, "teardown.yml", "-vvv", "-e", "teardown_remove_data=true")
    assert returncode == 0, output[-3000:]
    bed.torn_down = True
    assert canary.leaks() + canary.leaks(everything) + canary.leaks({}, files) == []
