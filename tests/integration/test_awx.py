# -*- coding: utf-8 -*-
"""The AWX pieces: the job templates playbook parses and refuses missing variables before it
contacts AWX, and execution-environment.yml is a valid ansible-builder v3 definition that
bundles this collection."""

from __future__ import annotations

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


def test_the_execution_environment_is_valid_for_ansible_builder(tmp_path):
    built = run(os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force",
                "--output-path", os.path.join(ROOT, ".build", "ee-collection"))
    assert built.returncode == 0, built.stdout + built.stderr
    context = tmp_path / "context"
    created = run(os.path.join(BIN, "ansible-builder"), "create", "-f", "execution-environment.yml",
                  "-c", str(context), "--output-filename", "Containerfile")
    assert created.returncode == 0, created.stdout + created.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install --offline /build/collections/gangplank-platform-" in containerfile
    assert list((context / "_build" / "collections").glob("gangplank-platform-*.tar.gz"))
    assert (context / "_build" / "requirements.yml").exists()
