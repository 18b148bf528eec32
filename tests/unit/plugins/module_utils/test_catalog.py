# -*- coding: utf-8 -*-
"""The catalog's deploy keys: defaults, every mistake with its path and wording (planning with them: test_planning.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import (
    DEFAULT_NVME_PATH, DEFAULT_RESTART_POLICY, DEFAULT_STOP_TIMEOUT, DEPLOY_KEYS, RESTART_POLICIES,
    Catalog, parse_catalog, read_catalog, split_catalog, unavailable_count,
)
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import SERVICE_KEYS
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError

NODES = {"n1": {"cpu": 4, "memory": "8Gi"}}
ARGV_EXPECTED = "a non-empty list of strings (the command and its arguments, run without a shell)"
ONE_PROBE = "exactly one probe: http, tcp or command"
ONE_SOURCE = "exactly one of src (a Jinja2 template file) or content (the file's text)"


def api(**extra):
    """A service listening on 8080, plus deploy keys."""
    spec = {"replicas": 1, "ports": [8080], "image": "localhost/app:1"}
    spec.update(extra)
    return spec


def errors_list(services):
    """Every (path, message), in order, from split_catalog."""
    with pytest.raises(ProblemError) as caught:
        split_catalog(services)
    return caught.value.errors


def errors_of(services):
    errors = errors_list(services)
    assert len({path for path, _unused in errors}) == len(errors), "one line per mistake: %s" % errors
    return dict(errors)


def deploy_of(spec, name="api"):
    return split_catalog({name: spec})[1][name]


# -- defaults and what each side gets ---------------------------------------------------------------------------------

def test_defaults_of_a_service_without_deploy_keys():
    assert deploy_of({"replicas": 2}) == {
        "image": None, "command": None, "env": {}, "init": False, "stop_timeout": DEFAULT_STOP_TIMEOUT,
        "restart_policy": DEFAULT_RESTART_POLICY, "health": None, "config": [], "nvme_path": DEFAULT_NVME_PATH,
        "max_unavailable": "25%", "down_grace": None, "ports": [], "secrets": [], "volumes": [],
    }
    assert (DEFAULT_STOP_TIMEOUT, DEFAULT_RESTART_POLICY, DEFAULT_NVME_PATH) == (10, "always", "/mnt/nvme")


def test_nulls_mean_the_defaults():
    spec = deploy_of(api(image=None, command=None, env=None, init=None, stop_timeout=None, health=None, config=None))
    assert (spec["image"], spec["command"], spec["env"], spec["init"]) == (None, None, {}, False)
    assert (spec["stop_timeout"], spec["health"], spec["config"]) == (10, None, [])


def test_every_deploy_key_is_read_and_converted():
    spec = deploy_of(api(
        command=["serve", "--workers", 4, True], env={"B": 2, "A": "x", "C": False}, init=True, stop_timeout=0,
        restart_policy="on-failure", nvme_path="/cache",
        config=[{"dest": "/etc/app/a.conf", "src": "templates/a.conf.j2"}, {"dest": "/etc/app/b.conf", "content": "b=1\n", "diff": True}],
        health={"http": {"port": 8080, "path": "/health", "expect_status": [200, 204]},
                "timeout": 5, "interval": 0.5, "retries": 3, "start_period": 30}))
    assert spec["image"] == "localhost/app:1"
    assert spec["command"] == ["serve", "--workers", "4", "true"]
    assert spec["env"] == {"A": "x", "B": "2", "C": "false"}
    assert list(spec["env"]) == ["A", "B", "C"]
    assert (spec["init"], spec["stop_timeout"], spec["restart_policy"], spec["nvme_path"]) == (True, 0, "on-failure", "/cache")
    # Rendered config files are private unless the catalog says otherwise (a template may read a secret).
    assert spec["config"] == [{"dest": "/etc/app/a.conf", "src": "templates/a.conf.j2", "mode": "0600", "group": None, "diff": False},
                              {"dest": "/etc/app/b.conf", "content": "b=1\n", "mode": "0600", "group": None, "diff": True}]
    assert spec["health"] == {"type": "http", "timeout": 5.0, "interval": 0.5, "retries": 3, "start_period": 30.0,
                              "port": 8080, "path": "/health", "expect_status": [200, 204]}
    assert spec["ports"] == [8080]


def test_split_hands_the_scheduler_only_its_own_keys():
    entry = api(command=["x"], env={"A": 1}, depends_on=[], resources={"cpu": 1})
    scheduling, deploy = split_catalog({"api": entry})
    # The image is a deploy key, checked here, and handed on for the scheduler's user plugins (profiles).
    assert scheduling == {"api": {"replicas": 1, "ports": [8080], "depends_on": [], "resources": {"cpu": 1},
                                  "image": "localhost/app:1"}}
    assert set(deploy) == {"api"}
    assert entry["image"] == "localhost/app:1"        # the caller's mapping is not changed


def test_every_restart_policy_is_accepted():
    for policy in RESTART_POLICIES:
        assert deploy_of(api(restart_policy=policy))["restart_policy"] == policy


# -- mistakes, per key ------------------------------------------------------------------------------------------------

def test_bad_image():
    errors = errors_of({"a": api(image=5), "b": api(image=""), "c": api(image=["x"])})
    assert errors == {
        "services.a.image": "got 5; expected an image reference such as localhost/app:1",
        "services.b.image": 'got ""; expected an image reference such as localhost/app:1',
        "services.c.image": 'got ["x"]; expected an image reference such as localhost/app:1',
    }


def test_a_command_string_is_refused_not_split():
    errors = errors_of({"a": api(command="serve --port 8080"), "b": api(command=[]), "c": api(command=["serve", {"x": 1}, None])})
    assert errors == {
        "services.a.command": 'got "serve --port 8080"; expected ' + ARGV_EXPECTED,
        "services.b.command": "got []; expected " + ARGV_EXPECTED,
        "services.c.command[1]": 'got {"x": 1}; expected a string, number or boolean',
        "services.c.command[2]": "got null; expected a string, number or boolean",
    }


def test_env_names_and_values():
    errors = errors_of({"a": api(env={"A=B": "x", "": "y", "OK": 1, "LIST": [1]}), "b": api(env=["A=1"])})
    assert errors == {
        "services.a.env.A=B": "got \"A=B\"; expected a variable name without '='",
        "services.a.env.": "got \"\"; expected a variable name without '='",
        "services.a.env.LIST": "got a value of type list (not shown: it may be a secret); expected a string, a boolean or a "
                               "number of at most 64 digits, as text without NUL, line breaks or lone surrogates",
        "services.b.env": "got a value of type list (not shown: it may hold secrets); expected a mapping",
    }


def test_env_key_that_is_not_a_string_is_named_once():
    assert errors_list({"a": api(env={1: "x"})}) == [("services.a.env.1", "got 1; expected a string key")]


def test_bad_restart_policy_init_and_stop_timeout():
    errors = errors_of({"a": api(restart_policy="sometimes", init="yes", stop_timeout=-1),
                        "b": api(restart_policy=None, stop_timeout=1.5), "c": api(stop_timeout="10", init=1)})
    assert errors == {
        "services.a.restart_policy": 'got "sometimes"; expected one of no, on-failure, always, unless-stopped',
        "services.a.init": 'got "yes"; expected true or false',
        "services.a.stop_timeout": "got -1; expected an integer >= 0",
        "services.b.restart_policy": "got null; expected one of no, on-failure, always, unless-stopped",
        "services.b.stop_timeout": "got 1.5; expected an integer >= 0",
        "services.c.stop_timeout": 'got "10"; expected an integer >= 0',
        "services.c.init": "got 1; expected true or false",
    }


def test_health_needs_exactly_one_probe():
    errors = errors_of({"none": api(health={"interval": 1}),
                        "two": api(health={"http": {"port": 8080}, "tcp": {"port": 8080}}),
                        "three": api(health={"http": {"port": 8080}, "tcp": {"port": 8080}, "command": ["true"]}),
                        "text": api(health="curl localhost")})
    assert errors.pop("services.three.health").endswith("; expected " + ONE_PROBE)
    assert errors == {
        "services.none.health": 'got {"interval": 1}; expected ' + ONE_PROBE,
        "services.two.health": 'got {"http": {"port": 8080}, "tcp": {"port": 8080}}; expected ' + ONE_PROBE,
        "services.text.health": 'got "curl localhost"; expected a mapping',
    }


def test_an_empty_health_mapping_is_no_probe():
    assert deploy_of(api(health={}))["health"] is None


def test_probe_port_must_be_one_the_service_publishes():
    errors = errors_of({
        "a": api(health={"http": {"port": 81}}),
        "b": api(ports=[8080, 8081], health={"tcp": {"port": 9000}}),
        "c": {"replicas": 1, "image": "x", "health": {"tcp": {"port": 5432}}},
        "d": api(health={"http": {"port": 70000}}),
        "e": api(health={"tcp": {"port": True}}),
    })
    assert errors == {
        "services.a.health.http.port": "got 81; expected one of the service's ports (8080)",
        "services.b.health.tcp.port": "got 9000; expected one of the service's ports (8080, 8081)",
        "services.c.health.tcp.port": "got 5432; expected one of the service's ports (none listed)",
        "services.d.health.http.port": "got 70000; expected an integer from 1 to 65535",
        "services.e.health.tcp.port": "got true; expected an integer from 1 to 65535",
    }


def test_a_sidecar_probes_its_own_ports():
    spec = deploy_of({"sidecar": True, "ports": [9100], "image": "x", "health": {"tcp": {"port": 9100}}}, name="log")
    assert spec["health"]["port"] == 9100 and spec["ports"] == [9100]


def test_probe_port_is_required_and_named_once():
    assert errors_list({"a": api(health={"tcp": {}})}) == [("services.a.health.tcp.port", "is required")]
    assert errors_list({"a": api(health={"http": {"path": "/"}})}) == [("services.a.health.http.port", "is required")]
    assert errors_list({"a": api(health={"tcp": None})}) == [("services.a.health.tcp", "got null; expected a mapping")]


def test_http_path_and_expect_status():
    errors = errors_of({
        "a": api(health={"http": {"port": 8080, "path": "health"}}),
        "b": api(health={"http": {"port": 8080, "path": ""}}),
        "c": api(health={"http": {"port": 8080, "expect_status": [200, 99, 600]}}),
        "d": api(health={"http": {"port": 8080, "expect_status": 200}}),
    })
    assert errors == {
        "services.a.health.http.path": 'got "health"; expected a URL path beginning with /',
        "services.b.health.http.path": 'got ""; expected a URL path beginning with /',
        "services.c.health.http.expect_status[1]": "got 99; expected an integer from 100 to 599",
        "services.c.health.http.expect_status[2]": "got 600; expected an integer from 100 to 599",
        "services.d.health.http.expect_status": "got 200; expected a list",
    }


def test_http_probe_defaults():
    health = deploy_of(api(health={"http": {"port": 8080}}))["health"]
    assert health == {"type": "http", "timeout": 2.0, "interval": 1.0, "retries": 60, "start_period": 0.0,
                      "port": 8080, "path": "/", "expect_status": None}
    assert deploy_of(api(health={"http": {"port": 8080, "expect_status": [100, 599]}}))["health"]["expect_status"] == [100, 599]


def test_tcp_and_command_probes():
    assert deploy_of(api(health={"tcp": {"port": 8080}, "retries": 5}))["health"] == {
        "type": "tcp", "timeout": 2.0, "interval": 1.0, "retries": 5, "start_period": 0.0, "port": 8080}
    assert deploy_of(api(health={"command": ["test", "-f", "/tmp/ready"], "interval": 0}))["health"] == {
        "type": "command", "timeout": 2.0, "interval": 0.0, "retries": 60, "start_period": 0.0,
        "argv": ["test", "-f", "/tmp/ready"]}
    assert errors_of({"a": api(health={"command": "test -f /tmp/ready"})}) == {
        "services.a.health.command": 'got "test -f /tmp/ready"; expected ' + ARGV_EXPECTED}


def test_probe_timings():
    errors = errors_of({"a": api(health={"tcp": {"port": 8080}, "timeout": 0, "interval": -1, "retries": 0, "start_period": True}),
                        "b": api(health={"tcp": {"port": 8080}, "timeout": "2s", "retries": 1.5})})
    assert errors == {
        "services.a.health.timeout": "got 0; expected a number of seconds >= 0.1",
        "services.a.health.interval": "got -1; expected a number of seconds >= 0",
        "services.a.health.retries": "got 0; expected an integer >= 1",
        "services.a.health.start_period": "got true; expected a number of seconds >= 0",
        "services.b.health.timeout": 'got "2s"; expected a number of seconds >= 0.1',
        "services.b.health.retries": "got 1.5; expected an integer >= 1",
    }


def test_unknown_keys_in_health():
    errors = errors_of({"a": api(health={"tcp": {"port": 8080, "path": "/"}, "grace": 1}),
                        "b": api(health={"http": {"port": 8080, "method": "GET"}})})
    assert errors == {
        "services.a.health.grace": "unknown key; expected one of: http, tcp, command, timeout, interval, retries, start_period",
        "services.a.health.tcp.path": "unknown key; expected one of: port",
        "services.b.health.http.method": "unknown key; expected one of: port, path, expect_status",
    }


def test_config_needs_exactly_one_of_src_and_content():
    errors = errors_of({"a": api(config=[{"dest": "/etc/a", "src": "a.j2", "content": "x"}]),
                        "b": api(config=[{"dest": "/etc/b"}])})
    assert errors == {
        "services.a.config[0]": "has both src and content; expected " + ONE_SOURCE,
        "services.b.config[0]": "has neither src nor content; expected " + ONE_SOURCE,
    }


def test_config_dest_is_absolute_normalised_and_listed_once():
    errors = errors_of({"a": api(config=[{"dest": "etc/a.conf", "content": "x"},
                                         {"dest": "/etc/../a.conf", "content": "x"},
                                         {"dest": "/etc/b/", "content": "x"},
                                         {"dest": "/etc/c.conf", "content": "x"},
                                         {"dest": "/etc/c.conf", "src": "c.j2"},
                                         {"dest": 7, "content": "x"}])})
    assert errors == {
        "services.a.config[0].dest": 'got "etc/a.conf"; expected an absolute, normalised path in the container',
        "services.a.config[1].dest": 'got "/etc/../a.conf"; expected an absolute, normalised path in the container',
        "services.a.config[2].dest": 'got "/etc/b/"; expected an absolute, normalised path in the container',
        "services.a.config[4].dest": 'got "/etc/c.conf"; expected a path not listed twice',
        "services.a.config[5].dest": "got 7; expected an absolute path in the container",
    }


def test_config_mistakes_are_named_once_each():
    assert errors_list({"a": api(config=[{"content": "x"}, {"content": "y"}])}) == [
        ("services.a.config[0].dest", "is required"), ("services.a.config[1].dest", "is required")]
    assert errors_list({"a": api(config=["/etc/a"])}) == [("services.a.config[0]", 'got "/etc/a"; expected a mapping')]
    assert errors_list({"a": api(config={"dest": "/etc/a"})}) == [("services.a.config", 'got {"dest": "/etc/a"}; expected a list')]


def test_config_src_and_content_values():
    errors = errors_of({"a": api(config=[{"dest": "/etc/a", "src": ""}, {"dest": "/etc/b", "content": 5},
                                         {"dest": "/etc/c", "content": "x", "owner": "app"}])})
    assert errors == {
        "services.a.config[0].src": 'got ""; expected a template file path',
        "services.a.config[1].content": "got a value of type int (not shown: it may hold a secret); expected a string",
        "services.a.config[2].owner": "unknown key; expected one of: dest, src, content, mode, group, diff, change, signal",
    }


def test_nvme_path_is_absolute():
    errors = errors_of({"a": api(nvme_path="cache"), "b": api(nvme_path=None), "c": api(nvme_path=5)})
    assert errors == {
        "services.a.nvme_path": 'got "cache"; expected an absolute path in the container',
        "services.b.nvme_path": "got null; expected an absolute path in the container",
        "services.c.nvme_path": "got 5; expected an absolute path in the container",
    }


def test_unknown_keys_list_both_key_sets():
    errors = errors_of({"api": api(colour="red", mounts=["/a:/b"])})
    expected = "unknown key; expected one of: " + ", ".join(SERVICE_KEYS + DEPLOY_KEYS)
    assert errors == {"services.api.colour": expected, "services.api.mounts": expected}
    assert expected.endswith("quota, priority, preemptible, every_node, cpu_pinning, topology_spread, image, command, env, init, "
                             "stop_timeout, restart_policy, "
                             "health, config, nvme_path, max_unavailable, down_grace, secrets, volumes, proxy")
    assert expected.startswith("unknown key; expected one of: replicas, stateful, sidecar, ")


def test_every_mistake_of_every_service_is_collected():
    with pytest.raises(ProblemError) as caught:
        split_catalog({"a": api(image=1), "b": api(restart_policy="never", nvme_path="x")})
    assert str(caught.value).splitlines() == [
        "services.a.image: got 1; expected an image reference such as localhost/app:1",
        "services.b.restart_policy: got \"never\"; expected one of no, on-failure, always, unless-stopped",
        "services.b.nvme_path: got \"x\"; expected an absolute path in the container",
    ]


def test_what_only_the_scheduler_can_name_is_left_to_it():
    scheduling, deploy, errors = read_catalog({"web": "nginx", "api": api(ports=8080, health={"tcp": {"port": 8080}})})
    assert scheduling["web"] == "nginx" and "web" not in deploy
    # ports: 8080 is the scheduler's mistake to name; the probe's port is then not among any listed ports.
    assert errors == [("services.api.health.tcp.port", "got 8080; expected one of the service's ports (none listed)")]
    assert read_catalog(None)[2] == [("services", "got null; expected a mapping")]


# -- max_unavailable --------------------------------------------------------------------------------------------------

def test_max_unavailable_defaults_to_one_for_stateful_and_a_quarter_for_stateless():
    assert deploy_of(api())["max_unavailable"] == "25%"
    assert deploy_of(api(stateful=True))["max_unavailable"] == 1
    assert deploy_of(api(max_unavailable=3))["max_unavailable"] == 3
    assert deploy_of(api(stateful=True, max_unavailable="50%"))["max_unavailable"] == "50%"


@pytest.mark.parametrize("value, shown", [
    (0, "0"), (-1, "-1"), (True, "true"), ("0%", '"0%"'), ("101%", '"101%"'), ("25", '"25"'), (2.5, "2.5"),
    (100001, "100001"), ("1e9%", '"1e9%"'), ([1], "[1]"),
])
def test_a_bad_max_unavailable_is_named_with_what_is_expected(value, shown):
    errors = errors_of({"api": api(max_unavailable=value)})
    assert errors == {"services.api.max_unavailable": "got %s; expected an integer from 1 to 100000, or a percentage "
                                                      "from 1%% to 100%% such as '25%%'" % shown}


@pytest.mark.parametrize("value, replicas, expected", [
    ("25%", 2, 1), ("25%", 4, 1), ("25%", 5, 2), ("100%", 3, 3), ("1%", 1000, 10), (1, 5, 1), (3, 2, 3), ("50%", 0, 1),
])
def test_unavailable_count_rounds_a_percentage_up_and_is_at_least_one(value, replicas, expected):
    assert unavailable_count(value, replicas) == expected


SECRET = "s3cret-value"


@pytest.mark.parametrize("value", [SECRET + "\nline2", [SECRET], {"k": SECRET}, SECRET + "\x00", SECRET + "\ud800", 10 ** 80])
def test_a_bad_env_value_is_named_by_its_path_and_type_never_shown(value):
    """An env value may be a secret (a vaulted variable): a mistake in it names the key, not the value."""
    with pytest.raises(ProblemError) as raised:
        deploy_of(api(env={"DB_PASSWORD": value}))
    text = str(raised.value)
    assert "services.api.env.DB_PASSWORD: got a value of type %s (not shown: it may be a secret)" % type(value).__name__ in text
    assert SECRET not in text and "ud800" not in text and str(10 ** 80)[:20] not in text


@pytest.mark.parametrize("entry, expected", [
    ({"dest": "/etc/a", "src": "a.j2", "content": SECRET}, "services.api.config[0]: has both src and content"),
    ({"dest": "/etc/a"}, "services.api.config[0]: has neither src nor content"),
    ({"dest": "/etc/a", "content": {"key": SECRET}}, "services.api.config[0].content: got a value of type dict (not shown"),
    ({"dest": "/etc/a", "content": "x", "diff": "yes"}, 'services.api.config[0].diff: got "yes"; expected true or false'),
])
def test_a_bad_config_entry_never_shows_its_content(entry, expected):
    with pytest.raises(ProblemError) as raised:
        deploy_of(api(config=[entry]))
    assert expected in str(raised.value) and SECRET not in str(raised.value)


@settings(max_examples=200, deadline=None)
@given(secret=st.text(max_size=40), spoiler=st.sampled_from(["\n", "\r", "\x00", "\ud800"]),
       position=st.integers(min_value=0, max_value=40))
def test_no_mistake_in_an_env_value_ever_shows_it(secret, spoiler, position):
    """Any value refused (a control character or a lone surrogate anywhere in it): the message is the same whatever
    the value, so no part of it can show."""
    value = secret[:position] + spoiler + secret[position:]
    assert errors_of({"a": api(env={"TOKEN": value})}) == {
        "services.a.env.TOKEN": "got a value of type str (not shown: it may be a secret); expected a string, a boolean or a "
                                "number of at most 64 digits, as text without NUL, line breaks or lone surrogates"}


# -- the typed value, and what the parser stands on ------------------------------------------------------------------

def test_a_catalog_is_parsed_into_one_typed_value():
    catalog = parse_catalog({"api": api(env={"A": 1}), "log": None})
    assert isinstance(catalog, Catalog) and catalog.errors == []
    assert catalog.scheduling == {"api": {"replicas": 1, "ports": [8080], "image": "localhost/app:1"}, "log": None}
    assert catalog.deploy["api"]["env"] == {"A": "1"} and set(catalog.deploy) == {"api"}
    assert split_catalog({"api": api(env={"A": 1}), "log": None}) == (catalog.scheduling, catalog.deploy)
    with pytest.raises(ProblemError) as caught:
        parse_catalog({"web": "nginx"})
    assert caught.value.errors == [("services.web", 'got "nginx"; expected a mapping')]


def test_the_catalogs_parser_does_not_load_the_scheduler():
    # The deploy side reads the catalog: it must not stand on the planner (the CP-SAT model, the framework). It reads
    # volume sizes with the quantities leaf on module_utils' ground floor, which imports nothing of the scheduler.
    code = ("import sys; import ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog; "
            "print(sorted(name for name in sys.modules if '.module_utils.scheduler' in name))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert loaded.stdout.strip() == "[]"


def test_a_misspelt_key_gets_the_close_one_suggested():
    errors = errors_of({"api": api(replica=3, helth={"command": ["true"]})})
    assert errors == {"services.api.replica": "unknown key; did you mean replicas?",
                      "services.api.helth": "unknown key; did you mean health?"}


def test_a_parse_handed_along_as_plain_data_is_the_same_catalog_and_anything_else_is_refused_at_its_path():
    import json

    from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import (
        catalog_secrets, handed_catalog, handed_secrets, parse_catalog,
    )

    services = {"api": {"image": "localhost/api:1", "env": {"MODE": "x"}, "replicas": 2,
                        "secrets": {"token": {"var": "vault_token", "env": "TOKEN"}}},
                "web": {"image": "localhost/web:1"}}
    parsed = parse_catalog(services)
    plain = json.loads(json.dumps({"scheduling": parsed.scheduling, "deploy": parsed.deploy}))
    assert handed_catalog(plain) == parsed
    secrets = catalog_secrets(parsed.deploy)
    assert list(secrets) == ["api"] and secrets["api"][0]["var"] == "vault_token"
    assert handed_secrets(json.loads(json.dumps(secrets))) == {"api": {"secrets": parsed.deploy["api"]["secrets"]}}
    for bad in (None, {"scheduling": {}}, {"scheduling": {}, "deploy": {"api": "x"}}, {"api": {}}):
        with pytest.raises(ProblemError) as raised:
            handed_catalog(bad)
        assert raised.value.errors[0][0] == "catalog" and "expected the parsed catalog" in raised.value.errors[0][1]
    for bad in ([], {"api": [{"name": "token"}]}, {"api": [{"name": "t", "var": "v", "value": "s3cret"}]}):
        with pytest.raises(ProblemError) as raised:
            handed_secrets(bad)
        assert raised.value.errors[0][0] == "secrets" and "s3cret" not in str(raised.value)
