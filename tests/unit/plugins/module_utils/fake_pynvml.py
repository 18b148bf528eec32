# -*- coding: utf-8 -*-
"""A stand-in for the pynvml module, built from a list of GPU dicts.

It implements only the NVML calls that plugins/module_utils/facts/gpu_facts.py makes; any other nvml* name
raises AttributeError, so a new call in the collector shows up here first. The error classes and the
NVML_* constants are the real ones from the installed nvidia-ml-py (NVMLError(code) returns the
subclass for that code, e.g. NVMLError_GpuIsLost), so the collector's except clauses are tested
against what the real binding raises.

A GPU dict:
    name              str (bytes when the fake plays old pynvml, old_bytes=True)
    uuid              str
    memory_total      bytes; memory_used (default 0); free is total - used
    pci_bus_id        str, e.g. "00000000:07:00.0"
    compute_capability  (major, minor)
    persistence       True / False, or None: NVMLError_NotSupported
    mig               None (NVMLError_NotSupported) or
                      {"current": bool, "pending": bool, "max": int,
                       "devices": {slot: {"uuid": str, "memory_total": int, "memory_used": int}}}
    numa_node         what nvmlDeviceGetNumaNodeId returns (-1 too); absent: NVMLError_FunctionNotFound (an old driver)
    cpu_affinity      nvmlDeviceGetCpuAffinity's 64-bit words (CPU 0 is bit 0 of the first); absent: NVMLError_NotSupported
    nvlinks           one entry per NVLink of the GPU: the remote PCI bus id of an active link (another GPU's, or an
                      NVSwitch's), or None for an inactive one; links past the list: NVMLError_InvalidArgument; absent:
                      NVMLError_NotSupported (no NVLink)
    errors            {"nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_GPU_IS_LOST, ...}: that call raises
                      NVMLError(code) for this GPU (nvmlDeviceGetHandleByIndex included)
"""

from __future__ import annotations

import collections
import types

import pynvml


class FakeHandle:
    """What nvmlDeviceGetHandleByIndex / nvmlDeviceGetMigDeviceHandleByIndex return."""

    def __init__(self, index, gpu, mig_slot=None):
        self.index = index
        self.gpu = gpu
        self.mig_slot = mig_slot

    def __repr__(self):
        return "FakeHandle(%d, mig_slot=%r)" % (self.index, self.mig_slot)


class FakeNvml:
    """pynvml, faked. `calls` counts every NVML call by name."""

    def __init__(self, gpus, driver_version="550.54.15", cuda_version=12040, init_error=None, old_bytes=False,
                 count_error=None, shutdown_error=None, topology=None):
        self.gpus = list(gpus)
        # {(i, j): NVML_TOPOLOGY_*} for nvmlDeviceGetTopologyCommonAncestor (either order); a pair not there: NotSupported.
        # A value that is an NVML_ERROR_* code in a tuple, (code,), raises that error.
        self.topology = dict(topology or {})
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.init_error = init_error          # an NVML_ERROR_* code nvmlInit raises
        self.count_error = count_error        # an NVML_ERROR_* code nvmlDeviceGetCount raises
        self.shutdown_error = shutdown_error  # an NVML_ERROR_* code nvmlShutdown raises
        self.old_bytes = old_bytes            # strings come back as bytes, like pynvml before nvidia-ml-py 11.515
        self.calls = collections.Counter()
        self.sessions = 0                     # open nvmlInit sessions

    # The real error classes and NVML_* constants: NVMLError, NVMLError_NotFound, NVML_ERROR_*, ...
    def __getattr__(self, name):
        if name.startswith("NVML"):
            return getattr(pynvml, name)
        raise AttributeError("FakeNvml does not implement %s" % name)

    # helpers

    def _call(self, name, handle=None):
        self.calls[name] += 1
        if name not in ("nvmlInit", "nvmlShutdown") and self.sessions <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if handle is not None and handle.mig_slot is None:
            code = handle.gpu.get("errors", {}).get(name)
            if code is not None:
                raise pynvml.NVMLError(code)

    def _str(self, value):
        return value.encode() if self.old_bytes and isinstance(value, str) else value

    @staticmethod
    def _mig(handle):
        mig = handle.gpu.get("mig")
        if mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return mig

    # session

    def nvmlInit(self):
        self._call("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.sessions += 1

    def nvmlShutdown(self):
        self._call("nvmlShutdown")
        if self.sessions <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.sessions -= 1
        if self.shutdown_error is not None:
            raise pynvml.NVMLError(self.shutdown_error)

    # system

    def nvmlSystemGetDriverVersion(self):
        self._call("nvmlSystemGetDriverVersion")
        return self._str(self.driver_version)

    def nvmlSystemGetCudaDriverVersion(self):
        self._call("nvmlSystemGetCudaDriverVersion")
        return self.cuda_version

    def nvmlDeviceGetCount(self):
        self._call("nvmlDeviceGetCount")
        if self.count_error is not None:
            raise pynvml.NVMLError(self.count_error)
        return len(self.gpus)

    # devices

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.gpus):
            self._call("nvmlDeviceGetHandleByIndex")
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handle = FakeHandle(index, self.gpus[index])
        self._call("nvmlDeviceGetHandleByIndex", handle)
        return handle

    def nvmlDeviceGetName(self, handle):
        self._call("nvmlDeviceGetName", handle)
        return self._str(handle.gpu["name"])

    def nvmlDeviceGetUUID(self, handle):
        self._call("nvmlDeviceGetUUID", handle)
        if handle.mig_slot is not None:
            return self._str(self._mig(handle)["devices"][handle.mig_slot]["uuid"])
        return self._str(handle.gpu["uuid"])

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._call("nvmlDeviceGetMemoryInfo", handle)
        source = handle.gpu if handle.mig_slot is None else self._mig(handle)["devices"][handle.mig_slot]
        total = source["memory_total"]
        used = source.get("memory_used", 0)
        return types.SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPciInfo(self, handle):
        self._call("nvmlDeviceGetPciInfo", handle)
        return types.SimpleNamespace(busId=self._str(handle.gpu["pci_bus_id"]), domain=0, bus=0, device=0)

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        self._call("nvmlDeviceGetCudaComputeCapability", handle)
        return tuple(handle.gpu["compute_capability"])

    def nvmlDeviceGetPersistenceMode(self, handle):
        self._call("nvmlDeviceGetPersistenceMode", handle)
        persistence = handle.gpu.get("persistence")
        if persistence is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_FEATURE_ENABLED if persistence else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetMigMode(self, handle):
        self._call("nvmlDeviceGetMigMode", handle)
        mig = self._mig(handle)
        mode = {True: pynvml.NVML_DEVICE_MIG_ENABLE, False: pynvml.NVML_DEVICE_MIG_DISABLE}
        return [mode[bool(mig["current"])], mode[bool(mig["pending"])]]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        self._call("nvmlDeviceGetMaxMigDeviceCount", handle)
        return self._mig(handle).get("max", 7)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        self._call("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        mig = self._mig(handle)
        if not mig["current"]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if index not in mig.get("devices", {}):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return FakeHandle(handle.index, handle.gpu, mig_slot=index)

    # topology

    def nvmlDeviceGetNumaNodeId(self, handle):
        self._call("nvmlDeviceGetNumaNodeId", handle)
        if "numa_node" not in handle.gpu:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return handle.gpu["numa_node"]

    def nvmlDeviceGetCpuAffinity(self, handle, cpu_set_size):
        self._call("nvmlDeviceGetCpuAffinity", handle)
        if "cpu_affinity" not in handle.gpu:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        words = list(handle.gpu["cpu_affinity"])[:cpu_set_size]
        return words + [0] * (cpu_set_size - len(words))

    def _link(self, handle, link):
        links = handle.gpu.get("nvlinks")
        if links is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(links):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle, link):
        self._call("nvmlDeviceGetNvLinkState", handle)
        return pynvml.NVML_FEATURE_DISABLED if self._link(handle, link) is None else pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        self._call("nvmlDeviceGetNvLinkRemotePciInfo", handle)
        remote = self._link(handle, link)
        if remote is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return types.SimpleNamespace(busId=self._str(remote), domain=0, bus=0, device=0)

    def nvmlDeviceGetTopologyCommonAncestor(self, first, second):
        self._call("nvmlDeviceGetTopologyCommonAncestor", first)
        self._call("nvmlDeviceGetTopologyCommonAncestor", second)
        level = self.topology.get((first.index, second.index), self.topology.get((second.index, first.index)))
        if level is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if isinstance(level, tuple):
            raise pynvml.NVMLError(level[0])
        return level
