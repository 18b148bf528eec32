# -*- coding: utf-8 -*-
"""deploy_plan: every host's containers from its read (the catalog parsed once), then the decision as ready lists per
host, rank and wave, which the deploy role's tasks loop over."""

from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import deploy
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import DeployError, decide, desired_on_hosts
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import (
    containers_step, hosts_stale_secrets, rollout_step,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import driver

DATA = "/var/lib/gangplank/instances"
SERVICES = {
    "db": {"stateful": True, "ports": [5432], "image": "localhost/db:1", "health": {"tcp": {"port": 5432}}},
    "api": {"replicas": 2, "ports": [8080], "sidecars": ["log"], "depends_on": ["db"], "image": "localhost/api:1",
            "config": [{"dest": "/etc/api/api.conf", "src": "templates/api.conf.j2"},
                       {"dest": "/etc/api/extra.conf", "content": "extra=1\n", "diff": True}],
            "secrets": {"token": {"var": "vault_token", "target": "/run/secrets/token"}},
            "health": {"http": {"port": 8080, "path": "/health"}}},
    "log": {"sidecar": True, "image": "localhost/log:1"},
}
HASHES = {"vault_token": "hmac-sha256:1"}


def test_a_host_with_the_local_proxy_that_no_service_asks_for_removes_it_and_says_so():
    reads, step, rendered = deployed_hosts()
    assert "proxy" not in step
    reads["h2"]["proxy"] = {"address": True, "master": 0, "systemd": False, "config_sha1": "", "found": True}
    plan = rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES)
    assert [plan["hosts"][host]["remove_proxy"] for host in ("h1", "h2")] == [False, True]
    assert plan["lines"]["h2"].endswith("keep 2; remove the local proxy (no service asks for it)")
    assert "proxy" not in plan["lines"]["h1"]
    shown = rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES, check_mode=True)
    assert shown["lines"]["h2"].endswith("; would remove the local proxy (no service asks for it)")
    # A catalog that asks for the proxy keeps it: the proxy's own tasks update it.
    asking = dict(step, proxy={"config": "global\n", "frontends": {}})
    kept = rollout_step(["h1", "h2"], reads, rendered, asking, secret_hashes=HASHES)
    assert not kept["hosts"]["h2"]["remove_proxy"] and "proxy" not in kept["lines"]["h2"]


def binding(service, ordinal, rank, sidecars=None):
    return {"service": service, "ordinal": ordinal, "node": "x", "gpus": [], "nvme": None, "sidecars": sidecars or [],
            "rank": rank}


def read(host, instances, engine="podman", containers=None, **extra):
    """A host's deploy_read result with settings."""
    entry = {"engine_found": True, "containers": containers or [], "leftovers": [], "forwards": [], "secrets": [],
             "missing": "", "note": "", "ranks": [["db"], ["api"]],
             "settings": {"instances": instances, "data_dir": DATA, "engine": engine, "limits": False,
                          "secret_dir": "/run/gangplank/secrets"}}
    entry.update(extra)
    return entry


def two_hosts(engine="podman"):
    return {"h1": read("h1", {"db-0": binding("db", 0, 0), "api-0": binding("api", 0, 1, ["log"])}, engine),
            "h2": read("h2", {"api-1": binding("api", 1, 1, ["log"])}, engine)}


def rendered_of(step):
    return {host: {entry["path"]: entry["content"] or "rendered" for entry in files} for host, files in step["render"].items()}


def deployed_hosts():
    """Both hosts after a first rollout: (reads that find every container, the first step, the rendered files)."""
    reads = two_hosts()
    step = containers_step(["h1", "h2"], reads, SERVICES)
    rendered = rendered_of(step)
    for host in reads:
        decision = decide([host], [step["containers"][host]], [rendered[host]], [[]], SERVICES, secret_hashes=HASHES)
        reads[host]["containers"] = [{"Name": c["name"], "State": {"Running": True}, "Config": {"Labels": c["labels"]}}
                                     for c in decision["rollouts"][host]["containers"]]
    return reads, step, rendered


def test_containers_step_parses_the_catalog_once_and_lists_the_files_to_render(monkeypatch):
    reads = two_hosts()
    calls = []
    real = deploy.split_catalog
    monkeypatch.setattr(deploy, "split_catalog", lambda services: calls.append(1) or real(services))
    step = containers_step(["h1", "h2"], reads, SERVICES)
    assert len(calls) == 1
    assert step["missing"] == ""
    assert step["containers"] == desired_on_hosts({host: reads[host]["settings"] for host in reads}, SERVICES)
    api = next(c for c in step["containers"]["h1"] if c["name"] == "h1-api-0")
    assert step["render"]["h1"] == [
        {"path": DATA + "/h1-api-0/config/0-api.conf", "dest": "/etc/api/api.conf", "src": "templates/api.conf.j2",
         "content": None, "instance": api},
        {"path": DATA + "/h1-api-0/config/1-extra.conf", "dest": "/etc/api/extra.conf", "src": None,
         "content": "extra=1\n", "instance": api}]
    assert step["restarts"]["db"] == {"stateful": True, "max_unavailable": 1}
    assert step["restarts"]["api"]["stateful"] is False


def test_containers_step_stops_at_hosts_that_cannot_be_deployed():
    reads = two_hosts()
    reads["h1"]["missing"] = "h1 has no bindings: ..."
    reads["h2"]["missing"] = "h2 has no podman: ..."
    assert containers_step(["h1", "h2"], reads, SERVICES) == {
        "missing": "h1 has no bindings: ... h2 has no podman: ...", "containers": {}, "render": {}, "restarts": {},
        "secrets": {}}
    with pytest.raises(DeployError, match="^h3: no read of the host"):
        containers_step(["h3"], reads, SERVICES)


def test_a_first_rollout_lists_each_rank_and_wave():
    reads = two_hosts()
    step = containers_step(["h1", "h2"], reads, SERVICES)
    plan = rollout_step(["h1", "h2"], reads, rendered_of(step), step, secret_hashes=HASHES)
    assert plan["waves"] == {"active_ranks": [0, 1], "waves": {"0": 1, "1": 1}, "wave_of": {}}
    assert plan["lines"]["h2"] == "start 2 ['h2-api-1', 'h2-api-1-log'], restart 0 [], stop 0 [], keep 0"
    h1 = plan["hosts"]["h1"]
    assert not h1["end_before_probe"] and not h1["end_after_probe"] and not h1["releases_lock"]
    assert h1["kept"] == {} and h1["kept_probes"] == [] and h1["stale"] == [] and h1["stale_secrets"] == []
    assert set(h1["ranks"]) == {"0", "1"} and set(plan["hosts"]["h2"]["ranks"]) == {"0", "1"}
    assert plan["hosts"]["h2"]["ranks"]["0"]["waves"] == [
        {"remove_sidecars": [], "leftovers": [], "start": [], "probes": []}]
    rank = h1["ranks"]["1"]
    assert rank["config_dirs"] == [DATA, DATA + "/h1-api-0", DATA + "/h1-api-0/config"]
    assert [entry["path"] for entry in rank["config_files"]] == [DATA + "/h1-api-0/config/0-api.conf"]
    assert [entry["path"] for entry in rank["config_files_shown"]] == [DATA + "/h1-api-0/config/1-extra.conf"]
    assert rank["evict"] == [] and rank["nvme_dirs"] == []
    assert set(rank["containers"]) == {"h1-api-0", "h1-api-0-log"}
    assert rank["containers"]["h1-api-0"]["instance"] == "api-0"
    (wave,) = rank["waves"]
    assert [c["name"] for c in wave["start"]] == ["h1-api-0", "h1-api-0-log"]
    assert [c["action"] for c in wave["start"]] == ["create", "create"]
    # The engine driver makes the secrets of a created container first, from the spec's names and variables.
    calls = driver("podman").start_calls(wave["start"][0], {"vault_token": "t"})
    assert [(call.module, call.args["name"]) for call in calls] == [
        ("containers.podman.podman_secret", "h1-api-0.token"), ("containers.podman.podman_container", "h1-api-0")]
    assert "value" not in wave["start"][0]["secrets"][0]
    assert [probe["name"] for probe in wave["probes"]] == ["h1-api-0"]


def test_docker_hosts_start_with_their_secret_files_and_directories_first():
    reads = two_hosts("docker")
    step = containers_step(["h1", "h2"], reads, SERVICES)
    rank = rollout_step(["h1", "h2"], reads, rendered_of(step), step, secret_hashes=HASHES)["hosts"]["h1"]["ranks"]["1"]
    calls = driver("docker").start_calls(rank["waves"][0]["start"][0], {"vault_token": "t"})
    assert [(call.module, call.args.get("path") or call.args.get("dest") or call.args["name"]) for call in calls] == [
        ("ansible.builtin.file", "/run/gangplank/secrets"), ("ansible.builtin.file", "/run/gangplank/secrets/h1-api-0"),
        ("ansible.builtin.copy", "/run/gangplank/secrets/h1-api-0/token"), ("community.docker.docker_container", "h1-api-0")]
    assert rank["waves"][0]["leftovers"] == []


def test_nothing_to_do_keeps_the_first_host_for_the_lock_and_probes_the_kept_containers():
    reads, step, rendered = deployed_hosts()
    plan = rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES)
    assert plan["waves"]["active_ranks"] == []
    h1, h2 = plan["hosts"]["h1"], plan["hosts"]["h2"]
    assert h1["releases_lock"] and not h1["end_before_probe"] and not h1["end_after_probe"]
    assert not h2["releases_lock"] and not h2["end_before_probe"] and h2["end_after_probe"]
    assert [probe["name"] for probe in h2["kept_probes"]] == ["h2-api-1"] and list(h2["kept"]) == ["h2-api-1"]
    assert h1["ranks"] == {}
    # In check mode, or without the probe, nothing is probed: every host but the lock's ends at once.
    for quiet in (rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES, check_mode=True),
                  rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES, probe_kept=False)):
        assert quiet["hosts"]["h2"]["end_before_probe"] and quiet["hosts"]["h2"]["kept_probes"] == []
        assert quiet["hosts"]["h1"]["releases_lock"]


def test_unused_secrets_are_in_the_line_and_keep_the_host_in_the_role():
    reads, step, rendered = deployed_hosts()
    reads["h2"]["secrets"] = ["h2-api-1.token", "h2-api-1.old", "h2-gone-0.x"]
    plan = rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES)
    assert plan["lines"]["h2"] == ("start 0 [], restart 0 [], stop 0 [], keep 2; remove unused secrets: h2-api-1.old, "
                                   "h2-gone-0.x")
    assert plan["hosts"]["h2"]["stale_secrets"] == ["h2-api-1.old", "h2-gone-0.x"]
    assert not plan["hosts"]["h2"]["end_after_probe"]
    # Some host stays: no host is kept for the lock.
    assert not plan["hosts"]["h1"]["releases_lock"] and plan["hosts"]["h1"]["end_after_probe"]
    checked = rollout_step(["h1", "h2"], reads, rendered, step, secret_hashes=HASHES, check_mode=True)
    assert checked["lines"]["h2"].startswith("would start 0") and "; would remove unused secrets: h2-api-1.old" in checked["lines"]["h2"]


def _leftovers_as_the_yaml_chose(leftovers, forwards, starting):
    """roles/deploy/tasks/wave.yml before deploy_plan: a regex of the names, and the forwards by published address."""
    pattern = "(broken:|[0-9]+:[0-9a-f]+:)?(" + "|".join(re.escape(c["name"]) for c in starting) + ")$"
    publishing = [re.sub(":[0-9]+$", "", port) for c in starting for port in c["ports"]]
    return ([leftover for leftover in leftovers if re.match(pattern, leftover)]
            + ["forward:" + entry["rule"] for entry in forwards if entry["published"] in publishing])


def test_leftovers_of_the_containers_that_start_as_the_yaml_chose_them():
    reads = two_hosts()
    reads["h1"]["leftovers"] = ["h1-api-0", "broken:h1-api-0-log", "123:abc0:h1-api-0", "h1-api-00", "broken:h1-db-1",
                                "9:ff:h1-other", "h1-api-0x"]
    reads["h1"]["forwards"] = [{"published": "8080", "rule": "NETAVARK-DN-1 -p tcp --dport 8080 -j DNAT"},
                               {"published": "9999", "rule": "NETAVARK-DN-2 -p tcp --dport 9999 -j DNAT"}]
    step = containers_step(["h1", "h2"], reads, SERVICES)
    plan = rollout_step(["h1", "h2"], reads, rendered_of(step), step, secret_hashes=HASHES)
    wave = plan["hosts"]["h1"]["ranks"]["1"]["waves"][0]
    assert wave["leftovers"] == _leftovers_as_the_yaml_chose(reads["h1"]["leftovers"], reads["h1"]["forwards"], wave["start"])
    assert wave["leftovers"] == ["h1-api-0", "broken:h1-api-0-log", "123:abc0:h1-api-0",
                                 "forward:NETAVARK-DN-1 -p tcp --dport 8080 -j DNAT"]


def test_without_the_engine_nothing_starts_and_the_line_still_says_what_would():
    reads = two_hosts()
    reads["h2"]["engine_found"] = False
    step = containers_step(["h1", "h2"], reads, SERVICES)
    plan = rollout_step(["h1", "h2"], reads, rendered_of(step), step, secret_hashes=HASHES, check_mode=True)
    assert plan["lines"]["h2"].startswith("would start 2")
    assert plan["hosts"]["h2"]["ranks"]["1"]["waves"][0]["start"] == []


def test_a_config_change_restarts_in_waves_with_the_sidecars_removed_first():
    reads, step, rendered = deployed_hosts()
    changed = copy.deepcopy(rendered)
    for host, files in changed.items():
        for path in files:
            files[path] = "changed"
    plan = rollout_step(["h1", "h2"], reads, changed, step, secret_hashes=HASHES)
    assert plan["waves"] == {"active_ranks": [1], "waves": {"1": 2}, "wave_of": {"h2-api-1": 1, "h2-api-1-log": 1}}
    h1_waves, h2_waves = plan["hosts"]["h1"]["ranks"]["1"]["waves"], plan["hosts"]["h2"]["ranks"]["1"]["waves"]
    assert [c["name"] for c in h1_waves[0]["start"]] == ["h1-api-0", "h1-api-0-log"] and h1_waves[1]["start"] == []
    assert h1_waves[0]["remove_sidecars"] == ["h1-api-0-log"]
    assert h2_waves[0]["start"] == [] and h2_waves[1]["remove_sidecars"] == ["h2-api-1-log"]
    # The unchanged rank's containers are probed once, before the rollout.
    assert [probe["name"] for probe in plan["hosts"]["h1"]["kept_probes"]] == ["h1-db-0"]


def test_the_stale_secrets_cover_every_host_once():
    reads = [{"engine_found": True, "containers": [], "leftovers": [], "secrets": ["n1-a-0.x"]},
             {"engine_found": False, "containers": [], "leftovers": [], "secrets": ["n2-a-0.x"]},
             {"engine_found": True, "containers": [], "leftovers": [], "secrets": ["n3-a-0/x"]}]
    desired = {"n1": [{"name": "n1-a-0", "secrets": [{"name": "x", "engine_name": "n1-a-0.x", "path": None}]}], "n2": [], "n3": []}
    assert hosts_stale_secrets(["n1", "n2", "n3"], reads, desired, ["podman", "podman", "docker"]) == {"n3": ["n3-a-0/x"]}
    for entry, engine in zip(reads, ["podman", "podman", "docker"]):
        entry["settings"] = {"engine": engine}
    assert hosts_stale_secrets(["n1", "n2", "n3"], reads, desired) == {"n3": ["n3-a-0/x"]}


def test_hosts_and_reads_of_other_lengths_are_refused():
    with pytest.raises(DeployError, match="2 hosts, but 1 reads"):
        hosts_stale_secrets(["n1", "n2"], [{}], {}, ["podman"])
