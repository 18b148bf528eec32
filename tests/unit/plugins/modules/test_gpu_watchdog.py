# -*- coding: utf-8 -*-
"""The gpu_watchdog module's main(): install, start, leave alone, reload, restart, stop and remove the watchdog as a
detached process (the process manager: no systemd here), in check mode too; what it reports as warnings."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.modules import gpu_watchdog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(ROOT, "roles", "deploy", "files", "gpu_watchdog.py")) as _handle:
    PROGRAM = _handle.read()
GIB = 1 << 30
GPU = "GPU-sim-h1-0"
INSTANCES = {"infer-0": {"service": "infer", "rank": 2, "gpus": [{"index": 0, "uuid": GPU, "memory": 20 * GIB}]},
             "web-0": {"service": "web", "rank": 1}}


@pytest.fixture(autouse=True)
def warnings(monkeypatch):
    return capture_module_exits(monkeypatch, warnings=[])


def run(args, check=False):
    with patch_module_args(dict(args, _ansible_check_mode=check)):
        try:
            gpu_watchdog.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return failed.args[0]
    raise AssertionError("main() returned without exit_json or fail_json")


@pytest.fixture
def directory(tmp_path):
    path = tmp_path / "gpu-watchdog"
    yield path
    run({"directory": str(path), "state": "absent", "manager": "process"})


def started(directory, check=False, **extra):
    args = {"directory": str(directory), "program": PROGRAM, "host": "h1", "instances": INSTANCES, "simulated": True,
            "manager": "process", "interval": 0.2, "sharing": "mps"}
    return run(dict(args, **extra), check=check)


def wait_for_state(directory, predicate, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = json.loads((directory / "state.json").read_text())
            if predicate(state):
                return state
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError("the watchdog wrote no such state in %ds" % seconds)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return ") Z " not in handle.read()
    except OSError:
        return False


def test_check_mode_says_what_would_start_and_changes_nothing(directory):
    result = started(directory, check=True)
    assert result["changed"] is True and result["pid"] is None and not directory.exists()
    assert result["actions"] == ["would create %s" % directory, "would write gpu_watchdog.py", "would write config.json",
                                 "would start"]


def test_started_is_idempotent_reloads_a_new_config_and_restarts_a_new_program(directory, warnings):
    first = started(directory)
    assert first["changed"] is True and first["manager"] == "process" and alive(first["pid"])
    config = json.loads((directory / "config.json").read_text())
    assert config["instances"] == {"infer-0": {"container": "h1-infer-0", "grants": {GPU: 20 * GIB}, "cores": {},
                                               "enforced": True}}
    assert config["source"] == "simulated" and config["simulated_file"] == str(directory / "simulated-processes.json")
    wait_for_state(directory, lambda state: state["pid"] == first["pid"])
    second = started(directory)
    assert second["changed"] is False and second["pid"] == first["pid"] and second["actions"] == []
    assert second["watchdog"]["source"].startswith("simulated (") and second["lines"] == []
    assert started(directory, check=True)["changed"] is False
    # A new grant: the config is written and the same process reloads it.
    bigger = {"infer-0": dict(INSTANCES["infer-0"], gpus=[{"index": 0, "uuid": GPU, "memory": 30 * GIB}])}
    third = started(directory, instances=bigger)
    assert third["changed"] is True and third["actions"] == ["write config.json", "reload the config"]
    assert third["pid"] == first["pid"]
    wait_for_state(directory, lambda state: state["instances"]["infer-0"]["grants"] == {GPU: 30 * GIB})
    # A new program: restarted.
    fourth = started(directory, instances=bigger, program=PROGRAM + "# changed\n")
    assert fourth["actions"] == ["write gpu_watchdog.py", "restart (the program changed)"]
    assert fourth["pid"] != first["pid"] and not alive(first["pid"]) and alive(fourth["pid"])
    # Killed: started again.
    os.kill(fourth["pid"], 9)
    time.sleep(0.3)
    fifth = started(directory, instances=bigger, program=PROGRAM + "# changed\n")
    assert fifth["actions"] == ["start"] and alive(fifth["pid"])


def test_events_are_warned_once_and_conditions_while_they_last(directory, warnings):
    first = started(directory, grace=0)
    (directory / "simulated-processes.json").write_text(json.dumps(
        {"processes": [{"gpu": GPU, "pid": os.getpid(), "used_memory": 3 * GIB}]}))
    wait_for_state(directory, lambda state: state["bypasses"])
    result = started(directory, grace=0)
    assert result["changed"] is False and result["pid"] == first["pid"]
    assert [line.split(":")[1] for line in result["lines"]] == [" GPU watchdog bypass", " GPU watchdog"]
    assert "uses 3.0 GiB outside every GPU share (not in a container)" in result["lines"][0]
    assert warnings == result["lines"]
    again = started(directory, grace=0)
    assert len(again["lines"]) == 1 and "bypass: pid %d" % os.getpid() in again["lines"][0]


def test_stopped_and_absent(directory):
    first = started(directory)
    assert run({"directory": str(directory), "state": "stopped", "manager": "process"}, check=True)["changed"] is True
    assert alive(first["pid"])
    stopped = run({"directory": str(directory), "state": "stopped", "manager": "process"})
    assert stopped["changed"] is True and not alive(first["pid"]) and (directory / "config.json").exists()
    absent = run({"directory": str(directory), "state": "absent"})
    assert absent["actions"] == ["remove %s" % directory] and not directory.exists()
    assert run({"directory": str(directory), "state": "absent"})["changed"] is False


def test_a_pid_file_naming_another_process_is_not_the_watchdog(directory):
    directory.mkdir()
    (directory / "watchdog.pid").write_text(json.dumps({"pid": os.getpid(), "program_sha256": "x"}))
    result = started(directory)
    assert result["actions"][-1] == "start" and result["pid"] != os.getpid()


@pytest.fixture
def readable_directory():
    """A watchdog directory another user can read (the impostor's interpreter reads the program)."""
    base = tempfile.mkdtemp(prefix="gangplank-watchdog-")
    os.chmod(base, 0o755)
    path = pathlib.Path(base) / "gpu-watchdog"
    yield path
    run({"directory": str(path), "state": "absent", "manager": "process"})
    shutil.rmtree(base)


def impostor(directory, *prefix, user=None):
    """A process whose command line holds the watchdog's program and config, as ``user`` (a uid) or as this one."""
    argv = list(prefix) + [str(directory / "gpu_watchdog.py"), str(directory / "config.json")]
    if user is not None:
        argv = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + argv
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("prefix, user", [
    (("sh", "-c", "sleep 30"), 65534),                       # the program and config as arguments of another command
    ((sys.executable, "-c", "import time; time.sleep(30)"), None),
    ((sys.executable,), 65534),                              # the very command line, as another user
])
def test_a_process_that_only_looks_like_the_watchdog_is_not_it(readable_directory, prefix, user):
    directory = readable_directory
    first = started(directory)
    process = impostor(directory, *prefix, user=user)
    try:
        time.sleep(0.2)
        record = json.loads((directory / "watchdog.pid").read_text())
        (directory / "watchdog.pid").write_text(json.dumps(dict(record, pid=process.pid)))
        assert gpu_watchdog.process_of(str(directory)) == (None, None)
        again = started(directory)
        assert again["actions"] == ["start"] and again["pid"] not in (process.pid, first["pid"])
        assert process.poll() is None                        # no signal reached it
        assert gpu_watchdog.process_of(str(directory))[0] == again["pid"]
    finally:
        process.kill()
        process.wait()
        os.kill(first["pid"], 9)


def test_a_pid_file_is_believed_only_of_the_process_it_recorded(directory):
    directory.mkdir()
    (directory / "gpu_watchdog.py").write_text("import time\ntime.sleep(30)\n")
    process = impostor(directory, sys.executable, "-c", "import time; time.sleep(30)")
    try:
        time.sleep(0.2)
        # Not the command line: the program and config are not the interpreter's arguments.
        pidfile = directory / "watchdog.pid"
        pidfile.write_text(json.dumps({"pid": process.pid, "program_sha256": "x"}))
        assert gpu_watchdog.process_of(str(directory)) == (None, None)
    finally:
        process.kill()
        process.wait()
    process = impostor(directory, sys.executable)
    try:
        time.sleep(0.2)
        facts = gpu_watchdog.process_facts(process.pid)
        # The record of this very process: believed.
        pidfile.write_text(json.dumps({"pid": process.pid, "program_sha256": "x", "boot_id": gpu_watchdog.boot_id(),
                                       "start_ticks": facts["start_ticks"]}))
        assert gpu_watchdog.process_of(str(directory)) == (process.pid, "x")
        # Another boot, or another start with the same pid: not this process.
        for change in ({"boot_id": "another-boot"}, {"start_ticks": facts["start_ticks"] - 1}):
            pidfile.write_text(json.dumps(dict(json.loads(pidfile.read_text()), **change)))
            assert gpu_watchdog.process_of(str(directory)) == (None, None)
        # A file of before the start time was recorded: believed unless the process started after it was written.
        pidfile.write_text(json.dumps({"pid": process.pid, "program_sha256": "x"}))
        assert gpu_watchdog.process_of(str(directory)) == (process.pid, "x")
        os.utime(pidfile, (time.time() - 3600, time.time() - 3600))
        assert gpu_watchdog.process_of(str(directory)) == (None, None)
        # A pid file that is a link or not this user's is not believed.
        os.utime(pidfile)
        os.chown(pidfile, 65534, 65534)
        assert gpu_watchdog.process_of(str(directory)) == (None, None)
        os.chown(pidfile, 0, 0)
        os.rename(pidfile, directory / "elsewhere.pid")
        os.symlink(directory / "elsewhere.pid", pidfile)
        assert gpu_watchdog.process_of(str(directory)) == (None, None)
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("name, value", [("directory", "/var/lib/gangplank/gpu-watchdog\nExecStartPre=/bin/touch /pwned"),
                                         ("directory", "/srv/a\u2028b"), ("python", "/usr/bin/python3\rx"),
                                         ("service", "gangplank\x1b[2J"), ("unit_dir", "/etc/systemd/system\t")])
def test_control_characters_in_what_reaches_the_unit_are_refused_by_name(tmp_path, name, value):
    args = {"directory": str(tmp_path / "wd"), "program": PROGRAM, "host": "h1", "manager": "systemd",
            "unit_dir": str(tmp_path / "units")}
    result = run(dict(args, **{name: value}))
    assert result["failed"] is True and result["msg"].startswith("%s: holds the control character" % name)
    assert "\n" not in result["msg"] and not (tmp_path / "units").exists() and not (tmp_path / "wd").exists()


def test_the_units_command_line_is_quoted_word_by_word(monkeypatch, tmp_path):
    """A directory and an interpreter with spaces, quotes, $ and %: each stays one word; systemd-analyze reads the unit
    (it checks that the command's first word is an executable)."""
    units = tmp_path / "units"
    units.mkdir()
    odd = tmp_path / 'a dir "with" $ and %n'
    odd.mkdir()
    (tmp_path / "bin $ %n").mkdir()
    python = tmp_path / "bin $ %n" / "python 3"
    os.symlink(sys.executable, python)
    monkeypatch.setattr(gpu_watchdog, "run", lambda argv, timeout=30: (0, "active\n" if argv[1] == "is-active" else "enabled\n", ""))
    monkeypatch.setattr(gpu_watchdog, "systemd_runs", lambda: True)
    result = started(odd / "gpu-watchdog", manager="systemd", unit_dir=str(units), python=str(python))
    assert not result.get("failed"), result
    unit = (units / "gangplank-gpu-watchdog.service").read_text()
    line = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    quoted = str(odd).replace('"', '\\"').replace("$", "$$").replace("%", "%%")
    assert line == ['ExecStart="%s/bin $ %%%%n/python 3" "%s/gpu-watchdog/gpu_watchdog.py" "%s/gpu-watchdog/config.json"' % (
        tmp_path, quoted, quoted)]
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(["systemd-analyze", "verify", str(units / "gangplank-gpu-watchdog.service")],
                                  capture_output=True, text=True, check=False)
        assert verified.returncode == 0, verified.stderr
    result = started(odd / "gpu-watchdog", manager="systemd", unit_dir=str(units), python=str(odd / "python"))
    assert result["failed"] is True and result["msg"].startswith("python: got a path with a quote or a backslash")


def test_a_state_file_nested_too_deeply_or_too_large_is_a_warning_naming_it(directory, warnings):
    started(directory, interval=60)
    for text, expected in (("[" * 100000 + "]" * 100000, "nested"), ('{"a": "%s"}' % ("x" * (5 << 20)), "larger than")):
        (directory / "state.json").write_text(text)
        warnings.clear()
        result = started(directory, interval=60)
        assert not result.get("failed") and any(expected in line and str(directory / "state.json") in line for line in warnings), warnings


def test_bad_bindings_and_a_corrupt_state_file_are_errors_naming_them(directory, warnings):
    bad = {"infer-0": {"service": "infer", "gpus": [{"uuid": GPU, "memory": "20Gi"}]}}
    result = started(directory, instances=bad)
    assert result["failed"] is True and result["msg"].startswith("instances.infer-0.gpus[0]:")
    started(directory)
    (directory / "state.json").write_text('{"version": 1, "pid": "x"}')
    result = run({"directory": str(directory), "program": PROGRAM, "host": "h1", "instances": INSTANCES,
                  "simulated": True, "manager": "process", "interval": 60, "sharing": "mps"})
    assert any("state file %s: pid: expected" % (directory / "state.json") in line for line in warnings)
    assert "Traceback" not in repr(result)


def test_exclusive_process_is_set_only_on_share_gpus_that_need_it(monkeypatch, directory, warnings):
    calls = []
    modes = {"GPU-a": "Default", "GPU-b": "Exclusive_Process"}

    def fake_run(argv, timeout=30):
        calls.append(argv)
        if "--query-gpu=compute_mode" in argv:
            return 0, modes[argv[2]] + "\n", ""
        return 0, "", ""

    monkeypatch.setattr(gpu_watchdog, "run", fake_run)
    instances = {"a-0": {"gpus": [{"uuid": "GPU-a", "memory": GIB}]}, "b-0": {"gpus": [{"uuid": "GPU-b", "memory": GIB}]},
                 "c-0": {"gpus": [{"uuid": "GPU-c", "memory": GIB}]}, "c-1": {"gpus": [{"uuid": "GPU-c", "memory": GIB}]},
                 "whole-0": {"gpus": [{"uuid": "GPU-w", "memory": 80 * GIB}]}}
    gpus = [{"uuid": "GPU-w", "memory_total": 80 * GIB}]
    result = started(directory, instances=instances, gpus=gpus, simulated=False, exclusive_process=True, check=True)
    assert result["exclusive_process"] == ["GPU-a"] and ["nvidia-smi", "-i", "GPU-a", "-c", "EXCLUSIVE_PROCESS"] not in calls
    assert any("GPU-c holds 2 share instances" in warning for warning in warnings)
    result = started(directory, instances=instances, gpus=gpus, simulated=False, exclusive_process=True, check=True)
    calls.clear()
    monkeypatch.setattr(gpu_watchdog, "start_process", lambda python, directory, sha: 1)
    result = started(directory, instances=instances, gpus=gpus, simulated=False, exclusive_process=True)
    assert ["nvidia-smi", "-i", "GPU-a", "-c", "EXCLUSIVE_PROCESS"] in calls
    assert not any("GPU-w" in argv for argv in calls)                  # a whole GPU holds no share
    assert started(directory, exclusive_process=True)["exclusive_process"] == []    # never on simulated GPUs


def test_with_systemd_a_unit_is_written_enabled_started_then_left_alone_reloaded_and_removed(monkeypatch, tmp_path):
    """systemctl faked (no systemd here): which commands the module runs, and when."""
    units = tmp_path / "units"
    units.mkdir()
    directory = tmp_path / "gpu-watchdog"
    service = {"enabled": "disabled", "active": "inactive"}
    calls = []

    def fake_run(argv, timeout=30):
        calls.append(argv[1:])
        verb = argv[1]
        if verb == "is-enabled":
            return (0 if service["enabled"] == "enabled" else 1), service["enabled"] + "\n", ""
        if verb == "is-active":
            return (0 if service["active"] == "active" else 3), service["active"] + "\n", ""
        if verb == "show":
            return 0, "4242\n", ""
        if verb == "enable":
            service["enabled"] = "enabled"
        if verb in ("start", "restart"):
            service["active"] = "active"
        if verb == "stop":
            service["active"] = "inactive"
        if verb == "disable":
            service["enabled"] = "disabled"
        return 0, "", ""

    monkeypatch.setattr(gpu_watchdog, "run", fake_run)
    monkeypatch.setattr(gpu_watchdog, "systemd_runs", lambda: True)
    extra = {"manager": "auto", "unit_dir": str(units)}
    first = started(directory, **extra)
    unit = (units / "gangplank-gpu-watchdog.service").read_text()
    assert 'ExecStart="%s" "%s" "%s"' % (gpu_watchdog.sys.executable, directory / "gpu_watchdog.py", directory / "config.json") in unit
    assert first["manager"] == "systemd" and first["pid"] == 4242
    assert [call for call in calls if call[0] not in ("is-enabled", "is-active", "show")] == [
        ["daemon-reload"], ["enable", "gangplank-gpu-watchdog.service"], ["start", "gangplank-gpu-watchdog.service"]]
    calls.clear()
    assert started(directory, **extra)["changed"] is False
    assert [call[0] for call in calls] == ["is-enabled", "is-active", "show"]
    calls.clear()
    bigger = {"infer-0": dict(INSTANCES["infer-0"], gpus=[{"index": 0, "uuid": GPU, "memory": 30 * GIB}])}
    assert started(directory, instances=bigger, **extra)["actions"] == ["write config.json",
                                                                        "reload gangplank-gpu-watchdog.service"]
    assert ["reload", "gangplank-gpu-watchdog.service"] in calls
    removed = run({"directory": str(directory), "state": "absent", "unit_dir": str(units)})
    assert removed["actions"] == ["stop gangplank-gpu-watchdog.service", "disable gangplank-gpu-watchdog.service",
                                  "remove %s" % (units / "gangplank-gpu-watchdog.service"), "remove %s" % directory]
    assert not directory.exists() and not (units / "gangplank-gpu-watchdog.service").exists()
