# -*- coding: utf-8 -*-
"""The runtime role's offline bundle install (roles/runtime/vars/main.yml's runtime__bundle_apt, run by
roles/runtime/tasks/install.yml) on real apt and dpkg, in a private package database: small .deb packages built
with dpkg-deb stand for a bundle that upgrades an essential package whose new version pre-depends on another
package of the bundle (libpam-modules and libpam-modules-bin, when the bundle was made at a later point release
than the host's). dpkg --install of the whole set in file-name order breaks there; the role's apt orders the set
itself, needs no repository, and refuses before changing anything when the set does not resolve."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import debs_to_install

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("apt-get", "dpkg", "dpkg-deb")) or os.geteuid() != 0,
    reason="needs Debian's apt-get, dpkg and dpkg-deb, as root")


def role_apt():
    with open(os.path.join(ROOT, "roles", "runtime", "vars", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["runtime__bundle_apt"]


def build(directory, package, version, essential=False, pre_depends="", depends="", conflicts=""):
    """A .deb of one file, named as Debian names its files."""
    tree = directory / f"tree-{package}-{version}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "usr" / "share" / package).mkdir(parents=True)
    (tree / "usr" / "share" / package / "version").write_text(version + "\n")
    fields = {"Package": package, "Version": version, "Architecture": "all", "Maintainer": "Test <test@example.invalid>",
              "Essential": "yes" if essential else "", "Pre-Depends": pre_depends, "Depends": depends,
              "Conflicts": conflicts, "Description": "a package of a test bundle"}
    (tree / "DEBIAN" / "control").write_text("".join(f"{key}: {value}\n" for key, value in fields.items() if value))
    path = directory / f"{package}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build", str(tree), str(path)], check=True,
                   capture_output=True, timeout=60)
    return str(path)


class Host:
    """A package database and file tree of its own (dpkg --root), with apt's state, cache and logs beside it."""

    def __init__(self, path):
        self.root = str(path)
        for folder in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/apt/lists/partial",
                       "var/cache/apt/archives/partial", "var/log/apt"):
            os.makedirs(os.path.join(self.root, folder))
        self.status_file = os.path.join(self.root, "var/lib/dpkg/status")
        self.sources = []  # the host's own source options, which the role's come after
        open(self.status_file, "w", encoding="utf-8").close()

    def private(self):
        """apt options that keep every read and write in this host (the role's own options come first)."""
        options = {"Dir::State": "var/lib/apt", "Dir::State::status": "var/lib/dpkg/status",
                   "Dir::Cache": "var/cache/apt", "Dir::Log": "var/log/apt"}
        argv = []
        for key, folder in options.items():
            argv += ["-o", f"{key}={os.path.join(self.root, folder)}"]
        return argv + ["-o", "Debug::NoLocking=1", "-o", f"DPkg::Options::=--root={self.root}"]

    def dpkg_install(self, *debs):
        return subprocess.run(["dpkg", f"--root={self.root}", "--install", *debs], capture_output=True, text=True,
                              timeout=120, check=False)

    def role_install(self, debs, simulate=False):
        argv = role_apt()
        argv = argv[:2] + self.private() + self.sources + argv[2:] + (["--simulate"] if simulate else []) + sorted(debs)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), check=False)

    def packages(self):
        shown = subprocess.run(["dpkg-query", f"--admindir={self.root}/var/lib/dpkg", "--show",
                                "--showformat=${Package} ${Version} ${db:Status-Abbrev}\n"],
                               capture_output=True, text=True, check=True, timeout=60)
        return sorted(line.split() for line in shown.stdout.splitlines())

    def installed(self):
        """The installed packages as the role reads them (roles/runtime/tasks/install.yml)."""
        shown = subprocess.run(["dpkg-query", f"--admindir={self.root}/var/lib/dpkg", "--show",
                                "--showformat=${Package}_${Version}_${Architecture}.deb\n"],
                               capture_output=True, text=True, check=True, timeout=60)
        return shown.stdout.splitlines()

    def status(self):
        with open(self.status_file, "rb") as handle:
            return handle.read()


@pytest.fixture
def host(tmp_path):
    """A host with the essential pair at version 1: base pre-depends on base-bin of its own version."""
    host = Host(tmp_path / "host")
    old = tmp_path / "old"
    old.mkdir()
    for package, pre_depends in (("gp-base-bin", ""), ("gp-base", "gp-base-bin (= 1)")):
        result = host.dpkg_install(build(old, package, "1", essential=True, pre_depends=pre_depends))
        assert result.returncode == 0, result.stderr
    return host


@pytest.fixture
def bundle(tmp_path):
    """Version 2 of the essential pair and an engine that needs it: base-bin's file sorts before base's."""
    folder = tmp_path / "bundle"
    folder.mkdir()
    return {"gp-base-bin": build(folder, "gp-base-bin", "2", essential=True),
            "gp-base": build(folder, "gp-base", "2", essential=True, pre_depends="gp-base-bin (= 2)"),
            "gp-engine": build(folder, "gp-engine", "1", depends="gp-base (>= 2)")}


UPGRADED = [["gp-base", "2", "ii"], ["gp-base-bin", "2", "ii"], ["gp-engine", "1", "ii"]]


def test_dpkg_install_of_the_whole_set_in_name_order_breaks_the_essential_upgrade(host, bundle):
    result = host.dpkg_install(*sorted(bundle.values()))
    assert result.returncode != 0 and "pre-dependency problem" in result.stderr
    assert host.packages() != UPGRADED


def test_the_role_upgrades_an_essential_package_whose_pre_dependency_is_in_the_bundle(host, bundle):
    check = host.role_install(bundle.values(), simulate=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert host.packages() == [["gp-base", "1", "ii"], ["gp-base-bin", "1", "ii"]]
    result = host.role_install(bundle.values())
    assert result.returncode == 0, result.stdout + result.stderr
    assert host.packages() == UPGRADED
    # The installed pair came in its dependency order: the pre-dependency configured before the package unpacked.
    log = result.stdout
    assert log.index("Setting up gp-base-bin (2)") < log.index("Unpacking gp-base (2)")


def repository(host, tmp_path, *debs):
    """A repository on disk that offers these packages, made this host's only source (apt-get update read it)."""
    folder = tmp_path / "repository"
    folder.mkdir()
    stanzas = []
    for deb in debs:
        shutil.copy(deb, folder)
        control = subprocess.run(["dpkg-deb", "--field", deb], capture_output=True, text=True, check=True, timeout=60)
        with open(deb, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        stanzas.append(control.stdout.rstrip("\n") + "\nFilename: ./%s\nSize: %d\nSHA256: %s\n"
                       % (os.path.basename(deb), os.path.getsize(deb), digest))
    (folder / "Packages").write_text("\n".join(stanzas))
    sources = tmp_path / "sources.list"
    sources.write_text(f"deb [trusted=yes] file:{folder} ./\n")
    source_options = ["-o", f"Dir::Etc::SourceList={sources}", "-o", f"Dir::Etc::SourceParts={tmp_path}/none"]
    update = subprocess.run(["apt-get", *host.private(), *source_options, "update"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert update.returncode == 0, update.stdout + update.stderr
    return source_options


def test_a_dependency_missing_from_the_bundle_is_not_taken_from_the_hosts_repository(host, bundle, tmp_path):
    source_options = repository(host, tmp_path, bundle["gp-base"])
    incomplete = [bundle["gp-base-bin"], bundle["gp-engine"]]
    # apt with the host's sources would take gp-base from the repository ...
    argv = ["apt-get", "install", "--simulate", *host.private(), *source_options, *incomplete]
    assert subprocess.run(argv, capture_output=True, timeout=120, check=False).returncode == 0
    # ... the role's apt, given the same sources, reads none of them.
    host.sources = source_options
    before = host.status()
    result = host.role_install(incomplete)
    assert result.returncode != 0 and "gp-engine : Depends: gp-base (>= 2)" in result.stdout, result.stdout
    assert host.status() == before


def test_a_bundle_missing_a_dependency_is_refused_before_anything_changes(host, bundle):
    before = host.status()
    incomplete = [bundle["gp-base-bin"], bundle["gp-engine"]]
    check = host.role_install(incomplete, simulate=True)
    assert check.returncode != 0 and "gp-engine : Depends: gp-base (>= 2)" in check.stdout, check.stdout + check.stderr
    result = host.role_install(incomplete)
    assert result.returncode != 0
    assert host.status() == before


def test_a_bundle_that_would_remove_a_package_is_refused_before_anything_changes(host, bundle, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    assert host.dpkg_install(build(other, "gp-rival", "1")).returncode == 0
    before = host.status()
    rivalled = dict(bundle, **{"gp-engine": build(other, "gp-engine", "1", depends="gp-base (>= 2)",
                                                  conflicts="gp-rival")})
    for simulate in (True, False):
        result = host.role_install(rivalled.values(), simulate=simulate)
        assert result.returncode != 0 and "Packages need to be removed but remove is disabled" in result.stderr
    assert host.status() == before


def test_a_host_newer_than_the_bundle_keeps_its_packages_and_gets_the_engine(host, bundle, tmp_path):
    newer = tmp_path / "newer"
    newer.mkdir()
    for package, pre_depends in (("gp-base-bin", ""), ("gp-base", "gp-base-bin (= 3)")):
        assert host.dpkg_install(build(newer, package, "3", essential=True, pre_depends=pre_depends)).returncode == 0
    # The role's choice of files (the debs_to_install filter): the older essential pair is left out.
    files = [{"path": path} for path in bundle.values()]
    chosen = debs_to_install(files, host.installed(), str(tmp_path / "bundle"))
    assert chosen == [bundle["gp-engine"]]
    result = host.role_install(chosen)
    assert result.returncode == 0, result.stdout + result.stderr
    assert host.packages() == [["gp-base", "3", "ii"], ["gp-base-bin", "3", "ii"], ["gp-engine", "1", "ii"]]
    # Given the older pair anyway, apt refuses to downgrade, before anything changes.
    before = host.status()
    refused = host.role_install(bundle.values(), simulate=True)
    assert refused.returncode != 0 and "downgraded" in refused.stderr
    assert host.status() == before
