# -*- coding: utf-8 -*-
"""An air-gapped engine install: a fresh host whose apt sources are removed gets Podman from an
offline bundle made on the controller by scripts/engine-bundle.sh (runtime_offline_bundle), then
runs the demo image loaded from the image bundle. A second run changes nothing."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.gangplank.platform.tests.e2e.bed import ROOT, failures
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed

HOST = "fe2e-offline"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    base = tmp_path_factory.mktemp("offline")
    bed = FreshBed(base, {}, extra={HOST: ("127.0.0.74", {})})
    bed.down()
    bed.up()
    # Air-gapped: no repository at all, and no package lists to fall back on.
    bed.sh(HOST, "rm -rf /etc/apt/sources.list /etc/apt/sources.list.d/* /var/lib/apt/lists/*")
    bed.bundle = str(base / "podman-bookworm.tar")
    subprocess.run([os.path.join(ROOT, "scripts", "engine-bundle.sh"), "podman", bed.bundle], check=True, timeout=600)
    yield bed
    bed.down()


def test_the_engine_installs_from_the_bundle_on_a_host_without_repositories(bed):
    assert bed.sh(HOST, "apt-get install -y -s podman >/dev/null 2>&1 && echo reachable || echo none").strip() == "none"
    returncode, report = bed.playbook("runtime.yml", "-e", "runtime_offline_bundle=%s" % bed.bundle)
    assert returncode == 0, failures(report)
    assert bed.sh(HOST, "podman run --rm localhost/gangplank-demo:1 echo engine works").strip() == "engine works"
    returncode, report = bed.playbook("runtime.yml", "-e", "runtime_offline_bundle=%s" % bed.bundle)
    assert returncode == 0 and report["stats"][HOST]["changed"] == 0, report["stats"]
