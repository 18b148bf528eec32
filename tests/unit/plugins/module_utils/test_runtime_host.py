# -*- coding: utf-8 -*-
"""The runtime role's read, run as the role runs it (sh -c STATE_SCRIPT sh <arguments>): it prints the stored
fingerprint, then sha256 of what it read and the inputs' JSON, then what it read."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    RuntimeHostError, bundled_images, combine, compare_versions, debs_to_install, inputs_json, limits_answer, state_argv,
    state_record)

INPUTS = {"version": 1, "engine": "podman", "install_packages": True, "offline_bundle": "", "packages": ["sh-nothing"],
          "podman_conf": "/nonexistent/50-gangplank.conf", "docker_conf": "/nonexistent/daemon.json", "cdi": False,
          "image_bundles": [{"path": "/b.tar", "images": ["localhost/a:1"]}]}
BINARIES = {"podman": "sh", "docker": "dockerd"}


def read(tmp_path, inputs, stored="stored-fingerprint\nlimits podman x\n"):
    state = tmp_path / "runtime-state"
    state.write_text(stored)
    from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import STATE_SCRIPT
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


# (older, newer) Debian versions, as dpkg orders them (deb-version(7)): epochs, ~ before the end, the end before
# letters, letters before other characters, numbers by value, the revision last.
OLDER_NEWER = [
    ("1.5.2-6+deb12u2", "1.5.2-6+deb12u3"), ("4.13+dfsg1-1", "1:4.12"), ("1.0~rc1-1", "1.0-1"), ("1.0~~", "1.0~"),
    ("1.0", "1.0a"), ("1.0a", "1.0+"), ("1.0", "1.0.0"), ("9", "10"), ("1.9", "1.10"), ("2023c-5", "2024a-0+deb12u1"),
    ("2.36-9+deb12u7", "2.36-9+deb12u14"), ("1.0-1~bpo12+1", "1.0-1"), ("4.3.1+ds1-8+deb12u1", "4.3.1+ds1-8+deb12u1+b3"),
    ("1.0-a", "1.0-b"), ("1.0-1", "1.0.1-1"), ("1.0Z", "1.0a"),
]
SAME = [("1.0", "1.0-0"), ("1.01", "1.1"), ("0:1.0", "1.0"), ("1.5.2-6", "1.5.2-6")]


@pytest.mark.parametrize("older, newer", OLDER_NEWER)
def test_debian_versions_compare_as_dpkg_orders_them(older, newer):
    assert compare_versions(older, newer) < 0 < compare_versions(newer, older)


@pytest.mark.parametrize("pair", SAME)
def test_debian_versions_that_dpkg_takes_for_the_same(pair):
    assert compare_versions(*pair) == 0 == compare_versions(*reversed(pair))


@pytest.mark.parametrize("version", ["", "a1", "1.0-", "1:", "x:1", "1.0 1", "1_0", "1.0-a-", "1\n0", "1.0-a_b"])
def test_what_is_not_a_debian_version_is_refused(version):
    with pytest.raises(RuntimeHostError, match="is not a Debian version"):
        compare_versions(version, "1.0")


@pytest.mark.skipif(not shutil.which("dpkg"), reason="compared with dpkg --compare-versions")
def test_debian_versions_compare_as_dpkg_compare_versions_says():
    import random
    draw = random.Random(47)
    alphabet = "0123456789.+~-aZ"
    versions = [draw.choice("0123456789") + "".join(draw.choice(alphabet) for _character in range(draw.randint(0, 6)))
                for _version in range(300)]
    versions = [("%d:%s" % (draw.randint(0, 2), version)) if draw.random() < 0.2 else version for version in versions]
    compared = 0
    for _pair in range(400):
        left, right = draw.sample(versions, 2)
        lower = subprocess.run(["dpkg", "--compare-versions", left, "lt", right], capture_output=True, timeout=30, check=False)
        try:
            ours = compare_versions(left, right)
        except RuntimeHostError:
            assert lower.returncode not in (0, 1) or lower.stderr, (left, right)
            continue
        same = subprocess.run(["dpkg", "--compare-versions", left, "eq", right], capture_output=True, timeout=30, check=False)
        expected = -1 if lower.returncode == 0 else 0 if same.returncode == 0 else 1
        assert (ours > 0) - (ours < 0) == expected, (left, right)
        compared += 1
    assert compared > 300


def test_a_bundle_package_older_than_the_installed_one_is_left_out():
    names = ("libpam0g_1.5.2-6+deb12u2_amd64.deb", "podman_4.3.1+ds1-8_amd64.deb", "passwd_1%3a4.13+dfsg1-1_amd64.deb",
             "tzdata_2024a-0+deb12u1_all.deb", "runc_1.1.5+ds1-1_amd64.deb")
    found = [{"path": "/p/%s" % name} for name in names]
    installed = ["libpam0g_1.5.2-6+deb12u3_amd64.deb", "passwd_1:4.13+dfsg1-1+deb12u2_amd64.deb", "tzdata_2023c-5_all.deb",
                 "runc_1.1.5+ds1-1+b1_i386.deb"]
    # libpam0g and passwd are newer on the host; tzdata older; runc is installed for another architecture only.
    assert debs_to_install(found, installed, "/p") == [
        "/p/podman_4.3.1+ds1-8_amd64.deb", "/p/runc_1.1.5+ds1-1_amd64.deb", "/p/tzdata_2024a-0+deb12u1_all.deb"]
