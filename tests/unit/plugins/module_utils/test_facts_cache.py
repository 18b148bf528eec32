# -*- coding: utf-8 -*-
"""The stored hardware facts are reused only while the fingerprint is the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import (
    CACHE_VERSION, CACHED_KEYS, MAX_CACHE_BYTES, _walk_names, _walk_order, cache_content, cached_facts, fingerprint, hardware_view,
    ReadError, parse_read, read_cache, read_command, read_state, state_of,
)

FACTS = {"processor_vcpus": 16, "memtotal_mb": 65536, "architecture": "x86_64", "system": "Linux",
         "gangplank_gpus": [{"index": 0, "uuid": "GPU-a", "model": "NVIDIA L4", "memory_total": 24 << 30}],
         "gangplank_gpu_driver": {"version": "550.54"}, "gangplank_nvme": [], "hostname": "h1", "env": {"HOME": "/root"},
         "gangplank_gpu_links": [],
         "gangplank_data_filesystem": {"path": "/v", "size": 1 << 40, "free": 1 << 39, "source": "statvfs"}}
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
    assert cached_facts({"version": CACHE_VERSION, "fingerprint": print_, "facts": {"memtotal_mb": 1}}, print_) == (
        None, "the cache lacks processor_vcpus")


def test_the_hardware_view_of_this_machine_is_plain_data_and_stable():
    view = hardware_view()
    assert view["cpus"] and view["memtotal"].endswith("kB")
    assert fingerprint(INPUTS) == fingerprint(INPUTS)


# The read as the action plugin runs it: one shell on the host (SHELL_READ), read on the controller.

def shell_read(path, bindings_path="", timeout=30):
    done = subprocess.run(read_command(path, bindings_path), shell=True, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_shell_read_gives_the_modules_fingerprint_and_files_on_this_machine(tmp_path):
    cache = tmp_path / "hardware-facts.json"
    cache.write_text(json.dumps(cache_content(FACTS, fingerprint(INPUTS))))
    bindings = tmp_path / "gangplank.fact"
    bindings.write_text(json.dumps({"instances": {"db-0": {"service": "db"}}, "revision": 3}))
    view, content, node = parse_read(shell_read(str(cache), str(bindings)), str(cache), str(bindings))
    assert view == hardware_view()
    assert content == read_cache(str(cache)) and node == read_cache(str(bindings))
    assert state_of(view, content, node, INPUTS, True) == read_state(str(cache), INPUTS, str(bindings))
    assert state_of(view, content, node, INPUTS, True)["valid"] is True
    # Without a fact file to read, none is returned, as the module does.
    view, content, node = parse_read(shell_read(str(cache)), str(cache), "")
    assert node is None and "gangplank_node_bindings" not in state_of(view, content, node, INPUTS, False).get("ansible_facts", {})


def test_a_terminal_s_line_ends_read_the_same(tmp_path):
    cache = tmp_path / "hardware-facts.json"
    cache.write_text(json.dumps(cache_content(FACTS, fingerprint(INPUTS))))
    out = shell_read(str(cache))
    assert parse_read(out.replace("\n", "\r\n"), str(cache), "") == parse_read(out, str(cache), "")


@pytest.mark.parametrize("make", [
    lambda path: None,                                             # missing
    lambda path: path.write_bytes(b"\xff\xfe not text"),
    lambda path: path.write_text("[1, 2]"),                        # JSON, not an object
    lambda path: path.write_text(""),
    lambda path: path.write_text('{"a": NaN}'),
    lambda path: path.write_bytes(b" " * (MAX_CACHE_BYTES + 1)),  # over the bound
    lambda path: path.mkdir(),
    os.mkfifo,                                                     # would block a reader without O_NONBLOCK
    lambda path: path.symlink_to("/dev/zero"),                     # no end
])
def test_hostile_cache_and_fact_files_read_as_the_module_reads_them(tmp_path, make):
    path = tmp_path / "file"
    make(path)
    _view, content, node = parse_read(shell_read(str(path), str(path), timeout=20), str(path), str(path))
    assert content is None and node is None and read_cache(str(path)) is None


def test_the_capability_names_come_in_os_walk_order(tmp_path):
    """find's names, sorted by _walk_order, are _walk_names' (top-down, sorted, files before subdirectories; a link to
    a directory is not walked and not a file)."""
    root = tmp_path / "capabilities"
    for name in ["gpu1/mig/gi2/ci0/access", "gpu1/mig/gi10/access", "gpu0/mig/config", "gpu0/access", "mig/monitor",
                 "a", "gpu1/mig/gi2/access", "z/b/c"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "gpu0" / "empty").mkdir()
    (root / "gpu0" / "to-dir").symlink_to(root / "gpu1")
    (root / "gpu0" / "broken").symlink_to(root / "nothing")
    found = subprocess.run("cd %s && find . -mindepth 1 ! -xtype d" % root, shell=True, capture_output=True, text=True,
                           check=True).stdout.split()
    assert sorted((name[2:] for name in found), key=_walk_order) == _walk_names(str(root))


LINE = st.one_of(
    st.text(max_size=40),
    st.builds(lambda tag, rest: tag + " " + rest,
              st.sampled_from(["cpus", "uname", "meminfo", "driver", "gpu", "block", "capability", "nvme", "mount",
                               "cache", "fact", "end"]),
              st.text(max_size=40)),
)


@pytest.mark.parametrize("line, field", [
    ("cpus \u00b2", "the CPU count"), ("cpus " + "9" * 5000, "the CPU count"), ("cpus -1", "the CPU count"),
    ("cpus 4\x00", "the CPU count"), ("cpus \u0664", "the CPU count"),
    ("uname x86_64\x1b[2J Linux", "the machine or system"), ("uname x86_64 Linux extra", "the machine or system"),
    ("meminfo MemTotal: \u00b9\u00b2 kB", "MemTotal"), ("meminfo MemTotal: " + "9" * 5000 + " kB", "MemTotal"),
    ("gpu ../../x =AAAA", "a gpu line's name"), ("gpu 0000:01:00.0 =!!", "a gpu line's content"),
    ("block nvme0n1 =" + "A" * 100000, "a block line's content"), ("driver x =AAAA", "a driver line's name"),
    ("capability ./gpu0/\u202eaccess", "a capability"), ("nvme nvme0\u2028cpus 1", "an NVMe controller"),
    ("mount /dev/nvme0n1 /mnt\x1b ext4", "a mount"),
])
def test_a_field_out_of_its_shape_is_an_error_naming_the_host_and_line(line, field):
    with pytest.raises(ReadError) as caught:
        parse_read("cpus 4\n" + line + "\nend\n", "/c", "/f", host="n1")
    assert str(caught.value).startswith("n1: line 2 of the facts read: " + field)
    assert "\n" not in str(caught.value) and "9999" not in str(caught.value)


def test_cached_facts_of_another_shape_are_gathered_again():
    for facts in ({"processor_vcpus": "4", "memtotal_mb": 1}, {"processor_vcpus": True, "memtotal_mb": 1},
                  {"processor_vcpus": 4, "memtotal_mb": 2 ** 60}, {"processor_vcpus": 4, "memtotal_mb": 1, "system": ["x"]}):
        content = {"version": CACHE_VERSION, "fingerprint": "f", "facts": facts}
        assert cached_facts(content, "f") == (None, "the cache file is not one this version wrote")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(LINE, max_size=30), st.booleans())
def test_any_output_parses_to_a_view_or_none_and_never_raises(lines, ended):
    out = "\n".join(lines + (["end"] if ended else []))
    try:
        read = parse_read(out, "/c", "/f", host="n1")
    except ReadError as error:
        # The documented error only: one line naming the host and the line.
        assert str(error).startswith("n1: line ") and "\n" not in str(error)
        return
    if read is None:
        assert "end" not in [line.rstrip("\r") for line in out.splitlines()]
    else:
        view, content, node = read
        assert set(view) == set(VIEW) and (content is None or isinstance(content, dict))
        fingerprint(INPUTS, view)


# Made in a mount namespace of its own (unshare -m; root, as on the test machines): an NVIDIA driver with two GPUs and
# MIG capability entries, two NVMe namespaces (one mounted) and a loop device, where the machine has none of them.
FAKE_HARDWARE = r"""set -e
mount -t tmpfs none /proc/driver
mkdir -p /proc/driver/nvidia/gpus/0000:01:00.0 /proc/driver/nvidia/gpus/0000:41:00.0
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n' > /proc/driver/nvidia/version
printf 'Model: \t NVIDIA A100-SXM4-80GB\nGPU UUID: GPU-1\n' > /proc/driver/nvidia/gpus/0000:01:00.0/information
printf 'Model: \t NVIDIA L4\n\xff\n' > /proc/driver/nvidia/gpus/0000:41:00.0/information
cd /proc/driver/nvidia && mkdir -p capabilities/gpu0/mig/gi1/ci0 capabilities/gpu0/mig/gi10 capabilities/mig
touch capabilities/mig/config capabilities/gpu0/mig/gi1/access capabilities/gpu0/mig/gi1/ci0/access \
  capabilities/gpu0/mig/gi10/access capabilities/gpu0/access
ln -s gpu0 capabilities/gpu-link
mount -t tmpfs none /sys/block
mkdir /sys/block/nvme0n1 /sys/block/nvme1n1 /sys/block/loop0
echo 7501476528 > /sys/block/nvme0n1/size; echo 3750738264 > /sys/block/nvme1n1/size; echo 0 > /sys/block/loop0/size
mount -t tmpfs none /sys/class
mkdir -p /sys/class/nvme/nvme0 /sys/class/nvme/nvme1
mount -t tmpfs /dev/nvme0n1 "$FAKE_MOUNT"
"""

COMPARE = """
import json, subprocess, sys
from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import hardware_view, parse_read, read_command
out = subprocess.run(read_command(sys.argv[1], ""), shell=True, capture_output=True, text=True, check=True).stdout
print(json.dumps({"module": hardware_view(), "shell": parse_read(out, sys.argv[1], "")[0]}))
"""


def test_the_shell_read_sees_gpus_mig_and_nvme_as_the_module_does(tmp_path):
    program = tmp_path / "compare.py"
    program.write_text(COMPARE)
    (tmp_path / "data").mkdir()
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           FAKE_HARDWARE + '\nexec "$0" "$@"', sys.executable, str(program), str(tmp_path / "cache.json")],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), FAKE_MOUNT=str(tmp_path / "data")))
    assert done.returncode == 0, done.stderr
    views = json.loads(done.stdout)
    assert views["shell"] == views["module"]
    view = views["shell"]
    assert sorted(view["gpus"]) == ["0000:01:00.0", "0000:41:00.0"] and "A100" in view["gpus"]["0000:01:00.0"]
    assert view["nvidia_capabilities"] == ["gpu0/access", "gpu0/mig/gi1/access", "gpu0/mig/gi1/ci0/access",
                                           "gpu0/mig/gi10/access", "mig/config"]
    assert view["nvidia_driver"].startswith("NVRM version") and view["nvme_controllers"] == ["nvme0", "nvme1"]
    assert view["nvme_namespaces"] == {"nvme0n1": "7501476528\n", "nvme1n1": "3750738264\n"}
    assert [line.split()[:2] for line in view["nvme_mounts"]] == [["/dev/nvme0n1", str(tmp_path / "data")]]


def test_a_cache_written_before_the_gpu_topology_is_gathered_again_once():
    """Version 1 stored no gangplank_gpu_links (nor numa_node, cpu_affinity): read again, under a new fingerprint."""
    assert CACHE_VERSION == 2 and "gangplank_gpu_links" in CACHED_KEYS
    print_ = fingerprint(INPUTS, VIEW)
    old = dict(cache_content(FACTS, print_), version=1)
    del old["facts"]["gangplank_gpu_links"]
    assert cached_facts(old, print_) == (None, "the cache file is not one this version wrote")
    import hashlib
    import json
    version_1 = hashlib.sha256(json.dumps({"version": 1, "hardware": VIEW, "inputs": INPUTS}, sort_keys=True, default=str)
                               .encode("utf-8")).hexdigest()
    assert print_ != version_1
    links = [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 4}]
    content = cache_content(dict(FACTS, gangplank_gpu_links=links), print_)
    assert cached_facts(content, print_)[0]["gangplank_gpu_links"] == links
