# -*- coding: utf-8 -*-
"""Endpoints from the plan, and what an instance gets of them: host ports, probes and endpoint variables."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import parse_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import DeployError, desired_containers
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import EndpointError, endpoints
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import hosts_changed

DATA = "/var/lib/gangplank/instances"

SERVICES = {
    "db": {"stateful": True, "ports": [5432], "image": "localhost/db:1"},
    "api": {"replicas": 3, "ports": [{"name": "http", "container_port": 8080}], "depends_on": ["db"],
            "image": "localhost/api:1", "health": {"http": {"port": "http", "path": "/health"}}},
    "web": {"depends_on": ["api", "db"], "image": "localhost/web:1", "ports": [443]},
}


def _binding(service, ordinal, node, host_ports=None, rank=0):
    entry = {"service": service, "ordinal": ordinal, "node": node, "gpus": [], "nvme": None, "sidecars": [],
             "rank": rank}
    if host_ports is not None:
        entry["host_ports"] = host_ports
    return entry


HOSTS = {
    "n2": {"instances": {"api-2": _binding("api", 2, "n2", {"http": 20000}, 1),
                         "web-0": _binding("web", 0, "n2", rank=2)}},
    "n1": {"instances": {"api-1": _binding("api", 1, "n1", {"http": 20001}, 1),
                         "api-0": _binding("api", 0, "n1", {"http": 20000}, 1),
                         "db-0": _binding("db", 0, "n1")}},
}
ADDRESSES = {"n1": "10.0.0.1", "n2": "10.0.0.2"}


def test_endpoints_list_every_instance_with_its_address_and_ports():
    found = endpoints(HOSTS, SERVICES, ADDRESSES)
    assert found["api"] == [
        {"instance": "api-0", "node": "n1", "address": "10.0.0.1", "ports": {"http": 20000}},
        {"instance": "api-1", "node": "n1", "address": "10.0.0.1", "ports": {"http": 20001}},
        {"instance": "api-2", "node": "n2", "address": "10.0.0.2", "ports": {"http": 20000}},
    ]
    assert found["db"] == [{"instance": "db-0", "node": "n1", "address": "10.0.0.1", "ports": {"5432": 5432}}]
    assert found["web"][0]["ports"] == {"443": 443}


def test_a_host_without_a_publish_address_is_named_by_its_inventory_name():
    assert endpoints(HOSTS, SERVICES, {})["db"][0]["address"] == "n1"


@pytest.mark.parametrize("address", ["10.0.0.1\nx", "a b", "host#1"])
def test_a_publish_address_that_would_inject_is_refused(address):
    with pytest.raises(EndpointError, match="host n1: the publish address"):
        endpoints(HOSTS, SERVICES, {"n1": address})


def _containers(host, endpoint_map=None):
    return desired_containers(host, {name: dict(entry) for name, entry in HOSTS[host]["instances"].items()}, SERVICES,
                              DATA, publish_address=ADDRESSES[host],
                              endpoints=endpoint_map)


def test_dynamic_ports_are_published_on_their_host_port_and_probed_there():
    by_name = {container["name"]: container for container in _containers("n1")}
    assert by_name["n1-api-0"]["ports"] == ["10.0.0.1:20000:8080"]
    assert by_name["n1-api-1"]["ports"] == ["10.0.0.1:20001:8080"]
    assert by_name["n1-api-1"]["probe"]["url"] == "http://127.0.0.1:20001/health"
    assert by_name["n1-api-1"]["env"]["GANGPLANK_HOST_PORTS"] == "http=20001"
    assert "GANGPLANK_HOST_PORTS" not in by_name["n1-db-0"]["env"]


def test_an_instance_gets_the_endpoints_of_the_services_it_depends_on_with_dynamic_ports():
    found = endpoints(HOSTS, SERVICES, ADDRESSES)
    web = _containers("n2", found)[1]
    assert web["name"] == "n2-web-0"
    assert web["env"]["GANGPLANK_ENDPOINTS_API"] == "10.0.0.1:20000,10.0.0.1:20001,10.0.0.2:20000"
    # db has static ports only: no variable, so a site without dynamic ports keeps its specs.
    assert not any(key.startswith("GANGPLANK_ENDPOINTS_DB") for key in web["env"])
    assert "GANGPLANK_ENDPOINTS_API" not in _containers("n2")[1]["env"]


def test_a_binding_without_its_host_port_is_refused():
    instances = {"api-0": _binding("api", 0, "n1", {})}
    with pytest.raises(DeployError, match="instances.api-0.host_ports.http"):
        desired_containers("n1", instances, SERVICES, DATA)


def test_a_probe_on_an_unknown_port_name_is_refused_naming_the_path():
    services = dict(SERVICES, api=dict(SERVICES["api"], health={"tcp": {"port": "grpc"}}))
    with pytest.raises(Exception) as caught:
        parse_catalog(services)
    assert "services.api.health.tcp.port" in str(caught.value)


def _read(host, instances):
    return {"engine_found": True, "containers": [], "missing": "", "note": "", "ranks": [["db"], ["api"], ["web"]],
            "settings": {"instances": instances, "data_dir": DATA, "engine": "podman", "limits": False,
                         "publish_address": ADDRESSES[host], "secret_dir": "/run/gangplank/secrets"}}


def test_the_containers_step_works_the_endpoints_out_from_every_hosts_bindings():
    reads = {host: _read(host, {name: dict(entry) for name, entry in HOSTS[host]["instances"].items()})
             for host in ("n1", "n2")}
    step = containers_step(["n1", "n2"], reads, SERVICES)
    assert [entry["address"] + ":" + str(entry["ports"]["http"]) for entry in step["endpoints"]["api"]] == [
        "10.0.0.1:20000", "10.0.0.1:20001", "10.0.0.2:20000"]
    web = [container for container in step["containers"]["n2"] if container["service"] == "web"][0]
    assert web["env"]["GANGPLANK_ENDPOINTS_API"] == "10.0.0.1:20000,10.0.0.1:20001,10.0.0.2:20000"
    # One api instance fewer (a scale down): the dependent's variable, and so its spec, changes.
    del reads["n1"]["settings"]["instances"]["api-1"]
    smaller = containers_step(["n1", "n2"], reads, SERVICES)
    web_after = [container for container in smaller["containers"]["n2"] if container["service"] == "web"][0]
    assert web_after["env"]["GANGPLANK_ENDPOINTS_API"] == "10.0.0.1:20000,10.0.0.2:20000"


def test_the_containers_step_counts_the_hosts_of_the_whole_plan():
    # Only n2 is deployed (scale.yml deploys the hosts whose instances change): n1's instances are endpoints too.
    reads = {"n2": _read("n2", {name: dict(entry) for name, entry in HOSTS["n2"]["instances"].items()})}
    everywhere = {host: {"instances": HOSTS[host]["instances"], "publish_address": ADDRESSES[host]} for host in HOSTS}
    step = containers_step(["n2"], reads, SERVICES, everywhere)
    assert [entry["instance"] for entry in step["endpoints"]["api"]] == ["api-0", "api-1", "api-2"]
    web = [container for container in step["containers"]["n2"] if container["service"] == "web"][0]
    assert web["env"]["GANGPLANK_ENDPOINTS_API"] == "10.0.0.1:20000,10.0.0.1:20001,10.0.0.2:20000"


def test_the_hosts_of_dependents_change_with_their_dependencies_endpoints():
    old = {"api-0": {"service": "api", "node": "n1", "host_ports": {"http": 20000}},
           "web-0": {"service": "web", "node": "n2"}, "db-0": {"service": "db", "node": "n3"}}
    new = dict(old, **{"api-1": {"service": "api", "node": "n1", "host_ports": {"http": 20001}}})
    record = {"ranks": [["db"], ["api"], ["web"]], "placement": old}
    result = {"ranks": [["db"], ["api"], ["web"]], "placements": new}
    assert hosts_changed(record, result, ["n1", "n2", "n3"]) == ["n1"]
    assert hosts_changed(record, result, ["n1", "n2", "n3"], SERVICES) == ["n1", "n2"]
    # db has static ports only: a change of its instances deploys only their hosts, as before.
    moved_db = dict(old, **{"db-0": {"service": "db", "node": "n1"}})
    assert hosts_changed(record, {"ranks": record["ranks"], "placements": moved_db}, ["n1", "n2", "n3"],
                         SERVICES) == ["n1", "n3"]


def test_a_catalog_with_bad_ports_is_refused_naming_each_path():
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import plan_catalog
    from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
    services = {"api": {"image": "localhost/api:1", "ports": [{"name": "web#1", "container_port": 8080}, 21000],
                        "health": {"tcp": {"port": "grpc"}}}}
    problem = {"nodes": {"n1": {"cpu": 1, "memory": "1Gi"}}, "services": services, "port_range": [20000, 22000]}
    with pytest.raises(ProblemError) as caught:
        plan_catalog(problem)
    paths = dict(caught.value.errors)
    assert "a port name" in paths["services.api.ports[0].name"]
    assert "outside the dynamic port range 20000-22000" in paths["services.api.ports[1]"]
    assert "services.api.health.tcp.port" in paths


def test_the_scale_report_gives_each_instance_its_host_ports():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import service_instances
    report = service_instances({host: entry["instances"] for host, entry in HOSTS.items()}, "api", ["n1", "n2"],
                               ADDRESSES, SERVICES["api"]["ports"])
    assert [(entry["instance"], entry["address"], entry["host_ports"]) for entry in report["instances"]] == [
        ("api-0", "10.0.0.1", {"http": 20000}), ("api-1", "10.0.0.1", {"http": 20001}),
        ("api-2", "10.0.0.2", {"http": 20000})]
    db = service_instances({host: entry["instances"] for host, entry in HOSTS.items()}, "db", ["n1"], ADDRESSES, [5432])
    assert "host_ports" not in db["instances"][0]
