# -*- coding: utf-8 -*-
"""GPU shares on a real GPU: the product's own MPS daemon (plugins/module_utils/deploy/mps.py: its limits, its daemon spec, its
entrypoint and host commands, run here without a container engine) for two share instances of different grants, a
CUDA client (PyTorch) in each instance's environment, and the GPU watchdog (roles/deploy/files/gpu_watchdog.py) on
real NVML.

Checks: a client over its grant is refused, one under it allowed, both instances side by side, the SM share seen by
the client, and the watchdog catching a process that bypasses MPS (outside every instance: a bypass; inside an
instance's container but not through MPS, over its grant: acted on after the grace period).

Skipped without a GPU (no NVML device), without PyTorch or without nvidia-cuda-mps-control. Changes no GPU setting.
Runs under pytest, or as a script (python3 tests/gpu/test_mps_shares.py) on a machine without pytest: then it prints
one JSON line per check and exits 1 when one fails. tests/gpu/run_on_gpu.sh runs it on a GPU machine.

What is not real here: no container engine runs the daemon (its command and environment are run on the host, with
the container paths mapped to the host directories its volumes name), and the watchdog's view of which process is in
which instance's container is given (a cgroup text per pid, as the engine's would read) rather than read from /proc.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy import mps
except ImportError:          # as a script, with the repository's parent layout not on the path
    sys.path.insert(0, os.path.join(ROOT, "plugins", "module_utils", "deploy"))
    import mps  # type: ignore  # noqa: E402

GIB = 1 << 30
BASE = "/tmp/gangplank-gpu-suite"
GRANT_A, GRANT_B, CORES_B = 8 * GIB, 16 * GIB, 25
ID_A, ID_B = "a" * 64, "b" * 64
ALLOC = r"""
import sys, time, torch
gib, label, hold = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
got = []
try:
    for _ in range(gib):
        got.append(torch.empty(2 ** 30, dtype=torch.uint8, device="cuda"))
    print(label, "allocated", gib, flush=True)
except Exception as error:
    print(label, "refused", len(got), type(error).__name__, flush=True)
print(label, "sms", torch.cuda.get_device_properties(0).multi_processor_count, flush=True)
time.sleep(hold)
"""


def _program():
    spec = importlib.util.spec_from_file_location("gangplank_gpu_watchdog", os.path.join(ROOT, "roles", "deploy", "files",
                                                                                         "gpu_watchdog.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first_gpu():
    """(uuid, SM count) of NVML device 0, or (None, why not)."""
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return None, "no NVML device"
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
        return (uuid.decode() if isinstance(uuid, bytes) else uuid), ""
    except Exception as error:  # pylint: disable=broad-except
        return None, "no NVML device (%s)" % (str(error)[:100] or type(error).__name__)


def control_binary():
    found = shutil.which("nvidia-cuda-mps-control")
    if found:
        return found
    return "/usr/local/nvidia/bin/nvidia-cuda-mps-control" if os.path.exists("/usr/local/nvidia/bin/nvidia-cuda-mps-control") else None


def why_skip():
    uuid, reason = first_gpu()
    if uuid is None:
        return reason
    if importlib.util.find_spec("torch") is None:
        return "no PyTorch"
    if control_binary() is None:
        return "no nvidia-cuda-mps-control"
    return ""


class Share:
    """One share instance's MPS daemon, as plugins/module_utils/deploy/mps.py makes it, run on the host."""

    def __init__(self, name, uuid, grant, cores=None):
        self.name = name
        binding = {"gpus": [{"index": 0, "uuid": uuid, "memory": grant} | ({"cores": cores} if cores else {})]}
        entries, cores = mps.limits(name, binding, {"count": 1, "memory": grant})
        main = {"name": "gpu-suite-" + name, "instance": name, "service": "share", "rank": 0, "image": "none",
                "labels": {"gangplank.io/node": "gpu-suite"}, "devices": [], "stop_timeout": 10,
                "restart_policy": "no", "volumes": [], "env": {}}
        self.spec = mps.daemon(main, entries, cores, control_binary(), BASE, "", simulated=False)
        mps.client(main, self.spec, 30)
        # The container paths, mapped to the host directories its volumes name.
        self.paths = {}
        for volume in self.spec["volumes"]:
            host, container = volume.split(":")[:2]
            self.paths[container] = host
        self.pipe = self.paths[mps.PIPE]
        self.ready = self.spec["mps_daemon"]["ready"]
        self.process = None

    def _host(self, value):
        for container, host in sorted(self.paths.items(), key=lambda item: -len(item[0])):
            if value == container or value.startswith(container + "/"):
                return host + value[len(container):]
        return value

    def start(self):
        subprocess.run(["sh", "-c", mps.prepare_command(self.spec)], check=True, timeout=30)
        env = dict(os.environ, **{key: self._host(value) for key, value in self.spec["env"].items()})
        command = [self._host(arg) if arg.startswith("/run/") else arg for arg in self.spec["command"]]
        self.process = subprocess.Popen(command, env=env, start_new_session=True)
        waited = subprocess.run(["sh", "-c", mps.wait_command({"mps_client": {"ready": self.ready, "timeout": 30}})],
                                capture_output=True, text=True, timeout=60, check=False)
        assert waited.returncode == 0, "daemon %s: %s" % (self.name, waited.stdout + waited.stderr)
        return waited.stdout

    def env(self):
        """A client's environment: the instance's (mps.client) with the pipe directory on the host."""
        return dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe, CUDA_DEVICE_ORDER="PCI_BUS_ID")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def client(env, gib, label, hold=0.0, timeout=120):
    """Run the allocation client to its end: {"allocated": bool, "got": GiB, "sms": n}."""
    done = subprocess.run([sys.executable, "-c", ALLOC, str(gib), label, str(hold)], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    return parse(done.stdout, label, done.stderr)


def parse(stdout, label, stderr=""):
    found = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == label:
            if words[1] == "allocated":
                found.update(allocated=True, got=int(words[2]))
            elif words[1] == "refused":
                found.update(allocated=False, got=int(words[2]))
            elif words[1] == "sms":
                found["sms"] = int(words[2])
    assert "allocated" in found and "sms" in found, "client %s printed:\n%s\n%s" % (label, stdout[-2000:], stderr[-2000:])
    return found


def held(env, gib, label, hold):
    """A client that allocates and holds its memory for ``hold`` seconds: (process, its answer once allocated)."""
    process = subprocess.Popen([sys.executable, "-c", ALLOC, str(gib), label, str(hold)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [process.stdout.readline(), process.stdout.readline()]
    return process, parse("".join(lines), label)


def check_memory_and_cores(a, b, total_sms):
    results = {}
    over = client(a.env(), 12, "A-over")
    results["over the grant refused"] = (not over["allocated"] and over["got"] <= GRANT_A // GIB, over)
    under = client(a.env(), 4, "A-under")
    results["under the grant allowed"] = (under["allocated"], under)
    # Side by side: both at once, each within its own grant.
    first, answer_b = held(b.env(), 12, "B-side", 5)
    answer_a = client(a.env(), 6, "A-side")
    first.wait(timeout=60)
    results["side by side"] = (answer_a["allocated"] and answer_b["allocated"], {"A": answer_a, "B": answer_b})
    limit = math.ceil(total_sms * CORES_B / 100.0) + 2
    results["SM share seen"] = (answer_b["sms"] <= limit and answer_b["sms"] < total_sms and answer_a["sms"] == total_sms,
                                {"B sms": answer_b["sms"], "A sms": answer_a["sms"], "total": total_sms})
    return results


def check_watchdog(a, b, uuid):
    """The watchdog on real NVML: a process outside every instance is a bypass; a process in instance A's container
    that does not go through MPS and takes more than A's grant is warned (grace 0)."""
    program = _program()
    work = tempfile.mkdtemp(prefix="gpu-suite-watchdog-")
    config = {"version": 1, "node": "gpu-suite", "engine": "podman", "policy": "warn", "grace": 0, "interval": 1,
              "source": "nvml", "state_file": os.path.join(work, "state.json"),
              "instances": {"share-a": {"container": "gpu-suite-share-a", "enforced": True, "grants": {uuid: GRANT_A}},
                            "share-b": {"container": "gpu-suite-share-b", "enforced": True, "grants": {uuid: GRANT_B},
                                        "cores": {uuid: CORES_B}}}}
    with open(os.path.join(work, "config.json"), "w") as handle:
        json.dump(config, handle)
    in_a = {}

    def proc(pid, name):
        # The MPS client and the leaking process "run in" instance A's container; everything else as /proc says.
        if name == "cgroup" and pid in in_a:
            return "0::/libpod_parent/libpod-%s\n" % ID_A
        return program.read_proc(pid, name)

    watchdog = program.Watchdog(os.path.join(work, "config.json"), engine_lookup=lambda engine, node: {ID_A: "share-a", ID_B: "share-b"},
                                stopper=lambda engine, name: "", proc=proc)
    no_mps = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=os.path.join(work, "no-pipe"))
    mps_client, _answer = held(a.env(), 4, "A-mps", 20)
    leak, _leak_answer = held(no_mps, 10, "A-leak", 20)
    outside, _outside_answer = held(no_mps, 2, "outside", 20)
    in_a.update({mps_client.pid: True, leak.pid: True})
    document = watchdog.poll()
    for process in (mps_client, leak, outside):
        process.kill()
        process.wait(timeout=30)
    used_a = document["instances"]["share-a"]["used"].get(uuid, 0)
    bypass = [entry for entry in document["bypasses"] if entry["pid"] == outside.pid]
    warned = [event for event in document["events"] if event["kind"] == "warn" and event["instance"] == "share-a"]
    return {"watchdog: bypass outside every instance reported": (len(bypass) == 1 and bypass[0]["used"] >= 2 * GIB,
                                                                 bypass),
            "watchdog: instance over its grant warned": (used_a > GRANT_A and len(warned) == 1 and
                                                         document["instances"]["share-a"]["action"] == "warned",
                                                         {"used": used_a, "events": warned, "servers": document["servers"],
                                                          "error": document["error"]})}


def run_all():
    uuid, _reason = first_gpu()
    import torch  # pylint: disable=import-outside-toplevel
    total_sms = torch.cuda.get_device_properties(0).multi_processor_count
    a, b = Share("share-a", uuid, GRANT_A), Share("share-b", uuid, GRANT_B, CORES_B)
    results = {}
    try:
        results["daemon A limits"] = (True, a.start().strip())
        results["daemon B limits"] = (True, b.start().strip())
        results.update(check_memory_and_cores(a, b, total_sms))
        results.update(check_watchdog(a, b, uuid))
    finally:
        a.stop()
        b.stop()
        shutil.rmtree(BASE, ignore_errors=True)
    return results


_RESULTS = {}


def _results():
    if not _RESULTS:
        _RESULTS.update(run_all())
    return _RESULTS


try:
    import pytest
except ImportError:       # a GPU machine without pytest runs this file as a script
    pytest = None

if pytest is not None:
    _SKIP = why_skip()
    pytestmark = pytest.mark.skipif(bool(_SKIP), reason=_SKIP or "a GPU is here")

    @pytest.mark.parametrize("check", ["daemon A limits", "daemon B limits", "over the grant refused",
                                       "under the grant allowed", "side by side", "SM share seen",
                                       "watchdog: bypass outside every instance reported",
                                       "watchdog: instance over its grant warned"])
    def test_gpu_share(check):
        passed, detail = _results()[check]
        print(json.dumps({"check": check, "passed": passed, "detail": detail}, default=str))
        assert passed, detail


if __name__ == "__main__":
    reason = why_skip()
    if reason:
        print(json.dumps({"skipped": reason}))
        sys.exit(0)
    failed = 0
    for name, (passed, detail) in run_all().items():
        print(json.dumps({"check": name, "passed": passed, "detail": detail}, default=str))
        failed += not passed
    sys.exit(1 if failed else 0)
