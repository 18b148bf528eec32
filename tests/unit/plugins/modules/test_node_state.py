# -*- coding: utf-8 -*-
"""The node_state module's main(), run with module arguments the way ansible-core 2.19 passes them."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.modules import node_state


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch):
    return capture_module_exits(monkeypatch, warnings=[])


def run(args, check=False, diff=True):
    args = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
    with patch_module_args(args):
        try:
            node_state.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return failed.args[0]
    raise AssertionError("main() returned without exit_json or fail_json")


INSTANCES = {
    "infer-0": {
        "service": "infer",
        "ordinal": 0,
        "gpus": [{"index": 0, "uuid": "GPU-aaaa", "model": "NVIDIA H100 80GB HBM3", "memory": 85899345920}],
        "nvme": {"name": "nvme0n1", "size": 3840755982336, "mount": "/mnt/nvme0n1"},
        "sidecars": ["metrics"],
        "rank": 0,
    },
    "web-1": {"service": "web", "ordinal": 1, "gpus": [], "nvme": None, "sidecars": [], "rank": 1},
}
LABELS = {"gangplank.io/service.infer": "true", "gangplank.io/service.web": "true"}
RANKS = [["infer"], ["web"]]


@pytest.fixture
def fact(tmp_path):
    return tmp_path / "etc/ansible/facts.d/gangplank.fact"


def args_for(fact, **overrides):
    args = {"path": str(fact), "revision": 7, "labels": LABELS, "instances": INSTANCES, "ranks": RANKS}
    args.update(overrides)
    return args


def expected_text(revision=7, labels=None, instances=None, ranks=None):
    content = {"revision": revision, "labels": LABELS if labels is None else labels,
               "instances": INSTANCES if instances is None else instances, "ranks": RANKS if ranks is None else ranks}
    return json.dumps(content, sort_keys=True, indent=2) + "\n"


def test_first_write_creates_the_file_and_its_directory(fact):
    assert not fact.parent.exists()
    result = run(args_for(fact))
    assert result["changed"] is True and not result.get("failed")
    assert fact.read_bytes() == expected_text().encode("utf-8")
    assert stat.S_IMODE(fact.stat().st_mode) == 0o644
    assert result["previous_revision"] is None
    assert result["state"] == json.loads(expected_text())
    assert result["diff"] == {"before": "", "after": expected_text(), "before_header": str(fact), "after_header": str(fact)}
    assert result["warnings"] == []
    assert os.listdir(fact.parent) == ["gangplank.fact"]


def test_readable_as_the_setup_module_reads_it(fact):
    run(args_for(fact))
    # ansible.builtin.setup loads each facts.d/*.fact with json.loads and puts it under ansible_local[<name>].
    with open(fact) as handle:
        loaded = json.loads(handle.read())
    assert loaded == {"revision": 7, "labels": LABELS, "instances": INSTANCES, "ranks": RANKS}


def test_the_same_input_twice_is_unchanged_and_keeps_the_mtime(fact):
    run(args_for(fact))
    past = 1_600_000_000
    os.utime(fact, (past, past))
    before = fact.read_bytes()
    result = run(args_for(fact))
    assert result["changed"] is False
    assert "diff" not in result
    assert result["previous_revision"] == 7
    assert result["state"] == json.loads(expected_text())
    assert fact.stat().st_mtime == past
    assert fact.read_bytes() == before


def test_same_content_in_another_key_order_is_unchanged(fact):
    run(args_for(fact))
    reordered = {name: dict(reversed(list(value.items()))) for name, value in reversed(list(INSTANCES.items()))}
    assert run(args_for(fact, instances=reordered))["changed"] is False


def test_a_newer_revision_that_leaves_the_nodes_share_as_it_is_writes_nothing(fact):
    """A scale that changes another host moves the record's revision on: this node's file stays as it is."""
    run(args_for(fact))
    before = (fact.read_bytes(), fact.stat().st_mtime_ns)
    result = run(args_for(fact, revision=9))
    assert result["changed"] is False and result["previous_revision"] == 7 and result["state"]["revision"] == 7
    assert (fact.read_bytes(), fact.stat().st_mtime_ns) == before
    # A change of the share is written with the new revision.
    result = run(args_for(fact, revision=9, ranks=[["db"]]))
    assert result["changed"] is True and json.loads(fact.read_text())["revision"] == 9


def test_a_label_change_is_written_with_a_diff(fact):
    run(args_for(fact))
    labels = {"gangplank.io/service.web": "true"}
    result = run(args_for(fact, revision=8, labels=labels))
    assert result["changed"] is True
    assert result["previous_revision"] == 7
    assert result["diff"]["before"] == expected_text()
    assert result["diff"]["after"] == expected_text(revision=8, labels=labels)
    assert result["diff"]["before_header"] == result["diff"]["after_header"] == str(fact)
    assert fact.read_text() == expected_text(revision=8, labels=labels)
    assert stat.S_IMODE(fact.stat().st_mode) == 0o644


def test_no_diff_unless_asked(fact):
    result = run(args_for(fact), diff=False)
    assert result["changed"] is True and "diff" not in result


def test_check_mode_writes_nothing_but_reports_the_change(fact):
    result = run(args_for(fact), check=True)
    assert result["changed"] is True
    assert result["diff"]["before"] == "" and result["diff"]["after"] == expected_text()
    assert result["state"] == json.loads(expected_text())
    assert not fact.parent.exists()

    run(args_for(fact))
    labels = {"gangplank.io/service.web": "true"}
    result = run(args_for(fact, labels=labels), check=True)
    assert result["changed"] is True
    assert result["diff"]["before"] == expected_text() and result["diff"]["after"] == expected_text(labels=labels)
    assert result["state"]["labels"] == labels
    assert fact.read_text() == expected_text()

    assert run(args_for(fact), check=True)["changed"] is False


def test_a_corrupt_file_is_replaced_with_a_warning(fact, capture_exit):
    fact.parent.mkdir(parents=True)
    fact.write_text('{"revision": 3, "labels": ')
    result = run(args_for(fact))
    assert result["changed"] is True and not result.get("failed")
    assert result["previous_revision"] is None
    assert result["diff"]["before"] == '{"revision": 3, "labels": '
    assert fact.read_text() == expected_text()
    assert len(result["warnings"]) == 1 and str(fact) in result["warnings"][0] and "replaced" in result["warnings"][0]


def test_a_corrupt_file_in_check_mode_is_left_alone(fact):
    fact.parent.mkdir(parents=True)
    fact.write_text("not json")
    result = run(args_for(fact), check=True)
    assert result["changed"] is True and len(result["warnings"]) == 1
    assert fact.read_text() == "not json"


def test_a_file_with_another_mode_gets_0644(fact):
    run(args_for(fact))
    os.chmod(fact, 0o600)
    assert run(args_for(fact), check=True)["changed"] is True
    assert stat.S_IMODE(fact.stat().st_mode) == 0o600
    result = run(args_for(fact))
    assert result["changed"] is True
    assert stat.S_IMODE(fact.stat().st_mode) == 0o644
    assert run(args_for(fact))["changed"] is False


def test_defaults_give_empty_content(fact):
    result = run({"path": str(fact), "revision": 1})
    assert result["changed"] is True
    assert json.loads(fact.read_text()) == {"revision": 1, "labels": {}, "instances": {}, "ranks": []}


def test_absent_removes_the_file(fact):
    run(args_for(fact))
    result = run({"path": str(fact), "revision": 7, "state": "absent"}, check=True)
    assert result["changed"] is True and fact.exists()
    assert result["diff"]["before"] == expected_text() and result["diff"]["after"] == ""
    result = run({"path": str(fact), "revision": 7, "state": "absent"})
    assert result["changed"] is True
    assert result["previous_revision"] == 7 and result["state"] is None
    assert not fact.exists()
    result = run({"path": str(fact), "revision": 7, "state": "absent"})
    assert result["changed"] is False and "diff" not in result


def test_absent_removes_a_corrupt_file(fact):
    fact.parent.mkdir(parents=True)
    fact.write_text("{")
    result = run({"path": str(fact), "revision": 7, "state": "absent"})
    assert result["changed"] is True and not fact.exists()


def test_bad_input_fails_with_a_message(fact):
    result = run(args_for(fact, revision=-1))
    assert result["failed"] is True and "revision" in result["msg"]
    result = run(args_for(fact, instances={"web-0": "web"}))
    assert result["failed"] is True and result["msg"].startswith("instances.web-0:")
    assert not fact.parent.exists()


def test_a_directory_in_the_way_fails(fact):
    fact.mkdir(parents=True)
    result = run(args_for(fact))
    assert result["failed"] is True and "directory" in result["msg"]
