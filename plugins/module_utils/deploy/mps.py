# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU shares under CUDA MPS: one control daemon per share instance, as a container of its own (docs/deploy.md,
"GPU shares under MPS"). deploy.desired_containers() calls it for each share instance (a GPU request with ``memory``)
on a host whose sharing mode is ``mps``; whole-GPU instances never use MPS.

Why a container per instance, not one daemon per GPU or a systemd unit:

- **Per-instance limits.** MPS sets a memory limit and an active thread percentage per control daemon (for the servers
  it starts), not per client. One daemon per instance gives each instance its own grant, of any size, instead of the
  equal split of NVIDIA's k8s-device-plugin (one daemon per GPU). A real H100 ran two daemons on one GPU side by side
  with 8G and 16G limits (docs/gpu-sharing.md).
- **The same machinery as every container.** The daemon is made, started, recreated, stopped and removed with its
  instance by the deploy's own read, rollout, waves, leftovers, stale removal and teardown, on Podman and Docker, and
  needs nothing on the host but the engine and the GPU's CDI spec (which brings the MPS binaries). A systemd unit would
  need a second lifecycle, and hosts without systemd (the test beds) have none.

What runs: the container ``<instance container>.mps`` (a ``.`` cannot occur in an instance's or a sidecar's name after
the host's: service names are ``[a-z0-9-]``) runs ENTRYPOINT, a POSIX sh script, as root with the instance's CDI devices:
it clears its ready file, starts ``nvidia-cuda-mps-control -d``, sets ``set_default_device_pinned_mem_limit <uuid> <N>M``
per device (the grant in MiB, rounded down) and, when ``cores`` are granted, ``set_default_active_thread_percentage``,
each control command bounded by ``timeout`` (an unbounded one hung a run on a real H100), then writes its ready file and
waits while the daemon lives (its pid file), exiting non-zero when it dies. Its limits are set before any client can
connect: the instance starts only once the ready file is there (gangplank.platform.container waits for it, and on
Podman the instance ``requires`` its daemon).

Directories per instance, on the host under ``mps_dir`` (/run/gangplank/mps by default; every directory from / down
to it root's and writable by nobody else, none a symbolic link: PREPARE walks it):
``<mps_dir>/<instance container>/`` (root, 0700, so nothing else on the host reaches what is inside) holding ``pipe``
(the control socket; mounted in both containers at PIPE), ``shm`` (mounted at /dev/shm in both, as NVIDIA's
k8s-device-plugin does for its daemons: no host IPC is shared) and ``log`` (the daemon's log and ready file, mounted in
the daemon only). The three are 1777 (sticky, as /tmp): the daemon runs as root and starts the MPS server as the
client's uid, which gangplank does not know (the image's user), and MPS serves a client only from a server of its own
uid; one daemon per instance means one client uid per daemon.

Standard library only.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import root_paths

MPS_OF = "gangplank.io/mps-of"
SHARING_MODES = ("mps", "none")
SUFFIX = ".mps"
DEFAULT_DIR = "/run/gangplank/mps"
DEFAULT_READY_TIMEOUT = 60
MAX_READY_TIMEOUT = 3600
# Where the daemon's directories are in the containers: short, so that the control socket's path stays far below the
# 108 bytes of a Unix socket address whatever the host's path.
PIPE = "/run/gangplank-mps/pipe"
LOG = "/run/gangplank-mps/log"
READY = LOG + "/ready"
# The binary the entrypoint calls when the host's facts do not name one (the CDI spec mounts it there).
DEFAULT_CONTROL = "/usr/bin/nvidia-cuda-mps-control"
# Seconds each control command may take (the entrypoint's `timeout`).
CONTROL_TIMEOUT = 10
MIB = 1024 * 1024
# A device id MPS takes: a GPU or MIG UUID (GPU-..., MIG-GPU-.../1/0); one word, since it is written to the control
# daemon's standard input, where a space or a line break would add a command.
_DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}")
_PATH = re.compile(r"/[A-Za-z0-9_.+@/-]{0,1023}")

# The daemon container's command: sh -c ENTRYPOINT gangplank-mps <control binary> <ready file> <cores or ""> <uuid>=<MiB>...
# POSIX sh and `timeout` (busybox has both). CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY are in its env.
ENTRYPOINT = """\
ctl=$1 ready=$2 cores=$3; shift 3
pid_file=$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid
say() { echo "gangplank-mps: $*" >&2; }
ask() { echo "$*" | timeout %(t)d "$ctl"; }
stop() { ask quit >/dev/null 2>&1; }
send() { ask "$@" >/dev/null || { say "control command '$*' failed or timed out"; stop; exit 1; }; }
# A stale pid file would make a dead daemon look alive, a stale ready file let the instance start too early.
rm -f "$ready" "$ready.tmp" "$pid_file"
timeout %(t)d "$ctl" -d || { say "$ctl -d failed or timed out"; exit 1; }
for limit; do send set_default_device_pinned_mem_limit "${limit%%=*}" "${limit#*=}M"; done
if [ -n "$cores" ]; then send set_default_active_thread_percentage "$cores"; fi
{ for limit; do echo "pinned_mem_limit ${limit%%=*} ${limit#*=}M $(ask get_default_device_pinned_mem_limit "${limit%%=*}" 2>&1)"; done
  echo "active_thread_percentage ${cores:-100}"; } >"$ready.tmp" && mv "$ready.tmp" "$ready" || { say "cannot write $ready"; stop; exit 1; }
say "limits set: $*${cores:+ cores=$cores}"
trap 'rm -f "$ready"; stop; exit 0' TERM INT
while pid=$(cat "$pid_file" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 1 & wait $!; done
rm -f "$ready"; say "the control daemon is gone"; exit 1
""" % {"t": CONTROL_TIMEOUT}


class MpsError(ValueError):
    """A binding or a setting that MPS cannot enforce; the message names the path."""


def daemon_name(instance_container):
    """The daemon's container: the instance's name and ".mps", which no instance or sidecar container can be named."""
    return instance_container + SUFFIX


def is_share(gpu_request, binding):
    """Whether an instance is a GPU share: its service asks ``resources.gpu.memory`` and it was given GPUs."""
    return isinstance(gpu_request, dict) and gpu_request.get("memory") not in (None, 0) and bool(binding.get("gpus"))


def limits(instance, binding, gpu_request):
    """([(uuid, MiB)] per device, cores or None) of a share: the memory granted on each device, rounded down to MiB,
    and ``cores`` from the binding's GPU entries (the scheduler's), else from the service's request."""
    entries = []
    cores = set()
    for index, gpu in enumerate(binding.get("gpus") or []):
        path = "instances.%s.gpus[%d]" % (instance, index)
        if not isinstance(gpu, dict) or not isinstance(gpu.get("uuid"), str) or not _DEVICE.fullmatch(gpu["uuid"]):
            raise MpsError("%s.uuid: expected a GPU UUID of letters, digits and ._:/- (MPS takes it as one word)" % path)
        memory = gpu.get("memory")
        if isinstance(memory, bool) or not isinstance(memory, int) or memory // MIB < 1:
            raise MpsError("%s.memory: expected the bytes granted, at least 1 MiB (MPS limits in whole MiB)" % path)
        entries.append((gpu["uuid"], memory // MIB))
        if gpu.get("cores") is not None:
            cores.add(_cores(gpu["cores"], path + ".cores"))
    if len(cores) > 1:
        raise MpsError("instances.%s.gpus: cores differ between devices; MPS sets one active thread percentage per daemon"
                       % instance)
    if not cores and isinstance(gpu_request, dict) and gpu_request.get("cores") is not None:
        cores.add(_cores(gpu_request["cores"], "instances.%s: resources.gpu.cores" % instance))
    return entries, (cores.pop() if cores else None)


def _cores(value, path):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise MpsError("%s: expected a percentage of the GPU's SMs, an integer from 1 to 100" % path)
    return value


def check_settings(control, directory, image, ready_timeout):
    """The host's MPS settings, or MpsError naming the setting: paths that cannot add volume options."""
    if control and (not _PATH.fullmatch(control) or posixpath.normpath(control) != control):
        raise MpsError("mps_control: expected the absolute, normalised path of nvidia-cuda-mps-control on the host "
                       "(letters, digits and _.+@/-)")
    if not _PATH.fullmatch(directory) or posixpath.normpath(directory) != directory or directory == "/":
        raise MpsError("mps_dir: expected an absolute, normalised directory other than / (letters, digits and _.+@/-)")
    # A directory every user can write is refused at once (the host refuses any directory on the way that another
    # user can write, PREPARE).
    shared = root_paths.shared_place(directory)
    if shared:
        raise MpsError("mps_dir: %s is inside %s, which every user can write; expected a directory only root can write "
                       "on every component, such as %s" % (directory, shared, DEFAULT_DIR))
    if image and (image.startswith("-") or not image.isprintable() or " " in image):
        raise MpsError("mps_image: expected an image reference such as localhost/mps:1")
    if isinstance(ready_timeout, bool) or not isinstance(ready_timeout, int) or not 1 <= ready_timeout <= MAX_READY_TIMEOUT:
        raise MpsError("mps_ready_timeout: expected seconds, an integer from 1 to %d" % MAX_READY_TIMEOUT)


def host_dir(directory, instance_container):
    """The instance's MPS directory on the host."""
    return posixpath.join(directory, instance_container)


def daemon(main, entries, cores, control, directory, image, simulated):
    """The daemon container of the instance container ``main`` (a spec of deploy.desired_containers): its labels are
    the instance's with ``gangplank.io/mps-of``, its devices the instance's CDI devices; on simulated GPUs, the
    control binary (the test bed's stand-in) is mounted at the path the entrypoint calls."""
    control = control or DEFAULT_CONTROL
    base = host_dir(directory, main["name"])
    volumes = ["%s/pipe:%s" % (base, PIPE), "%s/shm:/dev/shm" % base, "%s/log:%s" % (base, LOG)]
    if simulated:
        volumes.append("%s:%s:ro" % (control, control))
    name = daemon_name(main["name"])
    return {
        "name": name,
        "instance": main["instance"],
        "service": main["service"],
        "rank": main["rank"],
        "sidecar": False,
        "image": image or main["image"],
        "command": ["sh", "-c", ENTRYPOINT, "gangplank-mps", control, READY, "" if cores is None else str(cores)]
        + ["%s=%d" % entry for entry in entries],
        "env": {"GANGPLANK_INSTANCE": main["instance"], "GANGPLANK_NODE": main["labels"]["gangplank.io/node"],
                "CUDA_MPS_PIPE_DIRECTORY": PIPE, "CUDA_MPS_LOG_DIRECTORY": LOG},
        "ports": [],
        "devices": list(main["devices"]),
        "volumes": volumes,
        "directories": [],
        # The daemon talks to nobody over a network.
        "network": "none",
        # -d forks the daemon away from the entrypoint: an init reaps it, so that a dead daemon is not a zombie.
        "init": True,
        "stop_timeout": main["stop_timeout"],
        "restart_policy": main["restart_policy"],
        "labels": dict(main["labels"], **{MPS_OF: main["name"]}),
        "config": [],
        "secrets": [],
        "mounts": [],
        "podman_secrets": [],
        "probe": None,
        "cpus": None,
        "memory": None,
        # Root, whatever the image's user: it starts the MPS server as its client's uid.
        "user": "0:0",
        # What gangplank.platform.container does on the host before it starts the daemon: the directories, and no
        # ready file of an earlier daemon.
        "mps_daemon": {"dir": base, "ready": base + "/log/ready"},
    }


def client(main, daemon_spec, ready_timeout):
    """Make the instance container ``main`` a client of ``daemon_spec``: the pipe directory and /dev/shm mounted, the
    pipe directory in its env (winning over the catalog's: the limits are the host's), and what
    gangplank.platform.container waits for before it starts the instance."""
    base = daemon_spec["mps_daemon"]["dir"]
    main["volumes"] += ["%s/pipe:%s" % (base, PIPE), "%s/shm:/dev/shm" % base]
    main["env"]["CUDA_MPS_PIPE_DIRECTORY"] = PIPE
    main["mps_client"] = {"daemon": daemon_spec["name"], "ready": daemon_spec["mps_daemon"]["ready"],
                          "timeout": ready_timeout}


def stale_dir(name, labels, directory):
    """The MPS directory to remove with a stale container of the read: a daemon (labelled as the daemon of the
    instance its name ends in) has one; anything else, or a name that is not one plain path component, has none."""
    if not name.endswith(SUFFIX) or labels.get(MPS_OF) != name[:-len(SUFFIX)]:
        return None
    owner = name[:-len(SUFFIX)]
    if not owner or owner in (".", "..") or "/" in owner or not owner.isprintable():
        return None
    return host_dir(directory, owner)


# The host's side of a daemon's directories, as root: $1 the instance's MPS directory (absolute, normalised), walked
# from / as root_paths.WALK does (every component root's, writable by nobody else, no symbolic link; the instance's own
# directory made 0700). Inside it: pipe, shm and log (1777) and no ready file of an earlier daemon.
PREPARE = "umask 077\n" + root_paths.CHECK + "private=yes\n" + root_paths.WALK + r"""for sub in pipe shm log; do
  [ -e "$sub" ] || [ -L "$sub" ] || mkdir -- "$sub" || fail "$path/$sub cannot be made"
  check "$sub" "$path/$sub" owner
  chmod 1777 -- "$sub" || fail "$path/$sub: chmod failed"
done
rm -f -- log/ready
"""


def prepare_command(spec):
    """The host command run before the daemon ``spec`` starts: its directories with their modes, no old ready file
    (PREPARE); it fails naming the first directory that is a link, not root's or writable by other users."""
    base = spec["mps_daemon"]["dir"]
    _check_host_path(base)
    if spec["mps_daemon"]["ready"] != base + "/log/ready":
        raise MpsError("MPS directory: got an unusable ready file")
    return "sh -c %s gangplank-mps-dir %s" % (root_paths.quote(PREPARE), root_paths.quote(base))


def wait_command(spec):
    """The host command that waits for the ready file of the instance ``spec``'s daemon, at most its timeout; it
    prints the file (the limits the daemon set) or fails saying what it waited for."""
    ready, seconds = spec["mps_client"]["ready"], int(spec["mps_client"]["timeout"])
    _check_host_path(ready)
    # The log directory is the daemon's (1777): its ready file is read only as a regular file, never through a link.
    return ("i=0; while [ ! -s %(r)s ]; do if [ $i -ge %(n)d ]; then echo 'no ready file after %(s)ds'; exit 1; fi;"
            " sleep 0.2; i=$((i + 1)); done; if [ -L %(r)s ] || [ ! -f %(r)s ]; then echo 'the ready file is not a regular"
            " file'; exit 1; fi; head -c 65536 -- %(r)s" % {"r": root_paths.quote(ready), "n": seconds * 5, "s": seconds})


def _check_host_path(path):
    if not isinstance(path, str) or not _PATH.fullmatch(path) or ".." in path.split("/"):
        raise MpsError("MPS directory: got an unusable path")
