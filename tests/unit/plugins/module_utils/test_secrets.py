# -*- coding: utf-8 -*-
"""Secrets: the catalog's secrets key, the keyed hash, where each secret goes, reading the values, and
rotation through the spec hash."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    CONFIG_HASH, DeployError, SPEC_HASH, desired_containers, rollout,
)
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.secrets import (
    MAX_SECRET_BYTES, MAX_TOTAL_SECRET_BYTES, Missing, SecretError, Unreadable, container_secrets, keyed_hash,
    read_values,
)

KEY = "k" * 32
OTHER_KEY = "j" * 32
IMAGE = "localhost/app:1"


def errors_of(services):
    with pytest.raises(ProblemError) as caught:
        split_catalog(services)
    return dict(caught.value.errors)


def secrets_of(secrets, **spec):
    return split_catalog({"api": dict({"image": IMAGE, "secrets": secrets}, **spec)})[1]["api"]["secrets"]


# -- the keyed hash --------------------------------------------------------------------------------------------------

def test_keyed_hash_is_hmac_sha256_under_the_site_key():
    expected = hmac.new(KEY.encode(), b"s3cret", hashlib.sha256).hexdigest()
    assert keyed_hash(KEY, "s3cret") == "hmac-sha256:" + expected
    # Not a plain digest of the value, which a list of likely passwords would find again.
    assert hashlib.sha256(b"s3cret").hexdigest() not in keyed_hash(KEY, "s3cret")
    assert keyed_hash(KEY, "s3cret") != keyed_hash(OTHER_KEY, "s3cret")
    assert keyed_hash(KEY, "s3cret") != keyed_hash(KEY, "s3cret2")
    # The key file's trailing newline does not change it.
    assert keyed_hash(KEY + "\n", "s3cret") == keyed_hash(KEY, "s3cret")


@pytest.mark.parametrize("key", [None, "", "short", " " * 40, 12345])
def test_keyed_hash_refuses_a_missing_or_short_key(key):
    with pytest.raises(SecretError, match="secret hash key"):
        keyed_hash(key, "s3cret")


# -- the catalog -------------------------------------------------------------------------------------------------------

def test_secrets_default_to_a_private_file_under_run_secrets():
    assert secrets_of({"db_password": "vault_db_password", "token": {"var": "vault_token", "env": "API_TOKEN"},
                       "tls.key": {"var": "tls_key", "target": "/etc/tls/key.pem", "mode": 0o440, "uid": 0, "gid": 101}}) == [
        {"name": "db_password", "var": "vault_db_password", "delivery": "file", "env": None,
         "target": "/run/secrets/db_password", "mode": "0400", "uid": None, "gid": None},
        {"name": "tls.key", "var": "tls_key", "delivery": "file", "env": None, "target": "/etc/tls/key.pem",
         "mode": "0440", "uid": 0, "gid": 101},
        {"name": "token", "var": "vault_token", "delivery": "env", "env": "API_TOKEN", "target": None, "mode": None,
         "uid": None, "gid": None},
    ]
    assert secrets_of({"a": {"var": "x", "mode": "600"}})[0]["mode"] == "0600"
    assert secrets_of(None) == []


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", ".hidden", "-rf", "", "a b", "a\nb", "x" * 64, "ä", ".", ".."])
def test_a_secret_name_must_be_a_safe_file_name(name):
    errors = errors_of({"api": {"image": IMAGE, "secrets": {name: "vault_x"}}})
    [(path, message)] = errors.items()
    assert path.startswith("services.api.secrets") and "safe file name" in message


@pytest.mark.parametrize("var, expected", [
    ("s3cret value", "services.api.secrets.db.var"),
    ("{{ lookup('pipe', 'id') }}", "services.api.secrets.db.var"),
    ("1abc", "services.api.secrets.db.var"),
    ({"var": None}, "services.api.secrets.db.var"),
    (5, "services.api.secrets.db"),
    (["x"], "services.api.secrets.db"),
])
def test_a_secret_names_a_variable_never_a_value(var, expected):
    errors = errors_of({"api": {"image": IMAGE, "secrets": {"db": var}}})
    assert "the name of the Ansible variable" in errors[expected]


def test_bad_secret_specs_name_the_service_and_key():
    errors = errors_of({"api": {"image": IMAGE, "env": {"API_TOKEN": "x"},
                                "config": [{"dest": "/run/secrets/cfg", "content": "x"}], "secrets": {
                                    "a": {"var": "x", "env": "API_TOKEN"},
                                    "b": {"var": "x", "env": "GANGPLANK_NODE"},
                                    "c": {"var": "x", "env": "NVIDIA_VISIBLE_DEVICES"},
                                    "d": {"var": "x", "env": "A-B"},
                                    "e": {"var": "x", "env": "E", "target": "/x"},
                                    "f": {"var": "x", "mode": "0644"},
                                    "g": {"var": "x", "mode": "0700"},
                                    "h": {"var": "x", "mode": "rw"},
                                    "i": {"var": "x", "target": "relative"},
                                    "j": {"var": "x", "target": "/x:rw"},
                                    "cfg": {"var": "x"},
                                    "k": {"var": "x", "uid": -1},
                                    "l": {"var": "x", "colour": "red"},
                                    "m": {},
                                    "n": ["x"]}}})
    assert set(errors) == {"services.api.secrets.%s" % key for key in (
        "a.env", "b.env", "c.env", "d.env", "e", "f.mode", "g.mode", "h.mode", "i.target", "j.target", "cfg.target",
        "k.uid", "l.colour", "m.var", "n")}, errors
    assert "not both" in errors["services.api.secrets.e"]
    assert "others may not read" in errors["services.api.secrets.f.mode"]
    assert "do not set" in errors["services.api.secrets.a.env"]


def test_two_secrets_cannot_share_an_env_name_or_a_target():
    errors = errors_of({"api": {"image": IMAGE, "secrets": {"a": {"var": "x", "env": "T"}, "b": {"var": "y", "env": "T"},
                                                            "c": {"var": "x", "target": "/s"}, "d": {"var": "y", "target": "/s"}}}})
    assert set(errors) == {"services.api.secrets.b.env", "services.api.secrets.d.target"}


def test_secrets_are_bounded():
    errors = errors_of({"api": {"image": IMAGE, "secrets": {"s%d" % number: "v" for number in range(65)}}})
    assert errors == {"services.api.secrets": "has 65 entries; expected at most 64"}


def test_config_files_are_private_unless_the_catalog_says_otherwise():
    spec = split_catalog({"api": {"image": IMAGE, "config": [
        {"dest": "/a", "content": "x"}, {"dest": "/b", "content": "x", "mode": "0640", "group": 101},
        {"dest": "/c", "content": "x", "mode": 0o644}]}})[1]["api"]
    assert [(entry["mode"], entry["group"]) for entry in spec["config"]] == [("0600", None), ("0640", 101), ("0644", None)]
    errors = errors_of({"api": {"image": IMAGE, "config": [{"dest": "/a", "content": "x", "mode": "0666"},
                                                           {"dest": "/b", "content": "x", "mode": "0755"}]}})
    assert set(errors) == {"services.api.config[0].mode", "services.api.config[1].mode"}


# -- the layout on the host and in the container ------------------------------------------------------------------------

SERVICES = {
    "api": {"ports": [8080], "sidecars": ["log"], "image": IMAGE, "config": [{"dest": "/etc/api.conf", "content": "x"}],
            "secrets": {"db_password": "vault_db", "token": {"var": "vault_token", "env": "API_TOKEN"},
                        "tls": {"var": "vault_tls", "target": "/etc/tls/key.pem", "mode": "0440", "uid": 0, "gid": 101}}},
    "log": {"sidecar": True, "image": IMAGE, "secrets": {"token": {"var": "vault_token", "env": "LOG_TOKEN"}}},
    "web": {"ports": [80], "image": IMAGE},
}
INSTANCES = {
    "api-0": {"service": "api", "ordinal": 0, "rank": 0, "gpus": [], "nvme": None, "sidecars": ["log"]},
    "web-0": {"service": "web", "ordinal": 0, "rank": 0, "gpus": [], "nvme": None, "sidecars": []},
}


def containers(engine="podman"):
    found = desired_containers("h1", INSTANCES, SERVICES, "/var/lib/gangplank/instances", engine=engine,
                               secret_dir="/run/gangplank/secrets", gpu_mode="simulated")
    return {container["name"]: container for container in found}


def test_podman_gets_one_secret_per_container_and_secret():
    found = containers()
    api = found["h1-api-0"]
    assert api["podman_secrets"] == ["h1-api-0.db_password,type=mount,target=/run/secrets/db_password,mode=0400",
                                     "h1-api-0.tls,type=mount,target=/etc/tls/key.pem,mode=0440,uid=0,gid=101",
                                     "h1-api-0.token,type=env,target=API_TOKEN"]
    assert api["mounts"] == [] and "API_TOKEN" not in api["env"]
    assert found["h1-api-0-log"]["podman_secrets"] == ["h1-api-0-log.token,type=env,target=LOG_TOKEN"]
    assert found["h1-web-0"]["secrets"] == [] and found["h1-web-0"]["podman_secrets"] == []


def test_docker_gets_private_files_bind_mounted_read_only():
    api = containers("docker")["h1-api-0"]
    assert [entry["path"] for entry in api["secrets"]] == ["/run/gangplank/secrets/h1-api-0/db_password",
                                                           "/run/gangplank/secrets/h1-api-0/tls", None]
    assert api["mounts"] == [
        {"type": "bind", "source": "/run/gangplank/secrets/h1-api-0/db_password", "target": "/run/secrets/db_password",
         "read_only": True},
        {"type": "bind", "source": "/run/gangplank/secrets/h1-api-0/tls", "target": "/etc/tls/key.pem", "read_only": True}]
    assert api["podman_secrets"] == [] and "API_TOKEN" not in api["env"]


def test_a_container_spec_holds_names_never_values():
    value = "VALUE-never-in-a-spec"
    text = json.dumps(containers()) + json.dumps(containers("docker"))
    assert value not in text and "vault_db" in text


def test_container_secrets_keeps_names_inside_the_secret_dir():
    secret = {"name": "x", "var": "v", "delivery": "file", "env": None, "target": "/run/secrets/x", "mode": "0400",
              "uid": None, "gid": None}
    [entry] = container_secrets("h1-api-0", [secret], "docker", "/run/gangplank/secrets")
    assert entry["path"] == "/run/gangplank/secrets/h1-api-0/x"


# -- reading the values -------------------------------------------------------------------------------------------------

def specs(services):
    return split_catalog(services)[1]


def lookup_in(variables):
    def lookup(name):
        if name not in variables:
            raise Missing(name)
        value = variables[name]
        if isinstance(value, Exception):
            raise value
        return value
    return lookup


def test_read_values_returns_values_and_keyed_hashes_by_variable():
    values, hashes, errors = read_values(specs(SERVICES), lookup_in({"vault_db": "pw", "vault_token": 1234, "vault_tls": "k"}), KEY)
    assert errors == []
    assert values == {"vault_db": "pw", "vault_token": "1234", "vault_tls": "k"}
    assert hashes == {name: keyed_hash(KEY, value) for name, value in values.items()}


def test_read_values_names_the_service_and_key_never_the_value():
    hidden = "HIDDEN-value"
    services = {"api": {"image": IMAGE, "secrets": {
        "missing": "not_defined", "vault": "locked", "empty": "empty", "big": "big", "listy": "listy",
        "nul": {"var": "nul", "env": "NUL_VAR"}}}}
    variables = {"locked": Unreadable("Attempting to decrypt but no vault secrets found"), "empty": "",
                 "big": hidden + "x" * MAX_SECRET_BYTES, "listy": [hidden], "nul": hidden + "\x00"}
    values, hashes, errors = read_values(specs(services), lookup_in(variables), KEY)
    assert (values, hashes) == ({}, {})
    errors = dict(errors)
    assert errors == {
        "services.api.secrets.missing": "the variable not_defined is not defined (define it, vaulted, in the inventory or "
                                        "with -e @file, and give the vault password)",
        "services.api.secrets.vault": "the variable locked cannot be read: Attempting to decrypt but no vault secrets found",
        "services.api.secrets.empty": "the variable empty is empty; expected a value (the engines refuse empty secrets)",
        "services.api.secrets.big": "the variable big holds %d bytes; expected at most %d"
                                    % (len(hidden) + MAX_SECRET_BYTES, MAX_SECRET_BYTES),
        "services.api.secrets.listy": "the variable listy holds list; expected a string",
        "services.api.secrets.nul": "the variable nul holds a NUL character, which an environment variable cannot carry; "
                                    "deliver it as a file",
    }
    assert hidden not in json.dumps(errors)


def test_read_values_bounds_the_bytes_read_in_all():
    services = {"s%d" % number: {"image": IMAGE, "secrets": {"v%d" % var: "var_%d_%d" % (number, var) for var in range(64)}}
                for number in range(2)}
    chunk = "x" * MAX_SECRET_BYTES
    values, _hashes, errors = read_values(specs(services), lambda name: chunk, KEY)
    assert values == {} and len(errors) == 1
    assert errors[0][1] == "the catalog's secrets hold more than %d bytes in all; reading stopped here" % MAX_TOTAL_SECRET_BYTES


# -- rotation: the spec hash ------------------------------------------------------------------------------------------

def planned(hashes, existing=(), key=KEY):
    found = desired_containers("h1", INSTANCES, SERVICES, "/var/lib/gangplank/instances", gpu_mode="simulated")
    rendered = {entry["path"]: "x" for container in found for entry in container["config"]}
    return {container["name"]: container for container in rollout("h1", found, rendered, list(existing), hashes, key)["containers"]}


def as_existing(plan):
    return [{"Name": name, "State": {"Running": True}, "Config": {"Labels": container["labels"]}} for name, container in plan.items()]


HASHES = {"vault_db": keyed_hash(KEY, "pw"), "vault_token": keyed_hash(KEY, "t"), "vault_tls": keyed_hash(KEY, "k")}


def test_a_rotated_secret_recreates_exactly_the_containers_that_use_it():
    first = planned(HASHES)
    again = planned(HASHES, as_existing(first))
    assert {name: entry["action"] for name, entry in again.items()} == dict.fromkeys(first, "keep")
    rotated = planned(dict(HASHES, vault_db=keyed_hash(KEY, "pw2")), as_existing(first))
    assert {name: entry["action"] for name, entry in rotated.items()} == {
        "h1-api-0": "recreate", "h1-api-0-log": "recreate", "h1-web-0": "keep"}     # the sidecar goes with its instance
    token = planned(dict(HASHES, vault_token=keyed_hash(KEY, "t2")), as_existing(first))
    assert {name: entry["action"] for name, entry in token.items()} == {
        "h1-api-0": "recreate", "h1-api-0-log": "recreate", "h1-web-0": "keep"}


def test_labels_hold_keyed_hashes_only():
    plan = planned(HASHES)
    labels = json.dumps({name: entry["labels"] for name, entry in plan.items()})
    assert "pw" not in labels.replace("plank", "")
    config = [["/etc/api.conf", "x"]]
    assert plan["h1-api-0"]["labels"][CONFIG_HASH] == keyed_hash(KEY, json.dumps(config, sort_keys=True))
    assert planned(HASHES, key=OTHER_KEY)["h1-api-0"]["labels"][SPEC_HASH] != plan["h1-api-0"]["labels"][SPEC_HASH]
    # A container without secrets or config keeps the hash it had before secrets existed (no key, no secrets).
    [web] = desired_containers("h1", {"web-0": INSTANCES["web-0"]}, SERVICES, "/data", gpu_mode="simulated")
    assert rollout("h1", [web], {}, [])["containers"][0]["labels"][SPEC_HASH] == plan["h1-web-0"]["labels"][SPEC_HASH]


def test_a_secret_without_its_hash_is_refused_before_any_change():
    with pytest.raises(DeployError, match=r"services\.api\.secrets\.db_password: the value of vault_db was not read"):
        planned({"vault_token": HASHES["vault_token"], "vault_tls": HASHES["vault_tls"]})
