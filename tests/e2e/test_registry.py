# -*- coding: utf-8 -*-
"""Images from a real registry on the local test bed, real Podman: Debian's docker-registry on 127.0.0.1:5443 with TLS
(a self-signed certificate) and basic auth (tests/e2e/registry.py). A service whose image is the registry's reference by
digest is pulled before its rank starts, with the vaulted password, and runs; the bundle's image beside it is not
pulled; a second run pulls nothing and changes nothing; a wrong password fails the rank before any container is
created, naming the image and the registry, the password nowhere in the output; no login stays on the host.

The hosts are renamed (reg-n1, ...) and publish on 127.0.0.91-93."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import BUNDLE, Bed, containers as containers_of, failures, task_results, vault
from ansible_collections.gangplank.platform.tests.e2e.registry import (
    Registry, check_wrong_password_refused, last_output, write_password,
)

HOSTS = {"node1": ("reg-n1", "127.0.0.91"), "node2": ("reg-n2", "127.0.0.92"), "node3": ("reg-n3", "127.0.0.93")}
NAMES = tuple(name for name, _address in HOSTS.values())
USER, PASSWORD, WRONG = "deployer", "e2e-registry-pw-3c1d", "e2e-wrong-pw-88af"
SERVE = 'mkdir -p /www && cat /registry-marker > /www/health && exec httpd -f -p "${GANGPLANK_PORTS%%,*}" -h /www'
# A local image of its own (the demo image and a marker file), pushed to the registry, then removed here.
LOCAL_IMAGE = "localhost/gangplank-registry-e2e:1"


def podman(*argv):
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=False)


def catalog(image):
    return {
        "pulled": {
            "resources": {"cpu": "50m", "memory": "32Mi"}, "ports": [7091], "image": image,
            "command": ["sh", "-c", SERVE], "init": True,
            "health": {"tcp": {"port": 7091}, "interval": 0.2, "retries": 50},
        },
        "bundled": {
            "resources": {"cpu": "50m", "memory": "32Mi"}, "ports": [7092], "image": "localhost/gangplank-demo:1",
            "command": ["sh", "-c", 'mkdir -p /www && echo ok > /www/health && exec httpd -f -p "${GANGPLANK_PORTS%%,*}" -h /www'],
            "init": True, "health": {"tcp": {"port": 7092}, "interval": 0.2, "retries": 50},
        },
    }


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    registry = Registry("127.0.0.1", 5443, USER, PASSWORD).start()
    try:
        work = tmp_path_factory.mktemp("registry-image")
        loaded = podman("load", "-q", "-i", BUNDLE)         # the demo image, as the runtime role loads it
        assert loaded.returncode == 0, loaded.stderr
        (work / "Containerfile").write_text("FROM localhost/gangplank-demo:1\nRUN echo from-registry > /registry-marker\n")
        built = podman("build", "-q", "-t", LOCAL_IMAGE, str(work))
        assert built.returncode == 0, built.stderr
        registry.image = registry.push(LOCAL_IMAGE, "gangplank/demo", work / "digest")
        registry.image_id = built.stdout.strip().splitlines()[-1]
        removed = podman("rmi", "-f", registry.image_id)
        assert removed.returncode == 0, removed.stderr
        yield registry
    finally:
        registry.stop()
        podman("rmi", "-f", getattr(registry, "image_id", LOCAL_IMAGE))


@pytest.fixture(scope="module")
def bed(tmp_path_factory, registry):
    bed = Bed.make(tmp_path_factory.mktemp("registry"), HOSTS)
    (bed.base / "vault-password").write_text("e2e-vault-password\n")
    (bed.base / "group_vars" / "all" / "zz_catalog.yml").write_text(yaml.safe_dump({
        "gangplank_services": catalog(registry.image),
        "gangplank_registries": [{"registry": registry.host, "username": USER, "password_var": "e2e_registry_password",
                                  "ca_cert_dir": registry.cert_dir}],
    }))
    bed.transcripts = {}
    yield bed
    if containers_of(NAMES):
        bed.playbook("teardown.yml", "-e", "gangplank_break_lock=true", *vault(bed))


def not_logged_in(registry):
    return podman("login", "--get-login", registry.host).returncode != 0


def test_a_wrong_password_fails_the_rank_before_it_starts(bed, registry):
    write_password(bed, WRONG)
    returncode, report = bed.playbook("site.yml", *vault(bed))
    check_wrong_password_refused(registry, returncode, report, last_output(bed), containers_of(NAMES),
                                 no_login_left=not_logged_in(registry), secrets=(WRONG, PASSWORD))
    # Nor is the image here.
    assert podman("image", "exists", registry.image).returncode != 0


def test_the_image_by_digest_is_pulled_with_the_vaulted_password_and_runs(bed, registry):
    write_password(bed, PASSWORD)
    returncode, report = bed.playbook("site.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert PASSWORD not in last_output(bed)
    found = containers_of(NAMES)
    assert sorted(labels["gangplank.io/service"] for _state, _at, labels in found.values()) == ["bundled", "pulled"]
    assert all(state == "running" for state, _at, _labels in found.values()), found
    [pulled] = [name for name, (_state, _at, labels) in found.items() if labels["gangplank.io/service"] == "pulled"]
    shown = podman("exec", pulled, "cat", "/registry-marker")
    assert shown.stdout.strip() == "from-registry", shown.stderr
    inspected = json.loads(podman("inspect", pulled).stdout)[0]
    assert inspected["ImageName"] == registry.image
    # The pull ran on the host of the pulled service only (the bundle's host held its image already: no change).
    pulls = {host: result for hosts in task_results(report, "Pull the images of rank 0") for host, result in hosts.items()}
    assert sum(1 for result in pulls.values() if result.get("changed")) == 1, pulls
    assert not_logged_in(registry)
    record = (bed.state() / "placement.json").read_text()
    assert PASSWORD not in record


def test_a_second_run_pulls_nothing_and_changes_nothing(bed):
    before = containers_of(NAMES)
    returncode, report = bed.playbook("site.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    assert containers_of(NAMES) == before
    assert PASSWORD not in last_output(bed)


def test_teardown(bed):
    returncode, report = bed.playbook("teardown.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert containers_of(NAMES) == {}
