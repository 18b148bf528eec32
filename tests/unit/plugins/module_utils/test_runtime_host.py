# -*- coding: utf-8 -*-
"""The runtime role's read, run as the role runs it (sh -c STATE_SCRIPT sh <arguments>): it prints the stored
fingerprint, then sha256 of what it read and the inputs' JSON, then what it read."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.runtime_host import (
    RuntimeHostError, bundled_images, combine, inputs_json, limits_answer, state_argv, state_record)

INPUTS = {"version": 1, "engine": "podman", "install_packages": True, "offline_bundle": "", "packages": ["sh-nothing"],
          "podman_conf": "/nonexistent/50-gangplank.conf", "docker_conf": "/nonexistent/daemon.json", "cdi": False,
          "image_bundles": [{"path": "/b.tar", "images": ["localhost/a:1"]}]}
BINARIES = {"podman": "sh", "docker": "dockerd"}


def read(tmp_path, inputs, stored="stored-fingerprint\nlimits podman x\n"):
    state = tmp_path / "runtime-state"
    state.write_text(stored)
    from ansible_collections.gangplank.platform.plugins.module_utils.runtime_host import STATE_SCRIPT
    argv = state_argv(inputs, STATE_SCRIPT, str(state), BINARIES)
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.skipif(not shutil.which("sha256sum"), reason="the read hashes with sha256sum")
def test_the_read_prints_the_stored_fingerprint_then_the_hash_of_what_it_read_and_the_inputs(tmp_path):
    lines = read(tmp_path, INPUTS)
    assert lines[0] == "stored-fingerprint"
    read_lines = lines[2:]
    assert read_lines[:3] == [f"{'exists' if line.startswith('exists') else 'missing'} {path}" for line, path in zip(
        read_lines, ["/sys/fs/cgroup/cgroup.controllers", "/run/systemd/system", "/proc/driver/nvidia/version"])]
    assert read_lines[3].startswith("CapEff:") and read_lines[4].startswith("engine /")
    assert "settings none" in read_lines and read_lines[-1] == "image localhost/a:1 1"
    expected = hashlib.sha256(("\n".join(read_lines) + "\n" + inputs_json(INPUTS)).encode()).hexdigest()
    assert lines[1] == expected
    changed = dict(INPUTS, podman_settings={"engine": {"events_logger": "file"}})
    assert read(tmp_path, changed)[1] != expected


def test_a_missing_state_file_reads_as_an_empty_fingerprint(tmp_path):
    lines = read(tmp_path, dict(INPUTS, install_packages=False), stored="")
    assert lines[0] == "" and len(lines[1]) == 64


def test_the_images_are_each_read_once_compared_as_jinja_unique_compares():
    bundles = [{"path": "/a", "images": ["x:1", "X:1", "y:2"]}, {"path": "/b", "images": ["y:2", "z:3"]}]
    assert bundled_images(bundles) == ["x:1", "y:2", "z:3"]
    with pytest.raises(RuntimeHostError, match=r"image_bundles\[1\].images"):
        bundled_images([{"images": []}, {"images": "x:1"}])


def test_the_state_record_holds_the_engines_first_answer_line():
    assert state_record("f", "docker", {"rc": 0, "stdout_lines": ["", " memory limit: true "]}) == \
        "f\nlimits docker memory limit: true\n"
    assert state_record("f", "docker", {"skipped": True}) == "f\n"
    assert limits_answer({"rc": 125, "stdout_lines": ["Error"]}) == ""


def test_combine_merges_mappings_and_replaces_the_rest():
    assert combine({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2], "e": {"f": 1}}, "d": {"g": 1}}) == {
        "a": {"b": 1, "c": [2], "e": {"f": 1}}, "d": {"g": 1}}
