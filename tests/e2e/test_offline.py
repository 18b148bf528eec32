# -*- coding: utf-8 -*-
"""An air-gapped engine install: a fresh host whose apt sources are removed gets Podman from an
offline bundle made on the controller by scripts/engine-bundle.sh (runtime_offline_bundle), then
runs the demo image loaded from the image bundle. A second run changes nothing. The host is a
minimal Debian 12 from the release's own packages; the bundle comes from the controller's package
lists, which include the point and security updates: it upgrades essential packages of the host
(libpam-modules, whose new version pre-depends on the new libpam-modules-bin) on the way. The demo's catalog asks
for the local proxy, so the bundle also holds HAProxy and iproute2. A bundle that lacks a dependency, or a package
the host needs, is refused before anything is installed."""

from __future__ import annotations

import os
import subprocess
import tarfile

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
    subprocess.run([os.path.join(ROOT, "scripts", "engine-bundle.sh"), "podman", bed.bundle, "haproxy", "iproute2"],
                   check=True, timeout=600)
    yield bed
    bed.down()


def bundle_versions(bundle):
    """Package -> version of every .deb file in the bundle (<package>_<version>_<arch>.deb)."""
    with tarfile.open(bundle) as archive:
        names = [os.path.basename(name) for name in archive.getnames() if name.endswith(".deb")]
    return dict(name.split("_")[:2] for name in names)


def host_versions(bed, packages):
    shown = bed.sh(HOST, "dpkg-query --show --showformat='${Package} ${Version} ${db:Status-Abbrev}\\n' %s 2>/dev/null"
                   % " ".join(packages), check=False)
    return {line.split()[0]: line.split()[1].replace(":", "%3a") for line in shown.splitlines()
            if line.split()[2:] == ["ii"]}


def without(bed, tmp_path, prefix):
    """A copy of the bundle without the files whose name starts with ``prefix``."""
    incomplete = str(tmp_path / "incomplete.tar")
    with tarfile.open(bed.bundle) as source, tarfile.open(incomplete, "w") as target:
        for member in source.getmembers():
            if not os.path.basename(member.name).startswith(prefix):
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return incomplete


def refused(bed, tmp_path, prefix):
    """runtime.yml with the bundle less the files named ``prefix``*: it fails and installs nothing; its messages."""
    status = bed.sh(HOST, "sha256sum /var/lib/dpkg/status")
    returncode, report = bed.playbook("runtime.yml", "-e", "runtime_offline_bundle=%s" % without(bed, tmp_path, prefix))
    assert returncode != 0
    assert bed.sh(HOST, "sha256sum /var/lib/dpkg/status") == status
    bed.sh(HOST, "rm -rf /var/lib/gangplank/bundles")
    return " ".join(failures(report))


def test_a_bundle_that_lacks_a_dependency_is_refused_before_anything_is_installed(bed, tmp_path):
    messages = refused(bed, tmp_path, "libgpgme11_")
    assert "does not install on this host without a repository, and nothing was installed" in messages, messages
    assert "libgpgme11" in messages, messages


def test_a_bundle_that_lacks_a_package_the_host_needs_is_refused_naming_it(bed, tmp_path):
    messages = refused(bed, tmp_path, "haproxy_")
    assert "has no haproxy and the host does not have it; nothing was installed" in messages, messages
    assert "scripts/engine-bundle.sh podman OUTPUT.tar haproxy" in messages, messages


def test_the_engine_installs_from_the_bundle_on_a_host_without_repositories(bed):
    assert bed.sh(HOST, "apt-get install -y -s podman >/dev/null 2>&1 && echo reachable || echo none").strip() == "none"
    bundled = bundle_versions(bed.bundle)
    older = {package for package, version in host_versions(bed, bundled).items() if version != bundled[package]}
    returncode, report = bed.playbook("runtime.yml", "-e", "runtime_offline_bundle=%s" % bed.bundle)
    assert returncode == 0, failures(report)
    # Every package of the bundle is installed at the bundle's version, those the host had older included.
    assert host_versions(bed, bundled) == bundled
    print("upgraded from the bundle: %s" % ", ".join(sorted(older)))
    assert bed.sh(HOST, "podman run --rm localhost/gangplank-demo:1 echo engine works").strip() == "engine works"
    returncode, report = bed.playbook("runtime.yml", "-e", "runtime_offline_bundle=%s" % bed.bundle)
    assert returncode == 0 and report["stats"][HOST]["changed"] == 0, report["stats"]
