# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one read of a host that its deploy starts from, and what it means (gangplank.platform.deploy_read).

One shell on the host (no Python there: a module run costs ~0.15 s of a 2-core controller per host, a shell ~0.01 s;
day 2 at 30 hosts, docs/deploy.md) prints, line by line, each line tagged, each kind of line in its own section after
a marker line ``gangplank-read <section>`` (SECTIONS, in that order, each at most once). The parser takes a line only
inside its own section: a tagged line elsewhere, a section twice or out of order is refused (ReadError naming the host
and the line), so that text a host's process controls (a name holding a line break) cannot pass for another line.

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
- ``secret <name>``: the secrets on the host by name only, never a value: Podman's (``podman secret ls``), Docker's
  private files ``<container>/<secret>`` below the secret directory; stale_secrets() says which no container uses;
- Podman: ``conmon <pid> <container id> <name>`` for each monitor process of the engine on the host, from /proc (no
  engine call): only processes of root (real and effective uid 0) whose program is a ``conmon`` binary (any user can
  name a process conmon), and only with a hex id and a name of one word of the engine's name characters. One of this
  host's containers that the engine does not run is what a run killed inside ``podman start`` leaves.
- Podman: ``forward <rule>`` for each port forwarding rule of Podman's network backend (netavark's iptables DNAT
  rules in its ``NETAVARK-DN-*`` chains, ``iptables -S``). A run killed while Podman set up or tore down a container's
  network can leave one behind, pointing at an address no container has: it comes before the rule of the next
  container that publishes the same address and port, so connections to that container time out.

- ``proxy-address``, ``proxy-master <pid>``, ``proxy-systemd``, ``proxy-config <sha1>``: with the local proxy's
  paths (docs/connecting-services.md), whether the loopback interface has its address, its master process, whether
  systemd runs, and the SHA-1 of its live configuration file. The master's pid is taken from the pid file only where
  that file is a regular file of root (not a link), and only where that pid is a process of root (real and effective
  uid 0) running a ``haproxy`` binary: a local user can write a pid file in a directory of theirs, not make a process
  of root. Before the engine is looked for, so that a host without the engine still has it.
- ``config-file <sha256> <path>``: with the data directory, the SHA-256 of each config file of this host's containers
  (``<data_dir>/<prefix>*/config/*``, regular files only, at most MAX_CONFIG_FILES): what a config file that changes in
  place (``change`` signal or none) is compared with.

rc 3: the engine answered but could not list or inspect the containers (``engine error: ...`` says why).
Over SSH the shell runs on a terminal, which joins stderr to stdout: the engine's stderr (warnings) is kept out of the
lines above, and untagged lines are ignored; on an error, the command runs again for the error line. A container's JSON
of another shape than the projection's (State a string, PortBindings a list, ...) is refused, naming the field.
Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
import shlex

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import DRIVERS
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.mps import SUFFIX as MPS_SUFFIX
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, one_line, well_formed

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
# The config files a read hashes at most (each container has a few).
MAX_CONFIG_FILES = 4096

# $1 engine, $2 projection, $3 name pattern (a regular expression, unanchored: a superset of this host's containers,
# which the deploy's comparison narrows), $4 runtime state file, $5 fact file ('' for none), $6 the directory of
# Docker's secret files ('' for none), $7-$9 the local proxy's address with its prefix, pid file and configuration file
# ('' for no proxy section), $10-$11 the data directory and the containers' name prefix as a plain word ('' for no
# config section), then the limit probe.
# Every part of the output comes after its own marker line ("gangplank-read <section>", SECTIONS, in that order, each
# once): the parser takes a line only inside its section.
SCRIPT = r"""engine=$1 projection=$2 names=$3 state=$4 fact=$5 secrets=$6 proxy=$7 proxy_pid=$8 proxy_config=$9 data_dir=${10} prefix=${11}
shift 11
section() { printf 'gangplank-read %s\n' "$1"; }
if [ -n "$fact" ]; then
  section fact
  # Its size only for a regular file: opening a FIFO to count it would wait for a writer, for ever.
  size=; [ ! -f "$fact" ] || size=$(wc -c < "$fact" 2>/dev/null | tr -dc 0-9)
  if [ -n "$size" ] && [ "$size" -le {limit} ] && encoded=$(base64 < "$fact" 2>/dev/null); then
    printf '%s\n' "$encoded" | sed 's/^/fact-file /'
  elif [ -n "$size" ] && [ "$size" -gt {limit} ]; then printf 'fact-file-too-large %s\n' "$size"
  else printf 'fact-file-unreadable\n'; fi
fi
if [ -n "$proxy" ]; then
  section proxy
  ! ip -o address show dev lo 2>/dev/null | grep -qF " $proxy " || printf 'proxy-address\n'
  pid=
  if [ -f "$proxy_pid" ] && [ ! -L "$proxy_pid" ] && [ "$(stat -c %u "$proxy_pid" 2>/dev/null)" = 0 ]; then
    # Its first line, digits only: anything else in it is not a pid.
    pid=$(head -c 32 "$proxy_pid" 2>/dev/null | head -n 1)
    case $pid in '' | *[!0-9]*) pid= ;; esac
  fi
  # A binary replaced by an upgrade while it runs reads "<path> (deleted)".
  if [ -n "$pid" ] && exe=$(readlink "/proc/$pid/exe" 2>/dev/null) && { [ "${exe##*/}" = haproxy ] || [ "${exe##*/}" = "haproxy (deleted)" ]; } &&
    awk '$1 == "Uid:" && $2 == "0" && $3 == "0" {root = 1} END {exit !root}' "/proc/$pid/status" 2>/dev/null; then
    printf 'proxy-master %s\n' "$pid"
  fi
  [ ! -d /run/systemd/system ] || printf 'proxy-systemd\n'
  sum=; [ ! -f "$proxy_config" ] || sum=$(sha1sum < "$proxy_config" 2>/dev/null | cut -c1-40)
  [ -z "$sum" ] || printf 'proxy-config %s\n' "$sum"
  if [ -e "$proxy_config" ] || [ -L "$proxy_config" ] || [ -e {unit} ]; then printf 'proxy-found\n'; fi
fi
if [ -n "$data_dir" ] && [ -n "$prefix" ]; then
  section config
  for f in "$data_dir"/"$prefix"*/config/*; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    sum=$(sha256sum < "$f" 2>/dev/null | cut -c1-64) && printf 'config-file %s %s\n' "$sum" "$f"
  done | head -n {max_config}
fi
path=$(command -v "$engine") || exit 127
section engine
printf 'engine %s\n' "$path" | tr -d '\r'
if [ "$#" -gt 0 ]; then
  section limits
  stored=$(sed -n "s/^limits $engine //p" "$state" 2>/dev/null | head -n 1)
  if [ -z "$stored" ]; then stored=$("$@" 2>/dev/null) || true; fi
  printf '%s\n' "$stored" | sed 's/^/limits /'
fi
external=; [ "$engine" != podman ] || external=--external
list_all() { "$engine" ps -a $external --filter "name=$names" --format '{{.ID}} {{.Names}} {{.State}}'; }
list=$(list_all 2>/dev/null) || { printf 'engine error: %s\n' "$(list_all 2>&1 >/dev/null)"; exit 3; }
ids=$(printf '%s\n' "$list" | awk 'NF && tolower($3) != "storage" {print $1}')
section containers
broken=
if [ -n "$ids" ] && ! inspected=$("$engine" inspect --format "$projection" $ids 2>/dev/null); then
  for id in $ids; do
    one=$("$engine" inspect --format "$projection" "$id" 2>&1) && { printf '%s\n' "$one"; continue; }
    case $one in
      *"no such container"*) ;;
      *"no such file or directory"*)
        [ "$engine" = podman ] || { printf 'engine error: %s\n' "$one"; exit 3; }
        broken="$broken $id";;
      *) printf 'engine error: %s\n' "$one"; exit 3;;
    esac
  done
elif [ -n "$ids" ]; then printf '%s\n' "$inspected"; fi
# Names only as the engine spells them: one word of its name characters.
name_only='$2 ~ /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/'
section broken
for id in $broken; do printf '%s\n' "$list" | awk -v id="$id" '$1 == id && '"$name_only"' {print "broken " $2}'; done
section storage
printf '%s\n' "$list" | awk 'NF && tolower($3) == "storage" && '"$name_only"' {print "storage-only " $2}'
# The secrets gangplank made, names only (never a value): Podman's, and Docker's private files <container>/<secret>.
section secrets
if [ "$engine" = podman ]; then
  "$engine" secret ls --format '{{.Name}}' 2>/dev/null | awk '/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/ {print "secret " $0}'
elif [ -n "$secrets" ] && [ -d "$secrets" ]; then
  (cd "$secrets" && find . -mindepth 2 -maxdepth 2 -type f 2>/dev/null) |
    awk -F/ 'NF == 3 && $2 ~ /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/ && $3 ~ /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/ {print "secret " $2 "/" $3}'
fi
if [ "$engine" = podman ]; then
  section monitors
  # The engine's monitors only: processes of root (real and effective uid 0) whose program is a conmon binary (a local
  # user can name a process conmon, not make one of root), their container id and name one line of plain characters.
  for comm in $(grep -lx conmon /proc/[0-9]*/comm 2>/dev/null); do
    dir=${comm%/comm}; pid=${dir#/proc/}
    exe=$(readlink "$dir/exe" 2>/dev/null) || continue
    case $exe in */conmon) ;; *) continue;; esac
    awk '$1 == "Uid:" && $2 == "0" && $3 == "0" {root = 1} END {exit !root}' "$dir/status" 2>/dev/null || continue
    awk -v pid="$pid" 'BEGIN { RS = "\0" } { if (prev == "-c") id = $0; if (prev == "-n") name = $0; prev = $0 }
      END { if (pid ~ /^[0-9]+$/ && id ~ /^[0-9a-f]+$/ && length(id) <= 64 && name ~ /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/ &&
                length(name) <= 253) print "conmon " pid " " id " " name }' "$dir/cmdline" 2>/dev/null
  done
  section forwards
  ! command -v iptables >/dev/null 2>&1 ||
    iptables -w -t nat -S 2>/dev/null | awk '$1 == "-A" && $2 ~ /^NETAVARK-DN-/ && / -j DNAT / {sub(/^-A /, "forward "); print}'
fi
section end
""".replace("{limit}", str(FACT_FILE_LIMIT)).replace("{max_config}", str(MAX_CONFIG_FILES)).replace(
    "{unit}", "/etc/systemd/system/gangplank-proxy.service")

# The output's sections in the order the script prints them, and the tags each one holds ("{" for a container's JSON).
SECTIONS = ("fact", "proxy", "config", "engine", "limits", "containers", "broken", "storage", "secrets", "monitors", "forwards",
            "end")
MARKER = "gangplank-read"
_SECTION_OF = {
    "fact-file": "fact", "fact-file-unreadable": "fact", "fact-file-too-large": "fact",
    "engine": "engine",
    "limits": "limits", "{": "containers", "broken": "broken", "storage-only": "storage", "secret": "secrets", "conmon": "monitors",
    "forward": "forwards", "proxy-address": "proxy", "proxy-found": "proxy", "proxy-master": "proxy", "proxy-systemd": "proxy",
    "proxy-config": "proxy", "config-file": "config",
}
# A container's name as the engines allow it; a container id; a monitor line (pid, container id, name).
NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
MAX_NAME = 253
_CONMON = re.compile(r"conmon ([0-9]{1,10}) ([0-9a-f]{1,64}) ([a-zA-Z0-9][a-zA-Z0-9_.-]{0,252})")
# A forwarding rule as iptables -S prints it, without "-A": the chain, then options and values of plain characters only
# (the rule is deleted with those words, split by the shell).
# The local proxy's lines: its master's pid, its live configuration's SHA-1.
_PROXY_MASTER = re.compile(r"[1-9][0-9]{0,9}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
# A config file's line: its SHA-256 and its path (data_dir/<container>/config/<file>, one line of printable text).
_CONFIG_FILE = re.compile(r"([0-9a-f]{64}) (/[^\x00-\x1f\x7f]{1,4095})")
# A name prefix the shell may glob with: a host's name and "-".
_PLAIN_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
_FORWARD_RULE = re.compile(r"NETAVARK-DN-[0-9A-Fa-f]+( [A-Za-z0-9_./:-]+)+")
# The secrets a read lists at most (names only).
MAX_SECRETS = 10000
# What a container's JSON line may hold (longer lines are not the engine's projection).
MAX_CONTAINER_LINE = 1024 * 1024


class ReadError(ValueError):
    """The engine answered but could not list or inspect the containers, or the read failed otherwise."""


def command(engine, name_prefix, state_file, fact_file="", limit_probe=(), secret_dir="", proxy=None, data_dir=""):
    """The shell command line of the read; ``proxy`` ({address, pid_file, config}, the address with its prefix as
    ``ip address`` prints it) adds the local proxy's section, ``data_dir`` the config files' (for a name prefix of plain
    characters only: the shell globs with it)."""
    proxy = proxy or {}
    plain = name_prefix if _PLAIN_PREFIX.fullmatch(name_prefix or "") else ""
    argv = ["sh", "-c", SCRIPT, "sh", engine, INSPECT_PROJECTION, re.escape(name_prefix), state_file, fact_file or "",
            secret_dir or "", proxy.get("address") or "", proxy.get("pid_file") or "", proxy.get("config") or "",
            (data_dir or "").rstrip("/") if plain else "", plain]
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
    if not _FORWARD_RULE.fullmatch(rule):
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
    """The forwarding rules (as ``{"published": "address:port", "rule": text}``) that no container of this host owns:
    a rule is a container's when that container publishes the address and port and has the address the rule forwards
    to. A container that is not running owns its rules too when the engine still holds its address: a run killed
    after Podman set up a container's network but before it started the container leaves it so, and ``podman start``
    then uses that network as it is, without making its rules again. The others are left by a killed run (Podman
    killed inside netavark, before it kept the address), or belong to another program's container; the wave deletes
    one only just before it starts a container of this host that publishes the same address and port (which no
    running container can then have)."""
    owned = set()
    for entry in containers:
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


def _secret_name(text, engine):
    """Whether ``text`` names a secret as gangplank makes them: Podman's ``<container>.<secret>``, Docker's file
    ``<container>/<secret>``."""
    if engine == "podman":
        return well_formed(text, NAME, MAX_NAME + 64)
    container, _slash, secret = text.partition("/")
    return well_formed(container, NAME, MAX_NAME) and well_formed(secret, NAME, 63)


def stale_secrets(found, desired, engine):
    """The secrets of this host's read (``found["secrets"]``) that no container uses any more, sorted: Podman's names,
    Docker's files ``<container>/<secret>`` (below the host's secret directory).

    ``desired`` is the host's containers (deploy_plan.containers_step), each with its ``secrets`` as container_secrets()
    gives them. A secret of a container that stays is kept only while that container still has it (once the
    container is recreated without it, nothing uses it); a secret of a container the engine still has that is not
    wanted here is left to the removal of that container (tasks/remove_containers.yml: not while it may be kept, with
    deploy_remove_stale false); a secret of no container at all is removed. A Podman secret's owner is the container
    whose name and ``.`` begin the secret's name: an instance's or a sidecar's (their names hold no dot after the
    host's), never an MPS daemon's (``<instance container>.mps``, which holds no secret), so that ``X.mps.key`` is
    X's whatever becomes of X's daemon; a Docker file's directory is its container."""
    wanted = {}
    for container in desired or []:
        if not isinstance(container, dict) or not isinstance(container.get("name"), str):
            continue
        names = set()
        for secret in container.get("secrets") or []:
            if engine == "podman" and secret.get("engine_name"):
                names.add(secret["engine_name"])
            elif engine != "podman" and secret.get("path"):
                names.add("%s/%s" % (container["name"], secret["name"]))
        wanted[container["name"]] = names
    existing = {entry["Name"].lstrip("/") for entry in found.get("containers") or []}
    existing |= {leftover.rpartition(":")[2] for leftover in found.get("leftovers") or []}
    stale = []
    for name in found.get("secrets") or []:
        if engine == "podman":
            owners = {container for container in set(wanted) | existing
                      if name.startswith(container + ".") and not container.endswith(MPS_SUFFIX)}
        else:
            owners = {name.partition("/")[0]}
        wanting = [owner for owner in owners if owner in wanted]
        if wanting:
            if not any(name in wanted[owner] for owner in wanting):
                stale.append(name)
        elif not owners & existing:
            stale.append(name)
    return sorted(stale)


def _shape_error(entry):
    """What is wrong with the shape of a container's JSON object (the field, never its value), or ''.

    The projection (INSPECT_PROJECTION) gives a name, State.Running, Config.Labels, HostConfig.PortBindings and
    NetworkSettings.Networks; a field may be missing or null, never of another type."""
    if not isinstance(entry, dict):
        return "not an object (%s)" % type(entry).__name__
    name = entry.get("Name")
    if not well_formed(name.lstrip("/") if isinstance(name, str) else name, NAME, MAX_NAME):
        return "Name is not a container name"
    checks = (("State", "Running", bool), ("Config", "Labels", dict), ("HostConfig", "PortBindings", dict),
              ("NetworkSettings", "Networks", dict))
    for outer, inner, kind in checks:
        value = entry.get(outer)
        if value is None:
            continue
        if not isinstance(value, dict):
            return "%s is not an object (%s)" % (outer, type(value).__name__)
        if value.get(inner) is not None and not isinstance(value[inner], kind):
            return "%s.%s is not %s (%s)" % (outer, inner, "true or false" if kind is bool else "an object",
                                             type(value[inner]).__name__)
    labels = (entry.get("Config") or {}).get("Labels") or {}
    if not all(isinstance(key, str) and isinstance(value, str) for key, value in labels.items()):
        return "Config.Labels holds a label that is not text"
    for port, bindings in ((entry.get("HostConfig") or {}).get("PortBindings") or {}).items():
        if bindings is not None and not isinstance(bindings, list):
            return "HostConfig.PortBindings[%s] is not a list (%s)" % (one_line(port, 40), type(bindings).__name__)
        for binding in bindings or []:
            if not isinstance(binding, dict) or not all(isinstance(binding.get(key, ""), str) for key in ("HostIp", "HostPort")):
                return "HostConfig.PortBindings[%s] holds a binding that is not an object of text" % one_line(port, 40)
    for network, settings in ((entry.get("NetworkSettings") or {}).get("Networks") or {}).items():
        if not isinstance(settings, dict) or not isinstance(settings.get("IPAddress", ""), (str, type(None))):
            return "NetworkSettings.Networks[%s] is not an object with a text IPAddress" % one_line(network, 40)
    return ""


def parse(rc, stdout, engine, name_prefix, limits_asked=False, host="", proxy_asked=False, data_dir=""):
    """What the read found: ``engine_found``, ``containers`` (the JSON objects), ``leftovers``, ``limits`` (the engine's
    answer, '' when not asked), ``enforce_limits``, ``secrets_of`` (each container's own secrets among ``secrets``, as
    its engine driver names them for its removal), and with a fact file ``bindings`` and ``bindings_error``.

    ``leftovers`` names what a run killed inside the engine left of this host's containers: ``<name>`` (image store
    only), ``broken:<name>`` and ``<pid>:<container id>:<name>`` for a monitor of a container the engine does not run
    (compared by name: Podman's inspect template calls the id ``.ID``, Docker's ``.Id``). ``forwards``: the forwarding
    rules no container of this host owns (_stale_forwards). With ``proxy_asked``, ``proxy``: {address (bool), master
    (its pid, 0 for none), systemd (bool), config_sha1 ('' for no file), found (its configuration file, a link there, or
    its systemd unit is on the host: a deploy ran it here)}. With ``data_dir``, ``config_files``: the
    path of each config file of this host's containers -> its SHA-256 (only paths below ``data_dir``).

    Each line is taken only inside its own section (after its marker line, SECTIONS): a tagged line elsewhere, a
    section twice or out of order, a container of another shape than the projection's are refused. Untagged lines
    (warnings a terminal joined in) are ignored.
    Raises ReadError, naming ``host`` and the line, for those and for any exit status but 0 and 127 (no engine)."""
    where = "%s: " % one_line(host, 100) if host else ""
    # Lines as the shell ends them: a line break only (str.splitlines() also breaks at \x1c, \x85 or U+2028).
    lines = stdout.split("\n")
    if rc not in (0, 127):
        errors = [line for line in lines if line.startswith("engine error: ")]
        raise ReadError(where + (one_line(errors[-1].rstrip("\r"), 500) if errors else "the read of the %s engine failed "
                                 "(rc %s): %s" % (engine, one_line(rc, 20), one_line(" ".join(stdout.split())[-500:], 500))))
    # The fact file: None when not read, its base64 lines, False when unreadable, or why it was not read.
    fact, fact_lines, containers, limits, storage, broken, monitors, forwards = None, [], [], [], [], [], [], []
    secrets = []
    proxy = {"address": False, "master": 0, "systemd": False, "config_sha1": "", "found": False}
    config_files = {}
    config_root = (data_dir or "").rstrip("/") + "/"
    section, seen = None, set()
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        tag, _space, rest = line.partition(" ")
        if tag == MARKER:
            if rest not in SECTIONS or rest in seen or (section and SECTIONS.index(rest) < SECTIONS.index(section)):
                raise ReadError("%sline %d of the deploy read: %s" % (where, number, "section %s comes twice" % rest
                                if rest in seen else "a section out of order" if rest in SECTIONS else "an unknown section"))
            section = rest
            seen.add(rest)
            continue
        kind = "{" if line.startswith("{") else tag
        if kind not in _SECTION_OF:
            continue
        if _SECTION_OF[kind] != section:
            raise ReadError("%sline %d of the deploy read: a %s line outside the %s section"
                            % (where, number, "container" if kind == "{" else kind, _SECTION_OF[kind]))
        if kind == "fact-file":
            fact_lines.append(rest)
            fact = fact_lines if fact is None else fact
        elif kind == "fact-file-unreadable" and not rest:
            fact = False
        elif kind == "fact-file-too-large":
            fact = "larger than %d bytes (%s)" % (FACT_FILE_LIMIT, rest.strip() if rest.strip().isdecimal() and rest.isascii()
                                                  and len(rest.strip()) <= 20 else "a size the host did not say")
        elif kind in ("proxy-address", "proxy-systemd", "proxy-found"):
            if not rest:
                proxy[kind[6:]] = True
        elif kind == "proxy-master":
            if _PROXY_MASTER.fullmatch(rest):
                proxy["master"] = int(rest)
        elif kind == "proxy-config":
            if _SHA1.fullmatch(rest):
                proxy["config_sha1"] = rest
        elif kind == "config-file":
            match = _CONFIG_FILE.fullmatch(rest)
            if match and match.group(2).startswith(config_root) and len(config_files) < MAX_CONFIG_FILES:
                config_files[match.group(2)] = match.group(1)
        elif rc != 0:
            continue
        elif kind == "{":
            if len(line) > MAX_CONTAINER_LINE:
                raise ReadError("%sline %d of the deploy read: a container of more than %d characters"
                                % (where, number, MAX_CONTAINER_LINE))
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError) as error:
                raise ReadError("%sline %d of the deploy read: the %s engine printed a container that is not JSON (%s)"
                                % (where, number, engine, one_line(getattr(error, "msg", type(error).__name__), 80))) from None
            problem = _shape_error(entry)
            if problem:
                raise ReadError("%sline %d of the deploy read: the %s engine printed a container whose %s"
                                % (where, number, engine, problem))
            containers.append(entry)
        elif kind == "limits":
            if has_control(rest) or len(rest) > 4096:
                raise ReadError("%sline %d of the deploy read: the engine's answer about limits holds a control character "
                                "or is longer than 4096 characters" % (where, number))
            limits.append(rest)
        elif kind in ("storage-only", "broken"):
            if well_formed(rest, NAME, MAX_NAME) and rest.startswith(name_prefix):
                (storage if kind == "storage-only" else broken).append(rest)
        elif kind == "secret":
            if _secret_name(rest, engine) and rest.startswith(name_prefix) and len(secrets) < MAX_SECRETS:
                secrets.append(rest)
        elif kind == "conmon":
            match = _CONMON.fullmatch(line)
            if match and match.group(3).startswith(name_prefix):
                monitors.append(match.groups())
        elif kind == "forward":
            forwards.append(rest)
    running = {entry["Name"].lstrip("/") for entry in containers if (entry.get("State") or {}).get("Running")}
    answer = " ".join(limits).strip()
    found = {
        "engine_found": rc == 0,
        "containers": containers,
        "leftovers": storage + ["broken:" + name for name in broken]
        + [":".join(monitor) for monitor in monitors if monitor[2] not in running],
        "forwards": _stale_forwards(forwards, containers),
        "secrets": sorted(set(secrets)),
        "limits": answer,
        "enforce_limits": bool(limits_asked and rc == 0 and LIMIT_SUPPORT[engine].search(answer)),
    }
    if proxy_asked:
        found["proxy"] = proxy
    if data_dir:
        found["config_files"] = config_files
    # Each container's own secrets, by the names read here: what its removal removes after it (engine_driver).
    owner = DRIVERS[engine]() if engine in DRIVERS else None
    names = [entry["Name"].lstrip("/") for entry in containers] + [leftover.rpartition(":")[2] for leftover in found["leftovers"]]
    found["secrets_of"] = {name: owner.owned_secrets(name, found["secrets"]) for name in names} if owner else {}
    if fact is not None:
        found["bindings"], found["bindings_error"] = _bindings(fact)
    return found


def deploy_entry(host, found, settings, instances, ranks, fact_file="", limits=False, check_mode=False):
    """What the deploy decides from for one host: ``settings`` (as deploy.desired_on_hosts takes them, with its
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
