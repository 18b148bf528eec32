# -*- coding: utf-8 -*-
"""A config file's change action (``change``: restart, signal or none): the catalog's checks, the rollout's decision
(a kept container updated in place instead of restarted), the ready lists of the deploy plan and the engine's kill."""

from __future__ import annotations

import copy
import hashlib

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    CONFIG_HASH, SPEC_HASH, desired_containers, rollout, summary_line,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import (
    containers_step, rollout_step,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import EngineError, driver
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import CHANGE_SIGNALS, split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import hosts_changed
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError

HOST = "h1"
DATA = "/var/lib/gangplank/instances"
CLIENT = {"replicas": 1, "image": "localhost/client:1",
          "config": [{"dest": "/etc/client/upstreams.conf", "src": "upstreams.conf.j2"},
                     {"dest": "/etc/client/static.conf", "content": "static\n"}]}
INSTANCES = {"client-0": {"service": "client", "ordinal": 0, "node": HOST, "gpus": [], "nvme": None, "sidecars": [],
                          "rank": 0}}
UPSTREAMS = DATA + "/h1-client-0/config/0-upstreams.conf"
STATIC = DATA + "/h1-client-0/config/1-static.conf"


def catalog_with(**change):
    """The client's catalog with its first file's change keys."""
    services = {"client": copy.deepcopy(CLIENT)}
    services["client"]["config"][0].update(change)
    return services


def errors_of(services):
    with pytest.raises(ProblemError) as caught:
        split_catalog(services)
    return dict(caught.value.errors)


def specs(services):
    return desired_containers(HOST, copy.deepcopy(INSTANCES), services, DATA)


def digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def deployed(planned):
    return [{"Name": c["name"], "State": {"Running": True}, "Config": {"Labels": dict(c["labels"])}}
            for c in planned["containers"]]


def on_host(rendered):
    """What the host holds after a deploy that wrote ``rendered``: each file's SHA-256."""
    return {path: digest(text) for path, text in rendered.items()}


# -- the catalog ------------------------------------------------------------------------------------------------------

def test_restart_is_the_default_and_leaves_the_entry_as_it_was():
    default = split_catalog(catalog_with())[1]["client"]["config"]
    assert split_catalog(catalog_with(change="restart"))[1]["client"]["config"] == default
    assert "change" not in default[0] and "signal" not in default[0]


def test_signal_defaults_to_sighup_and_none_has_no_signal():
    assert split_catalog(catalog_with(change="signal"))[1]["client"]["config"][0]["signal"] == "SIGHUP"
    entry = split_catalog(catalog_with(change="signal", signal="SIGUSR1"))[1]["client"]["config"][0]
    assert (entry["change"], entry["signal"]) == ("signal", "SIGUSR1")
    entry = split_catalog(catalog_with(change="none"))[1]["client"]["config"][0]
    assert entry["change"] == "none" and "signal" not in entry


@pytest.mark.parametrize("change, expected", [
    ({"change": "reload"}, ("services.client.config[0].change", 'got "reload"; expected one of restart, signal, none')),
    ({"change": False}, ("services.client.config[0].change", "got false; expected one of restart, signal, none")),
    ({"change": None}, ("services.client.config[0].change", "got null; expected one of restart, signal, none")),
    ({"change": "signal", "signal": "HUP"},
     ("services.client.config[0].signal", 'got "HUP"; expected one of ' + ", ".join(CHANGE_SIGNALS))),
    ({"change": "signal", "signal": "SIGHUP; rm -rf /"},
     ("services.client.config[0].signal", 'got "SIGHUP; rm -rf /"; expected one of ' + ", ".join(CHANGE_SIGNALS))),
    ({"change": "signal", "signal": "SIGKILL"},
     ("services.client.config[0].signal", 'got "SIGKILL"; expected one of ' + ", ".join(CHANGE_SIGNALS))),
    ({"change": "signal", "signal": 1},
     ("services.client.config[0].signal", "got 1; expected one of " + ", ".join(CHANGE_SIGNALS))),
    ({"change": "none", "signal": "SIGHUP"},
     ("services.client.config[0].signal", "is set, but change is none; expected signal only with change: signal")),
    ({"signal": "SIGHUP"},
     ("services.client.config[0].signal", "is set, but change is restart; expected signal only with change: signal")),
])
def test_bad_change_keys_are_named_by_path(change, expected):
    assert errors_of(catalog_with(**change)) == dict([expected])


# -- the rollout ------------------------------------------------------------------------------------------------------

def test_a_catalog_that_says_restart_keeps_its_specs_and_hashes():
    default, explicit = specs(catalog_with()), specs(catalog_with(change="restart"))
    assert default == explicit
    rendered = {UPSTREAMS: "a\n", STATIC: "static\n"}
    assert rollout(HOST, default, rendered, []) == rollout(HOST, explicit, rendered, [], files_now={})


@pytest.mark.parametrize("change, line", [
    ({"change": "signal"}, "start 0 [], restart 0 [], stop 0 [], keep 0, signal SIGHUP ['h1-client-0']"),
    ({"change": "signal", "signal": "SIGUSR2"}, "start 0 [], restart 0 [], stop 0 [], keep 0, signal SIGUSR2 ['h1-client-0']"),
    ({"change": "none"}, "start 0 [], restart 0 [], stop 0 [], keep 0, file updated ['h1-client-0']"),
])
def test_a_changed_in_place_file_keeps_the_container_and_updates_it(change, line):
    containers = specs(catalog_with(**change))
    first_text = {UPSTREAMS: "echo-0 127.0.0.1:20000\n", STATIC: "static\n"}
    first = rollout(HOST, containers, first_text, [], files_now={UPSTREAMS: None})
    assert first["containers"][0]["action"] == "create"
    changed = dict(first_text, **{UPSTREAMS: "echo-0 127.0.0.1:20000\necho-1 127.0.0.2:20001\n"})
    second = rollout(HOST, containers, changed, deployed(first), files_now=on_host(first_text))
    container = second["containers"][0]
    assert container["action"] == "update"
    assert container["labels"] == first["containers"][0]["labels"]      # not a spec change: the same hashes
    signals = [change.get("signal", "SIGHUP")] if change["change"] == "signal" else []
    assert container["update"] == {"files": [UPSTREAMS], "signals": signals}
    assert summary_line(second["summary"]) == line
    assert summary_line(second["summary"], check_mode=True) == "would " + line
    # The files written, a second run keeps it as it is.
    third = rollout(HOST, containers, changed, deployed(first), files_now=on_host(changed))
    assert third["containers"][0]["action"] == "keep"
    assert third["summary"] == {"start": [], "restart": [], "stop": [], "keep": ["h1-client-0"]}


def test_a_restart_file_of_the_same_container_still_restarts_it():
    containers = specs(catalog_with(change="signal"))
    text = {UPSTREAMS: "a\n", STATIC: "static\n"}
    first = rollout(HOST, containers, text, [], files_now={})
    second = rollout(HOST, containers, dict(text, **{UPSTREAMS: "b\n", STATIC: "other\n"}), deployed(first),
                     files_now=on_host(text))
    assert second["containers"][0]["action"] == "recreate" and "update" not in second["containers"][0]
    assert second["summary"]["restart"] == ["h1-client-0"] and "signal" not in second["summary"]


def test_an_in_place_files_text_is_not_in_the_hashes_but_its_change_action_is():
    text = {UPSTREAMS: "a\n", STATIC: "static\n"}
    signal = rollout(HOST, specs(catalog_with(change="signal")), text, [], files_now={})["containers"][0]["labels"]
    other_text = rollout(HOST, specs(catalog_with(change="signal")), dict(text, **{UPSTREAMS: "b\n"}), [],
                         files_now={})["containers"][0]["labels"]
    none = rollout(HOST, specs(catalog_with(change="none")), text, [], files_now={})["containers"][0]["labels"]
    restart = rollout(HOST, specs(catalog_with()), text, [])["containers"][0]["labels"]
    assert signal == other_text
    # Choosing another change action recreates the container once.
    assert len({signal[SPEC_HASH], none[SPEC_HASH], restart[SPEC_HASH]}) == 3
    assert len({signal[CONFIG_HASH], none[CONFIG_HASH], restart[CONFIG_HASH]}) == 3


def test_a_stopped_container_with_a_changed_in_place_file_is_started_not_signalled():
    containers = specs(catalog_with(change="signal"))
    text = {UPSTREAMS: "a\n", STATIC: "static\n"}
    existing = deployed(rollout(HOST, containers, text, [], files_now={}))
    existing[0]["State"]["Running"] = False
    planned = rollout(HOST, containers, dict(text, **{UPSTREAMS: "b\n"}), existing, files_now=on_host(text))
    assert planned["containers"][0]["action"] == "start" and "update" not in planned["containers"][0]


# -- the deploy plan --------------------------------------------------------------------------------------------------

def read(containers=None, engine="podman", config_files=None):
    """A host's deploy read, with the SHA-256 of its config files (deploy_read's ``config_files``)."""
    return {"engine_found": True, "containers": containers or [], "leftovers": [], "forwards": [], "secrets": [],
            "missing": "", "note": "", "ranks": [["client"]], "config_files": dict(config_files or {}),
            "settings": {"instances": copy.deepcopy(INSTANCES), "data_dir": DATA, "engine": engine, "limits": False}}


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_the_plan_rewrites_in_place_and_signals_a_kept_container(engine):
    services = catalog_with(change="signal")
    step = containers_step([HOST], {HOST: read(engine=engine)}, services)
    assert step["in_place"] == {HOST: [UPSTREAMS]}
    text = {UPSTREAMS: "a\n", STATIC: "static\n"}
    first = rollout_step([HOST], {HOST: read(engine=engine)}, {HOST: text}, step)
    rank = first["hosts"][HOST]["ranks"]["0"]
    # A container that starts gets its in-place file written with the others, the same way as a kept one.
    assert [entry["path"] for entry in rank["config_files"]] == [STATIC]
    assert [entry["path"] for entry in rank["config_files_in_place"]] == [UPSTREAMS]
    assert [c["name"] for c in rank["waves"][0]["start"]] == ["h1-client-0"] and "signal" not in rank["waves"][0]
    planned = rollout(HOST, step["containers"][HOST], text, [], files_now={})
    running = read(deployed(planned), engine, on_host(text))
    changed = dict(text, **{UPSTREAMS: "b\n"})
    second = rollout_step([HOST], {HOST: running}, {HOST: changed}, step)
    assert second["lines"][HOST] == "start 0 [], restart 0 [], stop 0 [], keep 0, signal SIGHUP ['h1-client-0']"
    assert second["hosts"][HOST]["end_before_probe"] is False
    rank = second["hosts"][HOST]["ranks"]["0"]
    assert [entry["path"] for entry in rank["config_files_in_place"]] == [UPSTREAMS]
    assert [entry["path"] for entry in rank["config_files"]] == [STATIC]
    wave = rank["waves"][0]
    assert wave["start"] == [] and wave["leftovers"] == []
    assert wave["signal"] == [{"name": "h1-client-0", "signal": "SIGHUP",
                               "argv": [engine, "kill", "--signal", "SIGHUP", "h1-client-0"]}]
    # Once the host's file holds the new text, nothing is left to do.
    third = rollout_step([HOST], {HOST: read(deployed(planned), engine, on_host(changed))}, {HOST: changed}, step)
    assert third["waves"]["active_ranks"] == [] and third["lines"][HOST].endswith("keep 1")


def test_a_site_without_in_place_files_reads_none_and_gets_the_lists_it_had():
    step = containers_step([HOST], {HOST: read()}, catalog_with())
    assert "in_place" not in step
    plan = rollout_step([HOST], {HOST: read()}, {HOST: {UPSTREAMS: "a\n", STATIC: "static\n"}}, step)
    rank = plan["hosts"][HOST]["ranks"]["0"]
    assert "config_files_in_place" not in rank and "signal" not in rank["waves"][0]
    assert [entry["path"] for entry in rank["config_files"]] == [UPSTREAMS, STATIC]


# -- the engine's kill ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_kill_argv_of_each_engine(engine):
    assert driver(engine).kill_argv("node1-client-0", "SIGUSR1") == [engine, "kill", "--signal", "SIGUSR1", "node1-client-0"]


@pytest.mark.parametrize("name, signal", [("node1-client-0", "SIGKILL"), ("node1-client-0", "HUP"),
                                          ("node1-client-0", None), ("-x", "SIGHUP"), ("a b", "SIGHUP"),
                                          ("", "SIGHUP"), ("node1-client-0\n", "SIGHUP")])
def test_kill_argv_refuses_other_signals_and_names(name, signal):
    with pytest.raises(EngineError):
        driver("podman").kill_argv(name, signal)


# -- which hosts a scale deploys --------------------------------------------------------------------------------------

def test_a_scale_deploys_the_hosts_of_services_with_in_place_files_when_endpoints_move():
    services = {"echo": {"replicas": 2, "ports": [{"name": "http", "container_port": 8080}], "image": "localhost/e:1"},
                "watch": {"image": "localhost/w:1",
                          "config": [{"dest": "/etc/w.conf", "src": "w.j2", "change": "signal"}]},
                "plain": {"image": "localhost/p:1", "config": [{"dest": "/etc/p.conf", "src": "p.j2"}]}}
    old = {"echo-0": {"service": "echo", "node": "n1", "host_ports": {"http": 20000}},
           "watch-0": {"service": "watch", "node": "n2"}, "plain-0": {"service": "plain", "node": "n3"}}
    record = {"ranks": [["echo", "watch", "plain"]], "placement": old}
    scaled = dict(old, **{"echo-1": {"service": "echo", "node": "n1", "host_ports": {"http": 20001}}})
    assert hosts_changed(record, {"ranks": record["ranks"], "placements": scaled}, ["n1", "n2", "n3"],
                         services) == ["n1", "n2"]
    # Without a change of endpoints, only the hosts whose instances change.
    moved = dict(old, **{"plain-0": {"service": "plain", "node": "n1"}})
    assert hosts_changed(record, {"ranks": record["ranks"], "placements": moved}, ["n1", "n2", "n3"],
                         services) == ["n1", "n3"]


def test_without_a_read_of_the_host_files_nothing_is_updated():
    containers = specs(catalog_with(change="signal"))
    text = {UPSTREAMS: "a\n", STATIC: "static\n"}
    first = rollout(HOST, containers, text, [], files_now={})
    assert rollout(HOST, containers, dict(text, **{UPSTREAMS: "b\n"}), deployed(first))["containers"][0]["action"] == "keep"
