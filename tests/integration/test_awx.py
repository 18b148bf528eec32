# -*- coding: utf-8 -*-
"""The AWX pieces: the job templates playbook parses and refuses missing variables before it
contacts AWX, its job templates run the thin AWX project's wrappers of the collection's playbooks, and
the collections it needs are declared (the execution environment: test_execution_environment.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def run(*argv, **options):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, timeout=300, **options)


def test_the_job_templates_playbook_parses():
    completed = run(os.path.join(BIN, "ansible-playbook"), "--syntax-check", "awx/configure.yml")
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_job_templates_playbook_names_missing_variables_and_changes_nothing():
    env = dict(os.environ, CONTROLLER_HOST="https://127.0.0.1:9", ANSIBLE_NOCOLOR="1")
    completed = run(os.path.join(BIN, "ansible-playbook"), "awx/configure.yml", env=env)
    assert completed.returncode != 0
    assert "awx/configure.yml needs -e awx_project_scm_url=URL" in completed.stdout
    assert "Register the execution environment" not in completed.stdout


def test_the_scale_survey_matches_what_scale_yml_reads():
    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    templates = next(task for task in play["tasks"] if task["name"] == "Create the job templates")["loop"]
    assert [template["name"] for template in templates] == ["Deploy platform", "Plan", "Scale service"]
    survey = templates[2]["survey"]["spec"]
    assert [question["variable"] for question in survey] == ["service", "replicas", "reset"]
    assert survey[1]["type"] == "integer" and survey[1]["min"] == 0


def test_every_job_template_gets_the_vault_credential_and_its_password_is_never_logged():
    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    tasks = {task["name"]: task for task in play["tasks"]}
    assert "awx_vault_credential" in tasks["Create the job templates"]["awx.awx.job_template"]["credentials"]
    vault = tasks["Create or update the Vault credential"]
    assert vault["no_log"] is True and vault["awx.awx.credential"]["credential_type"] == "Vault"
    assert vault["awx.awx.credential"]["inputs"]["vault_password"] == "{{ awx_vault_password }}"


def test_the_job_templates_run_the_wrappers_that_the_awx_project_playbook_writes(tmp_path):
    """AWX runs a playbook of the project's repository: gangplank.platform.awx_project writes a wrapper for each
    job template's playbook, importing the collection's playbook of the same name; a second run changes nothing."""
    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    templates = next(task for task in play["tasks"] if task["name"] == "Create the job templates")["loop"]
    assert [template["playbook"] for template in templates] == ["site.yml", "site.yml", "scale.yml"]
    project = tmp_path / "project"
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    argv = (os.path.join(BIN, "ansible-playbook"), "playbooks/awx_project.yml", "-e", "awx_project_dir=%s" % project)
    first = run(*argv, env=env)
    assert first.returncode == 0 and "changed=2" in first.stdout, first.stdout + first.stderr
    second = run(*argv, env=env)
    assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout + second.stderr
    for name in ("site.yml", "scale.yml"):
        (wrapper,) = yaml.safe_load((project / name).read_text())
        assert wrapper["ansible.builtin.import_playbook"] == "gangplank.platform." + name[:-4], wrapper
        assert os.path.isfile(os.path.join(ROOT, "playbooks", name))
    requirements = yaml.safe_load((project / "collections" / "requirements.yml").read_text())
    assert requirements == {"collections": [{"name": "gangplank.platform"}]}
    pinned = run(*argv, "-e", "awx_project_collection_version=>=0.1.0,<1.0.0", env=env)
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    requirements = yaml.safe_load((project / "collections" / "requirements.yml").read_text())
    assert requirements == {"collections": [{"name": "gangplank.platform", "version": ">=0.1.0,<1.0.0"}]}
    refused = run(os.path.join(BIN, "ansible-playbook"), "playbooks/awx_project.yml", env=env)
    assert refused.returncode != 0 and "-e awx_project_dir=PATH; nothing was changed" in refused.stdout


def test_every_collection_that_configure_yml_uses_is_declared_in_its_requirements_and_installed_here():
    """awx/configure-requirements.yml names each collection whose modules awx/configure.yml runs, in a range
    that the installed copy (the `ansible` package's) satisfies."""
    from ansible.galaxy.dependency_resolution.versioning import meets_requirements

    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    used = set()
    for task in play["tasks"]:
        for key in task:
            if key.count(".") == 2 and not key.startswith("ansible.builtin."):
                used.add(key.rsplit(".", 1)[0])
    assert used == {"awx.awx"}
    with open(os.path.join(ROOT, "awx", "configure-requirements.yml")) as handle:
        declared = {entry["name"]: entry.get("version", "*") for entry in yaml.safe_load(handle)["collections"]}
    assert sorted(declared) == sorted(used)
    listed = run(os.path.join(BIN, "ansible-galaxy"), "collection", "list", "awx.awx", "--format", "json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    installed = [info["version"] for found in json.loads(listed.stdout).values() for info in found.values()]
    assert installed and all(meets_requirements(version, declared["awx.awx"]) for version in installed), installed
    assert not meets_requirements("25.0.0", declared["awx.awx"]) and not meets_requirements("23.9.0", declared["awx.awx"])
