#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: NVIDIA GPUs of a host as facts
version_added: 0.1.0
description:
  - Returns the host's NVIDIA GPUs as C(ansible_facts.gangplank_gpus), the link between every pair of them as
    C(ansible_facts.gangplank_gpu_links) and the driver as C(ansible_facts.gangplank_gpu_driver).
  - The topology comes from NVML (NVLink state and remote PCI devices, the pairs' common PCIe ancestor, each GPU's NUMA node
    and CPU affinity, with C(/sys/bus/pci/devices) where NVML does not tell them), or from C(nvidia-smi topo -m) read strictly
    in the fallback. An NVML error on a pair makes its level C(unknown); it never fails the module.
  - The GPUs are read in one NVML session through nvidia-ml-py (imported as C(pynvml)). Old C(pynvml) releases that return bytes work too.
  - When C(pynvml) cannot be imported, the module falls back to C(nvidia-smi --query-gpu). That fallback does not list MIG devices
    and leaves RV(ansible_facts.gangplank_gpu_driver.cuda_version) null.
  - A host without a driver, without C(libnvidia-ml.so.1), or without both C(pynvml) and C(nvidia-smi) does not fail;
    it returns no GPUs and RV(ansible_facts.gangplank_gpu_driver.available=false) with the reason.
  - The facts are documented in the collection's C(docs/facts.md).
options:
  simulated:
    description:
      - GPUs to report instead of the real ones, for test and demo hosts. Pass the C(gangplank_simulated_gpus) host variable.
      - Each entry is a mapping with C(model) (a non-empty string) and C(memory) (a size such as C(80Gi)), and optionally
        C(index) (default the entry's position), C(uuid) (default C(GPU-sim-<hostname>-<index>)) and C(compute_capability).
      - Optionally C(numa_node) (an integer, or null for unknown, the default) and C(cpu_affinity) (a Linux cpulist such as C(0-31,64-95)).
      - Simulated GPUs have no memory in use, no PCI bus id, no persistence mode and no MIG; each is marked C(source=simulated).
      - When the list is not empty the hardware is not read at all. A malformed entry fails the task, naming the entry.
    type: list
    elements: dict
    default: []
  simulated_links:
    description:
      - The links between simulated GPUs, for test beds. Pass the C(gangplank_simulated_gpu_links) host variable.
      - Each entry has C(gpus) (two indexes of O(simulated)), C(level) (C(nvlink), C(board), C(switch), C(multi_switch),
        C(host_bridge), C(numa), C(system) or C(unknown)), C(nvlinks) (1 to 64 with C(nvlink), else 0, the default) and
        C(pcie) (optional, an NVLinked pair's PCIe path beside its NVLinks, one of the levels but C(nvlink), default
        C(unknown); any other pair's is its level). A pair not listed is C(unknown) with no NVLinks. Checked like O(simulated).
      - Must be empty unless O(simulated) is not.
    type: list
    elements: dict
    default: []
  hostname:
    description:
      - The name simulated GPU uuids are made from (C(GPU-sim-<hostname>-<index>)), so that several inventory hosts
        on one machine get distinct uuids. Pass C(inventory_hostname).
      - Defaults to the host's own name. Not used for real GPUs.
    type: str
  mps_control:
    description:
      - The CUDA MPS control binary, reported as RV(ansible_facts.gangplank_gpu_driver.mps_control). A command name is
        looked up on C(PATH), an absolute path is taken when it is an executable regular file.
      - Looked up only on hosts with GPUs (simulated ones too, so a test bed can point it at a stand-in); empty looks
        nothing up. A relative path fails the task.
      - Where it is found, the host enforces GPU shares with MPS by default (C(gangplank_gpu_sharing), docs/gpu-sharing.md).
    type: str
    default: nvidia-cuda-mps-control
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    description: Reads only, so check mode returns the same facts.
  diff_mode:
    support: none
    description: Reads only; there is nothing to diff.
  facts:
    support: full
  platform:
    support: full
    platforms: posix
    description: Linux hosts with NVIDIA GPUs; any other host reports no GPUs.
requirements:
  - nvidia-ml-py (C(pynvml)) on the host for the full facts; without it C(nvidia-smi) is used when found.
author:
  - Gangplank maintainers (@gangplank)
notes:
  - Read the facts as C(ansible_facts['gangplank_gpus']); top-level fact variables are deprecated in ansible-core 2.20.
  - Address GPUs by uuid, not by index; enumeration order can change between boots.
seealso:
  - module: gangplank.platform.gang_plan
"""

EXAMPLES = r"""
- name: Read the GPUs
  gangplank.platform.gpu_facts:

- name: Show how many GPUs the host has, and why none when there are none
  ansible.builtin.debug:
    msg: "{{ ansible_facts['gangplank_gpu_driver']['gpu_count'] }} GPU(s); {{ ansible_facts['gangplank_gpu_driver']['reason'] }}"

- name: Describe GPUs on a test host that has none
  gangplank.platform.gpu_facts:
    simulated: "{{ gangplank_simulated_gpus | default([]) }}"

- name: Simulate two GPUs inline
  gangplank.platform.gpu_facts:
    simulated:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi}
      - {model: NVIDIA L4, memory: 24Gi, uuid: GPU-sim-node1-1, compute_capability: "8.9"}

- name: Fail when a GPU could not be read
  ansible.builtin.assert:
    that: ansible_facts['gangplank_gpus'] | selectattr('error') | list | length == 0
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    gangplank_gpu_driver:
      description: The NVIDIA driver, and where the GPU facts came from.
      returned: always
      type: complex
      contains:
        available:
          description: Whether GPUs could be read. False when there is no driver, no C(libnvidia-ml.so.1), or no C(pynvml) and no C(nvidia-smi).
          returned: always
          type: bool
          sample: true
        reason:
          description: Why the GPUs could not be read, naming the NVML error or the output of C(nvidia-smi). Null when they were read from hardware.
          returned: always
          type: str
          sample: "NVML could not be initialised: nvmlInit raised NVMLError_DriverNotLoaded (Driver Not Loaded); the NVIDIA kernel driver is not loaded"
        source:
          description: Where the facts came from, C(nvml), C(nvidia-smi) or C(simulated). Null when not available.
          returned: always
          type: str
          sample: nvml
        driver_version:
          description: The driver version. Null when not available or simulated.
          returned: always
          type: str
          sample: "550.54.15"
        cuda_version:
          description: The CUDA version the driver supports, from C(nvmlSystemGetCudaDriverVersion). Null from the nvidia-smi fallback.
          returned: always
          type: str
          sample: "12.4"
        gpu_count:
          description: Number of GPUs, including those that returned an error.
          returned: always
          type: int
          sample: 8
        topology:
          description:
            - "Why RV(ansible_facts.gangplank_gpu_links) holds no links or only C(unknown) ones, for example
              C(not read: more than 64 GPUs) or what C(nvidia-smi topo -m) printed that is not its table."
          returned: when the topology could not be read
          type: str
          sample: "not read: more than 64 GPUs"
        mps_control:
          description:
            - The absolute path of the CUDA MPS control binary (option O(mps_control)), or null when it was not found
              or the host has no GPUs (none read and none simulated).
          returned: always
          type: str
          sample: /usr/bin/nvidia-cuda-mps-control
    gangplank_gpu_links:
      description:
        - The link between every pair of GPUs of the host (i < j, by index). Empty with one GPU, with none, and with more
          than 64 (then RV(ansible_facts.gangplank_gpu_driver.topology) says so).
      returned: always
      type: list
      elements: dict
      sample: [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 18, "pcie": "numa"},
               {"gpus": [0, 2], "level": "system", "nvlinks": 0, "pcie": "system"}]
      contains:
        gpus:
          description: The two GPUs' indexes, the lower first.
          type: list
          elements: int
          returned: always
        level:
          description:
            - C(nvlink) when they share active NVLinks (directly, or both through the NVSwitches), else their closest
              common PCIe ancestor, C(board), C(switch) (one PCIe switch, nvidia-smi's PIX), C(multi_switch) (PXB),
              C(host_bridge) (PHB), C(numa) (the same NUMA node, NODE), C(system) (across NUMA nodes, SYS), or
              C(unknown) when it could not be read.
          type: str
          returned: always
        nvlinks:
          description: The number of active NVLinks between them (through NVSwitches, the fewer of the two GPUs' switch links); 0 without.
          type: int
          returned: always
        pcie:
          description:
            - Their PCIe path, one of the levels but C(nvlink). For an NVLinked pair the path beside its NVLinks (from NVML's
              common ancestor; from C(nvidia-smi topo -m), C(system) where the GPUs' NUMA nodes differ, else C(unknown)); for
              any other pair its C(level).
          type: str
          returned: always
    gangplank_gpus:
      description: One entry per GPU, in NVML index order. Empty when the driver is not available.
      returned: always
      type: list
      elements: dict
      contains:
        index:
          description: NVML (or nvidia-smi) index of the GPU.
          type: int
          returned: always
          sample: 0
        uuid:
          description: GPU UUID; the stable way to address a GPU.
          type: str
          returned: always
          sample: GPU-5d0c0d8a-31b6-4e4a-9e9e-6d8c2a1f7b10
        model:
          description: Product name.
          type: str
          returned: always
          sample: NVIDIA A100-SXM4-80GB
        memory_total:
          description: Memory in bytes.
          type: int
          returned: always
          sample: 85899345920
        memory_used:
          description: Memory in use, in bytes.
          type: int
          returned: always
          sample: 524288000
        memory_free:
          description: Free memory, in bytes.
          type: int
          returned: always
          sample: 85375057920
        pci_bus_id:
          description: PCI bus id.
          type: str
          returned: always
          sample: "00000000:07:00.0"
        compute_capability:
          description: CUDA compute capability, major.minor.
          type: str
          returned: always
          sample: "8.0"
        persistence_mode:
          description: Whether persistence mode is on. Null when not supported.
          type: bool
          returned: always
          sample: true
        mig_mode:
          description: MIG mode, current and pending, as booleans. Null when the GPU has no MIG support.
          type: dict
          returned: always
          sample: {"current": false, "pending": false}
        mig_devices:
          description: When MIG is on, its devices with index, uuid, memory_total, memory_used and memory_free (bytes). Otherwise empty.
          type: list
          elements: dict
          returned: always
          sample: [{"index": 0, "uuid": "MIG-4f2d9a8e-0c1b-5d6e-8f7a-1b2c3d4e5f60", "memory_total": 42949672960, "memory_used": 0, "memory_free": 42949672960}]
        numa_node:
          description: The NUMA node the GPU is attached to. Null when unknown (the kernel says -1) or not read.
          type: int
          returned: always
          sample: 0
        cpu_affinity:
          description: The CPUs local to the GPU, as a Linux cpulist. Null when unknown.
          type: str
          returned: always
          sample: "0-31,64-95"
        source:
          description: Where this entry came from, C(nvml), C(nvidia-smi) or C(simulated).
          type: str
          returned: always
          sample: nvml
        error:
          description: The NVML error this GPU returned, in words; its other fields are then null. Null when it was read.
          type: str
          returned: always
          sample: GPU is lost
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.facts.gpu_facts import MPS_CONTROL, collect_facts, mps_control_path

try:
    import pynvml
except ImportError:
    pynvml = None  # the collector falls back to nvidia-smi

# Where sysfs is mounted (a GPU's NUMA node and local CPUs where NVML does not tell them).
SYSFS = "/sys"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            simulated=dict(type="list", elements="dict", default=[]),
            simulated_links=dict(type="list", elements="dict", default=[]),
            hostname=dict(type="str"),
            mps_control=dict(type="str", default=MPS_CONTROL),
        ),
        supports_check_mode=True,
    )

    def run_command(argv):
        return module.run_command(argv, handle_exceptions=False)

    try:
        facts = collect_facts(
            nvml=pynvml,
            run_command=run_command,
            which=module.get_bin_path,
            simulated=module.params["simulated"],
            simulated_links=module.params["simulated_links"],
            hostname=module.params["hostname"] or socket.gethostname(),
            sysfs=SYSFS,
        )
        facts["gangplank_gpu_driver"]["mps_control"] = mps_control_path(module.params["mps_control"], facts["gangplank_gpus"],
                                                                        module.get_bin_path)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
