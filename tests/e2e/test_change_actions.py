# -*- coding: utf-8 -*-
"""Change actions of config files rendered from endpoints, end to end on a copy of the local test bed: three clients
list the instances of ``echo`` in a config file; a scale of echo changes the list. The client whose file says
``change: signal`` keeps its container, gets the new file in place and SIGHUP (its process copies what the file says
on the signal); the one with ``change: none`` keeps its container and gets the new file, no signal; the one with the
default restart is restarted. Check mode shows the change and changes nothing; a second identical run changes nothing.

Hosts chg-n1..3 publish on 127.0.0.161-163; echo runs on the two east hosts, the clients on the west one."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, failures, summaries

HOSTS = {"node1": ("chg-n1", "127.0.0.161"), "node2": ("chg-n2", "127.0.0.162"), "node3": ("chg-n3", "127.0.0.163")}
ADDRESSES = dict(HOSTS.values())
CLIENT_HOST = "chg-n3"
SERVE = 'mkdir -p /www && echo "$GANGPLANK_INSTANCE ok" > /www/health && exec httpd -f -p 8080 -h /www'
UPSTREAMS = "/etc/client/upstreams.conf"
# On each SIGHUP the client copies what its file says to /tmp/seen-<count>: what its process saw on the signal.
WATCH = ("n=0; trap 'n=$((n+1)); cat %s > /tmp/seen-$n' HUP; touch /tmp/ready; "
         "while :; do sleep 1 & wait $!; done" % UPSTREAMS)


def client(change):
    """A client that lists echo's endpoints in its file. Not in depends_on: GANGPLANK_ENDPOINTS_ECHO would be part of
    its spec, which a scale changes (docs/connecting-services.md)."""
    entry = {"dest": UPSTREAMS, "src": "{{ inventory_dir }}/templates/upstreams.conf.j2"}
    entry.update(change)
    return {
        "resources": {"cpu": "50m", "memory": "16Mi"},
        "node_selector": {"zone": "west"},
        "image": "{{ demo_image }}", "command": ["sh", "-c", WATCH], "init": True,
        "config": [entry],
        "health": {"command": ["test", "-f", "/tmp/ready"], "interval": 0.2, "retries": 50},
    }


CATALOG = {
    "gangplank_services": {
        "echo": {
            "replicas": 2, "scalable": True,
            "resources": {"cpu": "50m", "memory": "16Mi"},
            "ports": [{"name": "http", "container_port": 8080}],
            "node_selector": {"zone": "east"},
            "image": "{{ demo_image }}", "command": ["sh", "-c", SERVE], "init": True,
            "health": {"http": {"port": "http", "path": "/health"}, "interval": 0.2, "retries": 50},
        },
        "hup": client({"change": "signal", "signal": "SIGHUP"}),
        "quiet": client({"change": "none"}),
        "plain": client({}),
    },
}
TEMPLATE = ("{% for endpoint in gangplank_endpoints.echo %}"
            "{{ endpoint.instance }} {{ endpoint.address }}:{{ endpoint.ports.http }}\n"
            "{% endfor %}")
CLIENTS = ("hup", "quiet", "plain")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("change_actions"), HOSTS)
    (bed.base / "group_vars" / "all" / "zz_change_actions.yml").write_text(yaml.safe_dump(CATALOG))
    (bed.base / "templates" / "upstreams.conf.j2").write_text(TEMPLATE)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def name(service):
    return "%s-%s-0" % (CLIENT_HOST, service)


def container_ids():
    return {service: subprocess.run(["podman", "inspect", "--format", "{{.Id}}", name(service)], capture_output=True,
                                    text=True, check=True).stdout.strip() for service in CLIENTS}


def in_client(service, *argv):
    done = subprocess.run(["podman", "exec", name(service), *argv], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout


def listed(text):
    return [line.split()[1] for line in text.splitlines() if line]


def seen(service, count):
    """What the client's process saw on its ``count``-th signal; None when it has not had that many."""
    returncode, text = in_client(service, "cat", "/tmp/seen-%d" % count)
    return listed(text) if returncode == 0 else None


def expected_endpoints(bed):
    placement = json.loads((bed.state() / "placement.json").read_text())["placement"]
    echo = sorted((entry for entry in placement.values() if entry["service"] == "echo"), key=lambda entry: entry["ordinal"])
    return ["%s:%d" % (ADDRESSES[entry["node"]], entry["host_ports"]["http"]) for entry in echo]


def test_every_client_lists_the_endpoints_and_none_was_signalled(bed):
    wanted = expected_endpoints(bed)
    assert len(wanted) == 2
    for service in CLIENTS:
        assert listed(in_client(service, "cat", UPSTREAMS)[1]) == wanted, service
    assert seen("hup", 1) is None and seen("quiet", 1) is None


def test_check_mode_shows_the_change_actions_and_changes_nothing(bed):
    ids, before = container_ids(), expected_endpoints(bed)
    returncode, report = bed.playbook("scale.yml", "-e", "service=echo", "-e", "replicas=3", "--check")
    assert returncode == 0, failures(report)
    line = summaries(report)[CLIENT_HOST]
    assert line.startswith("would "), line
    assert "signal SIGHUP ['%s']" % name("hup") in line and "file updated ['%s']" % name("quiet") in line, line
    assert "'%s'" % name("plain") in line.split("restart", 1)[1].split(", stop", 1)[0], line
    assert container_ids() == ids
    for service in CLIENTS:
        assert listed(in_client(service, "cat", UPSTREAMS)[1]) == before, service
    assert seen("hup", 1) is None


def test_a_scale_signals_keeps_or_restarts_each_client_as_its_file_says(bed):
    ids = container_ids()
    returncode, report = bed.playbook("scale.yml", "-e", "service=echo", "-e", "replicas=3")
    assert returncode == 0, failures(report)
    wanted = expected_endpoints(bed)
    assert len(wanted) == 3
    line = summaries(report)[CLIENT_HOST]
    assert "signal SIGHUP ['%s']" % name("hup") in line and "file updated ['%s']" % name("quiet") in line, line
    after = container_ids()
    # signal: the same container, the new file through its bind mount, and the signal, on which it read the new list.
    assert after["hup"] == ids["hup"]
    assert listed(in_client("hup", "cat", UPSTREAMS)[1]) == wanted
    deadline = time.monotonic() + 10
    while seen("hup", 1) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert seen("hup", 1) == wanted
    assert seen("hup", 2) is None
    # none: the same container and the new file, no signal.
    assert after["quiet"] == ids["quiet"]
    assert listed(in_client("quiet", "cat", UPSTREAMS)[1]) == wanted
    assert seen("quiet", 1) is None
    # restart (the default): a new container with the new file.
    assert after["plain"] != ids["plain"]
    assert listed(in_client("plain", "cat", UPSTREAMS)[1]) == wanted


def test_a_second_identical_run_changes_nothing(bed):
    ids = container_ids()
    # site.yml deploys every host: every file is rendered again, as the hosts hold it.
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    line = summaries(report)[CLIENT_HOST]
    assert line.startswith("start 0 [], restart 0 [], stop 0 [], keep 3"), line
    assert "signal" not in line and "file updated" not in line, line
    assert container_ids() == ids
    time.sleep(1)
    assert seen("hup", 2) is None
