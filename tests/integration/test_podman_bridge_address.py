# -*- coding: utf-8 -*-
"""The command that gives Podman's bridges a fixed MAC address (engine_driver.BRIDGE_COMMAND), run for real in a
network namespace of its own: a bridge named as netavark names them, with container-like ports (veth pairs).

Without it the kernel gives the bridge the lowest address of its ports, so the address changes when a port with a
lower one joins or the port whose address it took leaves, and the other ports' ARP entries for the bridge go stale.
With it the address stays whatever ports come and go, and a bridge whose address is already fixed is left alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import BRIDGE_COMMAND, bridge_warnings

LOWEST = "02:00:00:00:00:01"


@pytest.fixture
def namespace():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("needs root and ip (iproute2): network namespaces are made for this test")
    name = "gp-bridge-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)


def run(namespace, script):
    """A shell script inside the namespace (its own /sys/class/net: sysfs mounted anew there); its stdout."""
    done = subprocess.run(["ip", "netns", "exec", namespace, "sh", "-c", script], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def bridge(namespace):
    return run(namespace, "cat /sys/class/net/podman0/address").strip()


def add_port(namespace, port, address):
    run(namespace, "ip link add %s address %s type veth peer name %s-peer && ip link set %s master podman0 up"
        % (port, address, port, port))


def make_bridge(namespace):
    run(namespace, "ip link add podman0 type bridge && ip link set podman0 up")
    add_port(namespace, "veth0", "0a:00:00:00:00:20")
    add_port(namespace, "veth1", "0a:00:00:00:00:10")
    assert bridge(namespace) == "0a:00:00:00:00:10"


def test_without_a_fixed_address_the_bridge_follows_its_lowest_port(namespace):
    make_bridge(namespace)
    add_port(namespace, "veth2", LOWEST)
    assert bridge(namespace) == LOWEST
    run(namespace, "ip link delete veth2")
    assert bridge(namespace) == "0a:00:00:00:00:10"


def test_the_command_keeps_the_bridges_present_address_whatever_ports_come_and_go(namespace):
    make_bridge(namespace)
    out = run(namespace, BRIDGE_COMMAND)
    assert out == "kept podman0 0a:00:00:00:00:10\n" and bridge_warnings(out) == []
    # A port with a lower address joins, and the port whose address the bridge had leaves: the address stays.
    add_port(namespace, "veth2", LOWEST)
    run(namespace, "ip link delete veth1")
    assert bridge(namespace) == "0a:00:00:00:00:10"
    # Fixed once: the next run leaves it alone and prints nothing.
    assert run(namespace, BRIDGE_COMMAND) == ""
    # Another program's bridge is not Podman's: left as it is.
    run(namespace, "ip link add br-other type bridge")
    assert run(namespace, BRIDGE_COMMAND) == ""
    assert run(namespace, "cat /sys/class/net/br-other/addr_assign_type").strip() != "3"


def test_a_host_without_podmans_bridges_gets_no_change_and_no_warning(namespace):
    assert run(namespace, BRIDGE_COMMAND) == ""
