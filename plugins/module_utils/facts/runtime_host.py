# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime role's decisions: the one read of what its work depends on (and so its fingerprint), the state file it
stores, the engine settings a host needs, whether the CDI spec is stale, and which bundled packages to install.

Pure functions over plain data, run on the controller by the filters of the same purpose. The fingerprint is hashed on
the host from the read's output and the role's inputs as JSON (``state_argv``): that JSON must stay byte for byte what
``to_json(sort_keys=true)`` made of them, or every host's stored fingerprint stops matching and each runs the role in
full once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

# Linux capability names by bit number (include/uapi/linux/capability.h).
CAPABILITIES = (
    "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
    "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
    "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
    "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap",
    "mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
    "checkpoint_restore",
)
# The one read of what the role's work depends on, run through raw (sh -c STATE_SCRIPT sh <arguments>): the probes, the
# capabilities, the engine (its binary's file), its settings file, whether dockerd runs, the packages, the CDI spec's
# GPUs and the bundled images. It prints the fingerprint the last full run stored (the state file), then the
# fingerprint of what it read and of the role's inputs (their JSON, an argument), worked out on the host (not in
# Ansible's main process, which would hash it for every host in turn), then what it read. Arguments: the state file,
# the engine's binary, its settings file, the engine (podman or docker), cdi or nocdi, the packages (one word list),
# the inputs, the images. Over SSH raw runs in a terminal that joins stderr to stdout: every command's stderr is
# dropped or printed on purpose, so that the lines (and the fingerprint) are the same on every connection.
STATE_SCRIPT = r"""state=$1 binary=$2 conf=$3 engine=$4 cdi=$5 packages=$6 inputs=$7
shift 7
read_host() {
  for path in /sys/fs/cgroup/cgroup.controllers /run/systemd/system /proc/driver/nvidia/version; do
    if [ -e "$path" ]; then echo "exists $path"; else echo "missing $path"; fi
  done
  grep '^CapEff:' /proc/self/status
  # The engine's binary as the file it is (inode, size, time: an upgrade replaces it), not its --version: one
  # engine process less per host and run (~25 ms of a CPU each), the costliest part of this read.
  found=$(command -v "$binary") \
    && echo "engine $found $(stat -L -c '%i %s %Y' "$found" 2>/dev/null || "$found" --version 2>&1)" \
    || echo "engine missing"
  if [ -f "$conf" ]; then echo "settings $(cksum < "$conf")"; else echo "settings none"; fi
  if [ "$engine" = docker ]; then
    if [ -e /run/systemd/system ]; then
      echo "dockerd $(systemctl is-active docker) $(systemctl is-enabled docker)"
    elif kill -0 "$(cat /run/docker.pid 2>/dev/null)" 2>/dev/null; then echo "dockerd running"
    else echo "dockerd stopped"; fi
  fi
  if [ -n "$packages" ]; then
    # shellcheck disable=SC2086
    if command -v dpkg-query >/dev/null; then
      dpkg-query --show --showformat='${Package} ${db:Status-Status}\n' $packages 2>&1
    else rpm -q $packages 2>&1; fi
  fi
  if [ "$cdi" = cdi ] && [ -e /proc/driver/nvidia/version ]; then nvidia-ctk cdi list 2>&1; fi
  for image in "$@"; do
    if [ "$engine" = docker ]; then docker image inspect --format present "$image" >/dev/null 2>&1
    else podman image exists "$image" 2>/dev/null; fi
    echo "image $image $?"
  done
}
read=$(read_host "$@")
printf '%s\n' "$(head -c 128 "$state" 2>/dev/null | head -n 1)"
# Without sha256sum, a fingerprint that matches no stored one: the role then runs in full.
if command -v sha256sum >/dev/null; then printf '%s\n%s' "$read" "$inputs" | sha256sum | cut -d ' ' -f 1
else echo "no-sha256sum-$$-$(date +%s%N)"; fi
printf '%s\n' "$read"
true"""
CDI_GPU_PREFIX = "nvidia.com/gpu="
_CDI_GPU_LINE = re.compile(r"nvidia.com/gpu=")      # as the role matched it: the dots match any character
# A Debian package's file name, <package>_<version>_<arch>.deb, and the parts of a version (deb-version(7)).
_DEB_NAME = re.compile(r"([a-z0-9][a-z0-9+.-]+)_([A-Za-z0-9.+~:%-]+)_([a-z0-9-]+)\.deb")
_EPOCH = re.compile(r"[0-9]{1,9}")
_UPSTREAM = re.compile(r"[0-9][A-Za-z0-9.+~:-]{0,255}")
_REVISION = re.compile(r"[A-Za-z0-9.+~]{1,255}")
# The whole CapEff line (a process name such as "CapEff: ff" on the Name line is not it); 64 bits are 16 digits.
_CAP_EFF = re.compile(r"CapEff:\s*([0-9a-f]{1,16})")


class RuntimeHostError(ValueError):
    """Input that is not what the role gives: the message names the input."""


def kind(value) -> str:
    """What a value is, for an error: Ansible passes its own (lazily templated) mappings, lists and strings."""
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Sequence):
        return "list"
    return type(value).__name__


def plain(value):
    """Mappings and sequences (Ansible's lazily templated ones included) as dicts and lists, for json.dumps."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(item) for item in value]
    return value


def inputs_json(inputs: Mapping) -> str:
    """The role's inputs as ``to_json(sort_keys=true)`` wrote them: the second half of what the fingerprint hashes."""
    return json.dumps(plain(inputs), sort_keys=True)


def _unique_ignoring_case(items):
    """Jinja's ``unique``: the first of the items equal when lower-cased, in order."""
    seen, kept = set(), []
    for item in items:
        key = item.lower() if isinstance(item, str) else item
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def bundled_images(image_bundles) -> list:
    """The images of every bundle, each once (compared as Jinja's ``unique`` compares: ignoring case), in order."""
    images = []
    for index, bundle in enumerate(image_bundles):
        if not isinstance(bundle, Mapping) or not isinstance(bundle.get("images"), Sequence) \
                or isinstance(bundle.get("images"), str):
            raise RuntimeHostError(f"image_bundles[{index}].images: expected a list of image names")
        images.extend(image for image in bundle["images"] if image not in (None, "None", "null"))
    return _unique_ignoring_case(images)


def state_argv(inputs: Mapping, script: str, state_file: str, binaries: Mapping) -> list:
    """The argv of the one read (runtime__state_script): the state file, the engine's binary, its settings file, the
    engine, cdi or nocdi, the packages to look at (none when the role installs nothing), the inputs' JSON, the images.
    """
    missing = sorted({"engine", "install_packages", "offline_bundle", "packages", "podman_conf", "docker_conf", "cdi",
                      "image_bundles"} - set(inputs))
    if missing:
        raise RuntimeHostError(f"inputs: missing {', '.join(missing)}")
    engine = inputs["engine"]
    if engine not in binaries:
        raise RuntimeHostError(f"inputs.engine: {engine!r} is none of {', '.join(sorted(binaries))}")
    installs = bool(inputs["install_packages"]) or len(inputs["offline_bundle"]) > 0
    return (["sh", "-c", script, "sh", state_file, binaries[engine],
             inputs["podman_conf"] if engine == "podman" else inputs["docker_conf"], engine,
             "cdi" if inputs["cdi"] else "nocdi",
             " ".join(str(package) for package in inputs["packages"]) if installs else "",
             inputs_json(inputs)]
            + bundled_images(inputs["image_bundles"]))


def limits_answer(result: Mapping) -> str:
    """The engine's answer to cluster_limit_probe: its first line that is not empty, trimmed; empty when it failed."""
    if not isinstance(result, Mapping) or result.get("rc", 1) != 0:
        return ""
    return next((line for line in result.get("stdout_lines") or [] if line), "").strip()


def state_record(fingerprint: str, engine: str, limits_result: Mapping) -> str:
    """cluster_runtime_state_file's content: the fingerprint, then "limits <engine> <answer>" when the engine answered.
    """
    answer = limits_answer(limits_result)
    return f"{fingerprint}\n" + (f"limits {engine} {answer}\n" if answer else "")


def has_capability(proc_status: str, name: str) -> bool:
    """Whether the CapEff line of a /proc/<pid>/status text holds the capability (``sys_resource`` or
    ``CAP_SYS_RESOURCE``)."""
    short = name.lower().removeprefix("cap_")
    if short not in CAPABILITIES:
        raise RuntimeHostError(f"capability {name!r}: not a Linux capability")
    found = next(filter(None, map(_CAP_EFF.fullmatch, proc_status.splitlines())), None)
    if not found:
        raise RuntimeHostError("no CapEff line in the process status")
    return bool(int(found.group(1), 16) >> CAPABILITIES.index(short) & 1)


def combine(base: Mapping, override: Mapping) -> dict:
    """``combine(override, recursive=true)``: mappings merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = combine(merged[key], value)
        else:
            merged[key] = plain(value)
    return merged


def podman_settings(host: Mapping, site: Mapping) -> dict:
    """The containers.conf tables this host needs (runc without cgroup v2, cgroupfs without systemd, no default
    ulimits without CAP_SYS_RESOURCE), with the site's settings over them."""
    detected = {"containers": {}, "engine": {}}
    if not host["unified_cgroups"]:
        detected["engine"]["runtime"] = "runc"
    if not host["systemd"]:
        detected["engine"]["cgroup_manager"] = "cgroupfs"
    if not host["sys_resource"]:
        detected["containers"]["default_ulimits"] = []
    return combine(detected, site)


def docker_settings(current: Mapping, cdi: bool, site: Mapping) -> dict:
    """daemon.json as it is, with CDI turned on where GPUs are handed over by CDI, and the site's settings over it."""
    settings = plain(current)
    if cdi:
        settings = combine(settings, {"features": {"cdi": True}})
    return combine(settings, site)


def cdi_spec_stale(cdi_list: Mapping, gpus) -> bool:
    """Whether ``nvidia-ctk cdi list`` failed, lacks one of the host's GPUs (a new or replaced one) or lists none."""
    if cdi_list.get("rc", 1) != 0:
        return True
    for index, gpu in enumerate(gpus):
        if not isinstance(gpu, Mapping) or not isinstance(gpu.get("uuid"), str):
            raise RuntimeHostError(f"gpus[{index}].uuid: expected the GPU's UUID")
    listed = list(cdi_list.get("stdout_lines") or [])
    if any(CDI_GPU_PREFIX + gpu["uuid"] not in listed for gpu in gpus):
        return True
    return not any(_CDI_GPU_LINE.match(line) for line in listed)


def _order(character):
    """dpkg's weight of one character of a version's non-digit part: ``~`` before the end, the end before letters,
    letters before the other characters (deb-version(7))."""
    if character == "~":
        return -1
    if character == "":
        return 0
    if "a" <= character.lower() <= "z":
        return ord(character)
    return ord(character) + 256


def _compare_part(left, right):
    """dpkg's comparison of two upstream versions or two revisions (its verrevcmp): <0, 0 or >0."""
    i = j = 0
    while i < len(left) or j < len(right):
        while (i < len(left) and not left[i].isdigit()) or (j < len(right) and not right[j].isdigit()):
            ours = _order(left[i] if i < len(left) and not left[i].isdigit() else "")
            theirs = _order(right[j] if j < len(right) and not right[j].isdigit() else "")
            if ours != theirs:
                return ours - theirs
            i, j = i + 1, j + 1
        start_i, start_j = i, j
        while i < len(left) and left[i].isdigit():
            i += 1
        while j < len(right) and right[j].isdigit():
            j += 1
        ours, theirs = int(left[start_i:i] or "0"), int(right[start_j:j] or "0")
        if ours != theirs:
            return -1 if ours < theirs else 1
    return 0


def _version_key(version):
    """(epoch, upstream version, revision) of a Debian version; None when it is not one."""
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "0", version
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, "0"
    if not (_EPOCH.fullmatch(epoch) and _UPSTREAM.fullmatch(upstream) and _REVISION.fullmatch(revision)):
        return None
    return int(epoch), upstream, revision


def compare_versions(left: str, right: str) -> int:
    """<0, 0 or >0 as the Debian version ``left`` is older than, the same as or newer than ``right`` (as
    ``dpkg --compare-versions``); RuntimeHostError when one is not a Debian version."""
    keys = []
    for version in (left, right):
        key = _version_key(version) if isinstance(version, str) else None
        if key is None:
            raise RuntimeHostError("%r is not a Debian version" % (version[:80] if isinstance(version, str) else version,))
        keys.append(key)
    (epoch, upstream, revision), (other_epoch, other_upstream, other_revision) = keys
    if epoch != other_epoch:
        return -1 if epoch < other_epoch else 1
    return _compare_part(upstream, other_upstream) or _compare_part(revision, other_revision)


def _deb_name(name):
    """(package, version, architecture) of a file name ``<package>_<version>_<arch>.deb`` (an epoch's ':' written
    '%3a'), or None for another name."""
    match = _DEB_NAME.fullmatch(name)
    if match is None:
        return None
    package, version, architecture = match.groups()
    return package, version.replace("%3a", ":"), architecture


def debs_to_install(found: Sequence, installed: Sequence, directory: str) -> list:
    """The bundle's .deb files to install, sorted by name, as paths in ``directory``: those whose package is not
    installed at that version or a newer one (a host at a later point release than the bundle keeps its newer
    packages; apt then says whether the bundle's others still fit them).

    ``found`` is ansible.builtin.find's files; ``installed`` the lines ``<package>_<version>_<arch>.deb`` that
    dpkg-query printed (an epoch's ':' is '%3a' in a file name).
    """
    names = set()
    for index, entry in enumerate(found):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
            raise RuntimeHostError(f"files[{index}].path: expected the path of a .deb file")
        names.add(entry["path"].rsplit("/", 1)[-1])
    names -= {line.replace(":", "%3a") for line in installed}
    versions = {}
    for line in installed:
        parsed = _deb_name(line.replace(":", "%3a")) if isinstance(line, str) else None
        if parsed is not None and _version_key(parsed[1]) is not None:
            versions.setdefault(parsed[0], []).append((parsed[2], parsed[1]))

    def newer_installed(name):
        parsed = _deb_name(name)
        if parsed is None or _version_key(parsed[1]) is None:
            return False
        package, version, architecture = parsed
        return any(compare_versions(have, version) > 0 for arch, have in versions.get(package, ())
                   if arch == architecture or "all" in (arch, architecture))

    names = {name for name in names if not newer_installed(name)}
    # Jinja's sort ignores case; the name itself breaks ties, so that the order never depends on a set's.
    return [f"{directory}/{name}" for name in sorted(names, key=lambda name: (name.lower(), name))]
