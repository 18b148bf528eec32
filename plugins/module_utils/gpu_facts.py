# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts (docs/facts.md): one NVML session for all GPUs, nvidia-smi when pynvml is missing,
or the GPUs described by gangplank_simulated_gpus.

Nothing here imports pynvml: the caller passes the imported module (or None), so the collector runs
and is tested without it. Only the standard library and this collection are imported.
"""

from __future__ import annotations

import csv
import os
import socket

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.quantity import BLANKS, parse_size
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control

SIMULATED_VAR = "gangplank_simulated_gpus"
SIMULATED_KEYS = ("model", "memory", "index", "uuid", "compute_capability")
SIMULATED_REASON = "simulated by " + SIMULATED_VAR
NOTHING_REASON = "nvidia-ml-py (pynvml) is not installed and nvidia-smi was not found"

MIB = 1024 * 1024
# The CUDA MPS control binary (the driver's user-space tools): where it is found, the host enforces GPU shares with MPS.
MPS_CONTROL = "nvidia-cuda-mps-control"

# nvidia-smi --help-query-gpu names; the order is the order of the CSV columns.
NVIDIA_SMI_FIELDS = (
    "index", "uuid", "name", "memory.total", "memory.used", "memory.free", "pci.bus_id", "compute_cap",
    "persistence_mode", "mig.mode.current", "mig.mode.pending", "driver_version",
)
NVIDIA_SMI_ARGS = ("--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS), "--format=csv,noheader,nounits")

_NVML_INIT_HINTS = (
    ("NVMLError_LibraryNotFound", "libnvidia-ml.so.1 was not found: is the NVIDIA driver installed?"),
    ("NVMLError_DriverNotLoaded", "the NVIDIA kernel driver is not loaded"),
    ("NVMLError_NoPermission", "no permission to open the NVIDIA devices (/dev/nvidia*)"),
    ("NVMLError_LibRmVersionMismatch", "the NVIDIA kernel module and user-space driver versions differ: reboot or reload"),
)
# The NVML errors that mean "this GPU or driver does not have the feature": the fact becomes null.
_NOT_SUPPORTED = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")


def gpu_entry(index, source, **fields):
    """One gangplank_gpus entry with every key of docs/facts.md; unknown values null."""
    entry = {
        "index": index,
        "uuid": None,
        "model": None,
        "memory_total": None,
        "memory_used": None,
        "memory_free": None,
        "pci_bus_id": None,
        "compute_capability": None,
        "persistence_mode": None,
        "mig_mode": None,
        "mig_devices": [],
        "source": source,
        "error": None,
    }
    unknown = set(fields) - set(entry)
    if unknown:
        raise KeyError("not a gangplank_gpus key: %s" % ", ".join(sorted(unknown)))
    entry.update(fields)
    return entry


def driver_entry(available, reason=None, source=None, driver_version=None, cuda_version=None, gpu_count=0):
    """The gangplank_gpu_driver fact."""
    return {
        "available": available,
        "reason": reason,
        "source": source,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "gpu_count": gpu_count,
    }


def _is_nvml_error(exc, names):
    """Whether exc is one of pynvml's NVMLError_<Name> classes, by name: older bindings lack some of them."""
    return any(cls.__name__ in names for cls in type(exc).__mro__)


def _text(value):
    """str from pynvml's str (nvidia-ml-py) or bytes (old pynvml); None and '' as None."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if value is None:
        return None
    value = str(value).rstrip("\x00").strip()
    return value or None


def cuda_version_text(version):
    """NVML's CUDA driver version integer as text: 12040 -> '12.4', 11080 -> '11.8'."""
    if not isinstance(version, int) or isinstance(version, bool) or version <= 0:
        return None
    return "%d.%d" % (version // 1000, (version % 1000) // 10)


# --- simulated ---------------------------------------------------------------------------------

def parse_simulated(entries, hostname):
    """gangplank_simulated_gpus as gangplank_gpus entries; ValueError naming the entry path when malformed."""
    if not isinstance(entries, list):
        raise ValueError("%s: got %s; expected a list of mappings with model and memory" % (SIMULATED_VAR, show(entries)))
    gpus = []
    indexes = {}
    uuids = {}
    for position, entry in enumerate(entries):
        gpu = _simulated_gpu(position, entry, hostname)
        path = "%s[%d]" % (SIMULATED_VAR, position)
        if gpu["index"] in indexes:
            raise ValueError("%s.index: got %d; %s[%d] already has that index"
                             % (path, gpu["index"], SIMULATED_VAR, indexes[gpu["index"]]))
        if gpu["uuid"] in uuids:
            raise ValueError("%s.uuid: got %s; %s[%d] already has that uuid"
                             % (path, show(gpu["uuid"]), SIMULATED_VAR, uuids[gpu["uuid"]]))
        indexes[gpu["index"]] = position
        uuids[gpu["uuid"]] = position
        gpus.append(gpu)
    return gpus


def _simulated_gpu(position, entry, hostname):
    path = "%s[%d]" % (SIMULATED_VAR, position)
    if not isinstance(entry, dict):
        raise ValueError("%s: got %s; expected a mapping with model and memory (e.g. {model: NVIDIA L4, memory: 24Gi})"
                         % (path, show(entry)))
    # show(), not str(): str() of an integer key of more than 4,300 digits raises.
    unknown = sorted((show(key) for key in entry if key not in SIMULATED_KEYS))
    if unknown:
        raise ValueError("%s: unknown key %s; expected only %s" % (path, ", ".join(unknown), ", ".join(SIMULATED_KEYS)))

    model = entry.get("model")
    if not isinstance(model, str) or not model.strip(BLANKS) or has_control(model.strip(BLANKS)):
        # One line: ASCII blanks around it are dropped, a control character is refused (the model is a node label).
        raise ValueError("%s.model: got %s; expected a non-empty string without control characters (e.g. NVIDIA L4)"
                         % (path, "nothing" if "model" not in entry else show(model)))

    if "memory" not in entry:
        raise ValueError("%s.memory: got nothing; expected a size (e.g. 24Gi)" % path)
    try:
        memory = parse_size(entry["memory"])
    except ValueError as exc:
        raise ValueError("%s.memory: got %s; expected %s" % (path, show(entry["memory"]), exc)) from None
    if memory <= 0:
        raise ValueError("%s.memory: got %s; expected a size greater than 0" % (path, show(entry["memory"])))

    index = entry.get("index", position)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError("%s.index: got %s; expected an integer >= 0" % (path, show(index)))

    uuid = entry.get("uuid")
    if uuid is None:
        uuid = "GPU-sim-%s-%d" % (hostname, index)
    elif not isinstance(uuid, str) or not uuid.strip(BLANKS) or has_control(uuid.strip(BLANKS)):
        raise ValueError("%s.uuid: got %s; expected a non-empty string without control characters" % (path, show(uuid)))

    capability = entry.get("compute_capability")
    if capability is not None:
        # A bounded number before str(): str() of an integer of more than 4,300 digits raises.
        if isinstance(capability, bool) or not isinstance(capability, (str, int, float)) or (
                isinstance(capability, int) and capability.bit_length() > 64) or not str(capability).strip(BLANKS) \
                or has_control(str(capability).strip(BLANKS)):
            raise ValueError("%s.compute_capability: got %s; expected a string such as \"8.0\"" % (path, show(capability)))
        capability = str(capability).strip(BLANKS)

    return gpu_entry(index, "simulated", uuid=uuid.strip(BLANKS), model=model.strip(BLANKS), memory_total=memory, memory_used=0,
                     memory_free=memory, compute_capability=capability)


# --- nvidia-smi --------------------------------------------------------------------------------

def _smi_value(value):
    """One nvidia-smi CSV value: '[N/A]', '[Not Supported]' and other bracketed notes -> None."""
    value = value.strip()
    if not value or value in ("N/A", "Not Supported") or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _smi_int(value):
    value = _smi_value(value)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _smi_mib(value):
    mib = _smi_int(value)
    return None if mib is None else mib * MIB


def _smi_bool(value):
    return {"enabled": True, "disabled": False}.get((_smi_value(value) or "").lower())


def parse_nvidia_smi(output):
    """Parse the CSV of NVIDIA_SMI_ARGS; return (gpus, driver_version)."""
    gpus = []
    driver_version = None
    lines = [line for line in output.splitlines() if line.strip()]
    for position, line in enumerate(lines):
        row = next(csv.reader([line], skipinitialspace=True))
        if len(row) != len(NVIDIA_SMI_FIELDS):
            gpus.append(gpu_entry(position, "nvidia-smi", error="nvidia-smi printed %s; expected %d comma-separated fields"
                                  % (show(line), len(NVIDIA_SMI_FIELDS))))
            continue
        values = dict(zip(NVIDIA_SMI_FIELDS, row))
        index = _smi_int(values["index"])
        current = _smi_bool(values["mig.mode.current"])
        pending = _smi_bool(values["mig.mode.pending"])
        gpus.append(gpu_entry(
            position if index is None else index,
            "nvidia-smi",
            uuid=_smi_value(values["uuid"]),
            model=_smi_value(values["name"]),
            memory_total=_smi_mib(values["memory.total"]),
            memory_used=_smi_mib(values["memory.used"]),
            memory_free=_smi_mib(values["memory.free"]),
            pci_bus_id=_smi_value(values["pci.bus_id"]),
            compute_capability=_smi_value(values["compute_cap"]),
            persistence_mode=_smi_bool(values["persistence_mode"]),
            mig_mode=None if current is None and pending is None else {"current": current, "pending": pending},
        ))
        if driver_version is None:
            driver_version = _smi_value(values["driver_version"])
    return gpus, driver_version


# --- the collector -----------------------------------------------------------------------------

class GpuFactCollector:
    """Collects gangplank_gpus and gangplank_gpu_driver.

    nvml: the imported pynvml module, or None when it could not be imported.
    run_command: callable(argv) -> (rc, stdout, stderr), e.g. AnsibleModule.run_command.
    which: callable(name) -> path or None, e.g. AnsibleModule.get_bin_path.
    simulated: gangplank_simulated_gpus; a non-empty list wins over the hardware.
    hostname: used in the uuids of simulated GPUs.
    """

    name = "gangplank_gpus"
    fact_ids = frozenset(("gangplank_gpus", "gangplank_gpu_driver"))

    def __init__(self, nvml=None, run_command=None, which=None, simulated=None, hostname=None):
        self.nvml = nvml
        self.run_command = run_command
        self.which = which
        self.simulated = simulated
        self.hostname = socket.gethostname() if hostname is None else hostname

    def collect(self):
        """Return (gpus, driver). Raises ValueError only for a malformed simulated list."""
        if self.simulated:
            gpus = parse_simulated(self.simulated, self.hostname)
            return gpus, driver_entry(True, SIMULATED_REASON, "simulated", gpu_count=len(gpus))
        if self.nvml is not None:
            return self._from_nvml()
        return self._from_nvidia_smi()

    # NVML

    def _from_nvml(self):
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            return [], driver_entry(False, self._init_reason(exc))
        try:
            return self._nvml_session()
        finally:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError:
                pass  # the facts are read; a failing shutdown changes nothing for them

    def _init_reason(self, exc):
        reason = "NVML could not be initialised: nvmlInit raised %s (%s)" % (type(exc).__name__, exc)
        for name, hint in _NVML_INIT_HINTS:
            if _is_nvml_error(exc, (name,)):
                return "%s; %s" % (reason, hint)
        return reason

    def _optional(self, call, *args):
        """call(*args), or None when NVML raises."""
        try:
            return call(*args)
        except self.nvml.NVMLError:
            return None

    def _unless_not_supported(self, call, *args):
        """call(*args), or None when this GPU or driver does not support it; other NVML errors are raised."""
        try:
            return call(*args)
        except self.nvml.NVMLError as exc:
            if _is_nvml_error(exc, _NOT_SUPPORTED):
                return None
            raise

    def _nvml_session(self):
        nvml = self.nvml
        driver_version = _text(self._optional(nvml.nvmlSystemGetDriverVersion))
        cuda_version = cuda_version_text(self._optional(nvml.nvmlSystemGetCudaDriverVersion))
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            reason = "nvmlDeviceGetCount raised %s (%s)" % (type(exc).__name__, exc)
            return [], driver_entry(False, reason, None, driver_version, cuda_version)
        gpus = [self._nvml_gpu(index) for index in range(count)]
        return gpus, driver_entry(True, None, "nvml", driver_version, cuda_version, len(gpus))

    def _nvml_gpu(self, index):
        nvml = self.nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpu = gpu_entry(
                index,
                "nvml",
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                model=_text(nvml.nvmlDeviceGetName(handle)),
                memory_total=int(memory.total),
                memory_used=int(memory.used),
                memory_free=int(memory.free),
                pci_bus_id=_text(getattr(nvml.nvmlDeviceGetPciInfo(handle), "busId", None)),
                compute_capability="%d.%d" % (major, minor),
            )
            persistence = self._unless_not_supported(nvml.nvmlDeviceGetPersistenceMode, handle)
            if persistence is not None:
                gpu["persistence_mode"] = persistence == nvml.NVML_FEATURE_ENABLED
            mig_mode = self._unless_not_supported(nvml.nvmlDeviceGetMigMode, handle)
            if mig_mode is not None:
                current, pending = mig_mode
                enabled = nvml.NVML_DEVICE_MIG_ENABLE
                gpu["mig_mode"] = {"current": current == enabled, "pending": pending == enabled}
                if current == enabled:
                    gpu["mig_devices"] = self._mig_devices(handle)
        except nvml.NVMLError as exc:
            return gpu_entry(index, "nvml", error=str(exc))
        return gpu

    def _mig_devices(self, handle):
        nvml = self.nvml
        devices = []
        for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError_NotFound:
                continue
            memory = nvml.nvmlDeviceGetMemoryInfo(mig)
            devices.append({
                "index": slot,
                "uuid": _text(nvml.nvmlDeviceGetUUID(mig)),
                "memory_total": int(memory.total),
                "memory_used": int(memory.used),
                "memory_free": int(memory.free),
            })
        return devices

    # nvidia-smi

    def _from_nvidia_smi(self):
        path = self.which("nvidia-smi") if self.which is not None else None
        if not path or self.run_command is None:
            return [], driver_entry(False, NOTHING_REASON)
        try:
            rc, out, err = self.run_command([path] + list(NVIDIA_SMI_ARGS))
        except OSError as exc:
            return [], driver_entry(False, "nvidia-ml-py (pynvml) is not installed and %s could not be run: %s" % (path, exc))
        if rc != 0:
            said = (err or "").strip() or (out or "").strip() or "no output"
            return [], driver_entry(False, "nvidia-ml-py (pynvml) is not installed and nvidia-smi exited with %d: %s" % (rc, said))
        gpus, driver_version = parse_nvidia_smi(out or "")
        return gpus, driver_entry(True, None, "nvidia-smi", driver_version, None, len(gpus))


def mps_control_path(name, gpus, which):
    """gangplank_gpu_driver.mps_control: the absolute path of the CUDA MPS control binary, or None.

    ``name``: a bare command name, looked up with ``which`` (e.g. AnsibleModule.get_bin_path: PATH), or an absolute
    path, taken when it is an executable regular file; empty (or None) looks nothing up. A host without GPUs (none read and none
    simulated) has no use for MPS: None. Simulated GPUs look it up too, so a test bed may name a stand-in.
    Raises ValueError for another name (a relative path, a control character)."""
    if name is None:
        return None
    if not isinstance(name, str) or has_control(name) or ("/" in name and not name.startswith("/")):
        raise ValueError("mps_control: got %s; expected a command name (looked up on PATH) or an absolute path"
                         % show(name))
    if not gpus or not name:
        return None
    if name.startswith("/"):
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    found = which(name) if which is not None else None
    return found if isinstance(found, str) and found.startswith("/") else None


def collect(nvml=None, run_command=None, which=None, simulated=None, hostname=None):
    """Return (gangplank_gpus, gangplank_gpu_driver); see GpuFactCollector."""
    return GpuFactCollector(nvml=nvml, run_command=run_command, which=which, simulated=simulated, hostname=hostname).collect()
