# -*- coding: utf-8 -*-
"""Retained volumes: a stateful scale-down keeps the removed instances' volumes (recorded, reported with sizes), a scale
back up reattaches each ordinal on its node, and only a confirmed removal forgets them."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.retained import retained_of, with_retained
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import (
    ScheduleError, ScheduleInputs, schedule_cluster,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_gang_schedule import hostvars

GI = 2 ** 30
HOSTS = ["a", "b", "c"]
# Each host's data filesystem holds two 4Gi volumes.
HOSTVARS = {name: hostvars(name, ansible_facts=dict(hostvars(name)["ansible_facts"], gangplank_data_filesystem={
    "path": "/var/lib/gangplank/volumes", "size": 9 * GI, "free": 9 * GI, "source": "simulated"})) for name in HOSTS}
DB = {"replicas": 3, "stateful": True, "resources": {"cpu": 1}, "anti_affinity": ["db"], "image": "localhost/db:1",
      "volumes": [{"name": "data", "path": "/var/lib/db", "size": "4Gi"}]}


def run(replicas, record=None, **changes):
    services = {"db": dict(DB, replicas=replicas), "web": {"replicas": 1, "resources": {"cpu": 1}}}
    inputs = ScheduleInputs(services=services, hosts=HOSTS, hostvars=HOSTVARS, record=copy.deepcopy(record or {}))
    outcome = schedule_cluster(dataclasses.replace(inputs, **changes))
    assert outcome.plan["feasible"], outcome.table
    return outcome


def states(outcome):
    return {row["instance"]: (row["state"], row["node"]) for row in outcome.volumes}


def test_scale_down_retains_and_scale_up_reattaches_each_ordinal_on_its_node():
    first = run(3)
    nodes = {name: placement["node"] for name, placement in first.plan["placements"].items() if name.startswith("db")}
    assert states(first) == {name: ("created", node) for name, node in nodes.items()}
    down = run(1, first.record)
    assert states(down) == {"db-0": ("kept", nodes["db-0"]), "db-1": ("retained", nodes["db-1"]),
                            "db-2": ("retained", nodes["db-2"])}
    assert down.record["retained"]["db-2"] == {"service": "db", "ordinal": 2, "node": nodes["db-2"], "nvme": None,
                                               "volumes": [{"name": "data", "where": "disk", "size": 4 * GI}]}
    assert "  retained db-2 on %s: data (disk, 4Gi); kept until removed (docs/deploy.md, Retained volumes)" \
        % nodes["db-2"] in down.table
    assert [row["size"] for row in down.volumes] == [4 * GI] * 3
    # Back to 2: db-1 goes back to its node (its data is there); db-2 stays retained.
    up = run(2, down.record)
    assert states(up) == {"db-0": ("kept", nodes["db-0"]), "db-1": ("reattached", nodes["db-1"]),
                          "db-2": ("retained", nodes["db-2"])}
    assert sorted(up.record["retained"]) == ["db-2"]
    assert up.changes["added"] == ["db-1"]
    # The same plan again changes nothing.
    again = run(2, up.record)
    assert again.changed is False and again.record["retained"] == up.record["retained"]


def test_a_retained_ordinal_is_pinned_to_its_node_even_where_another_node_would_score_better():
    first = run(3)
    down = run(1, first.record)
    node = down.record["retained"]["db-2"]["node"]
    up = run(3, down.record)
    assert up.plan["placements"]["db-2"]["node"] == node and up.plan["moves"] == []


def test_retained_disk_volumes_keep_their_space_on_their_node():
    problem = {"nodes": {"a": {"cpu": 1, "memory": 1, "disk": 9 * GI}}, "services": {"db": {"replicas": 1}},
               "previous": {}}
    retained = {"db-1": {"service": "db", "ordinal": 1, "node": "a", "nvme": None,
                         "volumes": [{"name": "data", "where": "disk", "size": 4 * GI}]}}
    assert with_retained(problem, retained)["nodes"]["a"]["disk"] == 5 * GI
    # Wanted again: it is the ordinal's previous placement instead.
    problem["services"]["db"]["replicas"] = 2
    changed = with_retained(problem, retained)
    assert changed["nodes"]["a"]["disk"] == 9 * GI and changed["previous"]["db-1"]["node"] == "a"
    assert problem["previous"] == {}            # the caller's problem is not changed


def test_a_record_entry_of_another_shape_is_skipped():
    good = {"service": "db", "ordinal": 1, "node": "a", "nvme": None, "volumes": []}
    record = {"retained": {"db-1": good, "db-2": dict(good, node="../x"), "db-3": dict(good, ordinal=-1),
                           "db-4": dict(good, volumes=[{"name": "/etc", "where": "disk", "size": 1}]), "db-5": "x"}}
    assert list(retained_of(record)) == ["db-1"]


def test_removal_needs_confirmation_and_an_instance_not_wanted_again():
    down = run(1, run(3).record)
    node = down.record["retained"]["db-2"]["node"]
    with pytest.raises(ScheduleError) as refused:
        run(1, down.record, remove_retained="db-2")
    assert refused.value.msg == (
        "remove_retained: removing the retained volumes of db-2 deletes its data on %s (data (disk, 4Gi)) for good. "
        "To do it, re-run with -e gangplank_remove_retained=db-2 -e gangplank_remove_retained_confirm=db-2 (got "
        "confirmation null); nothing was changed" % node)
    with pytest.raises(ScheduleError, match="remove_retained: \"db-9\" has no retained volumes \\(instances with "
                                            "retained volumes: db-1, db-2\\)"):
        run(1, down.record, remove_retained="db-9", remove_retained_confirm="db-9")
    with pytest.raises(ScheduleError, match="remove_retained: db-1 is wanted again"):
        run(2, down.record, remove_retained="db-1", remove_retained_confirm="db-1")
    removed = run(1, down.record, remove_retained="db-2", remove_retained_confirm="db-2",
                  volume_dir="/srv/volumes")
    assert removed.removed_retained == {"instance": "db-2", "node": node, "dirs": ["/srv/volumes/db/db-2/data"]}
    assert sorted(removed.record["retained"]) == ["db-1"] and removed.changed is True
    # Scaled up again after the removal, ordinal 2 starts with new, empty volumes wherever it fits.
    assert states(run(3, removed.record))["db-2"][0] == "created"


def test_a_site_without_volumes_records_and_reports_nothing_new():
    services = {"web": {"replicas": 2, "resources": {"cpu": 1}}}
    outcome = schedule_cluster(ScheduleInputs(services=services, hosts=HOSTS, hostvars=HOSTVARS))
    assert "retained" not in outcome.record and outcome.volumes is None and "volumes" not in outcome.result()
    # The data filesystem the facts report is left out of the problem and the record.
    assert all("disk" not in node for node in outcome.record["nodes"].values())


def test_status_lists_the_retained_volumes_with_their_sizes():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import retained_lines

    down = run(1, run(3).record)
    nodes = {name: entry["node"] for name, entry in down.record["retained"].items()}
    assert retained_lines(down.record) == ["retained volumes of db-1 on %s: data (disk, 4Gi)" % nodes["db-1"],
                                           "retained volumes of db-2 on %s: data (disk, 4Gi)" % nodes["db-2"]]
    assert retained_lines({}) == []
