# -*- coding: utf-8 -*-
"""The GPU facts collector against a fake NVML (real pynvml errors), fake nvidia-smi output and simulated GPUs."""

from __future__ import annotations

import time

import pynvml
import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.facts.gpu_facts import (
    NOTHING_REASON,
    NVIDIA_SMI_FIELDS,
    collect,
    cuda_version_text,
    parse_nvidia_smi,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.fake_pynvml import FakeNvml

GIB = 2 ** 30
MIB = 2 ** 20
GPU_KEYS = {"index", "uuid", "model", "memory_total", "memory_used", "memory_free", "pci_bus_id", "compute_capability",
            "persistence_mode", "mig_mode", "mig_devices", "numa_node", "cpu_affinity", "source", "error"}
DRIVER_KEYS = {"available", "reason", "source", "driver_version", "cuda_version", "gpu_count"}
MIG_KEYS = {"index", "uuid", "memory_total", "memory_used", "memory_free"}


def gpu(index, name, memory_gib, capability, mig=None, persistence=True, used_mib=0, **extra):
    entry = {
        "name": name,
        "uuid": "GPU-%08d-0000-4000-8000-%012d" % (index, index),
        "memory_total": memory_gib * GIB,
        "memory_used": used_mib * MIB,
        "pci_bus_id": "00000000:%02X:00.0" % (0x07 + 0x10 * index),
        "compute_capability": capability,
        "persistence": persistence,
        "mig": mig,
    }
    entry.update(extra)
    return entry


def no_mig():
    return {"current": False, "pending": False, "max": 7, "devices": {}}


def eight_gpus():
    """A mixed node: MIG on GPU 1 (two MIG devices, in slots 0 and 3 of 7), no MIG support on the L4, L40S and T4."""
    mig_on = {
        "current": True, "pending": True, "max": 7,
        "devices": {
            0: {"uuid": "MIG-aaaaaaaa-0000-5000-8000-000000000000", "memory_total": 40 * GIB, "memory_used": 10 * MIB},
            3: {"uuid": "MIG-bbbbbbbb-0000-5000-8000-000000000003", "memory_total": 20 * GIB},
        },
    }
    return [
        gpu(0, "NVIDIA A100-SXM4-80GB", 80, (8, 0), mig=no_mig(), used_mib=500),
        gpu(1, "NVIDIA A100-SXM4-80GB", 80, (8, 0), mig=mig_on),
        gpu(2, "NVIDIA H100 80GB HBM3", 80, (9, 0), mig=no_mig()),
        gpu(3, "NVIDIA H100 PCIe", 80, (9, 0), mig={"current": False, "pending": True, "max": 7, "devices": {}}),
        gpu(4, "NVIDIA L4", 24, (8, 9)),
        gpu(5, "NVIDIA L40S", 48, (8, 9), persistence=False),
        gpu(6, "NVIDIA A30", 24, (8, 0), mig=no_mig()),
        gpu(7, "Tesla T4", 16, (7, 5), persistence=None),
    ]


def run_nvml(nvml, **kwargs):
    def no_command(argv):
        raise AssertionError("nvidia-smi must not run when NVML is there: %r" % (argv,))
    return collect(nvml=nvml, run_command=no_command, which=lambda name: "/usr/bin/" + name, hostname="node1", **kwargs)


# --- NVML -----------------------------------------------------------------------------------------

def test_eight_mixed_gpus_in_one_nvml_session():
    nvml = FakeNvml(eight_gpus())
    gpus, driver = run_nvml(nvml)

    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1 and nvml.sessions == 0
    assert nvml.calls["nvmlSystemGetDriverVersion"] == 1 and nvml.calls["nvmlDeviceGetCount"] == 1
    assert driver == {"available": True, "reason": None, "source": "nvml", "driver_version": "550.54.15",
                      "cuda_version": "12.4", "gpu_count": 8}
    assert [g["index"] for g in gpus] == list(range(8))
    assert all(set(g) == GPU_KEYS for g in gpus)
    assert all(g["source"] == "nvml" and g["error"] is None for g in gpus)
    assert [g["model"] for g in gpus] == ["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
                                          "NVIDIA H100 PCIe", "NVIDIA L4", "NVIDIA L40S", "NVIDIA A30", "Tesla T4"]
    assert [g["compute_capability"] for g in gpus] == ["8.0", "8.0", "9.0", "9.0", "8.9", "8.9", "8.0", "7.5"]
    assert [g["persistence_mode"] for g in gpus] == [True, True, True, True, True, False, True, None]

    first = gpus[0]
    assert first["uuid"] == "GPU-00000000-0000-4000-8000-000000000000"
    assert first["memory_total"] == 85899345920
    assert first["memory_used"] == 524288000
    assert first["memory_free"] == 85899345920 - 524288000
    assert first["pci_bus_id"] == "00000000:07:00.0"
    assert first["mig_mode"] == {"current": False, "pending": False} and first["mig_devices"] == []
    for value in (first["memory_total"], first["memory_used"], first["memory_free"]):
        assert isinstance(value, int) and not isinstance(value, bool)
    assert isinstance(first["uuid"], str) and isinstance(first["model"], str) and isinstance(first["pci_bus_id"], str)


def test_mig_enabled_gpu_lists_its_mig_devices_and_skips_empty_slots():
    nvml = FakeNvml(eight_gpus())
    gpus, _unused = run_nvml(nvml)

    mig = gpus[1]
    assert mig["mig_mode"] == {"current": True, "pending": True}
    assert mig["mig_devices"] == [
        {"index": 0, "uuid": "MIG-aaaaaaaa-0000-5000-8000-000000000000", "memory_total": 40 * GIB,
         "memory_used": 10 * MIB, "memory_free": 40 * GIB - 10 * MIB},
        {"index": 3, "uuid": "MIG-bbbbbbbb-0000-5000-8000-000000000003", "memory_total": 20 * GIB,
         "memory_used": 0, "memory_free": 20 * GIB},
    ]
    assert all(set(device) == MIG_KEYS for device in mig["mig_devices"])
    # all 7 slots were asked for, 5 of them empty (NVMLError_NotFound)
    assert nvml.calls["nvmlDeviceGetMigDeviceHandleByIndex"] == 7
    # pending-only MIG is reported but lists no devices; no MIG support is null
    assert gpus[3]["mig_mode"] == {"current": False, "pending": True} and gpus[3]["mig_devices"] == []
    assert [g["mig_mode"] for g in gpus[4:6]] == [None, None] and gpus[7]["mig_mode"] is None
    assert nvml.calls["nvmlDeviceGetMaxMigDeviceCount"] == 1


@pytest.mark.parametrize("code, error_class, hint", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVMLError_LibraryNotFound", "libnvidia-ml.so.1 was not found"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVMLError_DriverNotLoaded", "the NVIDIA kernel driver is not loaded"),
    (pynvml.NVML_ERROR_UNKNOWN, "NVMLError_Unknown", "Unknown Error"),
])
def test_nvml_init_failure_reports_no_gpus_and_why(code, error_class, hint):
    nvml = FakeNvml(eight_gpus(), init_error=code)
    gpus, driver = run_nvml(nvml)

    assert gpus == []
    assert driver == {"available": False, "reason": driver["reason"], "source": None, "driver_version": None,
                      "cuda_version": None, "gpu_count": 0}
    assert driver["reason"].startswith("NVML could not be initialised: nvmlInit raised %s (%s)"
                                       % (error_class, pynvml.NVMLError(code)))
    assert hint in driver["reason"]
    assert nvml.calls["nvmlInit"] == 1
    assert nvml.calls["nvmlShutdown"] == 0  # no session was opened
    assert sum(nvml.calls.values()) == 1


def test_real_pynvml_without_a_driver_does_not_fail():
    """This machine has no libnvidia-ml.so.1: the real binding raises in nvmlInit, and that is reported."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # a GPU host: leave it alone
        pynvml.nvmlShutdown()
        pytest.skip("this host has an NVIDIA driver")
    gpus, driver = collect(nvml=pynvml, run_command=None, which=lambda name: None, hostname="node1")
    assert gpus == [] and driver["available"] is False and driver["reason"].startswith("NVML could not be initialised")


def test_one_failing_gpu_comes_back_with_its_error_and_the_others_still_come_back():
    gpus_in = eight_gpus()
    gpus_in[2]["errors"] = {"nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_GPU_IS_LOST}
    gpus_in[5]["errors"] = {"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_UNKNOWN}
    nvml = FakeNvml(gpus_in)
    gpus, driver = run_nvml(nvml)

    assert driver["available"] is True and driver["gpu_count"] == 8
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1
    lost = gpus[2]
    assert lost == {"index": 2, "uuid": None, "model": None, "memory_total": None, "memory_used": None, "memory_free": None,
                    "pci_bus_id": None, "compute_capability": None, "persistence_mode": None, "mig_mode": None,
                    "mig_devices": [], "numa_node": None, "cpu_affinity": None, "source": "nvml", "error": "GPU is lost"}
    assert lost["error"] == str(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST))
    assert gpus[5]["error"] == str(pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)) and gpus[5]["model"] is None
    ok = [g for g in gpus if g["index"] not in (2, 5)]
    assert len(ok) == 6 and all(g["error"] is None and g["uuid"] and g["memory_total"] for g in ok)
    assert gpus[1]["mig_devices"] and gpus[7]["model"] == "Tesla T4"


def test_error_in_mig_listing_is_that_gpus_error():
    gpus_in = eight_gpus()
    gpus_in[1]["errors"] = {"nvmlDeviceGetMaxMigDeviceCount": pynvml.NVML_ERROR_NO_PERMISSION}
    gpus, _unused = run_nvml(FakeNvml(gpus_in))
    assert gpus[1]["error"] == "Insufficient Permissions" and gpus[1]["mig_devices"] == []
    assert gpus[0]["error"] is None and gpus[2]["error"] is None


def test_old_pynvml_bytes_are_decoded():
    nvml = FakeNvml(eight_gpus(), old_bytes=True)
    nvml.nvmlInit()  # the fake really plays old pynvml
    assert isinstance(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0)), bytes)
    nvml.nvmlShutdown()
    nvml.calls.clear()
    gpus, driver = run_nvml(nvml)

    assert driver["driver_version"] == "550.54.15"
    assert gpus[0]["model"] == "NVIDIA A100-SXM4-80GB"
    assert gpus[0]["uuid"] == "GPU-00000000-0000-4000-8000-000000000000"
    assert gpus[0]["pci_bus_id"] == "00000000:07:00.0"
    assert gpus[1]["mig_devices"][0]["uuid"] == "MIG-aaaaaaaa-0000-5000-8000-000000000000"
    for g in gpus:
        for key in ("model", "uuid", "pci_bus_id"):
            assert isinstance(g[key], str)


def test_failing_device_count_and_shutdown():
    nvml = FakeNvml(eight_gpus(), count_error=pynvml.NVML_ERROR_UNKNOWN, shutdown_error=pynvml.NVML_ERROR_UNKNOWN)
    gpus, driver = run_nvml(nvml)
    assert gpus == [] and driver["available"] is False and "nvmlDeviceGetCount raised NVMLError_Unknown" in driver["reason"]
    assert driver["driver_version"] == "550.54.15"
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1


def test_host_with_driver_and_no_gpus():
    nvml = FakeNvml([])
    gpus, driver = run_nvml(nvml)
    assert gpus == [] and driver["available"] is True and driver["gpu_count"] == 0
    assert nvml.calls["nvmlInit"] == 1 and nvml.calls["nvmlShutdown"] == 1


@pytest.mark.parametrize("version, text", [(12040, "12.4"), (11080, "11.8"), (12000, "12.0"), (13010, "13.1"), (0, None), (None, None)])
def test_cuda_version_text(version, text):
    assert cuda_version_text(version) == text


def test_one_collect_of_eight_gpus_is_measured(capsys):
    """Not a timing assert: prints how long one collect() of 8 fake GPUs takes."""
    nvml = FakeNvml(eight_gpus())
    start = time.perf_counter()
    gpus, _unused = run_nvml(nvml)
    elapsed = time.perf_counter() - start
    assert len(gpus) == 8
    with capsys.disabled():
        print("\ncollect() of 8 fake NVML GPUs: %.3f ms" % (elapsed * 1000))


# --- nvidia-smi -----------------------------------------------------------------------------------

# What nvidia-smi --query-gpu=... --format=csv,noheader,nounits prints (driver 550): ", " separated, MiB, bracketed notes.
SMI_OUTPUT = """\
0, GPU-5d0c0d8a-31b6-4e4a-9e9e-6d8c2a1f7b10, NVIDIA A100-SXM4-80GB, 81920, 500, 81037, 00000000:07:00.0, 8.0, Enabled, Enabled, Enabled, 550.54.15
1, GPU-7f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, NVIDIA L4, 23034, 0, 22563, 00000000:0A:00.0, 8.9, Disabled, [N/A], [N/A], 550.54.15
2, GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9, Tesla T4, 15360, [N/A], [N/A], 00000000:3B:00.0, 7.5, [Not Supported], [Not Supported], [Not Supported], 550.54.15
"""
SMI_PATH = "/usr/bin/nvidia-smi"


def smi(rc=0, out=SMI_OUTPUT, err=""):
    seen = []

    def run_command(argv):
        seen.append(argv)
        return rc, out, err
    return run_command, seen


def test_nvidia_smi_fallback_parses_real_format_csv():
    run_command, seen = smi()
    gpus, driver = collect(nvml=None, run_command=run_command, which={"nvidia-smi": SMI_PATH}.get, hostname="node1")

    assert seen == [[SMI_PATH, "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS), "--format=csv,noheader,nounits"]]
    assert NVIDIA_SMI_FIELDS == ("index", "uuid", "name", "memory.total", "memory.used", "memory.free", "pci.bus_id",
                                 "compute_cap", "persistence_mode", "mig.mode.current", "mig.mode.pending", "driver_version")
    assert driver == {"available": True, "reason": None, "source": "nvidia-smi", "driver_version": "550.54.15",
                      "cuda_version": None, "gpu_count": 3}
    assert all(set(g) == GPU_KEYS and g["source"] == "nvidia-smi" and g["error"] is None for g in gpus)
    assert gpus[0] == {"index": 0, "uuid": "GPU-5d0c0d8a-31b6-4e4a-9e9e-6d8c2a1f7b10", "model": "NVIDIA A100-SXM4-80GB",
                       "memory_total": 81920 * MIB, "memory_used": 500 * MIB, "memory_free": 81037 * MIB,
                       "pci_bus_id": "00000000:07:00.0", "compute_capability": "8.0", "persistence_mode": True,
                       "mig_mode": {"current": True, "pending": True}, "mig_devices": [], "numa_node": None, "cpu_affinity": None,
                       "source": "nvidia-smi", "error": None}
    assert gpus[1]["persistence_mode"] is False and gpus[1]["mig_mode"] is None and gpus[1]["memory_total"] == 23034 * MIB
    t4 = gpus[2]
    assert t4["model"] == "Tesla T4" and t4["memory_total"] == 15360 * MIB
    assert t4["memory_used"] is None and t4["memory_free"] is None
    assert t4["persistence_mode"] is None and t4["mig_mode"] is None


def test_parse_nvidia_smi_reports_a_malformed_line_as_a_gpu_error():
    gpus, version = parse_nvidia_smi("0, GPU-x, NVIDIA L4, 23034\n\n" + SMI_OUTPUT.splitlines()[1] + "\n")
    assert version == "550.54.15"
    assert gpus[0]["error"].startswith('nvidia-smi printed "0, GPU-x, NVIDIA L4, 23034"; expected 12') and gpus[0]["uuid"] is None
    assert gpus[1]["model"] == "NVIDIA L4" and gpus[1]["error"] is None


def test_nvidia_smi_failing_reports_its_message():
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    run_command, _unused = smi(rc=9, out="", err=message + "\n")
    gpus, driver = collect(nvml=None, run_command=run_command, which={"nvidia-smi": SMI_PATH}.get, hostname="node1")
    assert gpus == []
    assert driver == {"available": False, "reason": "nvidia-ml-py (pynvml) is not installed and nvidia-smi exited with 9: " + message,
                      "source": None, "driver_version": None, "cuda_version": None, "gpu_count": 0}


def test_nvidia_smi_failing_with_message_on_stdout():
    run_command, _unused = smi(rc=6, out="No devices were found\n", err="")
    gpus, driver = collect(nvml=None, run_command=run_command, which={"nvidia-smi": SMI_PATH}.get, hostname="node1")
    assert gpus == [] and driver["available"] is False and driver["reason"].endswith("exited with 6: No devices were found")


def test_nvidia_smi_that_cannot_run():
    def run_command(argv):
        raise OSError(8, "Exec format error")
    gpus, driver = collect(nvml=None, run_command=run_command, which={"nvidia-smi": SMI_PATH}.get, hostname="node1")
    assert gpus == [] and driver["available"] is False and "Exec format error" in driver["reason"]


def test_neither_pynvml_nor_nvidia_smi():
    run_command, seen = smi()
    gpus, driver = collect(nvml=None, run_command=run_command, which=lambda name: None, hostname="node1")
    assert seen == []
    assert gpus == []
    assert driver == {"available": False, "reason": NOTHING_REASON, "source": None, "driver_version": None,
                      "cuda_version": None, "gpu_count": 0}
    assert NOTHING_REASON == "nvidia-ml-py (pynvml) is not installed and nvidia-smi was not found"


# --- simulated ------------------------------------------------------------------------------------

SIMULATED = [
    {"model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"},
    {"model": "NVIDIA L4", "memory": "24Gi", "uuid": "GPU-sim-node1-custom", "compute_capability": "8.9"},
    {"model": "NVIDIA H100 80GB HBM3", "memory": 85899345920, "index": 5},
]


def test_simulated_gpus_win_over_the_hardware():
    nvml = FakeNvml(eight_gpus())
    run_command, seen = smi()
    gpus, driver = collect(nvml=nvml, run_command=run_command, which=lambda name: SMI_PATH, simulated=SIMULATED, hostname="node1")

    assert sum(nvml.calls.values()) == 0 and seen == []
    assert driver == {"available": True, "reason": "simulated by gangplank_simulated_gpus", "source": "simulated",
                      "driver_version": None, "cuda_version": None, "gpu_count": 3}
    assert gpus[0] == {"index": 0, "uuid": "GPU-sim-node1-0", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * GIB,
                       "memory_used": 0, "memory_free": 80 * GIB, "pci_bus_id": None, "compute_capability": None,
                       "persistence_mode": None, "mig_mode": None, "mig_devices": [], "numa_node": None, "cpu_affinity": None,
                       "source": "simulated", "error": None}
    assert (gpus[1]["index"], gpus[1]["uuid"], gpus[1]["compute_capability"]) == (1, "GPU-sim-node1-custom", "8.9")
    assert (gpus[2]["index"], gpus[2]["uuid"], gpus[2]["memory_total"]) == (5, "GPU-sim-node1-5", 80 * GIB)


def test_simulated_uuids_are_deterministic_per_host():
    first, _unused = collect(simulated=SIMULATED, hostname="node1")
    again, _unused = collect(simulated=SIMULATED, hostname="node1")
    other, _unused = collect(simulated=SIMULATED, hostname="node2")
    assert first == again
    assert [g["uuid"] for g in other] == ["GPU-sim-node2-0", "GPU-sim-node1-custom", "GPU-sim-node2-5"]


def test_empty_simulated_list_reads_the_hardware():
    nvml = FakeNvml(eight_gpus())
    gpus, driver = run_nvml(nvml, simulated=[])
    assert driver["source"] == "nvml" and len(gpus) == 8


@pytest.mark.parametrize("entries, message", [
    ([{"model": "NVIDIA L4", "memory": "24Gi"}, {"model": "NVIDIA A100", "memory": "80Gx"}],
     'gangplank_simulated_gpus[1].memory: got "80Gx"; expected a size: bytes, or a number with Ki, Mi, Gi, Ti, Pi, K, M, G, T or P'),
    ([{"model": "NVIDIA L4"}], "gangplank_simulated_gpus[0].memory: got nothing; expected a size"),
    ([{"model": "NVIDIA L4", "memory": -1}], "gangplank_simulated_gpus[0].memory: got -1; expected a size"),
    ([{"model": "NVIDIA L4", "memory": 0}], "gangplank_simulated_gpus[0].memory: got 0; expected a size greater than 0"),
    ([{"model": "NVIDIA L4", "memory": True}], "gangplank_simulated_gpus[0].memory: got true; expected a size"),
    ([{"memory": "24Gi"}], "gangplank_simulated_gpus[0].model: got nothing; expected a non-empty string"),
    ([{"model": "  ", "memory": "24Gi"}], 'gangplank_simulated_gpus[0].model: got "  "; expected a non-empty string'),
    ([{"model": 4, "memory": "24Gi"}], "gangplank_simulated_gpus[0].model: got 4; expected a non-empty string"),
    (["NVIDIA L4"], 'gangplank_simulated_gpus[0]: got "NVIDIA L4"; expected a mapping with model and memory'),
    ([{"model": "NVIDIA L4", "memory": "24Gi", "memroy": "1Gi"}], 'gangplank_simulated_gpus[0]: unknown key "memroy"; expected only model'),
    ([{"model": "NVIDIA L4", "memory": "24Gi", "index": -1}], "gangplank_simulated_gpus[0].index: got -1; expected an integer >= 0"),
    ([{"model": "NVIDIA L4", "memory": "24Gi", "index": "0"}], 'gangplank_simulated_gpus[0].index: got "0"; expected an integer >= 0'),
    ([{"model": "NVIDIA L4", "memory": "24Gi", "uuid": ""}], 'gangplank_simulated_gpus[0].uuid: got ""; expected a non-empty string'),
    ([{"model": "NVIDIA L4", "memory": "24Gi", "compute_capability": [8, 9]}],
     "gangplank_simulated_gpus[0].compute_capability: got [8, 9]; expected a string"),
    ([{"model": "NVIDIA L4", "memory": "24Gi"}, {"model": "NVIDIA L4", "memory": "24Gi", "index": 0}],
     "gangplank_simulated_gpus[1].index: got 0; gangplank_simulated_gpus[0] already has that index"),
    ([{"model": "NVIDIA L4", "memory": "24Gi", "uuid": "GPU-a"}, {"model": "NVIDIA L4", "memory": "24Gi", "uuid": "GPU-a"}],
     'gangplank_simulated_gpus[1].uuid: got "GPU-a"; gangplank_simulated_gpus[0] already has that uuid'),
    ({"model": "NVIDIA L4", "memory": "24Gi"}, "gangplank_simulated_gpus: got {"),
])
def test_bad_simulated_entry_names_its_path(entries, message):
    with pytest.raises(ValueError) as caught:
        collect(nvml=FakeNvml([]), simulated=entries, hostname="node1")
    assert str(caught.value).startswith(message), str(caught.value)
