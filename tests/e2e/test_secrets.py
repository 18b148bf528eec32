# -*- coding: utf-8 -*-
"""Secrets end to end on a copy of the local test bed, real Podman: a vaulted file secret, a vaulted env secret and
a config template that reads a vaulted value; their modes on the host and in the container; a rotation that
restarts exactly the container that uses the rotated secret; bad input that changes nothing; teardown.

A small catalog of its own (two services, three instances) keeps the runs short. The hosts are renamed
(sec-n1, ...) and publish on 127.0.0.81-83.
"""

from __future__ import annotations

import json
import stat
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures, summaries, vault, vaulted

HOSTS = {"node1": ("sec-n1", "127.0.0.81"), "node2": ("sec-n2", "127.0.0.82"), "node3": ("sec-n3", "127.0.0.83")}
NAMES = tuple(name for name, _address in HOSTS.values())
SERVE = 'mkdir -p /www && echo ok > /www/health && exec httpd -f -p "${GANGPLANK_PORTS%%,*}" -h /www'
CATALOG = {
    "app": {
        "resources": {"cpu": "50m", "memory": "32Mi"}, "ports": [7081],
        "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", SERVE], "init": True,
        "secrets": {"db_password": "e2e_db_password", "api_token": {"var": "e2e_api_token", "env": "API_TOKEN"}},
        "config": [{"dest": "/etc/app/app.conf", "src": "{{ inventory_dir }}/templates/secret.conf.j2"}],
        "health": {"tcp": {"port": 7081}, "interval": 0.2, "retries": 50},
    },
    "other": {
        "replicas": 2, "anti_affinity": ["other"], "resources": {"cpu": "50m", "memory": "32Mi"}, "ports": [7082],
        "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", SERVE], "init": True,
        "secrets": {"token": {"var": "e2e_api_token", "env": "API_TOKEN"}},
        "health": {"tcp": {"port": 7082}, "interval": 0.2, "retries": 50},
    },
}
DB_PASSWORD, API_TOKEN, ROTATED = "e2e-db-pw-5f2c", "e2e-token-91ab", "e2e-db-pw-rotated-77d0"


def write_secrets(bed, db_password):
    (bed.base / "group_vars" / "all" / "zz_secrets.yml").write_text(
        "---\n" + vaulted(bed.base, "e2e_db_password", db_password) + "\n" + vaulted(bed.base, "e2e_api_token", API_TOKEN) + "\n")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("secrets"), HOSTS)
    (bed.base / "vault-password").write_text("e2e-vault-password\n")
    (bed.base / "templates" / "secret.conf.j2").write_text("password = {{ e2e_db_password }}\n")
    (bed.base / "group_vars" / "all" / "zz_catalog.yml").write_text(yaml.safe_dump({"gangplank_services": CATALOG}))
    write_secrets(bed, DB_PASSWORD)
    yield bed
    if containers():                        # test_teardown_removes_the_secrets did not run or failed
        bed.playbook("teardown.yml", "-e", "gangplank_break_lock=true", *vault(bed))


def containers():
    return containers_of(NAMES)


def podman(*argv):
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=False)


def app_container():
    [name] = [name for name, (_state, _at, labels) in containers().items() if labels["gangplank.io/service"] == "app"]
    return name


def test_file_and_env_secrets_reach_the_container_privately(bed):
    returncode, report = bed.playbook("site.yml", *vault(bed))
    assert returncode == 0, failures(report)
    found = containers()
    assert len(found) == 3 and all(state == "running" for state, _at, _labels in found.values()), found
    app = app_container()
    # The file secret: its value, mode 0400, at /run/secrets/<name>; the env secret in the environment.
    shown = podman("exec", app, "sh", "-c", "cat /run/secrets/db_password; echo; stat -c %a /run/secrets/db_password; "
                   "echo \"$API_TOKEN\"; cat /etc/app/app.conf")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [DB_PASSWORD, "400", API_TOKEN, "password = " + DB_PASSWORD]
    for name, (_state, _at, labels) in found.items():
        if labels["gangplank.io/service"] == "other":
            assert podman("exec", name, "sh", "-c", "echo \"$API_TOKEN\"").stdout.strip() == API_TOKEN
        # Labels hold keyed hashes, never a value.
        assert not any(secret in json.dumps(labels) for secret in (DB_PASSWORD, API_TOKEN)), labels
    # One Podman secret per container and secret: the file is not in the image, and no value is in the spec.
    listed = set(podman("secret", "ls", "--format", "{{.Name}}").stdout.split())
    assert {app + ".db_password", app + ".api_token"} <= listed
    # The rendered config file and its directories are private; so is the site's hash key on the control host.
    host = found[app][2]["gangplank.io/node"]
    config = bed.state(host) / "instances" / app / "config" / "0-app.conf"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(config.parent.parent.stat().st_mode) == 0o700
    key = bed.state() / "secret-hash.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_text().strip()) >= 32
    record = (bed.state() / "placement.json").read_text()
    assert DB_PASSWORD not in record and API_TOKEN not in record


def test_a_rotated_secret_restarts_exactly_its_container(bed):
    before = containers()
    app = app_container()
    write_secrets(bed, ROTATED)
    # deploy.yml: the recorded placement, without gathering and scheduling again (a rotation needs neither).
    returncode, report = bed.playbook("deploy.yml", *vault(bed))
    assert returncode == 0, failures(report)
    after = containers()
    restarted = sorted(name for name in after if after[name][1] != before[name][1])
    assert restarted == [app], (restarted, summaries(report))
    shown = podman("exec", app, "sh", "-c", "cat /run/secrets/db_password; echo; cat /etc/app/app.conf")
    assert shown.stdout.splitlines() == [ROTATED, "password = " + ROTATED]
    # The same value again changes nothing.
    returncode, report = bed.playbook("deploy.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    assert containers() == after


def test_a_secret_removed_from_the_catalog_leaves_podmans_store(bed):
    app = app_container()
    catalog = dict(CATALOG, app=dict(CATALOG["app"], secrets={"db_password": "e2e_db_password"}))
    without_token = ("-e", json.dumps({"gangplank_services": catalog}))
    # Check mode names it and changes nothing.
    returncode, report = bed.playbook("deploy.yml", "--check", *vault(bed), *without_token)
    assert returncode == 0, failures(report)
    assert any("would remove unused secrets: %s.api_token" % app in line for line in summaries(report).values()), summaries(report)
    assert app + ".api_token" in podman("secret", "ls", "--format", "{{.Name}}").stdout.split()
    # The container is recreated without it, then the secret goes; the other secrets stay.
    returncode, report = bed.playbook("deploy.yml", *vault(bed), *without_token)
    assert returncode == 0, failures(report)
    listed = set(podman("secret", "ls", "--format", "{{.Name}}").stdout.split())
    assert app + ".api_token" not in listed and app + ".db_password" in listed, listed
    assert {name + ".token" for name in containers() if name != app} <= listed
    # A second run changes nothing.
    returncode, report = bed.playbook("deploy.yml", *vault(bed), *without_token)
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]


def test_a_secret_that_cannot_be_read_stops_every_host_before_any_change(bed):
    before = containers()
    (bed.base / "wrong-password").write_text("not-the-vault-password\n")
    returncode, report = bed.playbook("deploy.yml", "--vault-password-file", str(bed.base / "wrong-password"))
    assert returncode != 0
    messages = "\n".join(failures(report))
    assert "services.app.secrets.db_password: the variable e2e_db_password cannot be read" in messages, messages
    assert "Traceback" not in messages
    catalog = dict(CATALOG, app=dict(CATALOG["app"], secrets={"db_password": "e2e_not_defined"}))
    returncode, report = bed.playbook("deploy.yml", *vault(bed), "-e", json.dumps({"gangplank_services": catalog}))
    assert returncode != 0
    messages = "\n".join(failures(report))
    assert "services.app.secrets.db_password: the variable e2e_not_defined is not defined" in messages, messages
    assert not summaries(report)            # stopped before the rollout was even worked out
    assert containers() == before


def test_teardown_removes_the_secrets(bed):
    app = app_container()
    returncode, report = bed.playbook("teardown.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert containers() == {}
    listed = podman("secret", "ls", "--format", "{{.Name}}").stdout.split()
    assert not [name for name in listed if name.startswith(app + ".")]
