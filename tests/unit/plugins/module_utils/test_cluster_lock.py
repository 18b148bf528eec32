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
