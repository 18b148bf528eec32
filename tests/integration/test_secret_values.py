# -*- coding: utf-8 -*-
"""The gangplank.platform.secret_values action under ansible-playbook, with real Ansible Vault values: it reads
them with the right password, and names the service, key and variable (never a value) when a variable is not
defined, refers to one that is not, or cannot be decrypted (no or a wrong vault password). Controller only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
VALUE = "CANARY-vaulted-3e1f"
KEY = "0123456789abcdef0123456789abcdef"
CATALOG = {"api": {"image": "localhost/api:1", "secrets": {
    "db_password": "vault_db", "token": {"var": "plain_token", "env": "API_TOKEN"}, "number": "a_number"}}}
PLAYBOOK = [{
    "hosts": "localhost", "gather_facts": False, "vars_files": ["vars.yml"],
    "tasks": [
        {"name": "Read", "gangplank.platform.secret_values": {"services": "{{ catalog }}", "hash_key": KEY},
         "register": "read", "no_log": True},
        # What a test may look at; the values only as a comparison.
        {"name": "Report", "ansible.builtin.debug": {"msg": {
            "errors": "{{ read.errors }}", "hashes": "{{ read.hashes | list | sort }}",
            "db_ok": "{{ read.secrets.vault_db | default('') == '%s' }}" % VALUE,
            "number": "{{ read.secrets.a_number | default('') }}"}}},
    ],
}]


def run(tmp_path, catalog, *extra):
    (tmp_path / "pb.yml").write_text(yaml.safe_dump(PLAYBOOK))
    (tmp_path / "catalog.json").write_text(json.dumps({"catalog": catalog}))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1")
    completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", str(tmp_path / "pb.yml"),
                                "-e", "@" + str(tmp_path / "catalog.json"), *extra],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert VALUE not in completed.stdout + completed.stderr
    assert CANARY not in completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    [task] = [task for task in report["plays"][0]["tasks"] if task["task"]["name"] == "Report"]
    return task["hosts"]["localhost"]["msg"]


@pytest.fixture(name="vaulted")
def fixture_vaulted(tmp_path):
    (tmp_path / "right").write_text("the-password\n")
    (tmp_path / "wrong").write_text("another-password\n")
    encrypted = subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt_string", "--vault-password-file",
                                str(tmp_path / "right"), "--stdin-name", "vault_db"],
                               input=VALUE, capture_output=True, text=True, check=True).stdout
    (tmp_path / "vars.yml").write_text(encrypted + "\nplain_token: \"tok-{{ 'x' * 3 }}\"\nbroken: \"{{ nothing_here }}\"\n"
                                       "a_number: 1234\n")
    return tmp_path


def test_vaulted_values_are_read_with_the_password(vaulted):
    shown = run(vaulted, CATALOG, "--vault-password-file", str(vaulted / "right"))
    assert shown == {"errors": [], "hashes": ["a_number", "plain_token", "vault_db"], "db_ok": True, "number": "1234"}


@pytest.mark.parametrize("password, reason", [
    ("wrong", "no vault secrets were found that could decrypt"),
    (None, "no vault secrets found"),
])
def test_a_vault_that_cannot_be_opened_or_an_undefined_variable_names_the_service_key_and_variable(vaulted, password, reason):
    extra = ("--vault-password-file", str(vaulted / password)) if password else ()
    catalog = {"api": dict(CATALOG["api"], secrets=dict(CATALOG["api"]["secrets"], a="not_defined_anywhere", b="broken"))}
    shown = run(vaulted, catalog, *extra)
    errors = {error["path"]: error["message"] for error in shown["errors"]}
    assert errors.pop("services.api.secrets.a") == ("the variable not_defined_anywhere is not defined (define it, vaulted, in "
                                                    "the inventory or with -e @file, and give the vault password)")
    assert errors.pop("services.api.secrets.b") == "the variable broken cannot be read: it refers to a variable that is not defined"
    [(path, message)] = errors.items()
    assert path == "services.api.secrets.db_password"
    assert message.startswith("the variable vault_db cannot be read: ") and reason in message
    assert shown["hashes"] == [] and shown["db_ok"] is False


CANARY = "CANARY-plain-9c2d7"


def test_a_huge_number_and_a_broken_template_name_the_path_never_the_value(vaulted):
    """A variable holding an integer of 5,001 digits is a clear error at its path (not Python's int->str error); a value
    that is a template Jinja cannot read is not quoted back by Ansible's message."""
    with open(vaulted / "vars.yml", "a", encoding="utf-8") as handle:
        handle.write("huge: \"{{ 10 ** 5000 }}\"\nbad_template: \"%s{{ oops\"\n" % CANARY)
    catalog = {"api": {"image": "localhost/api:1", "secrets": {"h": "huge", "t": "bad_template"}}}
    shown = run(vaulted, catalog, "--vault-password-file", str(vaulted / "right"))
    errors = {error["path"]: error["message"] for error in shown["errors"]}
    assert errors["services.api.secrets.h"].startswith("the variable huge holds an integer of about 5001 digits; expected a string")
    assert errors["services.api.secrets.t"].startswith("the variable bad_template cannot be read: "), errors
    assert CANARY not in json.dumps(shown), errors


def test_a_value_where_a_name_goes_is_not_quoted_back(vaulted, tmp_path):
    """Through ansible-playbook: the catalog's mistakes in a secret's places (a value as the variable's name, secrets
    given as a string, a reserved env name with a value) name the path and the type, never the value."""
    catalog = {"api": {"image": "localhost/api:1", "env": {"NVIDIA_VISIBLE_DEVICES": CANARY, "OK": [CANARY]},
                       "secrets": {"db": {"var": CANARY + " x"}, "n": 12345678901234567}},
               "web": {"image": "localhost/web:1", "secrets": CANARY}}
    shown = run(vaulted, catalog, "--vault-password-file", str(vaulted / "right"))
    errors = {error["path"]: error["message"] for error in shown["errors"]}
    assert set(errors) == {"services.api.env.NVIDIA_VISIBLE_DEVICES", "services.api.env.OK", "services.api.secrets.db.var",
                           "services.api.secrets.n", "services.web.secrets"}
    assert errors["services.api.secrets.db.var"].startswith("got a string of 20 characters (not shown: it may be a secret)")
    assert CANARY not in json.dumps(shown) and "12345678901234567" not in json.dumps(shown)
