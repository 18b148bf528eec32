# -*- coding: utf-8 -*-
"""The local proxy end to end on the fresh-host bed (real SSH, Podman on two hosts and Docker on the third): a client
container on a Podman host and one on the Docker host call ``api`` at its stable address (the proxy address on their
own host) in a loop while api scales 2 -> 6 with several instances per node (dynamic ports), a rebalance moves
instances to the other node (new healthy, in every proxy, old out of every proxy, then stopped), and api scales back
6 -> 2: no call fails (Podman's bridge on the client's host keeps its address throughout). A catalog that stops
asking for the proxy removes it from every host (process, address, files), and asking again brings it back. Then a
host holding api instances goes down: the calls fail at most for a few of the proxy's check intervals.

Hosts px-1..3 on 127.0.0.234-236; each publishes on its address in the bed's own network, where the other hosts'
proxies reach its instances."""

from __future__ import annotations

import json
import shlex
import subprocess
import time

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import failures
from ansible_collections.gangplank.platform.tests.e2e.fresh import ENV, FreshBed

HOSTS = {"fresh1": ("px-1", "127.0.0.234"), "fresh2": ("px-2", "127.0.0.235"), "fresh3": ("px-3", "127.0.0.236")}
ADDRESS = "169.254.30.1"
LISTEN = 18080
INTERVAL = 0.5
FALL = 2
SERVE = 'mkdir -p /www && echo "$GANGPLANK_INSTANCE ok" > /www/health && exec httpd -f -p 8080 -h /www'
# The client's calls: each a new connection through the proxy; "<ok> <failed>" in /tmp/counts, failures counted from
# the first answer on (the client may start before api answers). Each call is bounded by `timeout`, not by wget's own
# -T: the demo image's static busybox (Debian 12's) crashes in wget -T, so no call would ever count as answered.
CALLS = ('ok=0; failed=0; while :; do if timeout 5 wget -q -O /dev/null http://%s:%d/health; then ok=$((ok+1)); '
         'elif [ $ok -gt 0 ]; then failed=$((failed+1)); fi; echo "$ok $failed" > /tmp/counts.new; '
         'mv /tmp/counts.new /tmp/counts; done' % (ADDRESS, LISTEN))
CATALOG = {
    "gangplank_services": {
        "api": {
            "replicas": 2, "scalable": True,
            "resources": {"cpu": "50m", "memory": "16Mi"},
            "ports": [{"name": "http", "container_port": 8080}],
            "node_selector": {"zone": "east"},
            # Half on each of the two east hosts (each its own rack): 3 and 3, then 1 and 1.
            "topology_spread": [{"max_skew": 1, "topology_key": "rack"}],
            "image": "{{ demo_image }}", "command": ["sh", "-c", SERVE], "init": True, "stop_timeout": 5,
            "health": {"http": {"port": "http", "path": "/health"}, "interval": 0.2, "retries": 50},
            "proxy": [{"port": "http", "listen": LISTEN}],
        },
        # On the two hosts labelled for it (a Podman host and the Docker host): the other east host holds api only, so
        # that a rebalance can free it.
        "client": {
            "every_node": True, "node_selector": {"clients": "yes"},
            "resources": {"cpu": "20m", "memory": "16Mi"},
            "image": "{{ demo_image }}", "command": ["sh", "-c", CALLS], "init": True,
            # An exec on a busy host may take seconds: the probe waits for it.
            "health": {"command": ["true"], "timeout": 10, "interval": 0.5, "retries": 20},
        },
    },
    "gangplank_proxy_check_interval": INTERVAL,
    "gangplank_proxy_fall": FALL,
}


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = FreshBed(tmp_path_factory.mktemp("proxy"), HOSTS)
    bed.down()
    bed.up()
    # Each host publishes on its address in the bed's network: the other hosts' proxies reach its instances there.
    host_vars = bed.base / "host_vars"
    host_vars.mkdir()
    racks = {bed.names[0]: {"zone": "east", "rack": "a", "clients": "yes"}, bed.names[1]: {"zone": "east", "rack": "b"},
             bed.names[2]: {"zone": "west", "clients": "yes"}}
    for host in bed.names:
        address = subprocess.run(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                  "gangplank-fresh-" + host], env=ENV, capture_output=True, text=True,
                                 check=True).stdout.strip()
        (host_vars / ("%s.yml" % host)).write_text(yaml.safe_dump({"gangplank_publish_address": address,
                                                                   "gangplank_labels": racks[host]}))
    use_catalog(bed, spread=True)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, "\n".join(failures(report))
    yield bed
    bed.down()


def use_catalog(bed, spread, proxy=True):
    """The catalog, with api's topology spread or (``spread`` false: a rebalance may pack api on one node) without;
    without asking for the proxy where ``proxy`` is false."""
    catalog = json.loads(json.dumps(CATALOG))
    if not spread:
        del catalog["gangplank_services"]["api"]["topology_spread"]
    if not proxy:
        del catalog["gangplank_services"]["api"]["proxy"]
    (bed.base / "group_vars" / "all" / "zz_proxy.yml").write_text(yaml.safe_dump(catalog))


def no_failure(before, after):
    """Whether a client failed no call between two of its (ok, failed) counts."""
    return after[1] == before[1]


BRIDGE = "cat /sys/class/net/podman0/address /sys/class/net/podman0/addr_assign_type"


def bridge_address(bed, host):
    """The address of Podman's bridge on ``host`` and whether it was set (addr_assign_type 3), not taken from a port."""
    address, assign_type = bed.sh(host, BRIDGE).split()
    return address, assign_type == "3"


def client_counts(bed, host):
    """(ok, failed) of the client container on ``host``, from its own engine."""
    engine = bed.engines[host]
    out = bed.sh(host, "%s exec $(%s ps -q --filter label=gangplank.io/service=client) cat /tmp/counts" % (engine, engine))
    ok, failed = out.split()
    return int(ok), int(failed)


STATS = (
    "import socket\n"
    "s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect('/run/gangplank/proxy.sock')\n"
    "s.sendall(b'show stat\\n'); data = b''\n"
    "while True:\n"
    "    chunk = s.recv(65536)\n"
    "    if not chunk: break\n"
    "    data += chunk\n"
    "for line in data.decode().splitlines()[1:]:\n"
    "    f = line.split(',')\n"
    "    if len(f) > 37: print(f[1], f[17], 'econ', f[13], 'eresp', f[14], 'wretr', f[15], 'wredis', f[16], "
    "'chkfail', f[21], 'check', f[36], f[37])\n")


# What else a failed assertion shows of each host's proxy: the address on lo, its processes, its pid file and log.
PROXY_STATE = ("ip -o address show dev lo; ps -eo pid,ppid,args | grep '[h]aproxy'; echo pid $(cat /run/gangplank/proxy.pid);"
               " tail -n 5 /run/gangplank/proxy.log 2>/dev/null")


def proxy_stats(bed):
    """Each host's HAProxy counters (server state, connection errors, retries, redispatches, failed checks) and its
    proxy's state: what a failed assertion shows."""
    return {host: bed.sh(host, "python3 -c %s; %s" % (shlex.quote(STATS), PROXY_STATE), check=False)
            for host in bed.names}


def api_placement(bed):
    """api's instances, each mapped to its node."""
    placement = json.loads(bed.sh(bed.names[0], "cat /var/lib/gangplank/placement.json"))["placement"]
    return {name: entry["node"] for name, entry in placement.items() if entry["service"] == "api"}


def api_nodes(bed):
    return sorted(api_placement(bed).values())


# Calls from the host itself through its own proxy until each of the instances named answered (their /health names
# them), at most 300 calls: prints those that answered, one a line.
ANSWERED = (
    "import sys, urllib.request\n"
    "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
    "wanted, seen = set(sys.argv[1:]), set()\n"
    "for _ in range(300):\n"
    "    try:\n"
    "        with opener.open('http://%s:%d/health', timeout=5) as answer:\n"
    "            seen.update(answer.read(200).decode('ascii', 'replace').split()[:1])\n"
    "    except OSError:\n"
    "        pass\n"
    "    if wanted <= seen: break\n"
    "print('\\n'.join(sorted(seen)))\n" % (ADDRESS, LISTEN))


def answered_through_the_proxy(bed, host, instances):
    """The instances of ``instances`` that answered calls made on ``host`` through its proxy."""
    out = bed.sh(host, "python3 -c %s %s" % (shlex.quote(ANSWERED), " ".join(shlex.quote(name) for name in instances)))
    return set(out.split()) & set(instances)


def changed_task_names(report):
    """The names of the tasks that changed something on some host."""
    return [task["task"]["name"] for play in report["plays"] for task in play["tasks"]
            if any(result.get("changed") for result in task["hosts"].values())]


def task_names(report):
    return [task["task"]["name"].split(" : ", 1)[-1] for play in report["plays"] for task in play["tasks"]]


def scale(bed, clients, replicas):
    start = {host: client_counts(bed, host) for host in clients}
    returncode, report = bed.playbook("scale.yml", "-e", "service=api", "-e", "replicas=%d" % replicas)
    assert returncode == 0, "\n".join(failures(report))
    changed = [(task["task"]["name"], sorted(host for host, result in task["hosts"].items() if result.get("changed")))
               for play in report["plays"] for task in play["tasks"]]
    changed = [entry for entry in changed if entry[1]]
    nodes = api_nodes(bed)
    assert len(nodes) == replicas
    # Several instances of api on one node, each on its own host port, then one on each.
    assert [nodes.count(bed.names[0]), nodes.count(bed.names[1])] == [replicas // 2] * 2, nodes
    # Every host's proxy lists every instance (the Docker host's holds none of them).
    proxy = bed.sh(bed.names[2], "cat /etc/gangplank/proxy.cfg")
    assert proxy.count("    server api-") == replicas, proxy
    going, before, after = calls_go_on(bed, clients)
    print("calls after the scale to %d (ok, failed):" % replicas, before, after)
    assert going and all(no_failure(start[host], after[host]) for host in clients), (
        start, after, proxy_stats(bed), changed)


def rebalance(bed, clients):
    """Without api's spread, a rebalance packs api on the east node that holds a client (the other east node freed):
    the moved instances start there and are healthy, every proxy sends calls to them and none to the old ones, and only then are the old
    ones stopped; afterwards every host's proxy reaches the moved instances."""
    spread = api_placement(bed)
    start = {host: client_counts(bed, host) for host in clients}
    use_catalog(bed, spread=False)
    try:
        returncode, report = bed.playbook("rebalance.yml", "-e", "max_moves=3")
    finally:
        use_catalog(bed, spread=True)
    assert returncode == 0, "\n".join(failures(report))
    packed = api_placement(bed)
    moved = sorted(name for name in packed if packed[name] != spread[name])
    assert moved and len(set(packed.values())) == 1, (spread, packed)
    # The order of changes: every wave's health wait, then every host's proxy, then the old containers go.
    names = task_names(report)
    waits = [index for index, name in enumerate(names) if name.startswith("Wait until every instance is healthy")]
    proxy = names.index("Write the local proxy's configuration, checked by HAProxy first")
    removed = names.index("Remove the containers no longer placed here")
    assert waits and waits[-1] < proxy < removed, names
    written = [task for play in report["plays"] for task in play["tasks"]
               if task["task"]["name"].endswith("Write the local proxy's configuration, checked by HAProxy first")]
    assert sorted(host for host, result in written[0]["hosts"].items() if result.get("changed")) == sorted(bed.names)
    # Every host's proxy has the moved instances at their new node, and reaches them.
    for host in bed.names:
        assert answered_through_the_proxy(bed, host, moved) == set(moved), (host, moved, proxy_stats(bed))
    going, before, after = calls_go_on(bed, clients)
    print("calls after the rebalance moved %s (ok, failed):" % moved, before, after)
    assert going and all(no_failure(start[host], after[host]) for host in clients), (start, after, proxy_stats(bed))


def calls_go_on(bed, clients, seconds=3):
    before = {host: client_counts(bed, host) for host in clients}
    time.sleep(seconds)
    after = {host: client_counts(bed, host) for host in clients}
    return all(after[host][0] > before[host][0] for host in clients), before, after


def test_clients_on_podman_and_docker_call_api_through_the_proxy_with_no_failure_through_scale_move_and_scale(bed):
    clients = (bed.names[0], bed.names[2])      # a Podman host and the Docker host
    # A call made before the proxy's address was there may wait out its 5 s timeout: the first answer, within 30 s.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and min(client_counts(bed, host)[0] for host in clients) == 0:
        time.sleep(0.5)
    going, _before, start = calls_go_on(bed, clients)
    assert going, start
    # Podman's bridge on the client's host keeps one address while instances start and stop beside the client: the
    # client's ARP entry for its gateway stays right (a bridge that took its ports' lowest address would change it).
    bridge = bridge_address(bed, clients[0])
    assert bridge[1], bridge
    scale(bed, clients, 6)
    rebalance(bed, clients)
    # Back to one on each east node (the spread again): one instance starts on the node the rebalance emptied.
    scale(bed, clients, 2)
    assert bridge_address(bed, clients[0]) == bridge
    counts = {host: client_counts(bed, host) for host in clients}
    print("calls through the proxy during the scales and the move (ok, failed):", counts)
    assert all(counts[host][1] == start[host][1] for host in clients), (start, counts)
    # A run that changes nothing leaves the proxy alone.
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, "\n".join(failures(report))
    changed = changed_task_names(report)
    assert not [name for name in changed if "proxy" in name], changed


# On a host: whether lo has the proxy's address, HAProxy processes, and the proxy's files (0 0 0 once removed).
PROXY_LEFT = ("ip -o address show dev lo | grep -cF ' %s/32 '; ps -eo comm | grep -cx haproxy; "
              "ls -d /etc/gangplank/proxy.cfg /run/gangplank/proxy.pid /run/gangplank/proxy.sock 2>/dev/null | wc -l"
              % ADDRESS)


def site_without_the_proxy(bed):
    """site.yml with a catalog that asks for no proxy (then the test's catalog again); its report."""
    use_catalog(bed, spread=True, proxy=False)
    try:
        returncode, report = bed.playbook("site.yml")
    finally:
        use_catalog(bed, spread=True)
    assert returncode == 0, "\n".join(failures(report))
    return report


def test_a_catalog_that_no_longer_asks_for_the_proxy_removes_it_and_asking_again_brings_it_back(bed):
    site_without_the_proxy(bed)
    for host in bed.names:
        assert bed.sh(host, PROXY_LEFT, check=False).split() == ["0", "0", "0"], (host, proxy_stats(bed))
    # Nothing left to remove: a second run changes nothing of the proxy.
    changed = changed_task_names(site_without_the_proxy(bed))
    assert not [name for name in changed if "proxy" in name], changed
    # Asked again: every host runs its proxy, which reaches every api instance.
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, "\n".join(failures(report))
    instances = sorted(api_placement(bed))
    for host in bed.names:
        assert answered_through_the_proxy(bed, host, instances) == set(instances), (host, proxy_stats(bed))


def test_a_host_holding_api_instances_goes_down_and_calls_fail_at_most_for_a_few_check_intervals(bed):
    clients = (bed.names[0], bed.names[2])
    assert bed.names[1] in api_nodes(bed), api_nodes(bed)
    subprocess.run(["podman", "stop", "-t", "0", "gangplank-fresh-" + bed.names[1]], env=ENV, check=True,
                   capture_output=True)
    # The proxy takes the instance out after FALL failed checks (each waits at most the 1 s connect timeout); until
    # then a refused or timed out connection is sent to another instance.
    time.sleep(FALL * (INTERVAL + 1) + 2)
    going, before, after = calls_go_on(bed, clients, seconds=3)
    print("calls after the host went down (ok, failed):", before, after)
    assert going, after
    assert all(after[host][1] == before[host][1] for host in clients), (before, after)
