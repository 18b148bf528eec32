# -*- coding: utf-8 -*-
"""Bad input: every mistake is reported with its path, its value and what was expected."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import errors_of, gpu, node, service

GOOD_NODES = {"n1": node()}


def test_not_a_mapping():
    assert "problem" in errors_of([1, 2])


def test_required_top_level_keys():
    errors = errors_of({"nodes": GOOD_NODES})
    assert errors == {"services": "is required"}


def test_unknown_keys_everywhere():
    errors = errors_of({
        "nodes": {"n1": node(colour="red")},
        "services": {"web": service(resources={"tape": 1})},
        "extra": 1,
    })
    assert "unknown key" in errors["extra"]
    assert "unknown key" in errors["nodes.n1.colour"]
    assert "unknown key" in errors["services.web.resources.tape"]


def test_bad_quantities_name_path_and_value():
    errors = errors_of({
        "nodes": {"n1": node(cpu="lots", memory="-3Gi")},
        "services": {"infer": service(resources={"gpu": {"memory": "20Gx"}})},
    })
    assert errors["services.infer.resources.gpu.memory"].startswith('got "20Gx"; expected a size')
    assert errors["nodes.n1.cpu"].startswith('got "lots"; expected a CPU amount')
    assert "nodes.n1.memory" in errors


def test_negative_and_boolean_numbers():
    errors = errors_of({
        "nodes": {"n1": node(cpu=-1)},
        "services": {"web": service(replicas=-2), "api": service(replicas=True), "job": service(cpu=-1)},
    })
    assert "not negative" in errors["nodes.n1.cpu"]
    assert errors["services.web.replicas"] == "got -2; expected an integer >= 0"
    assert errors["services.api.replicas"] == "got true; expected an integer >= 0"
    assert "services.job.resources.cpu" in errors


def test_unknown_service_references():
    errors = errors_of({"nodes": GOOD_NODES, "services": {"web": service(
        depends_on=["db"], sidecars=["log"], anti_affinity=["cache"], quota="compute")}})
    assert errors["services.web.depends_on[0]"] == 'got "db"; expected a service defined under services'
    assert errors["services.web.sidecars[0]"] == 'got "log"; expected a service defined under services'
    assert errors["services.web.anti_affinity[0]"] == 'got "cache"; expected a service defined under services'
    assert "a quota defined under quotas" in errors["services.web.quota"]


def test_dependency_cycle_is_named():
    errors = errors_of({"nodes": GOOD_NODES, "services": {
        "a": service(depends_on=["b"]), "b": service(depends_on=["c"]), "c": service(depends_on=["a"])}})
    message = errors["services"]
    assert message.startswith("dependency cycle in depends_on: ")
    cycle = message.split(": ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and sorted(set(cycle)) == ["a", "b", "c"]


def test_sidecar_rules():
    errors = errors_of({"nodes": GOOD_NODES, "services": {
        "log": {"sidecar": True, "replicas": 2, "resources": {"gpu": {"count": 1}}},
        "web": service(sidecars=["api"], depends_on=["log"]),
        "api": service(),
    }})
    assert "no replicas on a sidecar" in errors["services.log.replicas"]
    assert "no gpu request on a sidecar" in errors["services.log.resources.gpu"]
    assert errors["services.web.sidecars[0]"] == 'got "api"; expected a service with sidecar: true'
    assert "not a sidecar" in errors["services.web.depends_on[0]"]


def test_duplicate_devices():
    errors = errors_of({"nodes": {
        "n1": node(gpus=[gpu(0, uuid="GPU-x"), gpu(0, uuid="GPU-y")], nvme=[
            {"name": "nvme0n1", "size": "1Ti"}, {"name": "nvme0n1", "size": "1Ti"}]),
        "n2": node(gpus=[gpu(0, uuid="GPU-x")]),
    }, "services": {}})
    assert "not used by another GPU of node n1" in errors["nodes.n1.gpus[1].index"]
    assert "unique in the cluster" in errors["nodes.n2.gpus[0].uuid"]
    assert "not used twice" in errors["nodes.n1.nvme[1].name"]


def test_quota_min_above_max_and_unknown_dimension():
    errors = errors_of({"nodes": GOOD_NODES, "services": {},
                        "quotas": {"q": {"min": {"gpu": 4}, "max": {"gpu": 2, "disks": 1}}}})
    assert errors["quotas.q.min.gpu"] == "got 4; expected at most the max (2)"
    assert "unknown key" in errors["quotas.q.max.disks"]


def test_bad_enumerations_and_names():
    errors = errors_of({"nodes": {"n1": node(taints=[{"key": "k", "effect": "Sometimes"}])},
                        "services": {"Web_1": service(), "web": service(tolerations=[{"value": "x"}])}})
    assert "one of NoSchedule" in errors["nodes.n1.taints[0].effect"]
    assert "lowercase DNS label" in errors["services.Web_1"]
    assert errors["services.web.tolerations[0].key"] == "is required"


def test_instance_name_collision():
    errors = errors_of({"nodes": GOOD_NODES, "services": {"web": service(replicas=2), "web-1": service()}})
    assert "not also an instance of service web" in errors["services.web-1"]


def test_all_errors_reported_at_once():
    with pytest.raises(ProblemError) as caught:
        parse_problem({"nodes": {"n1": node(cpu="x", memory="y")}, "services": {"a": service(replicas="z")}})
    assert len(caught.value.errors) == 3
    assert str(caught.value).count("\n") == 2


def test_label_values_become_strings():
    problem = parse_problem({"nodes": {"n1": node(labels={"gpu": True, "rack": 3})}, "services": {}})
    assert dict(problem.nodes["n1"].labels) == {"gpu": "true", "rack": "3"}


def test_previous_for_removed_instances_is_ignored():
    problem = parse_problem({"nodes": GOOD_NODES, "services": {"web": service(replicas=1)},
                             "previous": {"web-0": {"node": "n1"}, "web-5": {"node": "n1"}, "gone-0": {"node": "x"}}})
    assert [i.name for i in problem.instances() if i.previous] == ["web-0"]


def test_an_instance_cannot_clash_with_its_own_sidecars():
    errors = errors_of({"nodes": GOOD_NODES, "services": {
        "web": service(sidecars=["logship"]), "logship": {"sidecar": True, "anti_affinity": ["web"]},
        "db": service(ports=[80], sidecars=["proxy", "metrics"]), "proxy": {"sidecar": True, "ports": [80]},
        "metrics": {"sidecar": True, "ports": [80]},
    }})
    assert errors["services.web.sidecars[0]"] == \
        'got "logship"; expected a sidecar that logship\'s anti_affinity does not keep away from web'
    assert errors["services.db.sidecars[0]"] == \
        'got "proxy"; expected a sidecar whose host ports do not clash with db\'s (port 80)'
    assert errors["services.db.sidecars[1]"] == \
        'got "metrics"; expected a sidecar whose host ports do not clash with db\'s (port 80)'


def test_max_replicas_only_on_a_scalable_service_and_not_below_its_replicas():
    errors = errors_of({"nodes": GOOD_NODES, "services": {
        "fixed": service(max_replicas=4),
        "grown": service(replicas=5, scalable=True, max_replicas=4),
        "odd": service(scalable=True, max_replicas="4"),
        "none": service(scalable=True, max_replicas=0),
        "log": {"sidecar": True, "max_replicas": 2},
    }})
    assert errors["services.fixed.max_replicas"] == ("got 4; expected nothing on a service that is not scalable: true "
                                                     "(only scale requests change replicas)")
    assert errors["services.grown.replicas"] == "got 5; expected at most max_replicas (4)"
    assert errors["services.odd.max_replicas"] == 'got "4"; expected an integer >= 1'
    assert errors["services.none.max_replicas"] == "got 0; expected an integer >= 1"
    assert "not scalable" in errors["services.log.max_replicas"]
    problem = parse_problem({"nodes": GOOD_NODES, "services": {"web": service(replicas=2, scalable=True, max_replicas=6)}})
    assert problem.services["web"].max_replicas == 6 and problem.services["web"].replicas == 2


def test_a_misspelt_key_gets_the_close_one_suggested():
    errors = errors_of({"nodes": {"a": {"cpu": 1, "memory": "1Gi", "lables": {}}},
                        "services": {"web": {"replica": 2, "resources": {"cpus": 1}}}})
    assert errors["nodes.a.lables"] == "unknown key; did you mean labels?"
    assert errors["services.web.replica"] == "unknown key; did you mean replicas?"
    assert errors["services.web.resources.cpus"] == "unknown key; did you mean cpu?"
