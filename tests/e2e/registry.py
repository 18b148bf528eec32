# -*- coding: utf-8 -*-
"""A real image registry for the e2e tests: Debian's docker-registry (the CNCF distribution registry) on a loopback
address, TLS with a self-signed certificate made here with openssl, and htpasswd basic auth (bcrypt). Installed with
apt-get when missing, its config, certificate and storage under .build/registry, started by hand and stopped by the
test (by its process id). ``push`` puts a local image into it with Podman and gives its reference by digest.
The tests on Podman (test_registry.py) and Docker (test_registry_docker.py) share the vaulted password's writer and
the check of a wrong password (``check_wrong_password_refused``)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import ROOT, failures, vaulted

PACKAGES = {"docker-registry": "docker-registry", "htpasswd": "apache2-utils", "openssl": "openssl"}
START_TIMEOUT = 30


def _ensure_packages():
    missing = sorted({package for command, package in PACKAGES.items() if shutil.which(command) is None})
    if not missing:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *missing]):
        completed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
        if completed.returncode != 0:
            pytest.fail("cannot install %s: %s" % (" ".join(missing), completed.stderr[-2000:]))


def _run(argv, **kwargs):
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, **kwargs)
    if completed.returncode != 0:
        pytest.fail("%s failed: %s" % (argv[0], (completed.stdout + completed.stderr)[-2000:]))
    return completed.stdout


class Registry:
    """One registry at ``address:port`` with one user; ``cert_dir`` holds its CA certificate (Podman's --cert-dir)."""

    def __init__(self, address, port, username, password, base=None):
        self.address, self.port = address, port
        self.host = "%s:%d" % (address, port)
        self.username, self.password = username, password
        self.base = base or os.path.join(ROOT, ".build", "registry")
        self.cert_dir = os.path.join(self.base, "certs.d")
        self.process = None

    def start(self):
        _ensure_packages()
        os.makedirs(self.cert_dir, exist_ok=True)
        os.makedirs(os.path.join(self.base, "storage"), exist_ok=True)
        key, cert = os.path.join(self.base, "registry.key"), os.path.join(self.cert_dir, "ca.crt")
        if not (os.path.exists(key) and os.path.exists(cert)):
            _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=%s" % self.address,
                  "-addext", "subjectAltName=IP:%s" % self.address, "-keyout", key, "-out", cert])
        htpasswd = os.path.join(self.base, "htpasswd")
        with open(htpasswd, "w") as handle:
            handle.write(_run(["htpasswd", "-Bbn", self.username, self.password]))
        config = os.path.join(self.base, "config.yml")
        with open(config, "w") as handle:
            yaml.safe_dump({
                "version": 0.1, "log": {"level": "warn"},
                "storage": {"filesystem": {"rootdirectory": os.path.join(self.base, "storage")}, "delete": {"enabled": True}},
                "http": {"addr": self.host, "tls": {"certificate": cert, "key": key}},
                "auth": {"htpasswd": {"realm": "gangplank-e2e", "path": htpasswd}},
            }, handle)
        self.log = open(os.path.join(self.base, "registry.log"), "w")
        self.process = subprocess.Popen(["docker-registry", "serve", config], stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail("the registry exited: %s" % open(self.log.name).read()[-2000:])
            try:
                socket.create_connection((self.address, self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        pytest.fail("the registry did not listen on %s within %d s" % (self.host, START_TIMEOUT))

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if getattr(self, "log", None):
            self.log.close()

    def push(self, image, name, digest_file):
        """``image`` (local) pushed as ``<registry>/<name>``; its reference by digest, ``<registry>/<name>@sha256:...``."""
        target = "%s/%s" % (self.host, name)
        _run(["podman", "push", "--cert-dir", self.cert_dir, "--creds", "%s:%s" % (self.username, self.password),
              "--digestfile", str(digest_file), image, target])
        with open(digest_file) as handle:
            digest = handle.read().strip()
        return "%s@%s" % (target, digest)


def write_password(bed, password):
    """The registry's password as the site keeps it: a vaulted variable in the bed's group_vars."""
    (bed.base / "group_vars" / "all" / "zz_registry_password.yml").write_text(
        "---\n" + vaulted(bed.base, "e2e_registry_password", password))


def last_output(bed):
    """What the bed's last playbook run printed (``bed.transcripts`` must be a dict)."""
    return list(bed.transcripts.values())[-1]


def check_wrong_password_refused(registry, returncode, report, output, containers, no_login_left, secrets):
    """A run with a wrong registry password: it failed naming the image, the registry and the user, created no
    container (``containers``: what the engine has now), printed none of ``secrets`` (``output``: what it printed)
    and left no login behind (``no_login_left``: read from the engine's own store of logins)."""
    assert returncode != 0
    expected = ("cannot pull %s from registry %s: the registry refused the login of user %s (the password is not shown)"
                % (registry.image, registry.host, registry.username))
    assert expected in failures(report), failures(report)
    assert containers == {}
    assert not any(secret in output for secret in secrets)
    assert no_login_left
