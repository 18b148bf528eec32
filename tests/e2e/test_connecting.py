# -*- coding: utf-8 -*-
"""Connecting services end to end on a copy of the local test bed: a service with a dynamic port runs several
instances per node, each reachable on the host port the plan gave it, and a dependent service lists them in its
environment and in a config file rendered from the endpoints, updated after a scale.

Hosts conn-n1..3 publish on 127.0.0.191-193; echo runs on the two east hosts, its client on the west one."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, failures, get

HOSTS = {"node1": ("conn-n1", "127.0.0.191"), "node2": ("conn-n2", "127.0.0.192"), "node3": ("conn-n3", "127.0.0.193")}
ADDRESSES = dict(HOSTS.values())
SERVE = 'mkdir -p /www && echo "$GANGPLANK_INSTANCE ok" > /www/health && exec httpd -f -p 8080 -h /www'
CATALOG = {
    "gangplank_services": {
        "echo": {
            "replicas": 3, "scalable": True,
            "resources": {"cpu": "50m", "memory": "16Mi"},
            "ports": [{"name": "http", "container_port": 8080}],
            "node_selector": {"zone": "east"},
            "image": "{{ demo_image }}", "command": ["sh", "-c", SERVE], "init": True,
            "health": {"http": {"port": "http", "path": "/health"}, "interval": 0.2, "retries": 50},
        },
        "client": {
            "resources": {"cpu": "50m", "memory": "16Mi"},
            "depends_on": ["echo"],
            "node_selector": {"zone": "west"},
            "image": "{{ demo_image }}", "command": ["sh", "-c", "touch /tmp/ready && exec sleep 2147483647"],
            "init": True,
            "config": [{"dest": "/etc/client/upstreams.conf", "src": "{{ inventory_dir }}/templates/upstreams.conf.j2"}],
            "health": {"command": ["test", "-f", "/tmp/ready"], "interval": 0.2, "retries": 50},
        },
    },
}
TEMPLATE = ("{% for endpoint in gangplank_endpoints.echo %}"
            "{{ endpoint.instance }} {{ endpoint.address }}:{{ endpoint.ports.http }}\n"
            "{% endfor %}")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("connecting"), HOSTS)
    (bed.base / "group_vars" / "all" / "zz_connecting.yml").write_text(yaml.safe_dump(CATALOG))
    (bed.base / "templates" / "upstreams.conf.j2").write_text(TEMPLATE)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def placement(bed):
    return json.loads((bed.state() / "placement.json").read_text())["placement"]


def in_client(*argv):
    return subprocess.run(["podman", "exec", "conn-n3-client-0", *argv], capture_output=True, text=True,
                          check=True).stdout


def expected_endpoints(bed):
    echo = sorted((entry for name, entry in placement(bed).items() if entry["service"] == "echo"),
                  key=lambda entry: entry["ordinal"])
    return ["%s:%d" % (ADDRESSES[entry["node"]], entry["host_ports"]["http"]) for entry in echo]


def test_each_instance_answers_on_its_own_host_port_with_two_on_one_node(bed):
    echo = {name: entry for name, entry in placement(bed).items() if entry["service"] == "echo"}
    assert sorted(echo) == ["echo-0", "echo-1", "echo-2"]
    nodes = [entry["node"] for entry in echo.values()]
    assert max(nodes.count(node) for node in set(nodes)) >= 2, echo
    for name, entry in echo.items():
        port = entry["host_ports"]["http"]
        assert 20000 <= port <= 32000
        status, body = get("http://%s:%d/health" % (ADDRESSES[entry["node"]], port))
        assert (status, body.strip()) == (200, "%s ok" % name)


def test_the_client_lists_the_endpoints_in_its_env_and_config(bed):
    wanted = expected_endpoints(bed)
    assert len(wanted) == 3
    env = dict(line.split("=", 1) for line in in_client("env").splitlines() if "=" in line)
    assert env["GANGPLANK_ENDPOINTS_ECHO"] == ",".join(wanted)
    listed = [line.split()[1] for line in in_client("cat", "/etc/client/upstreams.conf").splitlines() if line]
    assert listed == wanted


def test_a_scale_updates_the_clients_endpoints_and_keeps_the_ports_of_the_others(bed):
    before = {name: (entry["node"], entry["host_ports"]) for name, entry in placement(bed).items()
              if entry["service"] == "echo"}
    returncode, report = bed.playbook("scale.yml", "-e", "service=echo", "-e", "replicas=4")
    assert returncode == 0, failures(report)
    after = {name: (entry["node"], entry["host_ports"]) for name, entry in placement(bed).items()
             if entry["service"] == "echo"}
    assert sorted(after) == ["echo-0", "echo-1", "echo-2", "echo-3"]
    assert all(after[name] == before[name] for name in before)
    wanted = expected_endpoints(bed)
    assert len(wanted) == 4
    env = dict(line.split("=", 1) for line in in_client("env").splitlines() if "=" in line)
    assert env["GANGPLANK_ENDPOINTS_ECHO"] == ",".join(wanted)
    listed = [line.split()[1] for line in in_client("cat", "/etc/client/upstreams.conf").splitlines() if line]
    assert listed == wanted
    node, ports = after["echo-3"]
    status, body = get("http://%s:%d/health" % (ADDRESSES[node], ports["http"]))
    assert (status, body.strip()) == (200, "echo-3 ok")
