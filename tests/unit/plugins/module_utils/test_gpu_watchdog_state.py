# -*- coding: utf-8 -*-
"""The GPU watchdog's files on the collection's side: the config from the bindings, the state file reader (hostile
files are errors naming the file and field), the lines and rows status and the next run show."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.gangplank.platform.plugins.filter.gpu_watchdog_wanted import gpu_watchdog_wanted
from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.gpu_watchdog_state import (
    StateError, condition_lines, event_lines, parse_state, render_share_rows, share_gpus, share_rows, watchdog_config,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import gpu_status, has_gpu_instances, status_report

GIB = 1 << 30
GPU, WHOLE = "GPU-aaaa", "GPU-wwww"
INSTANCES = {"infer-0": {"service": "infer", "gpus": [{"index": 0, "uuid": GPU, "memory": 20 * GIB, "cores": 25}]},
             "infer-1": {"service": "infer", "gpus": [{"index": 0, "uuid": GPU, "memory": 8 * GIB}]},
             "train-0": {"service": "train", "gpus": [{"index": 1, "uuid": WHOLE, "memory": 80 * GIB}]},
             "web-0": {"service": "web"}}
FACTS = [{"uuid": GPU, "memory_total": 80 * GIB}, {"uuid": WHOLE, "memory_total": 80 * GIB}]


def state(**change):
    document = {"version": 1, "pid": 321, "started": 1000.0, "last_poll": 2000.0, "source": "nvml", "policy": "warn",
                "grace": 30, "interval": 5, "config_sha256": "x", "error": "", "notes": [], "seq": 2,
                "instances": {"infer-0": {"container": "n1-infer-0", "enforced": True, "grants": {GPU: 20 * GIB},
                                          "cores": {GPU: 25}, "used": {GPU: 24 * GIB}, "pids": [7], "over_since": 1950.0,
                                          "action": "warned", "action_at": 1980.0},
                              "infer-1": {"container": "n1-infer-1", "enforced": True, "grants": {GPU: 8 * GIB},
                                          "cores": {}, "used": {GPU: 4 * GIB}, "pids": [8], "over_since": None,
                                          "action": None, "action_at": None, "last_action": "stopped",
                                          "last_action_at": 1500.0}},
                "bypasses": [{"pid": 99, "gpu": GPU, "used": 12 * GIB, "reason": "not in a container"}],
                "servers": [{"pid": 50, "gpu": GPU, "used": 66 << 20, "instance": "infer-0"}],
                "events": [{"seq": 1, "at": 1900.0, "kind": "bypass", "instance": None, "text": "pid 99 ..."},
                           {"seq": 2, "at": 1980.0, "kind": "warn", "instance": "infer-0", "text": "infer-0 uses ..."}]}
    document.update(change)
    return document


def test_the_config_holds_each_gpu_instances_grants_and_whether_the_share_is_enforced():
    config = watchdog_config("n1", INSTANCES, FACTS, sharing="mps", policy="stop", grace=10, directory="/d")
    assert config["instances"] == {
        "infer-0": {"container": "n1-infer-0", "grants": {GPU: 20 * GIB}, "cores": {GPU: 25}, "enforced": True},
        "infer-1": {"container": "n1-infer-1", "grants": {GPU: 8 * GIB}, "cores": {}, "enforced": True},
        # A whole GPU is the instance's: nothing to enforce.
        "train-0": {"container": "n1-train-0", "grants": {WHOLE: 80 * GIB}, "cores": {}, "enforced": False}}
    assert (config["state_file"], config["source"], config["simulated_file"], config["policy"]) == (
        "/d/state.json", "nvml", "", "stop")
    advisory = watchdog_config("n1", INSTANCES, FACTS, sharing="none", simulated=True, directory="/d")
    assert not any(entry["enforced"] for entry in advisory["instances"].values())
    assert advisory["simulated_file"] == "/d/simulated-processes.json"
    with pytest.raises(ValueError, match=r"instances.x.gpus\[0\]: expected a uuid and a memory grant"):
        watchdog_config("n1", {"x": {"gpus": [{"uuid": "GPU-1\n", "memory": 1}]}}, [])
    with pytest.raises(ValueError, match="sharing"):
        watchdog_config("n1", {}, [], sharing="hami")


def test_share_gpus_counts_share_instances_and_leaves_whole_gpus_out():
    assert share_gpus(INSTANCES, {WHOLE: 80 * GIB}) == {GPU: 2}
    assert share_gpus(INSTANCES) == {GPU: 2, WHOLE: 1}          # a GPU of unknown size counts as shared


def test_the_state_file_is_read_with_every_field_checked():
    parsed = parse_state(json.dumps(state()), "/s/state.json")
    assert parsed["instances"]["infer-0"]["used"] == {GPU: 24 * GIB} and parsed["seq"] == 2
    assert parsed["bypasses"][0]["reason"] == "not in a container" and parsed["servers"][0]["instance"] == "infer-0"


@pytest.mark.parametrize("text, field", [
    ("{", "is not JSON"), ("[]", "the document: expected a JSON object"), (b"\xff", "is not UTF-8 text"),
    (json.dumps(state(version=2)), "version: expected 1"),
    (json.dumps(state(pid=-1)), "pid: expected a whole number"),
    (json.dumps(state(last_poll="yesterday")), "last_poll: expected a time"),
    (json.dumps(state(policy="kill")), "policy: expected one of warn, stop"),
    (json.dumps(state(instances=[])), "instances: expected an object"),
    (json.dumps(state(instances={"a\nb": {}})), r"instances.a\?b: expected a string of at most 253 characters of plain"),
    (json.dumps(state(instances={"i": dict(state()["instances"]["infer-0"], used={GPU: 2 ** 60})})), "instances.i.used"),
    (json.dumps(state(instances={"i": dict(state()["instances"]["infer-0"], action="nuked")})), "instances.i.action"),
    (json.dumps(state(bypasses=[{"pid": 1, "gpu": GPU, "used": None}])), r"bypasses\[0\].reason"),
    (json.dumps(state(bypasses=[{}] * 2000)), "bypasses: expected a list of at most 1024"),
    (json.dumps(state(events=[{"kind": "explode"}])), r"events\[0\]: expected an object with a kind"),
    ("x" * (5 << 20), "is larger than"),
])
def test_a_state_file_that_is_not_the_watchdogs_is_an_error_naming_the_file_and_field(text, field):
    with pytest.raises(StateError, match="^the GPU watchdog's state file /s/state.json.*" + field):
        parse_state(text, "/s/state.json")


def test_control_characters_in_texts_are_not_passed_on():
    parsed = parse_state(json.dumps(state(error="bad\x1b[31m news")), "s")
    assert parsed["error"] == "bad?[31m news"


def test_lines_name_new_events_and_what_is_wrong_now():
    parsed = parse_state(json.dumps(state()), "s")
    assert event_lines("n1", parsed, after=1) == ["n1: GPU watchdog warn: infer-0 uses ..."]
    assert condition_lines("n1", parsed, now=2010) == [
        "n1: GPU watchdog: infer-0 over its grant on %s since 60s, warned" % GPU,
        "n1: GPU watchdog: bypass: pid 99 on %s uses 12.0 GiB (not in a container)" % GPU]
    assert condition_lines("n1", parsed, now=2100)[0] == "n1: GPU watchdog: no poll for 100s (pid 321): it is not running"


def test_share_rows_show_used_against_granted_the_sm_share_and_enforcement():
    parsed = parse_state(json.dumps(state()), "s")
    rows = share_rows("n1", INSTANCES, parsed, "mps")
    assert [(row["instance"], row["used"], row["granted"], row["cores"], row["sharing"], row["watchdog"]) for row in rows] == [
        ("infer-0", 24 * GIB, 20 * GIB, 25, "enforced (mps)", "warned"),
        ("infer-1", 4 * GIB, 8 * GIB, None, "enforced (mps)", "ok (last: stopped)"),
        ("train-0", None, 80 * GIB, None, "enforced (mps)", "no data")]
    lines = render_share_rows(rows)
    assert lines[0].split() == ["node", "instance", "gpu", "used/granted", "GiB", "sm", "%", "sharing", "watchdog"]
    assert lines[1].split() == ["n1", "infer-0", GPU, "24.0/20.0", "25", "enforced", "(mps)", "warned"]
    assert lines[3].split()[3:5] == ["?/80.0", "-"]
    assert share_rows("n1", INSTANCES, None, "none")[0]["sharing"] == "advisory" and render_share_rows([]) == []


def test_status_reads_the_state_from_slurp_and_names_a_missing_or_bad_file():
    content = base64.b64encode(json.dumps(state()).encode()).decode()
    found = gpu_status("n1", INSTANCES, {"content": content}, "/s/state.json", "mps", now=2001)
    assert found["shares"][0]["used"] == 24 * GIB and len(found["watchdog_lines"]) == 2
    missing = gpu_status("n1", INSTANCES, {"failed": True, "msg": "file not found: /s/state.json"}, "/s/state.json")
    assert missing["watchdog_lines"] == ["n1: GPU watchdog: it has not run here (no /s/state.json)"]
    assert missing["shares"][0]["watchdog"] == "no data" and missing["shares"][0]["sharing"] == "advisory"
    bad = gpu_status("n1", INSTANCES, {"content": base64.b64encode(b"[1]").decode()}, "/s/state.json")
    assert bad["watchdog_lines"] == ["n1: the GPU watchdog's state file /s/state.json: the document: expected a JSON object"]
    assert gpu_status("n1", INSTANCES, {"content": "!!"}, "/s/state.json")["watchdog_lines"][0].endswith("is not base64")
    assert has_gpu_instances(INSTANCES) and not has_gpu_instances({"web-0": {"service": "web"}}) and not has_gpu_instances(None)


def test_the_report_shows_the_gpu_lines_apart_from_the_table():
    content = base64.b64encode(json.dumps(state()).encode()).decode()
    status = {"rows": [], "bound": {}, "gpus": []}
    status.update(gpu_status("n1", INSTANCES, {"content": content}, "/s/state.json", "mps", now=2001))
    report = status_report(["n1", "n2"], {"n1": status, "n2": {"rows": [], "bound": {}, "gpus": []}}, {})
    assert report["lines"] == ["rank  node  instance  service  container  state  health  ports",
                               "0 of 0 container(s) running and healthy"]
    assert report["gpu_lines"][0].startswith("node  instance") and report["gpu_lines"][-1].startswith("n1: GPU watchdog: bypass")
    assert "infer-0" in status_report(["n1"], {"n1": status}, {}, picture=True)["html"]


def test_the_watchdog_runs_where_there_are_gpus():
    assert gpu_watchdog_wanted(INSTANCES) is True
    assert gpu_watchdog_wanted({"web-0": {"service": "web"}}, FACTS) is True
    assert gpu_watchdog_wanted({"web-0": {"service": "web"}}, []) is False


def test_the_gpu_lines_show_each_value_from_a_host_as_one_bounded_line():
    """Instance names and uuids come from the host's fact file: a line break, an escape or a long value stays in its
    cell, on its line."""
    bound = {"infer-0\nforged line": {"gpus": [{"index": 0, "uuid": "GPU-1\r\n\x1b[2Jx" + "u" * 5000, "memory": GIB}]},
             "infer-1\u2028b": {"gpus": [{"index": 0, "uuid": GPU, "memory": GIB}]}}
    status = {"rows": [], "bound": {}, "gpus": []}
    status.update(gpu_status("n1", bound, {"failed": True, "msg": "file not found"}, "/s/state.json", "mps"))
    status["watchdog_lines"].append("n1: GPU watchdog: a line\nwith a break" + "x" * 5000)
    lines = status_report(["n1"], {"n1": status}, {})["gpu_lines"]
    assert len(lines) == 5
    assert all(line.isprintable() and len(line) <= 1000 for line in lines), lines
    assert lines[1].startswith("n1    infer-0\ufffdforged line  GPU-1\ufffd\ufffd\ufffd[2Jxuuu")
    assert lines[2].startswith("n1    infer-1\ufffdb")


@pytest.mark.parametrize("text", ["[" * 100000 + "]" * 100000, '{"version": 1, "notes": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_a_state_file_nested_too_deeply_is_a_line_naming_it(text):
    with pytest.raises(StateError, match="is not JSON: it is nested too deeply"):
        parse_state(text, "/s/state.json")
    found = gpu_status("n1", INSTANCES, {"content": base64.b64encode(text.encode()).decode()}, "/s/state.json")
    assert found["watchdog_lines"] == ["n1: the GPU watchdog's state file /s/state.json is not JSON: it is nested too deeply"]


def test_an_instance_without_its_action_reads_as_none():
    document = state()
    del document["instances"]["infer-0"]["action"]
    assert parse_state(json.dumps(document), "s")["instances"]["infer-0"]["action"] is None
