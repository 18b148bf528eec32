# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one read of a host that its deploy starts from, and what it means (gangplank.platform.deploy_read).

One shell on the host (no Python there: a module run costs ~0.15 s of a 2-core controller per host, a shell ~0.01 s;
day 2 at 30 hosts, docs/deploy.md) prints, line by line, each line tagged:

- ``fact-file <base64>``: with a fact file, the node's bindings the schedule role wrote (``fact-file-unreadable`` when
  it cannot be read, ``fact-file-too-large <bytes>`` over FACT_FILE_LIMIT), before the engine is looked for, so that a
  host without the engine still has them;
- ``engine <path>``; exit 127 without the engine;
- ``limits <answer>``: with a limit probe, the engine's answer to which limits it can enforce: the one the runtime role
  stored at its last full run (the state file's ``limits <engine> <answer>`` line), else asked now (a failing ``info``
  leaves the answer empty, not the engine missing);
- one JSON object per container named ``<prefix>...``: only what the comparison needs (name, running, labels,
  published ports), projected by the engine itself, so a container's env never enters a result (docs/secrets.md);
- Podman: ``storage-only <name>`` for a container in the image store only, what a run killed while Podman created it
  leaves: its name is taken until ``podman rm --storage`` (roles/deploy/tasks/wave.yml);
- Podman: ``broken <name>`` for a container the engine lists but cannot inspect because a file of its storage is gone
  (its inspect fails with "no such file or directory"; any other failure, and this one with Docker, is an engine
  error): removed, and made anew if wanted;
- Podman: ``conmon <pid> <container id> <name>`` for each monitor process on the host, from /proc (no engine call):
  one of this host's containers that the engine does not run is what a run killed inside ``podman start`` leaves.
- Podman: ``forward <rule>`` for each port forwarding rule of Podman's network backend (netavark's iptables DNAT
  rules in its ``NETAVARK-DN-*`` chains, ``iptables -S``). A run killed while Podman set up or tore down a container's
  network can leave one behind, pointing at an address no container has: it comes before the rule of the next
  container that publishes the same address and port, so connections to that container time out.

rc 3: the engine answered but could not list or inspect the containers (``engine error: ...`` says why).
Over SSH the shell runs on a terminal, which joins stderr to stdout: the engine's stderr (warnings) is kept out of the
lines above, and untagged lines are ignored; on an error, the command runs again for the error line.
Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
import shlex

ENGINES = ("podman", "docker")

# What the read asks each container's inspect data for, one JSON object a line in the shape deploy_rollout reads:
# the same Go template fields on Podman and Docker, and no env.
INSPECT_PROJECTION = (
    '{"Name": {{json .Name}}, "State": {"Running": {{json .State.Running}}}, '
    '"Config": {"Labels": {{json .Config.Labels}}}, "HostConfig": {"PortBindings": {{json .HostConfig.PortBindings}}}, '
    '"NetworkSettings": {"Networks": {{json .NetworkSettings.Networks}}}}'
)

# Per engine: the answer to the limit probe (the cluster role's cluster_limit_probe) that means the engine can enforce
# CPU and memory limits.
LIMIT_SUPPORT = {
    "podman": re.compile(r"^(?=.*\bcpu\b)(?=.*\bmemory\b)"),
    "docker": re.compile(r"memory limit: true, cpu quota: true"),
}

# A node's bindings take a few KiB; a larger fact file is not one the schedule role wrote, and is not read.
FACT_FILE_LIMIT = 4 * 1024 * 1024

# $1 engine, $2 projection, $3 name pattern (a regular expression, unanchored: a superset of this host's containers,
# which the deploy's comparison narrows), $4 runtime state file, $5 fact file ('' for none), then the limit probe.
SCRIPT = r"""engine=$1 projection=$2 names=$3 state=$4 fact=$5; shift 5
if [ -n "$fact" ]; then
  # Its size only for a regular file: opening a FIFO to count it would wait for a writer, for ever.
  size=; [ ! -f "$fact" ] || size=$(wc -c < "$fact" 2>/dev/null | tr -dc 0-9)
  if [ -n "$size" ] && [ "$size" -le {limit} ] && encoded=$(base64 < "$fact" 2>/dev/null); then
    printf '%s\n' "$encoded" | sed 's/^/fact-file /'
  elif [ -n "$size" ] && [ "$size" -gt {limit} ]; then printf 'fact-file-too-large %s\n' "$size"
  else printf 'fact-file-unreadable\n'; fi
fi
path=$(command -v "$engine") || exit 127
printf 'engine %s\n' "$path"
if [ "$#" -gt 0 ]; then
  stored=$(sed -n "s/^limits $engine //p" "$state" 2>/dev/null | head -n 1)
  if [ -z "$stored" ]; then stored=$("$@" 2>/dev/null) || true; fi
  printf '%s\n' "$stored" | sed 's/^/limits /'
fi
external=; [ "$engine" != podman ] || external=--external
list_all() { "$engine" ps -a $external --filter "name=$names" --format '{{.ID}} {{.Names}} {{.State}}'; }
list=$(list_all 2>/dev/null) || { printf 'engine error: %s\n' "$(list_all 2>&1 >/dev/null)"; exit 3; }
ids=$(printf '%s\n' "$list" | awk 'NF && tolower($3) != "storage" {print $1}')
if [ -n "$ids" ] && ! inspected=$("$engine" inspect --format "$projection" $ids 2>/dev/null); then
  for id in $ids; do
    one=$("$engine" inspect --format "$projection" "$id" 2>&1) && { printf '%s\n' "$one"; continue; }
    case $one in
      *"no such container"*) ;;
      *"no such file or directory"*)
        [ "$engine" = podman ] || { printf 'engine error: %s\n' "$one"; exit 3; }
        printf '%s\n' "$list" | awk -v id="$id" '$1 == id {print "broken " $2}';;
      *) printf 'engine error: %s\n' "$one"; exit 3;;
    esac
  done
elif [ -n "$ids" ]; then printf '%s\n' "$inspected"; fi
printf '%s\n' "$list" | awk 'NF && tolower($3) == "storage" {print "storage-only " $2}'
if [ "$engine" = podman ]; then
  set -- $(grep -lx conmon /proc/[0-9]*/comm 2>/dev/null | sed 's,/comm$,/cmdline,')
  [ "$#" -eq 0 ] || awk 'BEGIN { RS = "\0";
    for (i = 1; i < ARGC; i++) { id = name = prev = ""; while ((getline arg < ARGV[i]) > 0) {
      if (prev == "-c") id = arg; if (prev == "-n") name = arg; prev = arg } close(ARGV[i]);
      pid = ARGV[i]; gsub(/[^0-9]/, "", pid); if (id != "" && name != "") print "conmon " pid " " id " " name } }' "$@"
  ! command -v iptables >/dev/null 2>&1 ||
    iptables -w -t nat -S 2>/dev/null | awk '$1 == "-A" && $2 ~ /^NETAVARK-DN-/ && / -j DNAT / {sub(/^-A /, "forward "); print}'
fi
""".replace("{limit}", str(FACT_FILE_LIMIT))

_CONMON = re.compile(r"conmon ([0-9]+) ([0-9a-f]+) (\S+)$")
# A forwarding rule as iptables -S prints it, without "-A": the chain, then options and values of plain characters only
# (the rule is deleted with those words, split by the shell).
_FORWARD_RULE = re.compile(r"NETAVARK-DN-[0-9A-Fa-f]+( [A-Za-z0-9_./:-]+)+$")


class ReadError(ValueError):
    """The engine answered but could not list or inspect the containers, or the read failed otherwise."""


def command(engine, name_prefix, state_file, fact_file="", limit_probe=()):
    """The shell command line of the read."""
    argv = ["sh", "-c", SCRIPT, "sh", engine, INSPECT_PROJECTION, re.escape(name_prefix), state_file, fact_file or ""]
    return " ".join(shlex.quote(arg) for arg in argv + list(limit_probe))


def _bindings(encoded):
    """(bindings, error) from the fact file's base64 lines; None when the read did not ask for them."""
    if encoded is None:
        return None, ""
    if encoded is False:
        return {}, "the file is missing or cannot be read"
    if isinstance(encoded, str):
        return {}, encoded
    try:
        bindings = json.loads(base64.b64decode("".join(encoded), validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        return {}, "not a JSON object (%s)" % error
    if not isinstance(bindings, dict):
        return {}, "not a JSON object (%s)" % type(bindings).__name__
    return bindings, ""


def _ipv4(text):
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _published(address, port):
    """An address and port as a container spec publishes them ("address:port"), or the port alone for any address."""
    return "%s:%s" % (address, port) if address else str(port)


def _forward(rule):
    """(the published address and port it serves, as a container spec publishes them: "address:port" or "port"; the
    address it forwards to) of a forwarding rule, or None for any rule not of the shape netavark writes."""
    if not _FORWARD_RULE.match(rule):
        return None
    words = rule.split()[1:]
    if len(words) % 2 or not all(word.startswith("-") for word in words[::2]):
        return None
    options = dict(zip(words[::2], words[1::2]))
    to_address, _colon, to_port = options.get("--to-destination", "").rpartition(":")
    address, _slash, mask = options.get("-d", "").partition("/")
    if (options.get("-j") != "DNAT" or options.get("-p") != "tcp" or not options.get("--dport", "").isdigit()
            or not _ipv4(to_address) or not to_port.isdigit() or ("-d" in options and not (_ipv4(address) and mask == "32"))
            or set(options) - {"-d", "-p", "-m", "--dport", "-j", "--to-destination"}):
        return None
    return _published(address, options["--dport"]), to_address


def _stale_forwards(rules, containers):
    """The forwarding rules (as ``{"published": "address:port", "rule": text}``) that no running container of this host
    owns: a rule is a running container's when that container publishes the address and port and has the address the
    rule forwards to. The others are left by a killed run, or belong to another program's container; the wave deletes
    one only just before it starts a container of this host that publishes the same address and port (which no
    running container can then have)."""
    owned = set()
    for entry in containers:
        if not (entry.get("State") or {}).get("Running"):
            continue
        networks = (entry.get("NetworkSettings") or {}).get("Networks") or {}
        addresses = {network.get("IPAddress") for network in networks.values() if isinstance(network, dict)}
        bindings = (entry.get("HostConfig") or {}).get("PortBindings") or {}
        for port, entries in bindings.items():
            if not str(port).endswith("/tcp"):
                continue
            for binding in entries or []:
                # Any address ("8080:8080") is a rule without -d, whichever way the engine writes it.
                host_ip = binding.get("HostIp") if binding.get("HostIp") not in ("0.0.0.0", "::") else ""
                published = _published(host_ip, binding.get("HostPort"))
                owned.update((published, address) for address in addresses if address)
    stale = []
    for rule in rules:
        forward = _forward(rule)
        if forward is not None and forward not in owned:
            stale.append({"published": forward[0], "rule": rule})
    return stale


def parse(rc, stdout, engine, name_prefix, limits_asked=False):
    """What the read found: ``engine_found``, ``containers`` (the JSON objects), ``leftovers``, ``limits`` (the engine's
    answer, '' when not asked), ``enforce_limits``, and with a fact file ``bindings`` and ``bindings_error``.

    ``leftovers`` names what a run killed inside the engine left of this host's containers: ``<name>`` (image store
    only), ``broken:<name>`` and ``<pid>:<container id>:<name>`` for a monitor of a container the engine does not run
    (compared by name: Podman's inspect template calls the id ``.ID``, Docker's ``.Id``). ``forwards``: the forwarding
    rules no running container of this host owns (_stale_forwards).
    Raises ReadError for any exit status but 0 and 127 (no engine)."""
    lines = stdout.splitlines()
    if rc not in (0, 127):
        errors = [line for line in lines if line.startswith("engine error: ")]
        raise ReadError(errors[-1] if errors else "the read of the %s engine failed (rc %s): %s"
                        % (engine, rc, " ".join(stdout.split())[-500:]))
    # The fact file: None when not read, its base64 lines, False when unreadable, or why it was not read.
    fact, fact_lines, containers, limits, storage, broken, monitors, forwards = None, [], [], [], [], [], [], []
    for line in lines:
        line = line.rstrip("\r")
        tag, _space, rest = line.partition(" ")
        if tag == "fact-file":
            fact_lines.append(rest)
            fact = fact_lines if fact is None else fact
        elif line == "fact-file-unreadable":
            fact = False
        elif tag == "fact-file-too-large":
            fact = "larger than %d bytes (%s)" % (FACT_FILE_LIMIT, rest.strip())
        elif rc != 0:
            continue
        elif line.startswith("{"):
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise ReadError("the %s engine printed a container that is not JSON (%s): %s" % (engine, error, line[:200])) from None
            if isinstance(entry, dict):
                containers.append(entry)
        elif tag == "limits":
            limits.append(rest)
        elif tag in ("storage-only", "broken") and rest.startswith(name_prefix):
            (storage if tag == "storage-only" else broken).append(rest)
        elif tag == "conmon":
            match = _CONMON.match(line)
            if match and match.group(3).startswith(name_prefix):
                monitors.append(match.groups())
        elif tag == "forward":
            forwards.append(rest)
    running = {str(entry.get("Name", "")).lstrip("/") for entry in containers if (entry.get("State") or {}).get("Running")}
    answer = " ".join(limits).strip()
    found = {
        "engine_found": rc == 0,
        "containers": containers,
        "leftovers": storage + ["broken:" + name for name in broken]
        + [":".join(monitor) for monitor in monitors if monitor[2] not in running],
        "forwards": _stale_forwards(forwards, containers),
        "limits": answer,
        "enforce_limits": bool(limits_asked and rc == 0 and LIMIT_SUPPORT[engine].search(answer)),
    }
    if fact is not None:
        found["bindings"], found["bindings_error"] = _bindings(fact)
    return found


def deploy_entry(host, found, settings, instances, ranks, fact_file="", limits=False, check_mode=False):
    """What the deploy decides from for one host: ``settings`` (as deploy_hosts_containers takes them, with its
    ``instances`` and whether ``limits`` are enforced), ``ranks``, ``missing`` (why the host cannot be deployed: its
    bindings, or its engine, which only check mode may find missing, before the runtime role installed it) and
    ``note`` (the engine cannot enforce the limits: the host's line says so)."""
    bound = found.get("bindings")
    if bound is not None:
        instances, ranks = bound.get("instances", {}), bound.get("ranks", [])
    missing = ""
    if found.get("bindings_error"):
        missing = ("%s has no bindings: %s cannot be read (%s). Run playbooks/site.yml (or schedule.yml) first, which "
                   "places the catalog and writes it." % (host, fact_file, found["bindings_error"]))
    elif not found["engine_found"] and not check_mode:
        engine = settings.get("engine", "")
        missing = ("%s has no %s: run the gangplank.platform.runtime role first (playbooks/site.yml or runtime.yml "
                   "does), or set gangplank_container_engine to the engine it has." % (host, engine))
    note = ""
    if limits and found["engine_found"] and not found["enforce_limits"]:
        note = ("; the %s engine cannot enforce CPU and memory limits here (%s): containers run without the limits the "
                "scheduler reserved" % (settings.get("engine", ""), found["limits"]))
    return {
        "settings": dict(settings, instances=instances, limits=found["enforce_limits"]),
        "ranks": ranks,
        "missing": missing,
        "note": note,
    }
