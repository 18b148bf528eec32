# -*- coding: utf-8 -*-
"""gang_schedule with fake hostvars: problem building, diffs, bindings, failures that change nothing."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.gang_schedule import ActionModule

GI = 2 ** 30


def hostvars(name, gpus=0, **extra):
    values = {"inventory_hostname": name, "ansible_facts": {
        "processor_vcpus": 16, "memtotal_mb": 64 * 1024, "architecture": "x86_64", "system": "Linux",
        "gangplank_gpus": [{"index": i, "uuid": "GPU-%s-%d" % (name, i), "model": "NVIDIA L4",
                            "memory_total": 24 * GI, "source": "simulated", "error": None, "mig_mode": None}
                           for i in range(gpus)],
        "gangplank_nvme": []}}
    values.update(extra)
    return values


HOSTVARS = {"a": hostvars("a", gpus=1, gangplank_labels={"zone": "east"}), "b": hostvars("b"), "c": hostvars("c")}
SERVICES = {
    "db": {"stateful": True, "resources": {"cpu": 4, "memory": "8Gi"}, "ports": [5432]},
    "web": {"replicas": 2, "resources": {"cpu": 1}, "ports": [80], "depends_on": ["db"]},
    "infer": {"resources": {"gpu": {"memory": "10Gi"}}, "depends_on": ["web"]},
}


def run(record=None, services=None, hosts=("a", "b", "c"), quotas=None, scale=None, down_hosts=None, **extra):
    task = Task()
    task.args = {"services": services or SERVICES, "hosts": list(hosts), "record": record or {},
                 "quotas": quotas or {}}
    task.args.update(extra)
    if down_hosts is not None:
        task.args["down_hosts"] = list(down_hosts)
    if scale is not None:
        task.args["scale"] = scale
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(),
                          templar=MagicMock(), shared_loader_obj=None)
    return action.run(task_vars={"hostvars": HOSTVARS})


def test_first_plan_adds_everything_and_binds_per_host():
    result = run()
    assert result["changed"] is True and not result.get("failed")
    assert result["changes"]["added"] == ["db-0", "infer-0", "web-0", "web-1"]
    assert result["ranks"] == [["db"], ["web"], ["infer"]]
    infer_host = result["plan"]["placements"]["infer-0"]["node"]
    assert infer_host == "a"
    instance = result["hosts"]["a"]["instances"]["infer-0"]
    assert instance["rank"] == 2 and instance["gpus"][0]["uuid"] == "GPU-a-0"
    assert set(result["hosts"]) == {"a", "b", "c"}
    assert result["record"]["placement"] == result["plan"]["placements"]
    assert result["ansible_stats"]["data"]["gangplank_placement"]["ranks"] == result["ranks"]
    assert result["diff"] and result["diff"][0]["before_header"].endswith("(revision 0)")


def test_same_plan_as_the_record_is_no_change():
    first = run()
    record = dict(first["record"], revision=1)
    again = run(record)
    assert again["changed"] is False and again["diff"] == []
    assert again["plan"]["placements"] == first["plan"]["placements"]


def test_scale_overrides_in_the_record_win_over_the_catalog():
    first = run()
    record = dict(first["record"], revision=1, replicas={"web": 3})
    result = run(record)
    assert result["changes"]["added"] == ["web-2"] and result["changes"]["moved"] == []
    assert result["record"]["replicas"] == {"web": 3}


def test_a_missing_host_moves_stateless_work_and_stateful_fails():
    first = run()
    placement = first["plan"]["placements"]
    lost = placement["web-1"]["node"]
    remaining = [host for host in ("a", "b", "c") if host != lost]
    record = dict(first["record"], revision=1)
    if placement["db-0"]["node"] == lost:
        result = run(record, hosts=remaining)
        assert result["failed"] and "db-0" in result["msg"]
    else:
        result = run(record, hosts=remaining)
        assert [move["instance"] for move in result["changes"]["moved"]] == ["web-1"]


def test_infeasible_fails_with_the_report():
    result = run(services=dict(SERVICES, web={"replicas": 5, "ports": [80]}))
    assert result["failed"] is True and result["changed"] is False
    assert "The gang does not fit; nothing was changed on any host." in result["msg"]
    assert "web-3: 0/3 nodes are available: 3 node(s) didn't have free ports" in result["msg"]
    assert "record" not in result and "hosts" not in result


def test_bad_catalog_names_the_inventory_variable():
    result = run(services={"web": {"replicas": "two"}}, quotas={"q": {"max": {"gpu": -1}}})
    assert result["failed"] is True
    paths = [error["path"] for error in result["errors"]]
    assert paths == ["gangplank_quotas.q.max.gpu", "gangplank_services.web.replicas"]
    assert "nothing was changed" in result["msg"]


def test_host_without_facts_is_named():
    task_hosts = dict(HOSTVARS, d={"inventory_hostname": "d", "ansible_facts": {}})
    task = Task()
    task.args = {"services": SERVICES, "hosts": ["a", "d"]}
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(),
                          templar=MagicMock(), shared_loader_obj=None)
    result = action.run(task_vars={"hostvars": task_hosts})
    assert result["failed"] is True and "d: ansible_facts lacks processor_vcpus" in result["msg"]


def test_deploy_keys_are_planned_around_and_their_mistakes_reported_with_the_schedulers():
    services = dict(SERVICES, web=dict(SERVICES["web"], image="localhost/web:1", command=["httpd"],
                                       health={"http": {"port": 80, "path": "/health"}}))
    result = run(services=services)
    assert result.get("failed") is not True and sorted(result["record"]["placement"]) == ["db-0", "infer-0", "web-0", "web-1"]
    services = dict(SERVICES, web=dict(SERVICES["web"], replicas="two", command="httpd -f", imagee="x"))
    result = run(services=services)
    assert result["failed"] is True
    paths = [error["path"] for error in result["errors"]]
    assert paths == ["gangplank_services.web.imagee", "gangplank_services.web.command", "gangplank_services.web.replicas"]


def test_a_scale_request_is_recorded_and_planned():
    services = dict(SERVICES, web={"replicas": 2, "scalable": True, "resources": {"cpu": 1}, "depends_on": ["db"]})
    result = run(services=services, scale={"service": "web", "replicas": "3"})
    assert result["changed"] is True and result["record"]["replicas"] == {"web": 3}
    assert result["changes"]["added"] == ["db-0", "infer-0", "web-0", "web-1", "web-2"]
    again = run(record=result["record"], services=services, scale={"service": "web", "replicas": 3})
    assert again["changed"] is False
    reset = run(record=result["record"], services=services, scale={"service": "web", "reset": True})
    assert reset["changed"] is True and reset["record"]["replicas"] == {} and reset["changes"]["removed"] == ["web-2"]


def test_an_invalid_scale_request_changes_nothing():
    result = run(scale={"service": "db", "replicas": 2})
    assert result["failed"] is True and "record" not in result
    assert result["errors"][0]["path"] == "scale.service" and "nothing was changed" in result["msg"]


def test_scaling_a_preemptible_service_records_the_ask_and_reports_what_runs():
    services = dict(SERVICES, batch={"scalable": True, "preemptible": True, "priority": -1, "resources": {"cpu": 8}})
    result = run(services=services, scale={"service": "batch", "replicas": 10})
    assert not result.get("failed") and result["record"]["replicas"] == {"batch": 10}
    report = result["scale"]
    assert report["service"] == "batch" and report["asked"] == 10 and 0 < report["running"] < 10
    assert len(result["preempted"]) == 10 - report["running"]
    assert all(name.startswith("batch-") for name in result["preempted"])


def test_hosts_changed_names_only_the_hosts_a_scale_touches():
    services = dict(SERVICES, web={"replicas": 2, "scalable": True, "resources": {"cpu": 1}, "depends_on": ["db"]})
    first = run(services=services)
    assert first["hosts_changed"] == ["a", "b", "c"] or set(first["hosts_changed"]) == {
        placement["node"] for placement in first["plan"]["placements"].values()}
    same = run(record=first["record"], services=services)
    assert same["hosts_changed"] == []
    up = run(record=first["record"], services=services, scale={"service": "web", "replicas": 3})
    assert up["hosts_changed"] == [up["plan"]["placements"]["web-2"]["node"]]
    down = run(record=up["record"], services=services, scale={"service": "web", "replicas": 2})
    assert down["hosts_changed"] == [up["plan"]["placements"]["web-2"]["node"]]


def test_hosts_changed_is_every_host_when_the_ranks_change():
    first = run()
    record = dict(first["record"], ranks=[["db", "web", "infer"]])
    assert run(record=record)["hosts_changed"] == ["a", "b", "c"]


def test_the_record_keeps_the_node_entry_each_host_was_planned_with():
    result = run()
    assert sorted(result["record"]["nodes"]) == ["a", "b", "c"]
    assert result["record"]["nodes"]["a"]["gpus"][0]["uuid"] == "GPU-a-0" and result["waiting"] == {}


def test_a_host_that_is_down_keeps_its_instances_and_everything_else_is_planned():
    """The host of the stateful db is unreachable: db-0 waits for it (kept in the record with its reservation),
    a scale of web is planned on the live hosts, and nothing new goes to the down host."""
    services = dict(SERVICES, web={"replicas": 2, "scalable": True, "resources": {"cpu": 1}, "depends_on": ["db"]})
    first = run(services=services)
    placement = first["plan"]["placements"]
    down = placement["db-0"]["node"]
    live = [host for host in ("a", "b", "c") if host != down]
    record = dict(first["record"], revision=1)
    result = run(record, services=services, hosts=live, down_hosts=[down], scale={"service": "web", "replicas": 4})
    assert not result.get("failed"), result.get("msg")
    assert result["plan"]["placements"]["db-0"] == placement["db-0"]
    assert result["changes"]["removed"] == [] and "db-0" not in [move["instance"] for move in result["changes"]["moved"]]
    new = result["changes"]["added"]
    assert new == ["web-2", "web-3"] and all(result["plan"]["placements"][name]["node"] in live for name in new)
    assert down in result["waiting"] and "db-0" in result["waiting"][down]
    assert any(line.startswith("down: %s" % down) and "db-0" in line for line in result["table"])
    # The down host gets no bindings (it is not in the play), keeps its node entry, and its instances stay recorded.
    assert set(result["hosts"]) == set(live) and down not in result["hosts_changed"]
    assert result["record"]["nodes"][down] == first["record"]["nodes"][down]
    assert result["record"]["placement"]["db-0"]["node"] == down


def test_without_a_recorded_node_entry_a_missing_host_counts_as_removed():
    first = run()
    down = first["plan"]["placements"]["db-0"]["node"]
    record = dict(first["record"], revision=1, nodes={})
    result = run(record, hosts=[host for host in ("a", "b", "c") if host != down], down_hosts=[down])
    assert result["failed"] is True and "which is no longer in the cluster" in result["msg"]


def test_a_host_that_is_not_in_the_inventory_is_removed_not_down():
    first = run()
    down = first["plan"]["placements"]["db-0"]["node"]
    record = dict(first["record"], revision=1)
    result = run(record, hosts=[host for host in ("a", "b", "c") if host != down], down_hosts=[])
    assert result["failed"] is True and "which is no longer in the cluster" in result["msg"]


# -- a host down for longer than the grace period; the operator's move of a stateful instance --------------------------

T0 = 1_800_000_000.0
# One web instance per host (anti-affinity), so the host of db-0 has one too; FREE lets two share a host.
DOWN_SERVICES = {
    "db": {"stateful": True, "resources": {"cpu": 4, "memory": "8Gi"}},
    "web": {"replicas": 3, "resources": {"cpu": 1}, "anti_affinity": ["web"], "depends_on": ["db"]},
}
FREE_SERVICES = dict(DOWN_SERVICES, web={"replicas": 3, "resources": {"cpu": 1}, "depends_on": ["db"]})


def down_case():
    """A first plan on a, b, c; the host of db-0 then goes down. (record, host that is down, live hosts)."""
    first = run(services=DOWN_SERVICES, now=T0)
    down = first["plan"]["placements"]["db-0"]["node"]
    return dict(first["record"], revision=1), down, [host for host in ("a", "b", "c") if host != down]


def test_within_the_grace_period_a_down_hosts_stateless_instances_keep_their_place():
    record, down, live = down_case()
    web_down = [name for name, entry in record["placement"].items() if entry["node"] == down and entry["service"] == "web"]
    result = run(record, services=DOWN_SERVICES, hosts=live, down_hosts=[down], now=T0 + 10)
    assert not result.get("failed"), result.get("msg")
    assert result["record"]["down_since"] == {down: int(T0 + 10)} and result["replaced"] == {}
    assert all(result["plan"]["placements"][name]["node"] == down for name in web_down)
    assert any("down: %s since 0s; its stateless instances are replaced on the live hosts in 300s" % down in line
               for line in result["table"]), result["table"]
    # The next run, 299 s after the host was first seen down, still waits: the time counts from the record.
    again = run(result["record"], services=DOWN_SERVICES, hosts=live, down_hosts=[down], now=T0 + 309)
    assert again["replaced"] == {} and again["record"]["down_since"] == {down: int(T0 + 10)}
    assert again["changed"] is False


def test_after_the_grace_period_stateless_instances_are_replaced_on_live_hosts_and_stateful_ones_wait():
    record, down, live = down_case()
    web_down = sorted(name for name, entry in record["placement"].items() if entry["node"] == down and entry["service"] == "web")
    assert web_down
    record["down_since"] = {down: int(T0)}
    result = run(record, services=FREE_SERVICES, hosts=live, down_hosts=[down], now=T0 + 300)
    assert not result.get("failed"), result.get("msg")
    assert sorted(result["replaced"]) == web_down
    placements = result["plan"]["placements"]
    assert all(placements[name]["node"] in live for name in web_down)
    assert placements["db-0"]["node"] == down and result["waiting"] == {down: ["db-0"]}
    assert sum(1 for entry in placements.values() if entry["service"] == "web") == 3
    assert any(line.startswith("replaced: %s of %s (down for 300s, grace 300s) now on" % (web_down[0], down))
               for line in result["table"]), result["table"]
    assert result["record"]["down_since"] == {down: int(T0)}

    # The host returns: its bindings no longer hold the replaced instance (the deploy removes its old copy, after the
    # ranks: the replacement was healthy first), it is deployed even by a scale, and the grace period is forgotten.
    back = run(dict(result["record"], revision=2), services=FREE_SERVICES, now=T0 + 400)
    assert not back.get("failed"), back.get("msg")
    assert back["plan"]["placements"]["db-0"]["node"] == down and back["record"]["down_since"] == {}
    assert sorted(back["hosts"][down]["instances"]) == ["db-0"]
    assert down in back["hosts_changed"] and back["replaced"] == {}


def test_a_services_own_down_grace_wins_over_the_inventorys():
    services = dict(FREE_SERVICES, web=dict(FREE_SERVICES["web"], down_grace=30))
    record, down, live = down_case()
    record["down_since"] = {down: int(T0)}
    assert run(record, services=services, hosts=live, down_hosts=[down], now=T0 + 29, down_grace=0)["replaced"] == {}
    assert run(record, services=services, hosts=live, down_hosts=[down], now=T0 + 30, down_grace=9999)["replaced"]


def test_replacements_without_room_keep_waiting_and_the_rest_goes_on():
    record, down, live = down_case()
    record["down_since"] = {down: int(T0)}
    # The live hosts are full for web: two web instances on two live hosts, anti-affinity.
    result = run(record, services=DOWN_SERVICES, hosts=live, down_hosts=[down], now=T0 + 3600)
    assert not result.get("failed"), result.get("msg")
    assert result["replaced"] == {} and any("could not be replaced" in warning for warning in result["warnings"])
    assert sorted(result["waiting"][down]) == sorted(name for name, entry in record["placement"].items() if entry["node"] == down)


def test_the_replacements_of_a_service_that_fits_go_and_the_others_wait():
    services = dict(DOWN_SERVICES, api={"replicas": 3, "resources": {"cpu": 1}, "anti_affinity": ["api"]})
    first = run(services=services, now=T0)
    down = first["plan"]["placements"]["db-0"]["node"]
    live = [host for host in ("a", "b", "c") if host != down]
    record = dict(first["record"], revision=1, down_since={down: int(T0)})
    # api may now share a host; web still may not, so only api's instance of the down host finds room.
    services["api"] = {"replicas": 3, "resources": {"cpu": 1}}
    result = run(record, services=services, hosts=live, down_hosts=[down], now=T0 + 300)
    assert not result.get("failed"), result.get("msg")
    api_down = [name for name, entry in record["placement"].items() if entry["node"] == down and entry["service"] == "api"]
    web_down = [name for name, entry in record["placement"].items() if entry["node"] == down and entry["service"] == "web"]
    assert sorted(result["replaced"]) == api_down and api_down and web_down
    assert sorted(result["waiting"][down]) == sorted(["db-0"] + web_down)
    assert any(warning.startswith("%s could not be replaced" % ", ".join(web_down)) for warning in result["warnings"])


@pytest.mark.parametrize("grace", [-1, 31536001, 10 ** 30, 1.5, "1.5", "abc", "", " ", True, None, [], {"a": 1}, "-5", "٣"])
def test_a_bad_grace_period_fails_and_changes_nothing(grace):
    result = run(services=DOWN_SERVICES, down_grace=grace)
    assert result["failed"] is True and result["msg"].startswith("down_grace (gangplank_down_grace): got ")
    assert "expected a whole number of seconds from 0 to 31536000" in result["msg"] and "record" not in result


@pytest.mark.parametrize("grace", [0, "0", "300", 31536000, " 60 "])
def test_good_grace_periods(grace):
    assert not run(services=DOWN_SERVICES, down_grace=grace).get("failed")


def test_moving_a_stateful_instance_needs_confirmation_then_moves_it_and_says_its_data_stays():
    record, down, live = down_case()
    refused = run(record, services=FREE_SERVICES, hosts=live, down_hosts=[down], now=T0 + 1, move_stateful="db-0")
    assert refused["failed"] is True and "record" not in refused
    assert "WITHOUT its data, which stays on %s" % down in refused["msg"] and "gangplank_move_stateful_confirm=db-0" in refused["msg"]
    assert refused["msg"].endswith("nothing was changed")
    wrong = run(record, services=FREE_SERVICES, hosts=live, down_hosts=[down], now=T0 + 1, move_stateful="db-0",
                move_stateful_confirm="db-1")
    assert wrong["failed"] is True
    moved = run(record, services=FREE_SERVICES, hosts=live, down_hosts=[down], now=T0 + 1, move_stateful="db-0",
                move_stateful_confirm="db-0")
    assert not moved.get("failed"), moved.get("msg")
    assert moved["plan"]["placements"]["db-0"]["node"] in live
    assert moved["moved_stateful"] == {"instance": "db-0", "from": down, "to": moved["plan"]["placements"]["db-0"]["node"]}
    assert any("WITHOUT its data, which stays on %s" % down in warning for warning in moved["warnings"])
    # Stateless instances of that host still wait for the grace period.
    assert moved["replaced"] == {} and "db-0" not in moved["waiting"][down]
    # When the host returns, its bindings do not hold db-0: the old copy is removed there, never started.
    back = run(dict(moved["record"], revision=2), services=FREE_SERVICES, now=T0 + 2)
    assert "db-0" not in back["hosts"][down]["instances"] and back["plan"]["placements"]["db-0"]["node"] in live


@pytest.mark.parametrize("name, says", [
    ("db-7", "db-7 is not an instance of the placement record (stateful instances: db-0)"),
    ("web-0", "web-0 is stateless (service web)"),
    ("x" * 300, "expected the name of a stateful instance"),
])
def test_a_move_of_something_that_is_no_stateful_instance_is_refused(name, says):
    record, down, live = down_case()
    result = run(record, services=DOWN_SERVICES, hosts=live, down_hosts=[down], now=T0, move_stateful=name,
                 move_stateful_confirm=name)
    assert result["failed"] is True and says in result["msg"] and "record" not in result


def test_a_stateful_instance_on_a_live_host_is_not_moved():
    first = run(services=DOWN_SERVICES, now=T0)
    record = dict(first["record"], revision=1)
    host = first["plan"]["placements"]["db-0"]["node"]
    other = [h for h in ("a", "b", "c") if h != host][0]
    result = run(record, services=DOWN_SERVICES, hosts=[h for h in ("a", "b", "c") if h != other], down_hosts=[other],
                 now=T0, move_stateful="db-0", move_stateful_confirm="db-0")
    assert result["failed"] is True and "db-0 runs on %s, which is not down in this run" % host in result["msg"]


def test_a_record_entry_of_another_shape_is_named_never_its_value():
    first = run()
    # A node entry the record cannot use is skipped, and the warnings name it.
    nodes = dict(first["record"]["nodes"], **{"bad\nhost": {"canary-0417": 1}, "c": ["canary-0417"]})
    result = run(dict(first["record"], revision=1, nodes=nodes))
    assert result.get("failed") is not True, result.get("msg")
    assert any("record.nodes[c] is skipped" in line for line in result["warnings"]), result.get("warnings")
    assert any("the key is not a host name" in line and "\n" not in line for line in result["warnings"])
    assert "canary-0417" not in str(result["warnings"])
    # A placement whose node is a list fails the plan with the path, as any malformed previous placement does.
    placement = dict(first["record"]["placement"], **{"web-9": {"node": ["a", "canary-0417"], "service": "web",
                                                                "ordinal": 9}})
    result = run(dict(first["record"], revision=1, placement=placement))
    assert result["failed"] is True and "previous.web-9.node" in result["msg"]
    assert "canary-0417" not in str(result.get("warnings"))
