# -*- coding: utf-8 -*-
"""The cluster state's lock protocol (module_utils/cluster_lock.py) with real processes: take, wait, release."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils import cluster_lock


def _queue(directory, job_id, barrier, results):
    barrier.wait()
    try:
        cluster_lock.take_lock(directory, "owner-" + job_id, job_id, 3600, False, False, lock_wait=60)
        with open(os.path.join(directory, "lock.json")) as handle:
            assert json.load(handle)["job_id"] == job_id
        cluster_lock.release_lock(directory, job_id, False)
        results.put((job_id, "ran"))
    except (cluster_lock.StateError, AssertionError) as error:
        results.put((job_id, str(error)))


def at_once(target, directory, jobs, timeout):
    """Runs target(directory, job_id, barrier, results) in one real process per job, released together by the
    barrier; every job's outcome by job id. Each process must end cleanly."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(jobs))
    results = context.Queue()
    processes = [context.Process(target=target, args=(directory, job_id, barrier, results)) for job_id in jobs]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=timeout) for _job in jobs)
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    return outcomes


def test_runs_that_wait_all_get_the_lock_one_after_another(tmp_path):
    """Four real processes with lock_wait: each takes the lock in turn (never two at once) and none fails."""
    jobs = ["q%d" % number for number in range(4)]
    outcomes = at_once(_queue, str(tmp_path / "gangplank"), jobs, timeout=60)
    assert outcomes == {job_id: "ran" for job_id in jobs}


def _race(directory, job_id, barrier, results):
    barrier.wait()
    try:
        cluster_lock.take_lock(directory, "owner-" + job_id, job_id, 3600, False, False)
        results.put((job_id, "won"))
    except cluster_lock.StateError as error:
        results.put((job_id, str(error)))


def race(directory):
    """Eight processes take the lock at once; returns the winner's job id and every job's outcome."""
    outcomes = at_once(_race, directory, ["j%d" % number for number in range(8)], timeout=30)
    winners = [job_id for job_id, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1, outcomes
    with open(os.path.join(directory, "lock.json")) as handle:
        assert json.load(handle)["job_id"] == winners[0]
    return winners[0], outcomes


@pytest.mark.parametrize("attempt", range(3))
def test_racing_runs_exactly_one_gets_the_lock(tmp_path, attempt):
    winner, outcomes = race(str(tmp_path / "gangplank"))
    for job_id, outcome in outcomes.items():
        if job_id != winner:
            assert "is locked by owner-%s (job %s)" % (winner, winner) in outcome


@pytest.mark.parametrize("attempt", range(3))
def test_racing_without_the_directory_lock_still_one_wins(tmp_path, monkeypatch, attempt):
    """O_EXCL alone decides when the runs do not take turns through the flock."""
    monkeypatch.setattr(cluster_lock, "_guard", lambda directory, shared=False: contextlib.nullcontext())
    race(str(tmp_path / "gangplank"))


# lock.json as another run (or a local user) could leave it: what it holds, as the file's text.
HOSTILE_LOCKS = {
    "huge values with an escape and a line break": json.dumps({
        "owner": "mallory\x1b[2J\n" + "o" * 100000, "job_id": "j" * 100000 + "\n", "started_at": "\x1b[31m" + "s" * 275,
        "started_epoch": 1}),
    "values that are not strings": '{"owner": {"a": ["\\u001b"]}, "job_id": %s, "started_at": [null], "started_epoch": 1}'
                                   % ("9" * 4000),
    "a forged note of an unreadable file": json.dumps({"owner": "x", "unreadable": "\x1b[2J" + "u" * 100000,
                                                       "job_id": "\u2028" * 99, "started_epoch": 1}),
}


def one_bounded_line(message, limit=1000):
    assert len(message) < limit and message.isprintable(), (len(message), message[:300])


@pytest.mark.parametrize("case", sorted(HOSTILE_LOCKS))
def test_a_lock_files_values_are_shown_in_one_bounded_line(tmp_path, case, monkeypatch):
    directory = str(tmp_path / "gangplank")
    os.makedirs(directory)
    with open(os.path.join(directory, "lock.json"), "w", encoding="utf-8") as handle:
        handle.write(HOSTILE_LOCKS[case])
    messages = []
    with pytest.raises(cluster_lock.StateError) as held:
        cluster_lock.take_lock(directory, "me", "mine", 3600, False, False)
    messages.append(str(held.value))
    with pytest.raises(cluster_lock.StateError) as refused:
        cluster_lock.write_record(directory, "mine", {}, 5, False)
    messages.append(str(refused.value))
    messages += cluster_lock.release_lock(directory, "mine", False)["warnings"]
    # The job id a run gives is shown the same way.
    messages += cluster_lock.release_lock(directory, "\x1b[2J" * 5000, False)["warnings"]
    with pytest.raises(cluster_lock.StateError) as refused:
        cluster_lock.write_record(directory, "\n" * 5000, {}, 5, False)
    messages.append(str(refused.value))
    broken = cluster_lock.take_lock(directory, "me", "mine", 0, True, True)
    messages += broken["warnings"]
    # The waited-for holders: a run that waits while the file's job holds the lock, then takes it.
    calls = []

    def released(seconds):
        calls.append(seconds)
        os.remove(os.path.join(directory, "lock.json"))
    monkeypatch.setattr(cluster_lock, "_sleep", released)
    waited = cluster_lock.take_lock(directory, "me", "mine", 3600, False, False, lock_wait=60)
    messages += waited["warnings"]
    assert len(messages) == 7 and calls
    for message in messages:
        one_bounded_line(message)
