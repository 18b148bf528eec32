# -*- coding: utf-8 -*-
"""The stored hardware facts are reused only while the fingerprint is the same."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.facts_cache import (
    CACHED_KEYS, cache_content, cached_facts, fingerprint, hardware_view,
)

FACTS = {"processor_vcpus": 16, "memtotal_mb": 65536, "architecture": "x86_64", "system": "Linux",
         "gangplank_gpus": [{"index": 0, "uuid": "GPU-a", "model": "NVIDIA L4", "memory_total": 24 << 30}],
         "gangplank_gpu_driver": {"version": "550.54"}, "gangplank_nvme": [], "hostname": "h1", "env": {"HOME": "/root"}}
INPUTS = {"hostname": "h1", "simulated_gpus": [], "simulated_nvme": [], "nvme_labels": {}}
VIEW = {"cpus": 16, "memtotal": "67108864 kB", "machine": "x86_64", "system": "Linux", "nvidia_driver": "NVRM 550.54",
        "gpus": {"0000:01:00.0": "Model: NVIDIA L4\n"}, "nvidia_capabilities": [], "nvme_controllers": ["nvme0"],
        "nvme_namespaces": {"nvme0n1": "7501476528\n"}, "nvme_mounts": ["/dev/nvme0n1 /data ext4 rw 0 0"]}


def test_the_cache_keeps_only_what_the_scheduler_reads_and_returns_it_while_nothing_changed():
    print_ = fingerprint(INPUTS, VIEW)
    content = cache_content(FACTS, print_)
    assert set(content["facts"]) == set(CACHED_KEYS)
    facts, reason = cached_facts(content, fingerprint(dict(INPUTS), dict(VIEW)))
    assert facts == {key: FACTS[key] for key in CACHED_KEYS} and reason == "the hardware is unchanged"


def test_any_change_of_the_hardware_or_the_inputs_makes_the_cache_stale():
    content = cache_content(FACTS, fingerprint(INPUTS, VIEW))
    changes = [dict(VIEW, cpus=8), dict(VIEW, memtotal="33554432 kB"), dict(VIEW, gpus={}),
               dict(VIEW, nvidia_capabilities=["gpu0/mig/gi1/access"]), dict(VIEW, nvidia_driver="NVRM 560.1"),
               dict(VIEW, nvme_namespaces={"nvme0n1": "1\n"}), dict(VIEW, nvme_mounts=[])]
    for view in changes:
        assert cached_facts(content, fingerprint(INPUTS, view)) == (
            None, "the hardware or the facts role's inputs changed since the cache was written"), view
    other = dict(INPUTS, nvme_labels={"nvme0n1": ["cache"]})
    assert cached_facts(content, fingerprint(other, VIEW))[0] is None


def test_facts_with_a_gpu_that_could_not_be_read_are_gathered_again():
    print_ = fingerprint(INPUTS, VIEW)
    broken = dict(FACTS, gangplank_gpus=[{"index": 0, "uuid": "GPU-a", "error": "Xid 79: GPU has fallen off the bus"}])
    assert cached_facts(cache_content(broken, print_), print_) == (None, "a GPU could not be read at the last gathering")
    assert cached_facts(cache_content(FACTS, print_), print_)[0] is not None


def test_a_missing_or_foreign_cache_is_not_used():
    print_ = fingerprint(INPUTS, VIEW)
    assert cached_facts(None, print_) == (None, "no cache yet")
    for content in ([], {"version": 0, "fingerprint": print_, "facts": FACTS}, {"version": 1, "fingerprint": print_, "facts": []}):
        assert cached_facts(content, print_) == (None, "the cache file is not one this version wrote")
    assert cached_facts({"version": 1, "fingerprint": print_, "facts": {"memtotal_mb": 1}}, print_) == (
        None, "the cache lacks processor_vcpus")


def test_the_hardware_view_of_this_machine_is_plain_data_and_stable():
    view = hardware_view()
    assert view["cpus"] and view["memtotal"].endswith("kB")
    assert fingerprint(INPUTS) == fingerprint(INPUTS)
