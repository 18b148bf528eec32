# -*- coding: utf-8 -*-
"""The engine drivers' pull step: a login per registry with credentials that an image names (no_log), then each image,
pulled only when absent; the registries' settings checked whole, naming the path."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import (
    EngineError, check_registries, driver, image_registry,
)

DIGEST = "sha256:" + "ab" * 32
REGISTRIES = [{"registry": "127.0.0.1:5443", "username": "deployer", "password_var": "vault_registry_password",
               "ca_cert_dir": "/etc/gangplank/registry-ca"}]
PASSWORDS = {"vault_registry_password": "pw-secret-value"}
IMAGES = ["127.0.0.1:5443/demo@" + DIGEST, "127.0.0.1:5443/other:1@" + DIGEST, "localhost/bundle:1"]


@pytest.mark.parametrize("image, registry", [
    ("127.0.0.1:5443/demo@" + DIGEST, "127.0.0.1:5443"), ("harbor.example.com/team/app:2", "harbor.example.com"),
    ("localhost/app:1", "localhost"), ("library/busybox", ""), ("busybox", ""), ("registry:5000/app", "registry:5000"),
])
def test_the_registry_of_an_image_is_its_first_component_when_that_is_a_host(image, registry):
    assert image_registry(image) == registry


def test_podman_logs_in_once_per_registry_then_pulls_each_image_only_when_absent():
    # An image named twice (two containers of the rank) is pulled once.
    calls = driver("podman").pull_calls(IMAGES + IMAGES[:1], REGISTRIES, PASSWORDS)
    assert [(call.module, call.no_log) for call in calls] == [
        ("containers.podman.podman_login", True), ("containers.podman.podman_image", False),
        ("containers.podman.podman_image", False), ("containers.podman.podman_image", False)]
    assert calls[0].args == {"registry": "127.0.0.1:5443", "username": "deployer", "password": "pw-secret-value",
                             "certdir": "/etc/gangplank/registry-ca"}
    assert calls[1].args == {"name": IMAGES[0], "pull": True, "force": False, "state": "present",
                             "ca_cert_dir": "/etc/gangplank/registry-ca"}
    # A bundle's image: no registry settings, pulled only if absent (the bundle loaded it: no pull).
    assert calls[3].args == {"name": "localhost/bundle:1", "pull": True, "force": False, "state": "present"}
    assert all("pw-secret-value" not in str(call.args) for call in calls[1:])


def test_docker_logs_in_with_docker_login_and_pulls_with_docker_image_pull_when_not_present():
    calls = driver("docker").pull_calls(IMAGES[:1], REGISTRIES, PASSWORDS)
    assert calls[0].module == "community.docker.docker_login" and calls[0].no_log
    assert calls[0].args == {"registry_url": "127.0.0.1:5443", "username": "deployer", "password": "pw-secret-value"}
    assert calls[1].module == "community.docker.docker_image_pull"
    assert calls[1].args == {"name": IMAGES[0], "pull": "not_present"}


def test_no_login_without_an_image_of_the_registry_and_none_without_registries():
    assert [call.module for call in driver("podman").pull_calls(["localhost/bundle:1"], REGISTRIES, PASSWORDS)] == [
        "containers.podman.podman_image"]
    assert [call.module for call in driver("docker").pull_calls(IMAGES[:1])] == ["community.docker.docker_image_pull"]


def test_a_missing_password_names_the_variable_not_a_value():
    with pytest.raises(EngineError, match=r"^registry 127.0.0.1:5443: the value of vault_registry_password was not given$"):
        driver("podman").pull_calls(IMAGES, REGISTRIES, {})


@pytest.mark.parametrize("registries, message", [
    ("x", r"^deploy_registries: expected a list"),
    (["x"], r"^deploy_registries\[0\]: expected a dict"),
    ([{"registry": "r:5000", "username": "u"}], r"^deploy_registries\[0\]\.password_var: missing$"),
    ([{"registry": "r:5000", "username": "u", "password_var": "p", "password": "x"}],
     r"^deploy_registries\[0\]\.password: unknown key"),
    ([{"registry": "https://r", "username": "u", "password_var": "p"}], r"^deploy_registries\[0\]\.registry: got 'https://r'"),
    ([{"registry": "r", "username": "u", "password_var": "p-q"}], r"^deploy_registries\[0\]\.password_var: got 'p-q'"),
    ([{"registry": "r", "username": "u:x", "password_var": "p"}], r"^deploy_registries\[0\]\.username: got"),
    ([{"registry": "r", "username": "u", "password_var": "p", "ca_cert_dir": "certs"}],
     r"^deploy_registries\[0\]\.ca_cert_dir: got 'certs'; expected an absolute"),
    ([{"registry": "r", "username": "u", "password_var": "p"}, {"registry": "r", "username": "v", "password_var": "q"}],
     r"^deploy_registries\[1\]\.registry: r is given twice$"),
])
def test_bad_registry_settings_name_the_path(registries, message):
    with pytest.raises(EngineError, match=message):
        check_registries(registries)


def test_a_logout_of_each_registry_logged_in_to():
    assert [(call.module, call.args) for call in driver("podman").logout_calls(IMAGES, REGISTRIES)] == [
        ("containers.podman.podman_logout", {"registry": "127.0.0.1:5443"})]
    assert [(call.module, call.args) for call in driver("docker").logout_calls(IMAGES, REGISTRIES)] == [
        ("community.docker.docker_login", {"registry_url": "127.0.0.1:5443", "state": "absent"})]
    assert driver("podman").logout_calls(["localhost/bundle:1"], REGISTRIES) == []
