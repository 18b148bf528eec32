# -*- coding: utf-8 -*-
"""The cluster_state module's main(), run with module arguments the way ansible-core 2.19 passes them."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.module_utils import cluster_lock
from ansible_collections.gangplank.platform.plugins.modules import cluster_state

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch):
    capture_module_exits(monkeypatch)


@pytest.fixture
def clock(monkeypatch):
    """The module's clock, set to T0; move it with clock.now = ..."""

    class Clock:
        now = T0

    monkeypatch.setattr(cluster_lock, "_now", lambda: Clock.now)
    return Clock


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: seen.append(warning))
    return seen


def run(args):
    with patch_module_args(args):
        try:
            cluster_state.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return failed.args[0]
    raise AssertionError("main() returned without exit_json or fail_json")


@pytest.fixture
def state(tmp_path):
    return tmp_path / "gangplank"


def lock(state, job_id="j1", owner="alice", **extra):
    return run(dict({"path": str(state), "action": "lock", "owner": owner, "job_id": job_id}, **extra))


def write(state, record, job_id="j1", **extra):
    return run(dict({"path": str(state), "action": "write", "job_id": job_id, "record": record}, **extra))


def unlock(state, job_id="j1", **extra):
    return run(dict({"path": str(state), "action": "unlock", "job_id": job_id}, **extra))


def read(state, **extra):
    return run(dict({"path": str(state), "action": "read"}, **extra))


def snapshot(folder):
    if not folder.exists():
        return None
    return {name: ((folder / name).read_bytes(), os.stat(folder / name).st_mtime_ns) for name in sorted(os.listdir(folder))}


def content(number):
    return {"placement": {"train": {"node%d" % number: [0, 1]}}, "node_labels": {"node%d" % number: {"role": "train"}},
            "replicas": {"train": number}, "ranks": ["node%d" % number], "nodes": {"node%d" % number: {"cpu": number}}}


def test_read_of_an_empty_directory(state):
    result = read(state)
    assert result["changed"] is False and not result.get("failed")
    assert result["lock"] is None
    assert result["path"] == str(state)
    assert result["record"] == {"revision": 0, "placement": {}, "node_labels": {}, "replicas": {}, "ranks": [], "nodes": {},
                                "down_since": {}, "retained": {}, "written_at": None, "job_id": None, "owner": None, "history": []}
    assert not state.exists()


def test_lock_creates_the_lock_file(state, clock):
    result = lock(state)
    assert result["changed"] is True and not result.get("failed")
    assert result["lock"] == {"owner": "alice", "job_id": "j1", "started_at": "2023-11-14T22:13:20Z", "started_epoch": T0}
    assert result["record"]["revision"] == 0
    assert json.loads((state / "lock.json").read_text()) == result["lock"]
    assert stat.S_IMODE(os.stat(state / "lock.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o755
    assert read(state)["lock"] == result["lock"]


def test_second_lock_by_another_job_fails_naming_the_holder(state, clock):
    lock(state)
    clock.now = T0 + 600
    before = snapshot(state)
    result = lock(state, job_id="j2", owner="bob")
    assert result["failed"] is True
    assert result["msg"] == (
        "the cluster state at %s is locked by alice (job j1) since 2023-11-14T22:13:20Z (600s ago): another run is in progress. "
        "If that run is dead, re-run with -e gangplank_break_lock=true (the lock is older than lock_timeout=3600s only after 3000s more)" % state)
    assert result["lock"]["job_id"] == "j1"
    assert snapshot(state) == before


def test_held_message_when_the_lock_is_already_stale(state, clock):
    lock(state)
    clock.now = T0 + 7200
    result = lock(state, job_id="j2", owner="bob")
    assert result["failed"] is True
    assert "locked by alice (job j1) since 2023-11-14T22:13:20Z (7200s ago)" in result["msg"]
    assert result["msg"].endswith("(the lock is older than lock_timeout=3600s, so it can be broken now)")


def test_same_job_relocks_without_change(state, clock):
    first = lock(state)
    clock.now = T0 + 10
    again = lock(state, owner="alice again")
    assert again["changed"] is False and not again.get("failed")
    assert again["lock"] == first["lock"]


def test_a_young_lock_is_not_broken_even_with_break_lock(state, clock, warnings):
    lock(state)
    clock.now = T0 + 3600  # exactly lock_timeout: not older than it
    result = lock(state, job_id="j2", owner="bob", break_lock=True)
    assert result["failed"] is True
    assert result["msg"].endswith("(break_lock is set, but the lock is older than lock_timeout=3600s only after 1s more)")
    assert json.loads((state / "lock.json").read_text())["job_id"] == "j1"


def test_a_stale_lock_is_kept_without_break_lock(state, clock):
    lock(state)
    clock.now = T0 + 3601
    result = lock(state, job_id="j2", owner="bob")
    assert result["failed"] is True
    assert json.loads((state / "lock.json").read_text())["job_id"] == "j1"


def test_a_stale_lock_is_broken_with_break_lock(state, clock, warnings):
    old = lock(state)["lock"]
    clock.now = T0 + 3601
    result = lock(state, job_id="j2", owner="bob", break_lock=True)
    assert result["changed"] is True and not result.get("failed")
    assert result["broken_lock"] == old
    assert result["lock"]["job_id"] == "j2" and result["lock"]["started_epoch"] == T0 + 3601
    assert json.loads((state / "lock.json").read_text()) == result["lock"]
    assert len(warnings) == 1 and "alice (job j1)" in warnings[0] and "broke the lock" in warnings[0]
    assert sorted(os.listdir(state)) == ["lock.json"]


def test_a_lock_written_by_hand_long_ago_is_broken(state, clock, warnings):
    state.mkdir()
    (state / "lock.json").write_text(json.dumps({"owner": "carol", "job_id": "j0", "started_at": "2023-11-13T00:00:00Z",
                                                 "started_epoch": T0 - 100000}))
    result = lock(state, job_id="j2", owner="bob", break_lock=True, lock_timeout=60)
    assert result["changed"] is True
    assert result["broken_lock"]["owner"] == "carol"


def test_an_unreadable_lock_counts_as_held_and_ages_by_its_mtime(state, clock, warnings):
    state.mkdir()
    (state / "lock.json").write_text("")
    os.utime(state / "lock.json", (T0 - 10, T0 - 10))
    result = lock(state, job_id="j2", owner="bob")
    assert result["failed"] is True
    assert "locked by an unknown holder (%s is empty, not a JSON object) (job unknown)" % (state / "lock.json") in result["msg"]
    assert "(10s ago)" in result["msg"]
    clock.now = T0 + 3600
    assert lock(state, job_id="j2", owner="bob", break_lock=True)["changed"] is True


def test_write_without_the_lock_fails(state, clock):
    result = write(state, content(1))
    assert result["failed"] is True
    assert result["msg"] == ("cannot write the cluster state at %s: it is not locked. Take the lock first with action=lock job_id=j1" % state)
    assert not (state / "placement.json").exists()


def test_write_under_another_jobs_lock_fails_naming_it(state, clock):
    lock(state, job_id="j2", owner="bob")
    result = write(state, content(1))
    assert result["failed"] is True
    assert "cannot write the cluster state at %s for job j1: it is locked by bob (job j2)" % state in result["msg"]
    assert not (state / "placement.json").exists()


def test_write_increments_the_revision_and_keeps_history(state, clock):
    lock(state)
    for number in range(1, 5):
        clock.now = T0 + number
        result = write(state, content(number), history=3)
        assert result["changed"] is True and not result.get("failed")
    record = result["record"]
    assert record["revision"] == 4
    assert (record["placement"], record["replicas"], record["job_id"], record["owner"]) == (content(4)["placement"], {"train": 4}, "j1", "alice")
    assert record["written_at"] == "2023-11-14T22:13:24Z"
    assert [entry["revision"] for entry in record["history"]] == [3, 2]
    assert record["history"][0] == dict(content(3), revision=3, written_at="2023-11-14T22:13:23Z", job_id="j1", owner="alice", down_since={}, retained={})
    assert json.loads((state / "placement.json").read_text()) == record
    assert stat.S_IMODE(os.stat(state / "placement.json").st_mode) == 0o600
    assert read(state)["record"] == record
    assert sorted(os.listdir(state)) == ["lock.json", "placement.json"]


def test_history_of_one_keeps_only_the_current_revision(state, clock):
    lock(state)
    write(state, content(1), history=1)
    assert write(state, content(2), history=1)["record"]["history"] == []


def test_an_unchanged_record_is_not_written(state, clock):
    lock(state)
    write(state, content(1))
    before = snapshot(state)
    clock.now = T0 + 100
    result = write(state, dict(content(1), replicas={"train": "1"}))
    assert result["changed"] is False and not result.get("failed")
    assert result["record"]["revision"] == 1
    assert snapshot(state) == before


def test_a_record_of_an_older_version_without_nodes_is_read_as_empty_nodes(state, clock):
    lock(state)
    write(state, content(1))
    older = json.loads((state / "placement.json").read_text())
    del older["nodes"], older["down_since"]
    (state / "placement.json").write_text(json.dumps(older))
    result = read(state)
    assert not result.get("failed") and result["record"]["nodes"] == {} and result["record"]["down_since"] == {}
    assert result["record"]["placement"] == content(1)["placement"]
    assert write(state, {"nodes": {"node1": {"cpu": 2}}})["record"]["revision"] == 2


def test_keys_left_out_keep_their_value_and_read_only_keys_are_ignored(state, clock):
    lock(state)
    first = write(state, content(1))["record"]
    result = write(state, dict(first, replicas={"train": 5}))
    assert result["changed"] is True
    assert result["record"]["revision"] == 2
    assert result["record"]["placement"] == content(1)["placement"]
    assert write(state, {"replicas": {"train": 5}})["changed"] is False


@pytest.mark.parametrize("record, says", [
    ({"placment": {}}, "record has unknown keys placment; it takes placement, node_labels, replicas, ranks, nodes, down_since, retained"),
    ({"nodes": []}, "record.nodes must be a mapping, got list"),
    ({"down_since": [1]}, "record.down_since must be a mapping, got list"),
    ({"ranks": {}}, "record.ranks must be a list, got dict"),
    ({"replicas": {"train": -1}}, "record.replicas.train must be a whole number of 0 or more, got -1"),
])
def test_a_bad_record_fails(state, clock, record, says):
    lock(state)
    result = write(state, record)
    assert result["failed"] is True and result["msg"] == says


def test_diff_of_the_placement(state, clock):
    lock(state)
    result = write(state, content(1), _ansible_diff=True)
    assert result["diff"]["before"] == "{}\n"
    assert result["diff"]["after"] == json.dumps(content(1)["placement"], sort_keys=True, indent=2) + "\n"
    assert result["diff"]["before_header"].endswith("placement.json placement (revision 0)")
    assert result["diff"]["after_header"].endswith("placement.json placement (revision 1)")


def test_unlock(state, clock):
    lock(state)
    result = unlock(state)
    assert result["changed"] is True and result["lock"] is None
    assert not (state / "lock.json").exists()
    assert unlock(state)["changed"] is False


def test_unlock_by_another_job_keeps_the_lock(state, clock, warnings):
    lock(state)
    result = unlock(state, job_id="j2")
    assert result["changed"] is False and not result.get("failed")
    assert result["lock"]["job_id"] == "j1"
    assert (state / "lock.json").exists()
    assert len(warnings) == 1 and "held by alice (job j1)" in warnings[0] and "not by job j2" in warnings[0]


def test_unlock_of_a_missing_directory(state):
    assert unlock(state)["changed"] is False
    assert not state.exists()


def test_check_mode_writes_nothing(state, clock):
    check = {"_ansible_check_mode": True}
    result = lock(state, **check)
    assert result["changed"] is True and result["lock"]["job_id"] == "j1"
    assert not state.exists()

    result = write(state, content(1), **check)
    assert result["changed"] is True and result["record"]["revision"] == 1
    assert not state.exists()

    lock(state)
    before = snapshot(state)
    assert lock(state, **check)["changed"] is False
    result = write(state, content(1), **check)
    assert result["changed"] is True and result["record"]["owner"] == "alice"
    assert unlock(state, **check)["changed"] is True
    assert snapshot(state) == before


def test_check_mode_still_refuses_a_held_lock(state, clock):
    lock(state)
    before = snapshot(state)
    result = lock(state, job_id="j2", owner="bob", _ansible_check_mode=True)
    assert result["failed"] is True and "locked by alice (job j1)" in result["msg"]
    assert write(state, content(1), job_id="j2", _ansible_check_mode=True)["failed"] is True
    assert snapshot(state) == before


def test_check_mode_break_lock_reports_without_breaking(state, clock, warnings):
    lock(state)
    before = snapshot(state)
    clock.now = T0 + 4000
    result = lock(state, job_id="j2", owner="bob", break_lock=True, _ansible_check_mode=True)
    assert result["changed"] is True and result["broken_lock"]["job_id"] == "j1"
    assert snapshot(state) == before


@pytest.mark.parametrize("text, says", [
    ('{"revision": 3, "placement": {', "is not valid JSON"),
    ('{"revision": "three", "placement": {}, "node_labels": {}, "replicas": {}, "ranks": []}', "is corrupt: 'revision' is \"three\""),
    ('{"revision": 3, "placement": [], "node_labels": {}, "replicas": {}, "ranks": []}', "is corrupt: 'placement' is [], not a JSON object"),
])
def test_a_corrupt_record_fails_and_is_kept(state, clock, text, says):
    state.mkdir()
    (state / "placement.json").write_text(text)
    for result in (read(state), lock(state)):
        assert result["failed"] is True
        assert str(state / "placement.json") in result["msg"] and says in result["msg"]
        assert "The previous revisions are inside it, under 'history'" in result["msg"]
    assert not (state / "lock.json").exists()
    (state / "lock.json").write_text(json.dumps(cluster_lock.new_lock("alice", "j1", T0)))
    assert write(state, content(1))["failed"] is True
    assert (state / "placement.json").read_text() == text
    result = unlock(state)
    assert result["changed"] is True and result["record"] is None


@pytest.mark.parametrize("args, says", [
    ({"action": "lock", "job_id": "j1"}, "owner"),
    ({"action": "write", "job_id": "j1"}, "record"),
    ({"action": "unlock"}, "job_id"),
    ({"action": "lock", "job_id": " ", "owner": "me"}, "job_id must not be empty"),
    ({"action": "write", "job_id": "j1", "record": {}, "history": 0}, "history must be 1 or more"),
])
def test_argument_mistakes(state, args, says):
    result = run(dict(args, path=str(state)))
    assert result["failed"] is True and says in result["msg"]


@pytest.fixture
def sleeps(monkeypatch, clock):
    """The module's waits between looks at a held lock: recorded, and they move the clock instead of sleeping."""
    seen = []

    def sleep(seconds):
        seen.append(seconds)
        clock.now += seconds

    monkeypatch.setattr(cluster_lock, "_sleep", sleep)
    return seen


def test_a_held_lock_is_waited_for_and_taken_once_released(state, clock, sleeps, monkeypatch, warnings):
    lock(state)
    released_after = []

    def sleep(seconds):
        sleeps.append(seconds)
        clock.now += seconds
        if clock.now - T0 >= 7 and not released_after:       # the other run ends 7 s into the wait
            released_after.append(clock.now - T0)
            assert unlock(state)["changed"] is True

    monkeypatch.setattr(cluster_lock, "_sleep", sleep)
    result = lock(state, job_id="j2", owner="bob", lock_wait=60)
    assert not result.get("failed") and result["changed"] is True
    assert result["lock"]["job_id"] == "j2" and result["waited"] == int(released_after[0])
    assert sleeps[0] == 1.0 and max(sleeps) <= 5.0 and sum(sleeps) < 60
    assert any("waited %ds for the cluster lock" % result["waited"] in warning and "j1" in warning for warning in warnings)


def test_a_lock_still_held_after_lock_wait_fails_saying_how_long_it_waited(state, clock, sleeps):
    lock(state)
    before = snapshot(state)
    result = lock(state, job_id="j2", owner="bob", lock_wait=30)
    assert result["failed"] is True and "is locked by alice (job j1)" in result["msg"]
    assert result["msg"].endswith("waited 30s for it (lock_wait=30s)")
    assert sum(sleeps) == 30 and max(sleeps) <= 5.0      # never sleeps past the end of the wait
    assert snapshot(state) == before


def test_no_wait_by_default(state, clock, sleeps):
    lock(state)
    result = lock(state, job_id="j2", owner="bob")
    assert result["failed"] is True and sleeps == [] and "waited" not in result["msg"]


def test_waiting_for_the_own_lock_does_not_happen(state, clock, sleeps):
    lock(state)
    result = lock(state, lock_wait=60)
    assert result["changed"] is False and sleeps == [] and "waited" not in result


@pytest.mark.parametrize("value", [-1, cluster_lock.MAX_LOCK_WAIT + 1])
def test_lock_wait_out_of_bounds_is_refused(state, value):
    result = lock(state, lock_wait=value)
    assert result["failed"] is True and "lock_wait must be 0 to 86400 seconds, got %d" % value in result["msg"]
    assert not state.exists()


def test_min_revision_lets_a_control_host_that_missed_writes_catch_up_with_the_same_number(state, clock):
    """A control host that was down has an older revision; the run writes the newest revision + 1 to every control host,
    so the returning one can never later pass for the newest with older content."""
    lock(state)
    assert write(state, content(1))["record"]["revision"] == 1
    result = write(state, content(2), min_revision=8)
    assert result["changed"] is True and result["record"]["revision"] == 8
    assert [entry["revision"] for entry in result["record"]["history"]] == [1]
    # An up-to-date host gets the current revision + 1 when that is higher; the same content changes nothing.
    assert write(state, content(3), min_revision=2)["record"]["revision"] == 9
    assert write(state, content(3), min_revision=50)["changed"] is False


@pytest.mark.parametrize("value", [-1, 2 ** 53 + 1])
def test_a_bad_min_revision_fails_and_writes_nothing(state, clock, value):
    lock(state)
    result = write(state, content(1), min_revision=value)
    assert result["failed"] is True and result["msg"] == "min_revision must be 0 to %d, got %d" % (2 ** 53, value)
    assert not (state / "placement.json").exists()
