# -*- coding: utf-8 -*-
"""playbooks/status.yml for real with a host that is down (ssh to a closed port): the status table and the picture
name the down host and the instances that wait for it, the live hosts' instances are shown with their state, and
each GPU is drawn to scale from the stored hardware facts. The hosts are this machine (local connections); no
container runs, so the live instances are 'missing'."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
GIB = 1024 ** 3
SERVICES = {"db": {"stateful": True, "image": "localhost/none:1", "resources": {"cpu": "100m"}},
            "infer": {"image": "localhost/none:1", "resources": {"gpu": {"memory": "20Gi"}}}}
GPU = {"index": 0, "uuid": "GPU-live-0", "model": "NVIDIA A100-SXM4-80GB", "memory": 20 * GIB}


def write_json(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))


@pytest.fixture
def site(tmp_path):
    hosts = {}
    for host in ("live", "gone"):
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "gangplank_state_dir": str(tmp_path / host / "state"),
                       "gangplank_fact_path": str(tmp_path / host / "facts.d")}
    hosts["gone"].update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1,
                         ansible_ssh_common_args="-o ConnectTimeout=3")
    placement = {"infer-0": {"service": "infer", "ordinal": 0, "node": "live", "gpus": [GPU], "nvme": None, "sidecars": []},
                 "db-0": {"service": "db", "ordinal": 0, "node": "gone", "gpus": [], "nvme": None, "sidecars": []}}
    write_json(tmp_path / "live" / "state" / "placement.json",
               {"revision": 1, "placement": placement, "node_labels": {}, "replicas": {}, "ranks": [["db"], ["infer"]],
                "nodes": {}, "history": []})
    write_json(tmp_path / "live" / "facts.d" / "gangplank.fact",
               {"revision": 1, "labels": {}, "ranks": [["db"], ["infer"]], "instances": {"infer-0": dict(placement["infer-0"], rank=1)}})
    write_json(tmp_path / "live" / "state" / "hardware-facts.json",
               {"version": 1, "fingerprint": "x", "facts": {"gangplank_gpus": [
                   {"index": 0, "uuid": "GPU-live-0", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * GIB}]}})
    inventory = {"all": {"hosts": hosts, "vars": {"gangplank_services": SERVICES},
                         "children": {"gangplank_control": {"hosts": {"live": {}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return tmp_path


def test_status_names_the_down_host_and_what_waits_and_draws_gpus_to_scale(site):
    page = site / "status.html"
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1")
    completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(site / "hosts.yml"),
                                os.path.join(ROOT, "playbooks", "status.yml"), "-e", "gangplank_status_html=%s" % page],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(completed.stdout)
    assert completed.returncode == 4, completed.stdout[-3000:]      # Ansible's unreachable status: gone is down
    tasks = {task["task"]["name"].split(" : ", 1)[-1]: task["hosts"] for play in report["plays"] for task in play["tasks"]}
    table = tasks["Show the status table"]["live"]["msg"]
    assert "gone is down; waiting for it: db-0" in table and any("infer-0" in line and "missing" in line for line in table)
    html = page.read_text()
    assert "down: gone" in html and "DOWN" in html and "db-0 (db), waiting: host down" in html
    assert "GPU0 A100-SXM4-80GB 20Gi/80Gi" in html
