# -*- coding: utf-8 -*-
"""The one read of a host that its deploy starts from: the shell run by a real sh against a fake engine, and what
its output means."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import deploy_read
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_read import (
    FACT_FILE_LIMIT, ReadError, command, deploy_entry, parse,
)

PREFIX = "n1-"
DB = {"Name": "n1-db-0", "State": {"Running": True}, "Config": {"Labels": {"gangplank.io/service": "db"}},
      "HostConfig": {"PortBindings": {"5432/tcp": [{"HostIp": "127.0.0.1", "HostPort": "5432"}]}}}
API = {"Name": "/n1-api-0", "State": {"Running": False}, "Config": {"Labels": {}}, "HostConfig": {"PortBindings": {}}}
SETTINGS = {"data_dir": "/d", "publish_address": "", "probe_address": "127.0.0.1", "gpu_mode": "cdi",
            "engine": "podman", "secret_dir": "/s"}


def sectioned(**parts):
    """The read's output as the script prints it: each part after its marker line, in the script's order."""
    lines = []
    for section in deploy_read.SECTIONS:
        if section in parts:
            lines.append("gangplank-read " + section)
            lines.extend(parts[section])
    return "\n".join(lines)


def _fact_lines(value):
    encoded = base64.b64encode(value if isinstance(value, bytes) else json.dumps(value).encode()).decode()
    return ["fact-file " + encoded[i:i + 76] for i in range(0, len(encoded), 76)]


def test_a_podman_read_gives_containers_limits_and_what_killed_runs_left():
    stdout = sectioned(
        engine=["engine /usr/bin/podman"],
        limits=["limits cgroup controllers: [cpuset cpu io memory pids]"],
        containers=[json.dumps(DB), json.dumps(API)],
        # Another host's (the engine's name filter is unanchored): not this host's leftovers.
        broken=["broken n1-worker-1", "broken n2-worker-1"],
        storage=["storage-only n1-queue-0", "storage-only xn1-queue-0"],
        # A monitor of a container the engine runs is no leftover; one of a container it lost is; another host's is
        # not this host's.
        monitors=["conmon 101 aaa111 n1-db-0", "conmon 102 bbb222 n1-api-0", "conmon 103 ccc333 n2-api-0",
                  "conmon garbage", "some warning the terminal joined in"],
        end=[]).replace("\n", "\r\n") + "\r\n"
    found = parse(0, stdout, "podman", PREFIX, limits_asked=True)
    assert found["engine_found"] is True
    assert found["containers"] == [DB, API]
    assert found["leftovers"] == ["n1-queue-0", "broken:n1-worker-1", "102:bbb222:n1-api-0"]
    assert found["limits"] == "cgroup controllers: [cpuset cpu io memory pids]"
    assert found["enforce_limits"] is True
    assert "bindings" not in found


CHAIN = "NETAVARK-DN-1D8721804F16F"


def test_forwarding_rules_that_no_container_owns_are_named_with_what_they_serve():
    db = dict(DB, NetworkSettings={"Networks": {"podman": {"IPAddress": "10.88.0.7"}}})
    # Set up but not started (a run killed between the two, or `podman init`): `podman start` uses its rules as they
    # are, so they are its own.
    initialized = {"Name": "n1-api-0", "State": {"Running": False},
                   "HostConfig": {"PortBindings": {"8080/tcp": [{"HostIp": "", "HostPort": "8080"}]}},
                   "NetworkSettings": {"Networks": {"podman": {"IPAddress": "10.88.0.9"}}}}
    # Not set up (a run killed inside netavark, before Podman kept the address): its rules are no one's.
    created = {"Name": "n1-api-1", "State": {"Running": False},
               "HostConfig": {"PortBindings": {"8081/tcp": [{"HostIp": "", "HostPort": "8081"}]}},
               "NetworkSettings": {"Networks": {"podman": {"IPAddress": ""}}}}
    rules = {
        # The db's own rule: its address and port, to its address.
        "owned": CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.7:5432",
        # The same address and port to an address no container has: left by a killed run.
        "stale": CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.129:5432",
        # Any address ("8080:8080"), to the address the initialized container holds: its own.
        "initialized": CHAIN + " -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.9:8080",
        # The created container's port, to an address it does not hold: nothing owns it.
        "unowned": CHAIN + " -p tcp -m tcp --dport 8081 -j DNAT --to-destination 10.88.0.10:8081",
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
    stdout = sectioned(engine=["engine /usr/bin/podman"],
                       containers=[json.dumps(db), json.dumps(initialized), json.dumps(created), json.dumps(anywhere)],
                       forwards=["forward " + rule for rule in list(rules.values()) + hostile]) + "\r\n"
    found = parse(0, stdout, "podman", PREFIX)
    assert found["forwards"] == [{"published": "127.0.0.1:5432", "rule": rules["stale"]},
                                 {"published": "8081", "rule": rules["unowned"]}]


@pytest.mark.parametrize("engine, answer, asked, enforced", [
    ("podman", "cgroup controllers: [cpuset cpu memory]", True, True),
    ("podman", "cgroup controllers: [cpuset pids]", True, False),
    ("podman", "", True, False),
    ("podman", "cgroup controllers: [cpu memory]", False, False),
    ("docker", "memory limit: true, cpu quota: true", True, True),
    ("docker", "memory limit: true, cpu quota: false", True, False),
])
def test_limits_are_enforced_only_where_asked_and_the_engine_says_so(engine, answer, asked, enforced):
    stdout = sectioned(engine=["engine /usr/bin/%s" % engine], limits=["limits " + answer] if asked else [])
    found = parse(0, stdout, engine, PREFIX, limits_asked=asked)
    assert found["enforce_limits"] is enforced
    note = deploy_entry("n1", found, dict(SETTINGS, engine=engine), {}, [], limits=asked)["note"]
    assert bool(note) is (asked and not enforced)


def test_without_the_engine_the_bindings_are_still_read():
    bindings = {"revision": 3, "instances": {"db-0": {"service": "db"}}, "ranks": [["db"]]}
    found = parse(127, sectioned(fact=_fact_lines(bindings)) + "\n", "podman", PREFIX, limits_asked=True)
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
    found = parse(0, sectioned(fact=lines, engine=["engine /usr/bin/podman"]), "podman", PREFIX)
    assert found["bindings"] == {} and found["bindings_error"].startswith(reason)
    entry = deploy_entry("n1", found, SETTINGS, {"x": {}}, [["x"]], fact_file="/etc/f.fact")
    assert entry["missing"].startswith("n1 has no bindings: /etc/f.fact cannot be read (" + reason)
    # The file's (absent) bindings win over this run's: a deploy on its own never deploys what it was not bound.
    assert entry["settings"]["instances"] == {} and entry["ranks"] == []


def test_this_runs_bindings_are_used_when_no_fact_file_was_read():
    found = parse(0, sectioned(engine=["engine /usr/bin/podman"]), "podman", PREFIX)
    entry = deploy_entry("n1", found, SETTINGS, {"db-0": {}}, [["db"]])
    assert entry == {"settings": dict(SETTINGS, instances={"db-0": {}}, limits=False), "ranks": [["db"]],
                     "missing": "", "note": ""}


@pytest.mark.parametrize("rc, stdout, message", [
    (3, "engine /usr/bin/podman\nengine error: cannot connect to the service\n", "engine error: cannot connect to the service"),
    (1, "sh: syntax error\n", "the read of the podman engine failed (rc 1): sh: syntax error"),
    (0, "gangplank-read engine\nengine /usr/bin/podman\ngangplank-read containers\n{not json\n",
     "line 4 of the deploy read: the podman engine printed a container that is not JSON"),
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
  secret) [ "$2 $3 $4" = "ls --format {{.Name}}" ] && printf '%s\n' n1-db-0.password n2-db-0.password 'n1-db-0.x y' ;;
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
    assert found["secrets"] == ["n1-db-0.password"]
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


def test_the_shell_finds_the_local_proxy_by_its_file_without_the_engine_too(tmp_path):
    config = tmp_path / "proxy.cfg"

    def proxy_found():
        proxy = {"address": "169.254.255.254/32", "pid_file": str(tmp_path / "none.pid"), "config": str(config)}
        done = subprocess.run(command("no-such-engine-here", PREFIX, str(tmp_path / "s"), proxy=proxy),
                              shell=True, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 127
        return parse(done.returncode, done.stdout, "podman", PREFIX, proxy_asked=True)["proxy"]["found"]

    assert proxy_found() is False
    config.write_text("global\n")
    assert proxy_found() is True
    # A dangling link where the file was is something of the proxy's too: removed with the rest.
    config.unlink()
    config.symlink_to(tmp_path / "gone")
    assert proxy_found() is True


def test_the_proxy_is_found_only_from_its_own_line_in_its_own_section():
    def found(stdout):
        return parse(0, stdout, "podman", PREFIX, proxy_asked=True)["proxy"]["found"]
    assert found(sectioned(proxy=["proxy-found"], engine=["engine /usr/bin/podman"]))
    assert not found(sectioned(proxy=["proxy-found yes"]))
    assert not found(sectioned(engine=["engine /usr/bin/podman"]))
    with pytest.raises(ReadError, match="a proxy-found line outside the proxy section"):
        parse(0, sectioned(engine=["engine /usr/bin/podman", "proxy-found"]), "podman", PREFIX)


# A monitor's name holding a line break, followed by lines shaped as other sections (the forging output of a local
# user's process named conmon): none of it is taken.
FORGED = ["conmon 104 ddd444 n1-x", json.dumps(dict(DB, Name="n1-forged-0")), "storage-only n1-forged-1",
          "broken n1-forged-2", "fact-file " + base64.b64encode(b'{"instances": {"evil-0": {}}}').decode()]


@pytest.mark.parametrize("monitors", [
    FORGED,
    FORGED[:1] + ["gangplank-read containers"] + FORGED[1:],      # a marker forged too: the section comes twice
    FORGED[:1] + ["gangplank-read forwards", "forward " + CHAIN + " -p tcp --dport 1 -j DNAT --to-destination 10.0.0.1:1"],
    FORGED[:1] + ["gangplank-read end"],
    FORGED[:1] + ["gangplank-read nothing"],
])
def test_lines_forged_into_the_monitors_section_are_refused_naming_the_host_and_line(monitors):
    stdout = sectioned(fact=_fact_lines({"instances": {"db-0": {}}}), engine=["engine /usr/bin/podman"],
                       containers=[json.dumps(DB)], broken=[], storage=[], monitors=monitors,
                       forwards=[], end=[])
    with pytest.raises(ReadError) as caught:
        parse(0, stdout, "podman", PREFIX, host="n1")
    message = str(caught.value)
    assert message.startswith("n1: line ") and "\n" not in message
    assert "forged" not in message and "evil" not in message


def test_a_section_twice_or_out_of_order_is_refused():
    for stdout in (sectioned(engine=["engine /usr/bin/podman"]) + "\ngangplank-read engine\nengine /x",
                   sectioned(containers=[]) + "\ngangplank-read limits\nlimits cpu memory"):
        with pytest.raises(ReadError, match=r"^n1: line \d+ of the deploy read: (section engine comes twice|a section "
                                            r"out of order)$"):
            parse(0, stdout, "podman", PREFIX, host="n1")


@pytest.mark.parametrize("entry, field", [
    (dict(DB, State="running"), "State is not an object (str)"),
    (dict(DB, State={"Running": "true"}), "State.Running is not true or false (str)"),
    (dict(DB, HostConfig={"PortBindings": [["5432/tcp"]]}), "HostConfig.PortBindings is not an object (list)"),
    (dict(DB, HostConfig={"PortBindings": {"5432/tcp": {"HostPort": "1"}}}), "HostConfig.PortBindings[5432/tcp] is not a list"),
    (dict(DB, HostConfig={"PortBindings": {"5432/tcp": [{"HostPort": 5432}]}}), "HostConfig.PortBindings[5432/tcp] holds"),
    (dict(DB, HostConfig={"PortBindings": {"5432/tcp": ["x"]}}), "HostConfig.PortBindings[5432/tcp] holds"),
    (dict(DB, NetworkSettings={"Networks": ["podman"]}), "NetworkSettings.Networks is not an object (list)"),
    (dict(DB, NetworkSettings={"Networks": {"podman": "10.0.0.1"}}), "NetworkSettings.Networks[podman] is not an object"),
    (dict(DB, NetworkSettings={"Networks": {"podman": {"IPAddress": 7}}}), "NetworkSettings.Networks[podman] is not"),
    (dict(DB, Config=None, HostConfig=None), ""),
    (dict(DB, Config="x"), "Config is not an object (str)"),
    (dict(DB, Config={"Labels": ["a=b"]}), "Config.Labels is not an object (list)"),
    (dict(DB, Config={"Labels": {"a": 1}}), "Config.Labels holds a label that is not text"),
    (dict(DB, Name=["n1-db-0"]), "Name is not a container name"),
    (dict(DB, Name="n1-db-0\n"), "Name is not a container name"),
])
def test_a_container_of_another_shape_is_an_error_naming_the_host_line_and_field(entry, field):
    stdout = sectioned(engine=["engine /usr/bin/podman"], containers=[json.dumps(DB), json.dumps(entry)])
    if not field:
        assert parse(0, stdout, "podman", PREFIX, host="n1")["containers"][1] == entry
        return
    with pytest.raises(ReadError) as caught:
        parse(0, stdout, "podman", PREFIX, host="n1")
    assert str(caught.value).startswith("n1: line 5 of the deploy read: the podman engine printed a container whose "
                                        + field)


@pytest.mark.parametrize("line", ['{"Name": 1' + "0" * 5000 + "}", '{"a": ' * 100000, '{"Name": "n1-a", "State": {"Running": 1e999}}'])
def test_numbers_and_nesting_beyond_bounds_are_errors_not_tracebacks(line):
    with pytest.raises(ReadError, match=r"^n1: line 4 of the deploy read: the podman engine printed a container"):
        parse(0, sectioned(engine=["engine /usr/bin/podman"], containers=[line]), "podman", PREFIX, host="n1")


def _programs_named(program_name):
    """Starts processes whose program is a copy of the system's Python named ``program_name``, as root or as another
    user; yields a function that starts one (its arguments after Python's own ``-c``) and returns its pid."""
    import shutil
    import tempfile
    import time
    directory = tempfile.mkdtemp(prefix="gangplank-%s-" % program_name)
    os.chmod(directory, 0o755)
    program = os.path.join(directory, program_name)
    shutil.copy("/usr/bin/python3", program)
    os.chmod(program, 0o755)
    started = []

    def start(*args, user=None):
        argv = [program, "-c", "import time; time.sleep(60)"] + list(args)
        if user is not None:
            argv = ["setpriv", "--reuid", str(user), "--regid", str(user), "--clear-groups"] + argv
        process = subprocess.Popen(argv)  # pylint: disable=consider-using-with
        started.append(process)
        for _attempt in range(100):
            try:
                with open("/proc/%d/comm" % process.pid) as handle:
                    if handle.read().strip() == program_name:
                        break
            except OSError:
                pass
            time.sleep(0.02)
        return process.pid

    yield start
    for process in started:
        process.kill()
        process.wait()
    shutil.rmtree(directory)


@pytest.fixture(name="monitor")
def _monitor():
    """A process named conmon (Python takes the arguments as conmon's: ``-c`` and ``-n`` are the last of their kind)."""
    for start in _programs_named("conmon"):
        yield lambda container_id, name, user=None: start("-c", container_id, "-n", name, user=user)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"), reason="needs root and a system Python")
def test_the_shell_lists_root_monitors_only_and_names_of_one_plain_line(bed, monitor):
    run, _tmp_path = bed
    lost = monitor("abc123", "n1-lost-0")
    forged = monitor("def456", "n1-x\n" + json.dumps(dict(DB, Name="n1-forged-0")) + "\nstorage-only n1-forged-1\n"
                     "gangplank-read monitors\nconmon 1 fff n1-forged-2")
    other = monitor("fed789", "n1-other-0", user=65534)
    rc, stdout = run(probe=())
    found = parse(rc, stdout, "podman", PREFIX, host="n1")
    mine = [leftover for leftover in found["leftovers"] if leftover.split(":")[0] in {str(lost), str(forged), str(other)}]
    assert mine == ["%d:abc123:n1-lost-0" % lost]
    assert "forged" not in stdout and "n1-other-0" not in stdout and "n1-forged" not in repr(found)
    assert [entry["Name"] for entry in found["containers"]] == ["n1-db-0"]


def _desired(name, *secrets, engine="podman"):
    return {"name": name, "secrets": [
        {"name": secret, "engine_name": "%s.%s" % (name, secret) if engine == "podman" else None,
         "path": "/run/s/%s/%s" % (name, secret) if engine == "docker" and delivery == "file" else None}
        for secret, delivery in (item.split(":") if ":" in item else (item, "file") for item in secrets)]}


def test_the_secrets_no_container_uses_any_more_are_stale_podman():
    found = {"containers": [{"Name": "n1-db-0"}, {"Name": "/n1-old-0"}, {"Name": "n1.x-web-0"}],
             "leftovers": ["n1-queue-0", "broken:n1-lost-0"],
             "secrets": ["n1-db-0.password", "n1-db-0.token", "n1-old-0.password", "n1-gone-0.password",
                         "n1-queue-0.key", "n1-lost-0.key", "n1.x-web-0.cert", "n1.x-web-0.old"]}
    desired = [_desired("n1-db-0", "password"), _desired("n1.x-web-0", "cert"), _desired("n1-new-0", "password")]
    # n1-db-0 stays without its token (it is recreated without it); n1-gone-0 exists no more; n1-old-0 and the
    # leftovers are not wanted here and still exist: their removal takes their secrets. A dotted name is matched whole.
    assert deploy_read.stale_secrets(found, desired, "podman") == ["n1-db-0.token", "n1-gone-0.password", "n1.x-web-0.old"]
    # Nothing stale: a second run after the removal changes nothing.
    found["secrets"] = ["n1-db-0.password", "n1.x-web-0.cert", "n1-old-0.password"]
    assert deploy_read.stale_secrets(found, desired, "podman") == []


def test_the_secret_files_no_container_uses_any_more_are_stale_docker():
    found = {"containers": [{"Name": "/n1-db-0"}, {"Name": "/n1-old-0"}], "leftovers": [],
             "secrets": ["n1-db-0/password", "n1-db-0/token", "n1-old-0/password", "n1-gone-0/password"]}
    desired = [_desired("n1-db-0", "password", "token:env", engine="docker")]
    # An env secret is a variable of the container on Docker (no file): a file left for it is stale too.
    assert deploy_read.stale_secrets(found, desired, "docker") == ["n1-db-0/token", "n1-gone-0/password"]


def test_the_read_lists_this_hosts_secret_names_only_from_their_section():
    stdout = sectioned(engine=["engine /usr/bin/podman"], containers=[json.dumps(DB)],
                       secrets=["secret n1-db-0.password", "secret n2-db-0.password", "secret n1-db-0.bad\x1bname",
                                "secret ../n1-x"])
    assert parse(0, stdout, "podman", PREFIX)["secrets"] == ["n1-db-0.password"]
    stdout = sectioned(engine=["engine /usr/bin/docker"], secrets=["secret n1-db-0/password", "secret n1-db-0/../x",
                                                                   "secret n1-db-0"])
    assert parse(0, stdout, "docker", PREFIX)["secrets"] == ["n1-db-0/password"]
    with pytest.raises(ReadError, match="a secret line outside the secrets section"):
        parse(0, sectioned(engine=["engine /usr/bin/podman"], monitors=["secret n1-db-0.forged"]), "podman", PREFIX)


def test_each_container_read_names_its_own_secrets_for_its_removal():
    stdout = sectioned(engine=["engine /usr/bin/podman"], containers=[json.dumps(DB)], storage=["storage-only n1-web-0"],
                       secrets=["secret n1-db-0.password", "secret n1-db-0-log.key", "secret n1-web-0.token"])
    found = parse(0, stdout, "podman", PREFIX)
    assert found["secrets_of"] == {"n1-db-0": ["n1-db-0.password"], "n1-web-0": ["n1-web-0.token"]}
    # Docker's: each container's private directory, whatever the read found in it.
    stdout = sectioned(engine=["engine /usr/bin/docker"], containers=[json.dumps(DB)], secrets=["secret n1-db-0/password"])
    assert parse(0, stdout, "docker", PREFIX)["secrets_of"] == {"n1-db-0": ["n1-db-0"]}


def test_the_shell_lists_dockers_secret_files_by_name_only(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(bin_dir / "docker", 0o755)
    secrets = tmp_path / "secrets"
    for path in ("n1-db-0/password", "n1-db-0/token", "n2-db-0/password", "n1-db-0/bad name", "loose"):
        (secrets / path).parent.mkdir(parents=True, exist_ok=True)
        (secrets / path).write_text("hunter2")
    (secrets / "n1-db-0" / "dir").mkdir()
    done = subprocess.run(command("docker", PREFIX, str(tmp_path / "state"), secret_dir=str(secrets)), shell=True,
                          env=dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"])), capture_output=True,
                          text=True, timeout=30, check=False)
    assert "hunter2" not in done.stdout
    assert parse(done.returncode, done.stdout, "docker", PREFIX)["secrets"] == ["n1-db-0/password", "n1-db-0/token"]


def test_a_secret_belongs_to_its_container_not_to_that_containers_mps_daemon():
    daemon = {"Name": "n1-infer-0.mps", "Config": {"Labels": {"gangplank.io/mps-of": "n1-infer-0"}}}
    # The instance is gone, its daemon is still there: the instance's secret "mps.key" is nobody's.
    found = {"containers": [daemon], "leftovers": [], "secrets": ["n1-infer-0.mps.key"]}
    assert deploy_read.stale_secrets(found, [], "podman") == ["n1-infer-0.mps.key"]
    # Nor does a daemon left over by a killed run keep it.
    found = {"containers": [], "leftovers": ["broken:n1-infer-0.mps", "n1-infer-0.mps"], "secrets": ["n1-infer-0.mps.key"]}
    assert deploy_read.stale_secrets(found, [], "podman") == ["n1-infer-0.mps.key"]
    # A wanted daemon (no secrets) does not keep it either, when its instance no longer has the secret.
    found = {"containers": [{"Name": "n1-infer-0"}, daemon], "leftovers": [], "secrets": ["n1-infer-0.mps.key"]}
    desired = [_desired("n1-infer-0", "token"), _desired("n1-infer-0.mps")]
    assert deploy_read.stale_secrets(found, desired, "podman") == ["n1-infer-0.mps.key"]
    # The instance that has it keeps it, wanted or left to its own removal.
    assert deploy_read.stale_secrets(found, [_desired("n1-infer-0", "mps.key"), _desired("n1-infer-0.mps")],
                                     "podman") == []
    assert deploy_read.stale_secrets(found, [], "podman") == []


@pytest.fixture(name="haproxy")
def _haproxy():
    """A process whose program is named haproxy."""
    yield from _programs_named("haproxy")


def _proxy_read(tmp_path, pid_file, address="169.254.255.254/32", config=None):
    config = config or str(tmp_path / "proxy.cfg")
    done = subprocess.run(command("no-such-engine-here", PREFIX, str(tmp_path / "s"),
                                  proxy={"address": address, "pid_file": str(pid_file), "config": config}),
                          shell=True, capture_output=True, text=True, timeout=30, check=False)
    return parse(done.returncode, done.stdout, "podman", PREFIX, host="n1", proxy_asked=True)["proxy"]


def test_the_proxy_section_is_read_with_or_without_the_engine(tmp_path):
    (tmp_path / "proxy.cfg").write_text("global\n")
    found = _proxy_read(tmp_path, tmp_path / "none.pid", address="127.0.0.1/8")
    assert found == {"address": True, "master": 0, "systemd": os.path.isdir("/run/systemd/system"),
                     "config_sha1": "54652f530a66c3dd698e14dd152e3207633e32bc", "found": True}
    assert _proxy_read(tmp_path, tmp_path / "none.pid", config=str(tmp_path / "gone.cfg"))["config_sha1"] == ""
    assert _proxy_read(tmp_path, tmp_path / "none.pid")["address"] is False
    # Not asked: no section, no key.
    assert "proxy" not in parse(0, sectioned(engine=["engine /usr/bin/podman"]), "podman", PREFIX)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"), reason="needs root and a system Python")
def test_the_proxy_master_is_a_process_of_root_running_haproxy_named_by_a_pid_file_of_root(tmp_path, haproxy):
    master = haproxy()
    other = haproxy(user=65534)
    pid_file = tmp_path / "proxy.pid"
    pid_file.write_text("%d\n" % master)
    assert _proxy_read(tmp_path, pid_file)["master"] == master
    # A pid file naming a process of another user, or a process of root that is not haproxy (this test's own).
    pid_file.write_text("%d\n" % other)
    assert _proxy_read(tmp_path, pid_file)["master"] == 0
    pid_file.write_text("%d\n" % os.getpid())
    assert _proxy_read(tmp_path, pid_file)["master"] == 0
    # A pid file that another user owns, or a link to root's: not trusted, whatever it names.
    pid_file.write_text("%d\n" % master)
    os.chown(pid_file, 65534, 65534)
    assert _proxy_read(tmp_path, pid_file)["master"] == 0
    os.chown(pid_file, 0, 0)
    link = tmp_path / "link.pid"
    link.symlink_to(pid_file)
    assert _proxy_read(tmp_path, link)["master"] == 0
    # Only a first line of digits is a pid: digits spread over a file of root's do not make one.
    split = "%s\n%s\n" % (str(master)[:-1], str(master)[-1])
    for text in ("", "x\n", "%d 1\n" % master, "-1\n", " %d\n" % master, split, "$(touch %s/owned)\n" % tmp_path):
        pid_file.write_text(text)
        assert _proxy_read(tmp_path, pid_file)["master"] == 0, text
    assert not (tmp_path / "owned").exists()


@pytest.mark.parametrize("lines, expected", [
    (["proxy-master 12x", "proxy-config " + "A" * 40, "proxy-address yes"], {}),
    (["proxy-master 0", "proxy-config " + "a" * 41, "proxy-systemd no"], {}),
    (["proxy-master 4242", "proxy-config " + "a" * 40, "proxy-address", "proxy-systemd"],
     {"master": 4242, "config_sha1": "a" * 40, "address": True, "systemd": True}),
])
def test_proxy_lines_are_taken_only_whole(lines, expected):
    found = parse(0, sectioned(engine=["engine /usr/bin/podman"], proxy=lines, end=[]), "podman", PREFIX, proxy_asked=True)
    assert found["proxy"] == dict({"address": False, "master": 0, "systemd": False, "config_sha1": "", "found": False},
                                  **expected)


def test_a_proxy_line_outside_its_section_is_refused():
    stdout = sectioned(proxy=[], engine=["engine /usr/bin/podman"], secrets=["secret n1-db-0.x", "proxy-master 1"], end=[])
    with pytest.raises(ReadError, match=r"^n1: line 6 of the deploy read: a proxy-master line outside the proxy section$"):
        parse(0, stdout, "podman", PREFIX, host="n1", proxy_asked=True)


def test_the_config_files_of_this_hosts_containers_are_hashed_only_below_the_data_directory(tmp_path):
    data = tmp_path / "data"
    mine = data / "n1-client-0" / "config"
    mine.mkdir(parents=True)
    (mine / "0-upstreams.conf").write_text("a\n")
    (mine / "1-link.conf").symlink_to(mine / "0-upstreams.conf")
    other = data / "n10-client-0" / "config"
    other.mkdir(parents=True)
    (other / "0-upstreams.conf").write_text("b\n")
    done = subprocess.run(command("no-such-engine-here", PREFIX, str(tmp_path / "s"), data_dir=str(data) + "/"),
                          shell=True, capture_output=True, text=True, timeout=30, check=False)
    found = parse(done.returncode, done.stdout, "podman", PREFIX, data_dir=str(data))
    # n1- is not n10-'s prefix as a glob of "n1-*"; a link is not a file the deploy wrote.
    assert found["config_files"] == {str(mine / "0-upstreams.conf"): hashlib.sha256(b"a\n").hexdigest()}
    # Not asked: no key; a line naming a path outside the data directory is not taken.
    assert "config_files" not in parse(0, sectioned(engine=["engine /usr/bin/podman"]), "podman", PREFIX)
    forged = sectioned(config=["config-file %s /etc/shadow" % ("a" * 64)], engine=["engine /usr/bin/podman"])
    assert parse(0, forged, "podman", PREFIX, data_dir=str(data))["config_files"] == {}
