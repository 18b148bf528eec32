# -*- coding: utf-8 -*-
"""Each role's README.md is what scripts/role_readme.py writes from its meta/argument_specs.yml, and the main
entry point documents exactly the role's defaults: one source, so README, ansible-doc and defaults cannot drift."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "scripts", "role_readme.py")
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles"))
               if os.path.isfile(os.path.join(ROOT, "roles", name, "meta", "argument_specs.yml")))


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60, check=False)


def test_every_readme_is_in_sync_with_its_argument_specs():
    result = run("--check")
    assert result.returncode == 0, result.stderr


def test_check_names_a_readme_that_drifted_and_a_run_repairs_it(tmp_path):
    shutil.copytree(os.path.join(ROOT, "roles"), tmp_path / "roles")
    readme = tmp_path / "roles" / "deploy" / "README.md"
    readme.write_text(readme.read_text() + "\nDocker is not supported yet.\n")
    result = run("--check", "--root", str(tmp_path))
    assert result.returncode == 1 and "roles/deploy/README.md" in result.stderr
    assert "Docker is not supported yet." in readme.read_text()     # --check changes nothing
    assert run("--root", str(tmp_path)).returncode == 0
    assert run("--check", "--root", str(tmp_path)).returncode == 0
    assert "not supported" not in readme.read_text()


def test_a_broken_spec_is_an_error_naming_the_file(tmp_path):
    shutil.copytree(os.path.join(ROOT, "roles"), tmp_path / "roles")
    (tmp_path / "roles" / "facts" / "meta" / "argument_specs.yml").write_text("argument_specs: [unclosed\n")
    result = run("--check", "--root", str(tmp_path))
    assert result.returncode == 2 and "roles/facts/meta/argument_specs.yml" in result.stderr
    assert "Traceback" not in result.stderr


def _options(role, entry="main"):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["argument_specs"][entry].get("options") or {}


@pytest.mark.parametrize("role", ROLES)
def test_main_entry_point_documents_exactly_the_roles_defaults(role):
    # The base role's settings are its entry point "settings" (it has no main spec); the other roles' main holds a copy.
    shared = _options("cluster", "settings")
    options = set(shared) if role == "cluster" else set(_options(role)) - set(shared)
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = set(yaml.safe_load(handle) or {})
    assert options == defaults, "documented only: %s; defaults only: %s" % (options - defaults, defaults - options)


@pytest.mark.parametrize("role", sorted(set(ROLES) - {"cluster"}))
def test_each_role_holds_the_base_roles_settings_as_they_are_there(role):
    assert {name: spec for name, spec in _options(role).items() if name.startswith("cluster_")} == _options("cluster", "settings")


def test_check_names_a_copy_that_drifted_and_a_run_repairs_it(tmp_path):
    shutil.copytree(os.path.join(ROOT, "roles"), tmp_path / "roles")
    base = tmp_path / "roles" / "cluster" / "meta" / "argument_specs.yml"
    base.write_text(base.read_text().replace("choices: [podman, docker]", "choices: [podman, docker, lxc]", 1))
    result = run("--check", "--root", str(tmp_path))
    assert result.returncode == 1 and "roles/deploy/meta/argument_specs.yml" in result.stderr
    assert run("--root", str(tmp_path)).returncode == 0 and run("--check", "--root", str(tmp_path)).returncode == 0
    deploy = yaml.safe_load((tmp_path / "roles" / "deploy" / "meta" / "argument_specs.yml").read_text())
    assert deploy["argument_specs"]["main"]["options"]["cluster_engine"]["choices"] == ["podman", "docker", "lxc"]
