# -*- coding: utf-8 -*-
"""Images from a real registry on Docker: a fresh-bed host (scripts/lib/freshbed.sh) reached over real SSH, Docker
installed by the runtime role, and the registry of tests/e2e/registry.py (TLS, basic auth) on this machine's
127.0.0.1:5443, which the host reaches on its own 127.0.0.1:5443 through an SSH tunnel (loopback only on both sides).
The service's image by digest is pulled with docker_login and docker_image_pull before its rank starts and runs; a
wrong password fails the rank before any container is created, naming the image and the registry, the password
nowhere in the output; no login stays in the host's Docker config. tests/e2e/test_registry.py checks more on Podman."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import ROOT, failures, vault
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed
from ansible_collections.gangplank.platform.tests.e2e.registry import (
    check_wrong_password_refused, last_output, write_password,
)
from ansible_collections.gangplank.platform.tests.e2e.test_registry import (  # the same registry and image
    PASSWORD, USER, WRONG, registry,
)

HOST, ADDRESS = "fe2e-reg", "127.0.0.79"
SERVE = 'mkdir -p /www && cat /registry-marker > /www/health && exec httpd -f -p "${GANGPLANK_PORTS%%,*}" -h /www'
__all__ = ["registry"]     # the module fixture, shared


def catalog(image):
    return {"pulled": {"resources": {"cpu": "10m", "memory": "16Mi"}, "ports": [8080], "image": image,
                       "command": ["sh", "-c", SERVE], "init": True,
                       "health": {"tcp": {"port": 8080}, "interval": 0.2, "retries": 100}}}


@pytest.fixture(scope="module")
def bed(tmp_path_factory, registry):
    base = tmp_path_factory.mktemp("registry-docker")
    bed = FreshBed(base, {}, extra={HOST: (ADDRESS, {"gangplank_container_engine": "docker"})})
    (base / "vault-password").write_text("e2e-vault-password\n")
    (base / "group_vars" / "all" / "zz_catalog.yml").write_text(yaml.safe_dump({
        "gangplank_services": catalog(registry.image),
        "gangplank_registries": [{"registry": registry.host, "username": USER, "password_var": "e2e_registry_password"}],
    }))
    bed.transcripts = {}
    bed.down()
    bed.up()
    # The site's CA where dockerd reads it for this registry.
    with open(os.path.join(registry.cert_dir, "ca.crt")) as handle:
        ca = handle.read()
    bed.sh(HOST, "mkdir -p /etc/docker/certs.d/%s && cat > /etc/docker/certs.d/%s/ca.crt <<'EOF'\n%sEOF" % (
        registry.host, registry.host, ca))
    tunnel = subprocess.Popen(
        ["ssh", "-N", "-i", os.path.join(ROOT, ".build", "fresh", "id_ed25519"), "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes",
         "-R", "127.0.0.1:%d:127.0.0.1:%d" % (registry.port, registry.port), "gangplank@" + ADDRESS],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield bed
    finally:
        tunnel.terminate()
        tunnel.wait(timeout=10)
        bed.down()


def no_login_stays(bed, registry):
    config = bed.sh(HOST, "cat /root/.docker/config.json 2>/dev/null || true")
    return registry.host not in config


def test_a_wrong_password_fails_the_rank_before_it_starts(bed, registry):
    write_password(bed, WRONG)
    returncode, report = bed.playbook("site.yml", *vault(bed))
    check_wrong_password_refused(registry, returncode, report, last_output(bed), bed.containers(),
                                 no_login_left=no_login_stays(bed, registry), secrets=(WRONG, PASSWORD))


def test_the_image_by_digest_is_pulled_with_the_vaulted_password_and_runs(bed, registry):
    write_password(bed, PASSWORD)
    returncode, report = bed.playbook("site.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert PASSWORD not in last_output(bed)
    [(name, (state, _at, labels, engine))] = bed.containers().items()
    assert (state, labels["gangplank.io/service"], engine) == ("running", "pulled", "docker")
    assert bed.sh(HOST, "docker exec %s cat /registry-marker" % name).strip() == "from-registry"
    assert bed.sh(HOST, "docker inspect --format '{{.Config.Image}}' %s" % name).strip() == registry.image
    assert no_login_stays(bed, registry)
    # A second run pulls nothing and changes nothing.
    returncode, report = bed.playbook("site.yml", *vault(bed))
    assert returncode == 0, failures(report)
    assert report["stats"][HOST]["changed"] == 0, report["stats"]
