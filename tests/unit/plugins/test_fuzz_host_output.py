# -*- coding: utf-8 -*-
"""Hostile host output: what a host's shell prints is read on the controller (the deploy read, the facts read) and
what the placement record holds is read by down_hosts. Each parser gets a real valid output, mutated at random (line
breaks injected into fields, sections repeated or moved, lines swapped, huge numbers, non-ASCII digits, control
characters, forged lines), mixed with random text.

The property, for every case: no exception but the documented one (ReadError, one line naming the host), bounded
time, and nothing forged in the result: a forged line put where its own section is not never becomes an entry.
"""

from __future__ import annotations

import base64
import json
import time

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import deploy_read

from ansible_collections.gangplank.platform.plugins.module_utils.planning import down_hosts

from ansible_collections.gangplank.platform.plugins.module_utils.facts import facts_cache

CASE_SECONDS = 1.0
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
FORGED = "forged"          # every forged name holds it; nothing in a valid output does

DB = {"Name": "n1-db-0", "State": {"Running": True}, "Config": {"Labels": {"gangplank.io/service": "db"}},
      "HostConfig": {"PortBindings": {"5432/tcp": [{"HostIp": "127.0.0.1", "HostPort": "5432"}]}},
      "NetworkSettings": {"Networks": {"podman": {"IPAddress": "10.88.0.7"}}}}
API = {"Name": "n1-api-0", "State": {"Running": False}, "Config": {"Labels": None}, "HostConfig": {"PortBindings": {}},
       "NetworkSettings": {"Networks": {}}}
CHAIN = "NETAVARK-DN-1D8721804F16F"
FACT = base64.b64encode(json.dumps({"instances": {"db-0": {"service": "db"}}, "ranks": [["db"]]}).encode()).decode()

# A real read of a Podman host, section by section.
DEPLOY_VALID = [
    "gangplank-read fact", "fact-file " + FACT[:40], "fact-file " + FACT[40:],
    "gangplank-read engine", "engine /usr/bin/podman",
    "gangplank-read limits", "limits cgroup controllers: [cpuset cpu io memory pids]",
    "gangplank-read containers", json.dumps(DB), json.dumps(API),
    "gangplank-read broken", "broken n1-worker-1",
    "gangplank-read storage", "storage-only n1-queue-0",
    "gangplank-read secrets", "secret n1-db-0.password", "secret n1-gone-0.token",
    "gangplank-read monitors", "conmon 102 bbb222 n1-api-0",
    "gangplank-read forwards",
    "forward " + CHAIN + " -d 127.0.0.1/32 -p tcp -m tcp --dport 5432 -j DNAT --to-destination 10.88.0.129:5432",
    "gangplank-read end",
]
# Forged lines, each with the section it would belong to: a container, leftovers, a forward, bindings, a marker.
DEPLOY_FORGED = [
    ("containers", json.dumps(dict(DB, Name="n1-forged-0", Config={"Labels": {"gangplank.io/service": "evil"}}))),
    ("storage", "storage-only n1-forged-1"),
    ("broken", "broken n1-forged-2"),
    ("secrets", "secret n1-db-0.forged"),
    ("monitors", "conmon 7 abc n1-forged-3"),
    ("forwards", "forward " + CHAIN + " -p tcp --dport 6 -j DNAT --to-destination 10.6.6.6:6"),
    ("fact", "fact-file " + base64.b64encode(b'{"instances": {"forged-4": {}}}').decode()),
]
LINE_BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
ODD_NUMBERS = ["9" * 5000, "1" + "0" * 400, "\u00b2", "\u0664\u0662", "\uff11", "-1", "1e999", "NaN", "0x10", " 1", "1 "]
CONTROLS = ["\x00", "\x1b[2J", "\u202e", "\ud800", "\x7f", "\t", "\u200b", "\ufeff"]


def _section_at(lines, index):
    """The section a line at ``index`` is read in (the last marker before it), as the parser reads it."""
    section = None
    for line in lines[:index]:
        tag, _space, rest = line.partition(" ")
        if tag == deploy_read.MARKER:
            section = rest
    return section


def _mutate_field(draw, line):
    """``line`` with one word replaced by a huge or non-ASCII number, a control character or random text."""
    words = line.split(" ")
    where = draw(st.integers(0, len(words) - 1))
    words[where] = draw(st.one_of(st.sampled_from(ODD_NUMBERS + CONTROLS), st.text(max_size=12),
                                  st.builds("{}{}".format, st.just(words[where]), st.sampled_from(CONTROLS + LINE_BREAKS))))
    return " ".join(words)


@st.composite
def deploy_outputs(draw):
    """(output, whether a forged line may legitimately be read): a mutated valid read."""
    lines = list(DEPLOY_VALID)
    for _step in range(draw(st.integers(0, 4))):
        operation = draw(st.sampled_from(["field", "field", "field", "text", "text", "swap", "repeat", "drop", "section",
                                          "json"]))
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        if operation == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif operation == "repeat":
            count = draw(st.integers(1, 4))
            lines[index:index] = lines[index:index + count]
        elif operation == "drop":
            del lines[index]
        elif operation == "field":
            lines[index] = _mutate_field(draw, lines[index])
        elif operation == "text":
            lines.insert(index, draw(st.text(max_size=60)))
        elif operation == "section":
            lines.insert(index, "gangplank-read " + draw(st.sampled_from(list(deploy_read.SECTIONS) + ["x", ""])))
        else:
            lines.insert(index, draw(st.sampled_from([
                '{"Name": "n1-a", "State": "running"}', '{"Name": "n1-a", "HostConfig": {"PortBindings": [1]}}',
                '{"Name": "n1-a", "NetworkSettings": {"Networks": ["x"]}}', '{"Name": "n1-a", "Config": null}',
                '{"Name": "n1-a", "Config": {"Labels": ["a"]}}', '{"Name": "n1-a", "State": {"Running": "1"}}',
                '{"Name": 1' + "0" * 5000 + '}', '{"a": ' * 3000, "{", '{"Name": "n1-a", "State": {"Running": 1e999}}',
                '{"Name": "n1-a\\u2028x"}', '{"Name": ["n1-a"]}'])))
    # Forged lines last: put where their own section is not (a line break in another line's field, or a line of its
    # own), they must never be read.
    for _step in range(draw(st.sampled_from([0, 0, 1, 2, 3]))):
        section, forged = draw(st.sampled_from(DEPLOY_FORGED))
        index = draw(st.integers(0, len(lines)))
        if _section_at(lines, index) == section:
            continue
        if index and draw(st.booleans()):
            lines[index - 1] += draw(st.sampled_from(LINE_BREAKS)) + forged
        else:
            lines.insert(index, forged)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


def _timed(run, *args, **kwargs):
    start = time.monotonic()
    try:
        return run(*args, **kwargs)
    finally:
        assert time.monotonic() - start < CASE_SECONDS, "took %.2fs" % (time.monotonic() - start)


def _check_deploy(stdout, rc=0):
    try:
        found = _timed(deploy_read.parse, rc, stdout, "podman", "n1-", limits_asked=True, host="n1")
    except deploy_read.ReadError as error:
        message = str(error)
        assert message.startswith("n1: ") and "\n" not in message and "\r" not in message, message
        assert FORGED not in message
        return
    assert FORGED not in json.dumps(found, default=repr), found
    for entry in found["containers"]:
        assert deploy_read._shape_error(entry) == ""                      # pylint: disable=protected-access
    assert all(isinstance(leftover, str) and "\n" not in leftover for leftover in found["leftovers"])
    assert all(deploy_read._FORWARD_RULE.fullmatch(forward["rule"]) for forward in found["forwards"])  # pylint: disable=protected-access
    deploy_read.deploy_entry("n1", found, {"engine": "podman"}, {}, [], fact_file="/f", limits=True)


@settings(FUZZ, max_examples=3500)
@given(deploy_outputs())
def test_deploy_read_of_a_mutated_valid_output(stdout):
    _check_deploy(stdout)


@settings(FUZZ, max_examples=800)
@given(st.sampled_from([0, 127, 3, 1]), st.lists(st.one_of(
    st.text(max_size=50),
    st.builds("{} {}".format, st.sampled_from(["gangplank-read", "engine", "limits", "storage-only", "broken", "conmon",
                                               "fact-file", "fact-file-too-large", "forward", "engine error:"]),
              st.text(max_size=50))), max_size=15))
def test_deploy_read_of_random_text(rc, lines):
    _check_deploy("\n".join(lines), rc)


# --- the facts read ------------------------------------------------------------------------------------------

CACHE = base64.b64encode(json.dumps({"version": 1, "fingerprint": "f", "facts": {"processor_vcpus": 4}}).encode()).decode()
FACTS_VALID = [
    "cpus 4", "uname x86_64 Linux", "meminfo MemTotal:       16318436 kB",
    "driver - =" + base64.b64encode(b"NVRM version: 550.54").decode(),
    "gpu 0000:01:00.0 =" + base64.b64encode(b"Model: H100").decode(), "gpu 0000:02:00.0",
    "capability ./gpu0/mig/gi1/access", "nvme nvme0", "block nvme0n1 =" + base64.b64encode(b"2048\n").decode(),
    "mount /dev/nvme0n1 /data ext4 rw,relatime 0 0", "cache file =" + CACHE, "fact missing", "end",
]
FACTS_FORGED = ["cpus 999999", "nvme nvmeforged", "gpu forged =AAAA", "capability ./forged", "uname forged forged"]


@st.composite
def facts_outputs(draw):
    """(output, whether a line was forged inside another line): a mutated valid facts read."""
    lines = list(FACTS_VALID)
    forged = False
    for _step in range(draw(st.integers(0, 4))):
        operation = draw(st.sampled_from(["swap", "repeat", "drop", "field", "text", "forge", "huge"]))
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        if operation == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif operation == "repeat":
            lines[index:index] = lines[index:index + draw(st.integers(1, 3))]
        elif operation == "drop":
            del lines[index]
        elif operation == "field":
            lines[index] = _mutate_field(draw, lines[index])
        elif operation == "text":
            lines.insert(index, draw(st.text(max_size=60)))
        elif operation == "forge":
            # A field holding a character that str.splitlines() breaks at, but the shell does not.
            lines[index] += draw(st.sampled_from(LINE_BREAKS[2:])) + draw(st.sampled_from(FACTS_FORGED))
            forged = True
        else:
            lines.insert(index, draw(st.sampled_from(["cpus", "meminfo", "gpu 0000:03:00.0", "mount"])) + " "
                         + draw(st.sampled_from(ODD_NUMBERS)))
    return "\n".join(lines) + "\n", forged


@settings(FUZZ, max_examples=2500)
@given(facts_outputs())
def test_facts_read_of_a_mutated_valid_output(case):
    stdout, forged = case
    try:
        read = _timed(facts_cache.parse_read, stdout, "/c", "/f", host="n1")
    except facts_cache.ReadError as error:
        assert str(error).startswith("n1: line ") and "\n" not in str(error)
        return
    if read is None:
        return
    view, content, _bindings = read
    assert view["cpus"] is None or (isinstance(view["cpus"], int) and 0 <= view["cpus"] < 10 ** 7)
    if forged:
        assert FORGED not in json.dumps(view) and view["cpus"] != 999999
    assert content is None or isinstance(content, dict)
    facts_cache.fingerprint({}, view)


_FACTS_TAGS = ["cpus", "uname", "meminfo", "driver", "gpu", "block", "capability", "nvme", "mount", "cache", "fact"]
_FACTS_LINE = st.builds("{} {}".format, st.sampled_from(_FACTS_TAGS),
                        st.one_of(st.text(max_size=40), st.sampled_from(ODD_NUMBERS)))


@settings(FUZZ, max_examples=700)
@given(st.lists(st.one_of(st.text(max_size=40), _FACTS_LINE), max_size=20), st.booleans())
def test_facts_read_of_random_text(lines, ended):
    try:
        _timed(facts_cache.parse_read, "\n".join(lines + (["end"] if ended else [])), "/c", "/f", host="n1")
    except facts_cache.ReadError as error:
        assert str(error).startswith("n1: line ") and "\n" not in str(error)


# --- the placement record (down_hosts) ------------------------------------------------------------------------

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
              st.sampled_from(["n3", "n3\n", "n3\u202e", "9" * 5000, "", "n" * 300])),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)),
    max_leaves=8)


@st.composite
def records(draw):
    record = {"placement": {"db-0": {"node": "n3", "service": "db"}, "web-0": {"node": "n1", "service": "web"},
                            "web-1": {"node": "n3", "service": "web"}},
              "nodes": {"n1": {"cpu": "4"}, "n3": {"cpu": "8"}}, "down_since": {"n3": 50}}
    for _step in range(draw(st.integers(0, 4))):
        where = draw(st.sampled_from(["placement", "nodes", "down_since", "record", "entry", "node"]))
        value = draw(JSONISH)
        if where == "record":
            return value if draw(st.booleans()) else dict(record, **{draw(st.sampled_from(list(record))): value})
        if where in ("placement", "nodes", "down_since"):
            record[where] = value
        elif isinstance(record.get("placement"), dict) and record["placement"]:
            name = draw(st.sampled_from(sorted(record["placement"])))
            if where == "entry":
                record["placement"][name] = value
            elif isinstance(record["placement"][name], dict):
                record["placement"][name] = dict(record["placement"][name], node=value)
    return record


@settings(FUZZ, max_examples=2000)
@given(records(), st.integers(0, 2 ** 40))
def test_down_hosts_of_a_mutated_record(record, now):
    start = time.monotonic()
    down = down_hosts.down_nodes(record, ["n1"], ["n1", "n3", "n3\n"])
    assert all(down_hosts._host(host) for host in down)                # pylint: disable=protected-access
    assert set(down) <= {"n3"}
    since = down_hosts.down_since(record if isinstance(record, dict) else {}, down, now)
    placement = record.get("placement") if isinstance(record, dict) else None
    services = {"db": {"stateful": True}, "web": {}}
    waits = down_hosts.waiting(placement if isinstance(placement, dict) else {}, down)
    assert all("\n" not in line for line in down_hosts.waiting_lines(waits))
    chosen = down_hosts.replacements(placement, services, since, now, 0)
    assert all(why["node"] in down for why in chosen.values())
    down_hosts.pending_lines(placement, services, since, now, 10, {})
    message = down_hosts.move_stateful_error("db-0", "db-0", placement, services, down)
    assert message is None or (message.startswith("move_stateful: ") and "\n" not in message)
    problems = down_hosts.record_problems(record)
    assert len(problems) <= 10 and all("\n" not in line for line in problems)
    assert time.monotonic() - start < CASE_SECONDS
