# -*- coding: utf-8 -*-
"""bindings_to_write: only the hosts whose fact file does not hold their share of the plan (or whose instances change)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.bindings_to_write import bindings_to_write

INSTANCE = {"service": "worker", "ordinal": 0, "node": "n1", "gpus": [], "ports": [8080]}
PLAN = {"hosts": {"n1": {"labels": {"zone": "east"}, "instances": {"worker-0": INSTANCE}},
                  "n2": {"labels": {"zone": "west"}, "instances": {}}},
        "ranks": [["worker"]], "hosts_changed": []}


def file_of(host, revision=3):
    return {"revision": revision, "labels": PLAN["hosts"][host]["labels"], "instances": PLAN["hosts"][host]["instances"],
            "ranks": PLAN["ranks"]}


def test_files_that_hold_the_share_are_left_whatever_their_revision():
    assert bindings_to_write(PLAN, ["n1", "n2"], {"n1": file_of("n1"), "n2": file_of("n2", revision=1)}) == []


def test_a_file_not_read_damaged_or_different_is_written():
    assert bindings_to_write(PLAN, ["n1", "n2"], {"n1": None}) == ["n1", "n2"]
    assert bindings_to_write(PLAN, ["n1", "n2"], {"n1": file_of("n1"), "n2": dict(file_of("n2"), labels={})}) == ["n2"]
    assert bindings_to_write(PLAN, ["n1"], {"n1": dict(file_of("n1"), ranks=[])}) == ["n1"]
    assert bindings_to_write(PLAN, ["n1"], {"n1": dict(file_of("n1"), revision=True)}) == ["n1"]
    assert bindings_to_write(PLAN, ["n1"], {"n1": dict(file_of("n1"), extra=1)}) == ["n1"]
    assert bindings_to_write(PLAN, ["n1"], {"n1": ["not", "a", "mapping"]}) == ["n1"]


def test_hosts_whose_instances_change_are_written_even_when_the_file_read_earlier_matched():
    plan = dict(PLAN, hosts_changed=["n2"])
    assert bindings_to_write(plan, ["n1", "n2"], {"n1": file_of("n1"), "n2": file_of("n2")}) == ["n2"]


def test_values_compare_as_a_reader_of_the_json_file_sees_them():
    plan = dict(PLAN, ranks=[("worker",)])
    assert bindings_to_write(plan, ["n2"], {"n2": dict(file_of("n2"), ranks=[["worker"]])}) == []


def test_bad_input_is_a_clear_error():
    with pytest.raises(AnsibleFilterError, match="the plan has no host n9"):
        bindings_to_write(PLAN, ["n9"], {})
    with pytest.raises(AnsibleFilterError, match="expected a gang_schedule result"):
        bindings_to_write([], ["n1"], {})
    with pytest.raises(AnsibleFilterError, match="read: expected a mapping"):
        bindings_to_write(PLAN, ["n1"], None)


def test_the_fact_files_are_read_from_hostvars_as_the_facts_role_set_them():
    hostvars = {"n1": {"ansible_facts": {"gangplank_node_bindings": file_of("n1")}},
                "n2": {"ansible_facts": {}}, "n3": {}}
    plan = dict(PLAN, hosts=dict(PLAN["hosts"], n3={"labels": {}, "instances": {}}))
    assert bindings_to_write(plan, ["n1", "n2", "n3"], hostvars=hostvars) == ["n2", "n3"]
    hostvars["n2"]["ansible_facts"]["gangplank_node_bindings"] = file_of("n2")
    assert bindings_to_write(plan, ["n1", "n2"], hostvars=hostvars) == []


def test_read_and_hostvars_are_one_or_the_other():
    with pytest.raises(AnsibleFilterError, match="give either read or hostvars"):
        bindings_to_write(PLAN, ["n1"])
    with pytest.raises(AnsibleFilterError, match="give either read or hostvars"):
        bindings_to_write(PLAN, ["n1"], {}, hostvars={})
    with pytest.raises(AnsibleFilterError, match="hostvars: expected Ansible's hostvars, got list"):
        bindings_to_write(PLAN, ["n1"], hostvars=[])
