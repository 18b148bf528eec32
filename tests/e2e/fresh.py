# -*- coding: utf-8 -*-
"""Hosts of the fresh-host bed (scripts/lib/freshbed.sh) for end-to-end tests, and what they read back.

Each test module starts hosts of its own (own names and loopback addresses) from the bed's image:
minimal Debian 12 with sshd, sudo and python3 and no container engine. Ansible reaches them over
real SSH as the sudo user ``gangplank`` with become, as inventories/fresh does. What runs inside a
host is read with ``podman exec`` on the bed's container, from outside, never through Ansible.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import BUNDLE, ROOT, run_playbook, start_playbook

FRESH = os.path.join(ROOT, "inventories", "fresh")
FRESHBED = os.path.join(ROOT, "scripts", "lib", "freshbed.sh")
ENV = dict(os.environ, CONTAINERS_CONF=os.path.join(ROOT, ".build", "fresh", "containers.conf"))


def freshbed(*args):
    subprocess.run([FRESHBED, *args], check=True, env=ENV, timeout=900)


def outer_podman(*args):
    """Podman on this machine, as the bed runs it (its own containers.conf): the hosts' containers."""
    subprocess.run(["podman", *args], env=ENV, check=True, timeout=120, capture_output=True)


def forget_connections():
    """Ansible's persistent SSH connections to the bed (ControlPersist): the next run connects afresh."""
    folder = os.path.join(ROOT, ".build", "fresh", "cp")
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def wait_for_ssh(address, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, 22), timeout=2) as connection:
                if connection.recv(4).startswith(b"SSH"):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError("%s does not answer on port 22" % address)


class FreshBed:
    """``hosts`` maps each inventories/fresh host (fresh1, ...) to the (name, address) it gets here;
    ``extra`` adds hosts of this module's own: name -> (address, host variables)."""

    def __init__(self, base, hosts, extra=None):
        if shutil.which("podman") is None or not os.path.exists(BUNDLE):
            pytest.fail("the test bed is not set up: source scripts/lib/testbed.sh first (scripts/test.sh does)")
        self.base = base
        with open(os.path.join(FRESH, "hosts.yml")) as handle:
            inventory = yaml.safe_load(handle)
        renamed = {}
        for old, spec in inventory["all"]["hosts"].items():
            if old in hosts:
                name, address = hosts[old]
                renamed[name] = dict(spec, ansible_host=address)
        for name, (address, variables) in (extra or {}).items():
            renamed[name] = dict(variables, ansible_host=address)
        inventory["all"]["hosts"] = renamed
        inventory["all"]["children"]["gangplank_control"]["hosts"] = {next(iter(renamed)): {}}
        self.engines = {name: spec.get("gangplank_container_engine", "podman") for name, spec in renamed.items()}
        self.addresses = {name: spec["ansible_host"] for name, spec in renamed.items()}
        self.names = tuple(renamed)
        # group_vars holds links to the local bed's catalog: copy what they point to.
        shutil.copytree(os.path.join(FRESH, "group_vars"), str(base / "group_vars"))
        shutil.copytree(os.path.join(FRESH, "templates"), str(base / "templates"))
        (base / "group_vars" / "all" / "zz_e2e.yml").write_text(yaml.safe_dump({
            "ansible_ssh_private_key_file": os.path.join(ROOT, ".build", "fresh", "id_ed25519"),
            "ansible_control_path_dir": os.path.join(ROOT, ".build", "fresh", "cp"),
            "gangplank_image_bundles": [{"path": BUNDLE, "images": ["localhost/gangplank-demo:1"]}],
        }))
        self.inventory = base / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump(inventory))
        self.publish = {}

    def up(self):
        """Starts the hosts; each host that sets no publish address of its own publishes on its address in the bed's
        network (written into the inventory), where the other hosts reach it: the endpoints and every host's local
        proxy name that address (the bed forwards its loopback address to the same ports)."""
        freshbed("up", *("%s=%s" % item for item in self.addresses.items()))
        inventory = yaml.safe_load(self.inventory.read_text())
        for name, spec in inventory["all"]["hosts"].items():
            self.publish[name] = spec.get("gangplank_publish_address") or subprocess.run(
                ["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                 "gangplank-fresh-" + name], env=ENV, check=True, timeout=120, capture_output=True,
                text=True).stdout.strip()
            spec["gangplank_publish_address"] = self.publish[name]
        self.inventory.write_text(yaml.safe_dump(inventory))

    def down(self):
        freshbed("down", *("%s=%s" % item for item in self.addresses.items()))

    def boot(self, host):
        """Starts a stopped host again as a boot would: /run emptied (a tmpfs on a real host, not in the bed's
        container), so the engines' runtime state is gone; returns once its sshd answers."""
        outer_podman("start", "gangplank-fresh-" + host)
        self.sh(host, "rm -rf /run/libpod /run/containers /run/runc /run/crun /run/docker /run/docker.sock /run/docker.pid")
        wait_for_ssh(self.addresses[host])
        forget_connections()

    def reboot(self, host):
        """The host's power cut (every process killed at once), then boot()."""
        outer_podman("stop", "-t", "0", "gangplank-fresh-" + host)
        forget_connections()
        self.boot(host)

    # As Bed's (tests/e2e/bed.py): added to each run's environment; what each run printed, when a dict.
    environment = {}
    transcripts = None

    def playbook(self, name, *extra, timeout=900):
        return run_playbook(self.inventory, os.path.join(ROOT, "playbooks", name), *extra, timeout=timeout,
                            environment=self.environment, transcripts=self.transcripts)

    def popen(self, name, *extra):
        return start_playbook(self.inventory, name, *extra, environment=self.environment)

    def sh(self, host, script, check=True):
        """Runs a shell script as root inside the host (not through Ansible); its stdout."""
        completed = subprocess.run(["podman", "exec", "gangplank-fresh-" + host, "sh", "-c", script], env=ENV,
                                   capture_output=True, text=True, timeout=120, check=False)
        if check and completed.returncode != 0:
            raise AssertionError("%s: %s failed: %s" % (host, script, completed.stderr))
        return completed.stdout

    def containers(self):
        """Every managed container on every host, from its own engine: name -> (state, started_at, labels, engine)."""
        found = {}
        for host in self.names:
            engine = self.engines[host]
            out = self.sh(host, "command -v %s >/dev/null || exit 0; ids=$(%s ps -aq --filter label=gangplank.io/managed=true); "
                                '[ -z "$ids" ] || %s inspect $ids' % (engine, engine, engine))
            for item in json.loads(out or "[]"):
                state = "running" if item["State"]["Running"] else "stopped"
                found[item["Name"].lstrip("/")] = (state, item["State"]["StartedAt"], item["Config"]["Labels"], engine)
        return found
