# -*- coding: utf-8 -*-
"""The one read of a host that its deploy starts from: the shell run by a real sh against a fake engine, and what
its output means."""

from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils import deploy_read
from ansible_collections.gangplank.platform.plugins.module_utils.deploy_read import (
    FACT_FILE_LIMIT, ReadError, command, deploy_entry, parse,
)

PREFIX = "n1-"
DB = {"Name": "n1-db-0", "State": {"Running": True}, "Config": {"Labels": {"gangplank.io/service": "db"}},
      "HostConfig": {"PortBindings": {"5432/tcp": [{"HostIp": "127.0.0.1", "HostPort": "5432"}]}}}
API = {"Name": "/n1-api-0", "State": {"Running": False}, "Config": {"Labels": {}}, "HostConfig": {"PortBindings": {}}}
SETTINGS = {"data_dir": "/d", "publish_address": "", "probe_address": "127.0.0.1", "gpu_mode": "cdi",
            "engine": "podman", "secret_dir": "/s"}


def _fact_lines(value):
    encoded = base64.b64encode(value if isinstance(value, bytes) else json.dumps(value).encode()).decode()
    return ["fact-file " + encoded[i:i + 76] for i in range(0, len(encoded), 76)]


def test_a_podman_read_gives_containers_limits_and_what_killed_runs_left():
    stdout = "\n".join([
        "engine /usr/bin/podman",
        "limits cgroup controllers: [cpuset cpu io memory pids]",
        json.dumps(DB), json.dumps(API),
        "storage-only n1-queue-0",
        "broken n1-worker-1",
        # Another host's (the engine's name filter is unanchored): not this host's leftovers.
        "storage-only xn1-queue-0",
        "broken n2-worker-1",
        # A monitor of a container the engine runs is no leftover; one of a container it lost is; another host's is
        # not this host's.
        "conmon 101 aaa111 n1-db-0",
        "conmon 102 bbb222 n1-api-0",
        "conmon 103 ccc333 n2-api-0",
        "conmon garbage",
        "some warning the terminal joined in",
    ]) + "\r\n"
    found = parse(0, stdout, "podman", PREFIX, limits_asked=True)
    assert found["engine_found"] is True
    assert found["containers"] == [DB, API]
    assert found["leftovers"] == ["n1-queue-0", "broken:n1-worker-1", "102:bbb222:n1-api-0"]
    assert found["limits"] == "cgroup controllers: [cpuset cpu io memory pids]"
    assert found["enforce_limits"] is True
    assert "bindings" not in found


CHAIN = "NETAVARK-DN-1D8721804F16F"


def test_forwarding_rules_that_no_running_container_owns_are_named_with_what_they_serve():
    db = dict(DB, NetworkSettings={"Networks": {"podman": {"IPAddress": "10.88.0.7"}}})
    stopped = {"Name": "n1-api-0", "State": {"Running": False},
               "HostConfig": {"PortBindings": {"8080/tcp": [{"HostIp": "", "HostPort": "8080"}]}},
               "NetworkSettings": {"Networks": {"podman": {"IPAddress": "10.88.0.9"}}}}
    rules = {
        # The db's own rule: its address and port, to its address.
        "owned": CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.7:5432",
        # The same address and port to an address no container has: left by a killed run.
        "stale": CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.129:5432",
        # Any address ("8080:8080"), for a container that does not run: nothing owns it.
        "unowned": CHAIN + " -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.9:8080",
    }
    hostile = [
        CHAIN + " -d 127.0.0.1/24 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.1:5432",   # a network
        CHAIN + " -d 300.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.1:5432",  # no address
        CHAIN + " ! -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.1:5432",  # negated
        CHAIN + " -d 127.0.0.1/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.88.0.1:53",       # not TCP
        CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination [fd00::1]:5432",   # not IPv4
        CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp -j DNAT --to-destination 10.88.0.1:5432",                # no port
        CHAIN + ' -p tcp -m comment --comment "a b" --dport 1 -j DNAT --to-destination 10.88.0.1:1',    # quoted words
        CHAIN + " -p tcp --dport 1 -j DNAT --to-destination 10.88.0.1:1; rm -rf /",                     # not a rule
        CHAIN + " -p tcp --dport 1 -j DNAT --to-destination 10.88.0.1:1 -j ACCEPT extra",               # odd words
        CHAIN + " -p tcp --dport 1 -j MASQUERADE --to-destination 10.88.0.1:1",                         # not DNAT
        "NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.1:8080",     # other chain
        CHAIN + " -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.1:8080 --random x",        # more options
        CHAIN,
    ]
    # Any address, written as 0.0.0.0 by the engine, owns the rule without -d.
    anywhere = {"Name": "n1-queue-0", "State": {"Running": True},
                "HostConfig": {"PortBindings": {"5672/tcp": [{"HostIp": "0.0.0.0", "HostPort": "5672"}]}},
                "NetworkSettings": {"Networks": {"podman": {"IPAddress": "10.88.0.8"}}}}
    rules["anywhere"] = CHAIN + " -p tcp -m tcp --dport 5672 -j DNAT --to-destination 10.88.0.8:5672"
    stdout = "\n".join(["engine /usr/bin/podman", json.dumps(db), json.dumps(stopped), json.dumps(anywhere)]
                       + ["forward " + rule for rule in list(rules.values()) + hostile]) + "\r\n"
    found = parse(0, stdout, "podman", PREFIX)
    assert found["forwards"] == [{"published": "127.0.0.1:5432", "rule": rules["stale"]},
                                 {"published": "8080", "rule": rules["unowned"]}]


@pytest.mark.parametrize("engine, answer, asked, enforced", [
    ("podman", "cgroup controllers: [cpuset cpu memory]", True, True),
    ("podman", "cgroup controllers: [cpuset pids]", True, False),
    ("podman", "", True, False),
    ("podman", "cgroup controllers: [cpu memory]", False, False),
    ("docker", "memory limit: true, cpu quota: true", True, True),
    ("docker", "memory limit: true, cpu quota: false", True, False),
])
def test_limits_are_enforced_only_where_asked_and_the_engine_says_so(engine, answer, asked, enforced):
    stdout = "engine /usr/bin/%s\n%s\n" % (engine, "limits " + answer if asked else "")
    found = parse(0, stdout, engine, PREFIX, limits_asked=asked)
    assert found["enforce_limits"] is enforced
    note = deploy_entry("n1", found, dict(SETTINGS, engine=engine), {}, [], limits=asked)["note"]
    assert bool(note) is (asked and not enforced)


def test_without_the_engine_the_bindings_are_still_read():
    bindings = {"revision": 3, "instances": {"db-0": {"service": "db"}}, "ranks": [["db"]]}
    found = parse(127, "\n".join(_fact_lines(bindings)) + "\n", "podman", PREFIX, limits_asked=True)
    assert found["engine_found"] is False and found["containers"] == [] and found["leftovers"] == []
    assert found["bindings"] == bindings and found["bindings_error"] == ""
    entry = deploy_entry("n1", found, SETTINGS, {}, [], fact_file="/f", limits=True)
    assert entry["missing"] == ("n1 has no podman: run the gangplank.platform.runtime role first (playbooks/site.yml or "
                                "runtime.yml does), or set gangplank_container_engine to the engine it has.")
    assert entry["settings"]["instances"] == bindings["instances"] and entry["ranks"] == [["db"]]
    assert entry["note"] == ""
    # Check mode may run before the runtime role installed the engine: the summary says what would start.
    assert deploy_entry("n1", found, SETTINGS, {}, [], fact_file="/f", check_mode=True)["missing"] == ""


@pytest.mark.parametrize("lines, reason", [
    (["fact-file-unreadable"], "the file is missing or cannot be read"),
    (["fact-file-too-large 9999999"], "larger than %d bytes (9999999)" % FACT_FILE_LIMIT),
    (["fact-file !!!not base64"], "not a JSON object"),
    (_fact_lines(b"\xff\xfe binary"), "not a JSON object"),
    (_fact_lines(b"{not json"), "not a JSON object"),
    (_fact_lines([1, 2]), "not a JSON object (list)"),
])
def test_a_fact_file_that_is_not_bindings_is_named_as_the_reason(lines, reason):
    found = parse(0, "\n".join(["engine /usr/bin/podman"] + lines), "podman", PREFIX)
    assert found["bindings"] == {} and found["bindings_error"].startswith(reason)
    entry = deploy_entry("n1", found, SETTINGS, {"x": {}}, [["x"]], fact_file="/etc/f.fact")
    assert entry["missing"].startswith("n1 has no bindings: /etc/f.fact cannot be read (" + reason)
    # The file's (absent) bindings win over this run's: a deploy on its own never deploys what it was not bound.
    assert entry["settings"]["instances"] == {} and entry["ranks"] == []


def test_this_runs_bindings_are_used_when_no_fact_file_was_read():
    found = parse(0, "engine /usr/bin/podman\n", "podman", PREFIX)
    entry = deploy_entry("n1", found, SETTINGS, {"db-0": {}}, [["db"]])
    assert entry == {"settings": dict(SETTINGS, instances={"db-0": {}}, limits=False), "ranks": [["db"]],
                     "missing": "", "note": ""}


@pytest.mark.parametrize("rc, stdout, message", [
    (3, "engine /usr/bin/podman\nengine error: cannot connect to the service\n", "engine error: cannot connect to the service"),
    (1, "sh: syntax error\n", "the read of the podman engine failed (rc 1): sh: syntax error"),
    (0, "engine /usr/bin/podman\n{not json\n", "the podman engine printed a container that is not JSON"),
])
def test_a_failed_read_is_an_error_with_its_line(rc, stdout, message):
    with pytest.raises(ReadError) as caught:
        parse(rc, stdout, "podman", PREFIX)
    assert str(caught.value).startswith(message)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rc=st.sampled_from([0, 127, 3, 1]),
       lines=st.lists(st.one_of(
           st.text(max_size=40),
           st.builds("{} {}".format, st.sampled_from(["engine", "limits", "storage-only", "broken", "conmon",
                                                      "fact-file", "fact-file-too-large", "forward"]), st.text(max_size=40)),
           st.builds("forward NETAVARK-DN-1 -d {}/32 -p tcp --dport {} -j DNAT --to-destination {}".format,
                     st.sampled_from(["1.2.3.4", "300.1.1.1", "x"]), st.text(max_size=6), st.text(max_size=12)),
           st.sampled_from(["fact-file-unreadable", json.dumps(DB), "[1]", "{}"])), max_size=12))
def test_any_output_is_read_or_refused_with_a_read_error(rc, lines):
    try:
        found = parse(rc, "\n".join(lines), "podman", PREFIX, limits_asked=True)
    except ReadError:
        return
    assert isinstance(found["containers"], list) and all(isinstance(entry, dict) for entry in found["containers"])
    assert all(isinstance(leftover, str) for leftover in found["leftovers"])
    # A rule is handed to iptables as words the shell splits: plain characters only.
    assert all(set(forward) == {"published", "rule"} and deploy_read._FORWARD_RULE.match(forward["rule"])
               for forward in found["forwards"])
    assert isinstance(found["enforce_limits"], bool) and isinstance(found["limits"], str)
    assert isinstance(found.get("bindings", {}), dict)
    entry = deploy_entry("n1", found, SETTINGS, {}, [], fact_file="/f", limits=True)
    assert isinstance(entry["missing"], str) and isinstance(entry["settings"]["instances"], (dict, list, str, int, float, type(None)))


# The real shell, with a fake engine first on PATH: what it prints and how the script reads it.
FAKE_PODMAN = r"""#!/bin/sh
case "$1" in
  ps) printf '%s\n' 'aaa n1-db-0 running' 'bbb n1-api-0 exited' 'ccc n1-queue-0 storage' ;;
  inspect)
    shift 3
    if [ "$#" -gt 1 ]; then exit 125; fi
    case "$1" in
      aaa) printf '%s\n' '{"Name": "n1-db-0", "State": {"Running": true}}' ;;
      bbb) echo 'Error: reading container bbb: open /var/lib/x/config.json: no such file or directory' >&2; exit 125 ;;
    esac ;;
  info) echo "info asked" > "$FAKE_ENGINE_LOG"; echo 'cgroup controllers: [cpu memory]' ;;
esac
"""

# The nat table as iptables-nft prints it with netavark's chains: only the DNAT rules of NETAVARK-DN-* are forwards.
FAKE_IPTABLES = r"""#!/bin/sh
[ "$*" = "-w -t nat -S" ] || exit 2
cat <<'RULES'
-P PREROUTING ACCEPT
-N NETAVARK-DN-1D8721804F16F
-A PREROUTING -m addrtype --dst-type LOCAL -j NETAVARK-HOSTPORT-DNAT
-A NETAVARK-DN-1D8721804F16F -s 10.88.0.0/16 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK
-A NETAVARK-DN-1D8721804F16F -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.129:8080
-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 8080 -m comment --comment "dnat name: podman id: abc" -j NETAVARK-DN-1D8721804F16F
RULES
"""


@pytest.fixture(name="bed")
def _bed(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(FAKE_PODMAN)
    os.chmod(bin_dir / "podman", 0o755)
    (bin_dir / "iptables").write_text(FAKE_IPTABLES)
    os.chmod(bin_dir / "iptables", 0o755)
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), FAKE_ENGINE_LOG=str(tmp_path / "log"))

    def run(fact_file="", state_text=None, probe=("podman", "info")):
        state = tmp_path / "runtime-state"
        if state_text is not None:
            state.write_text(state_text)
        done = subprocess.run(command("podman", PREFIX, str(state), fact_file, list(probe)), shell=True, env=env,
                              capture_output=True, text=True, timeout=30, check=False)
        return done.returncode, done.stdout

    return run, tmp_path


def test_the_shell_reads_a_podman_host_as_parse_expects(bed):
    run, tmp_path = bed
    bindings = {"revision": 7, "instances": {"db-0": {"service": "db", "note": "ü ' \" $(x)"}}, "ranks": [["db"]]}
    fact = tmp_path / "gangplank.fact"
    fact.write_text(json.dumps(bindings, indent=2) * 1 + "\n" + " " * 200)
    rc, stdout = run(str(fact))
    found = parse(rc, stdout, "podman", PREFIX, limits_asked=True)
    assert rc == 0 and found["engine_found"]
    assert found["containers"] == [{"Name": "n1-db-0", "State": {"Running": True}}]
    # The lost storage of bbb makes it broken; the image-store-only container is left over.
    assert found["leftovers"] == ["n1-queue-0", "broken:n1-api-0"]
    assert found["forwards"] == [{"published": "127.0.0.1:8080", "rule": "NETAVARK-DN-1D8721804F16F -d 127.0.0.1/32 -p tcp"
                                  " -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.129:8080"}]
    assert found["bindings"] == bindings and found["bindings_error"] == ""
    # Asked now, since no answer was stored.
    assert found["enforce_limits"] and (tmp_path / "log").exists()


def test_the_shell_uses_the_stored_answer_and_names_a_missing_or_huge_fact_file(bed):
    run, tmp_path = bed
    rc, stdout = run(str(tmp_path / "none.fact"), state_text="abc\nlimits podman cgroup controllers: [pids]\n")
    found = parse(rc, stdout, "podman", PREFIX, limits_asked=True)
    assert found["limits"] == "cgroup controllers: [pids]" and not found["enforce_limits"]
    assert not (tmp_path / "log").exists()
    assert found["bindings_error"] == "the file is missing or cannot be read"
    huge = tmp_path / "huge.fact"
    with open(huge, "wb") as handle:
        handle.truncate(FACT_FILE_LIMIT + 1)
    found = parse(*run(str(huge), probe=()), "podman", PREFIX)
    assert found["bindings_error"] == "larger than %d bytes (%d)" % (FACT_FILE_LIMIT, FACT_FILE_LIMIT + 1)
    assert found["limits"] == "" and not found["enforce_limits"]
    # A FIFO, a directory, /dev/zero: not a file the schedule role wrote, refused without reading (a FIFO blocked it).
    os.mkfifo(tmp_path / "fifo.fact")
    (tmp_path / "dir.fact").mkdir()
    (tmp_path / "zero.fact").symlink_to("/dev/zero")
    for name in ("fifo.fact", "dir.fact", "zero.fact"):
        found = parse(*run(str(tmp_path / name), probe=()), "podman", PREFIX)
        assert found["bindings_error"] == "the file is missing or cannot be read", name


def test_the_shell_exits_127_without_the_engine(tmp_path):
    done = subprocess.run(command("no-such-engine-here", PREFIX, str(tmp_path / "s")), shell=True, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 127
    assert deploy_read.parse(done.returncode, done.stdout, "podman", PREFIX)["engine_found"] is False
