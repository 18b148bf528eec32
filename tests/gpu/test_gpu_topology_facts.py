# -*- coding: utf-8 -*-
"""GPU topology facts on a real GPU: plugins/module_utils/facts/gpu_facts.py's collect_facts (what the gpu_facts module runs,
topology included) read through NVML and through nvidia-smi, against what the host itself says.

Checks: both readings finish without an error and without a "not read" reason in gangplank_gpu_driver.topology;
gangplank_gpu_links is empty on a one-GPU host (on more, every pair once, of a known level name); each GPU's
numa_node and cpu_affinity agree with sysfs (/sys/bus/pci/devices/<bus id>/numa_node and local_cpulist, -1 being
"not known") and with the CPU Affinity and NUMA Affinity columns of ``nvidia-smi topo -m`` (read here on their own,
not with the product's parser; N/A, or a list of NUMA nodes, checks nothing).

Skipped without a GPU (no NVML device, or nvidia-ml-py missing); the nvidia-smi checks also without nvidia-smi.
Changes no GPU setting. Runs under pytest, or as a script (python3 tests/gpu/test_gpu_topology_facts.py, one JSON line
per check, exit 1 when one fails) on a machine without pytest; tests/gpu/run_on_gpu.sh runs it on a GPU machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYOUT = "/tmp/gangplank-ac"     # where run_on_gpu.sh links the collection in (ansible_collections/gangplank/platform)
if __name__ == "__main__" and LAYOUT not in sys.path:
    sys.path.insert(0, LAYOUT)     # as a script, the collection as run_on_gpu.sh lays it out
try:
    from ansible_collections.gangplank.platform.plugins.module_utils.facts import gpu_facts
except ImportError:
    gpu_facts = None

SYSFS = "/sys"
TIMEOUT = 60                 # seconds for one nvidia-smi run


def _pynvml():
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return pynvml


def why_skip():
    """Why this host cannot run the checks, or ""."""
    if gpu_facts is None:
        return "the collection is not importable (ansible_collections/gangplank/platform on the path; run_on_gpu.sh links it)"
    nvml = _pynvml()
    if nvml is None:
        return "nvidia-ml-py (pynvml) is not installed"
    try:
        nvml.nvmlInit()
        try:
            count = nvml.nvmlDeviceGetCount()
        finally:
            nvml.nvmlShutdown()
    except Exception as error:  # pylint: disable=broad-except
        return "no NVML device (%s)" % (str(error)[:100] or type(error).__name__)
    return "" if count >= 1 else "no NVML device"


def run_command(argv):
    """(rc, stdout, stderr) as AnsibleModule.run_command gives them, bounded by TIMEOUT."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 127, "", str(error)
    return done.returncode, done.stdout, done.stderr


def nvml_facts():
    return gpu_facts.collect_facts(nvml=_pynvml(), run_command=run_command, which=shutil.which, sysfs=SYSFS)


def smi_facts():
    return gpu_facts.collect_facts(nvml=None, run_command=run_command, which=shutil.which, sysfs=SYSFS)


def sysfs_affinity(bus_id):
    """(numa_node or None, local CPUs as a set or None) of a GPU from sysfs, read here directly."""
    key = gpu_facts.pci_key(bus_id)
    if key is None:
        return None, None
    directory = os.path.join(SYSFS, "bus", "pci", "devices", "%04x:%02x:%02x.%x" % key)
    numa = cpus = None
    try:
        with open(os.path.join(directory, "numa_node"), encoding="ascii") as handle:
            value = int(handle.read().strip())
        numa = value if value >= 0 else None
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(directory, "local_cpulist"), encoding="ascii") as handle:
            cpus = cpu_set(handle.read().strip())
    except OSError:
        pass
    return numa, cpus


def cpu_set(text):
    """A cpulist ("0-3,8") as a set of CPUs; None for anything else (N/A, empty)."""
    if not isinstance(text, str) or not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", text.strip()):
        return None
    cpus = set()
    for part in text.strip().split(","):
        low, _dash, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def topo_affinity(output):
    """{GPU index: (CPU Affinity cell, NUMA Affinity cell)} from ``nvidia-smi topo -m``'s table, read by column name."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip("\r") for line in output.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return {}
    header = [cell.strip() for cell in lines[0].split("\t") if cell.strip()]
    found = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split("\t")]
        name = re.fullmatch(r"GPU(\d+)", cells[0])
        if not name:
            continue
        values = [cell for cell in cells[1:] if cell]
        named = dict(zip(header, values))
        found[int(name.group(1))] = (named.get("CPU Affinity", "N/A"), named.get("NUMA Affinity", "N/A"))
    return found


def check_read(facts, source):
    """The facts' own verdict: the GPUs read, none with an error, the topology not refused."""
    driver = facts["gangplank_gpu_driver"]
    problems = []
    if not driver.get("available"):
        problems.append("driver not available: %s" % driver.get("reason"))
    if not facts["gangplank_gpus"]:
        problems.append("no GPU read")
    problems += ["GPU %s: %s" % (gpu.get("index"), gpu["error"]) for gpu in facts["gangplank_gpus"] if gpu.get("error")]
    if driver.get("topology"):
        problems.append("topology %s" % driver["topology"])
    return not problems, "%s: %s" % (source, "; ".join(problems) or "%d GPU(s) read" % len(facts["gangplank_gpus"]))


def check_links(facts, source):
    """One GPU: no links. More: every pair once, with a level the facts name."""
    links = facts["gangplank_gpu_links"]
    count = len(facts["gangplank_gpus"])
    if count == 1:
        return links == [], "%s: one GPU, links %s" % (source, json.dumps(links)[:200])
    pairs = sorted(tuple(link["gpus"]) for link in links)
    indexes = sorted(gpu["index"] for gpu in facts["gangplank_gpus"])
    expected = [(a, b) for position, a in enumerate(indexes) for b in indexes[position + 1:]]
    levels = {link["level"] for link in links}
    ok = pairs == expected and levels <= set(gpu_facts.LINK_LEVELS)
    return ok, "%s: %d GPUs, %d links, levels %s" % (source, count, len(links), sorted(levels))


def check_affinity(facts, source, topo):
    """Each GPU's numa_node and cpu_affinity against sysfs and nvidia-smi topo -m (``topo``: topo_affinity's, or None)."""
    problems, seen = [], []
    for gpu in facts["gangplank_gpus"]:
        index = gpu["index"]
        numa, cpus = gpu.get("numa_node"), cpu_set(gpu.get("cpu_affinity"))
        sys_numa, sys_cpus = sysfs_affinity(gpu.get("pci_bus_id"))
        sys_text = gpu_facts.cpulist_of(sys_cpus or ())
        seen.append("GPU%s numa %s cpus %s (sysfs %s, %s)" % (index, numa, gpu.get("cpu_affinity"), sys_numa, sys_text))
        if numa != sys_numa:
            problems.append("GPU%s numa_node %s, sysfs %s" % (index, numa, sys_numa))
        if sys_cpus is not None and cpus != sys_cpus:
            problems.append("GPU%s cpu_affinity %s, sysfs local_cpulist %s" % (index, gpu.get("cpu_affinity"), sys_text))
        if topo is None:
            continue
        if index not in topo:
            problems.append("GPU%s has no row in nvidia-smi topo -m" % index)
            continue
        smi_cpus, smi_numa = topo[index]
        if cpu_set(smi_cpus) is not None and cpus != cpu_set(smi_cpus):
            problems.append("GPU%s cpu_affinity %s, nvidia-smi %s" % (index, gpu.get("cpu_affinity"), smi_cpus))
        if re.fullmatch(r"\d+", smi_numa) and numa != int(smi_numa):
            problems.append("GPU%s numa_node %s, nvidia-smi %s" % (index, numa, smi_numa))
    return not problems, "%s: %s" % (source, "; ".join(problems) or "agree: " + "; ".join(seen))


def _topo():
    """nvidia-smi topo -m's affinity columns, or None without nvidia-smi."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return None
    rc, out, err = run_command([path, "topo", "-m"])
    if rc != 0:
        raise AssertionError("nvidia-smi topo -m exited with %s: %s" % (rc, err.strip()[:300]))
    return topo_affinity(out)


CHECKS = ("read through NVML", "links through NVML", "affinity through NVML",
          "read through nvidia-smi", "links through nvidia-smi", "affinity through nvidia-smi")


def run_check(name):
    """(ok, what was seen) for one of CHECKS; (None, why) when it cannot run here."""
    if name.endswith("nvidia-smi"):
        if shutil.which("nvidia-smi") is None:
            return None, "nvidia-smi is not installed"
        facts, source = smi_facts(), "nvidia-smi"
    else:
        facts, source = nvml_facts(), "NVML"
    if name.startswith("read"):
        return check_read(facts, source)
    if name.startswith("links"):
        return check_links(facts, source)
    return check_affinity(facts, source, _topo())


try:
    import pytest
except ImportError:       # a GPU machine without pytest runs this file as a script
    pytest = None

if pytest is not None:
    _SKIP = why_skip()
    pytestmark = pytest.mark.skipif(bool(_SKIP), reason=_SKIP or "a GPU is here")

    @pytest.mark.parametrize("check", CHECKS)
    def test_topology_facts_on_a_real_gpu(check):
        ok, seen = run_check(check)
        if ok is None:
            pytest.skip(seen)
        print(seen)
        assert ok, seen


if __name__ == "__main__":
    why = why_skip()
    if why:
        print(json.dumps({"skipped": why}))
        sys.exit(0)
    failed = False
    for check_name in CHECKS:
        try:
            passed, detail = run_check(check_name)
        except Exception as error:  # pylint: disable=broad-except
            passed, detail = False, "%s: %s" % (type(error).__name__, error)
        failed = failed or passed is False
        print(json.dumps({"check": check_name, "ok": passed, "seen": detail}))
    sys.exit(1 if failed else 0)
