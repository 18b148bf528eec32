# -*- coding: utf-8 -*-
"""playbooks/scale.yml end to end on a copy of the local test bed, as AWX's "Scale service" runs it:
scale up and down, refusals that change nothing (beyond the quota, a service not marked
scalable, a bad count), the recorded count surviving site.yml, and a no-op scale.
The demo's workers are scalable with a quota of 600m CPU (six workers of 100m)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures, summaries, task_results

HOSTS = {"node1": ("scale-n1", "127.0.0.51"), "node2": ("scale-n2", "127.0.0.52"), "node3": ("scale-n3", "127.0.0.53")}
NAMES = tuple(name for name, _address in HOSTS.values())
# The facts role's first task on every host (it also checks the roles' inputs there).
FACTS_READ = ("Check the roles' inputs on this host, and reuse the hardware facts of the last full gathering"
              " while the hardware is unchanged")


def containers():
    return containers_of(NAMES)


def workers(found):
    return sorted(labels["gangplank.io/instance"] for _state, _at, labels in found.values()
                  if labels["gangplank.io/service"] == "worker")


def artifacts(report):
    """What set_stats hands to the AWX job's artifacts."""
    return report["global_custom_stats"]["gangplank_scale"]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("scale"), HOSTS)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def record(bed):
    return json.loads((bed.state() / "placement.json").read_text())


def test_scale_up_starts_only_the_new_instances(bed):
    before = containers()
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=5")
    assert returncode == 0, failures(report)
    after = containers()
    assert workers(after) == ["worker-0", "worker-1", "worker-2", "worker-3", "worker-4"]
    assert all(state == "running" for state, _at, _labels in after.values())
    # Unaffected containers keep their start times.
    assert all(after[name][1] == before[name][1] for name in before)
    assert record(bed)["replicas"] == {"worker": 5}
    # The demo asks for the local proxy: every host that answers runs the deploy role, so that its proxy follows the
    # endpoints (docs/connecting-services.md), and only the hosts of the new workers start anything; every host's facts
    # were reused, not gathered again.
    new_nodes = {labels["gangplank.io/node"] for _state, _at, labels in after.values()
                 if labels["gangplank.io/instance"] in ("worker-3", "worker-4")}
    lines = summaries(report)
    assert set(lines) == set(NAMES), lines
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") == (host not in new_nodes)
               for host, line in lines.items()), lines
    reused = next(task_results(report, FACTS_READ))
    assert {host: result["valid"] for host, result in reused.items()} == {host: True for host in NAMES}
    # A host whose facts were reused ends the facts role on the controller: no host reaches the gathering.
    assert all(result.get("skipped") for results in task_results(report, "Read the GPUs") for result in results.values())
    # Only the hosts that got the workers had their fact files written (the others hold their share already).
    written = [host for results in task_results(report, "Write this node's labels and bindings")
               for host, result in results.items() if not result.get("skipped")]
    assert sorted(written) == sorted(new_nodes), written
    result = artifacts(report)
    assert result["service"] == "worker" and int(result["replicas"]) == 5
    assert [item["instance"] for item in result["instances"]] == ["worker-%d" % n for n in range(5)]
    assert all(item["address"] in dict(HOSTS.values()).values() for item in result["instances"])


def test_the_recorded_count_survives_site_yml_and_a_no_op_scale_changes_nothing(bed):
    before = containers()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=5")
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    assert containers() == before


def test_check_mode_shows_the_plan_and_changes_nothing(bed):
    before, kept = containers(), record(bed)
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=6", "--check")
    assert returncode == 0, failures(report)
    planned = next(task_results(report, "Plan every service instance at once"))
    assert next(iter(planned.values()))["changes"]["added"] == ["worker-5"]
    assert containers() == before and record(bed) == kept


@pytest.mark.parametrize("extra, expected", [
    (("-e", "service=worker", "-e", "replicas=7"), "would take quota workers to"),
    (("-e", "service=db", "-e", "replicas=2"), 'scale.service: got "db"; it is not scalable'),
    (("-e", "service=worker", "-e", "replicas=-1"), 'scale.replicas: got "-1"; expected an integer >= 0'),
    (("-e", "service=nope", "-e", "replicas=1"), "expected one of the catalog's scalable services (infer, worker)"),
    (("-e", "service=worker",), "scale.yml needs -e service=NAME and either -e replicas=N or -e reset=true"),
])
def test_a_refused_scale_names_the_reason_and_changes_nothing(bed, extra, expected):
    before, kept = containers(), record(bed)
    returncode, report = bed.playbook("scale.yml", *extra)
    assert returncode != 0
    assert any(expected in message for message in failures(report)), failures(report)
    assert containers() == before and record(bed) == kept
    assert not (bed.state() / "lock.json").exists()


def test_scale_down_removes_the_highest_ordinals_and_reset_restores_the_catalog(bed):
    before = containers()
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=2")
    assert returncode == 0, failures(report)
    after = containers()
    assert workers(after) == ["worker-0", "worker-1"]
    assert all(after[name][1] == before[name][1] for name in after)
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "reset=true")
    assert returncode == 0, failures(report)
    assert workers(containers()) == ["worker-0", "worker-1", "worker-2"] and record(bed)["replicas"] == {}


def test_a_host_whose_facts_inputs_changed_is_read_again(bed):
    """Another NVMe label on one host (a host variable) makes its stored facts stale: it is gathered again."""
    host = NAMES[0]
    extra = bed.base / "host_vars"
    extra.mkdir(exist_ok=True)
    (extra / ("%s.yml" % host)).write_text(json.dumps({"gangplank_nvme_labels": {"nvme0n1": ["cache", "scratch"]}}))
    try:
        returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=3")
    finally:
        (extra / ("%s.yml" % host)).unlink()
    assert returncode == 0, failures(report)
    reused = next(task_results(report, FACTS_READ))
    assert {name: result["valid"] for name, result in reused.items()} == {name: name != host for name in NAMES}
    gathered = next(task_results(report, "Read the GPUs"))
    assert [name for name, result in gathered.items() if not result.get("skipped")] == [host]
    nvme = next(task_results(report, "Read the NVMe devices"))[host]["ansible_facts"]["gangplank_nvme"]
    assert [device["labels"] for device in nvme] == [["cache", "scratch"]]
    # No host's instances changed: every host that answers looked at its proxy (the demo asks for it) and changed
    # nothing, and the lock the schedule kept is released.
    lines = summaries(report)
    assert set(lines) == set(NAMES) and all(line.startswith("start 0 [], restart 0 [], stop 0 []")
                                            for line in lines.values()), lines
    assert all(report["stats"][name]["changed"] == 0 for name in NAMES if name != host), report["stats"]
    assert not (bed.state() / "lock.json").exists()
