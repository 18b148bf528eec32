# -*- coding: utf-8 -*-
"""playbooks/plan.yml planning an inventory offline, through real ansible-playbook runs on localhost (no mocks): its
catalog templated as Ansible templates it, its hosts from a nodes file or Ansible's fact cache, a scale preview, the
diff against a record, and its secrets checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "plan.yml")
BIN = os.path.dirname(sys.executable)

CATALOG = {
    "registry": "registry.example.internal",
    "gangplank_services": {
        "postgres": {"image": "{{ registry }}/postgres:16.4", "stateful": True, "resources": {"cpu": 2, "memory": "8Gi"},
                     "secrets": {"db_password": "vault_db_password"}},
        "embed": {"image": "{{ registry }}/embed:1", "replicas": 4, "scalable": True, "max_replicas": 12,
                  "resources": {"cpu": 1, "memory": "2Gi", "gpu": {"memory": "10Gi"}},
                  "topology_spread": [{"max_skew": 1}]},
    },
    "gangplank_quotas": {},
}
NODES = {"nodes": {name: {"cpu": 32, "memory": "256Gi", "gpus": [
    {"index": i, "uuid": "GPU-%s-%d" % (name, i), "model": "NVIDIA L40S", "memory": "48Gi"} for i in range(2)]}
    for name in ("gpu-a", "gpu-b")}}
FILL_CACHE = [{"hosts": "all", "gather_facts": False, "tasks": [{"ansible.builtin.set_fact": {
    "processor_vcpus": 32, "memtotal_mb": 262144, "architecture": "x86_64", "system": "Linux", "gangplank_nvme": [],
    "gangplank_gpus": "{{ range(2) | map('int') | map('gpu_of', inventory_hostname) | list }}", "cacheable": True}}]}]


def inventory(tmp_path, secret_var="vault_db_password"):
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {
        "gpu-a": {"ansible_connection": "local"}, "gpu-b": {"ansible_connection": "local"}}}}))
    (tmp_path / "group_vars" / "all" / "catalog.yml").write_text(yaml.safe_dump(CATALOG))
    (tmp_path / "group_vars" / "all" / "secrets.yml").write_text(yaml.safe_dump({secret_var: "canary-not-shown-1234"}))
    (tmp_path / "nodes.yml").write_text(yaml.safe_dump(NODES))
    return tmp_path / "hosts.yml"


def run(args, tmp_path, env=None):
    environment = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
                       ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
                       ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile",
                       ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "fact-cache"))
    environment.update(env or {})
    return subprocess.run(args, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300, check=False)


def plan(tmp_path, *extra):
    completed = run([os.path.join(BIN, "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"), PLAYBOOK,
                     "-e", "gangplank_plan_html=%s" % (tmp_path / "plan.html"), *extra], tmp_path)
    report = json.loads(completed.stdout)
    tasks = {task["task"]["name"]: task["hosts"]["localhost"] for task in report["plays"][0]["tasks"]}
    return completed, tasks


def _counts(table, service):
    """Per node row of the table, how many instances of ``service`` it lists."""
    rows = [line for line in table if line.startswith("gpu-")]
    return {row.split()[0]: row.count(service + "-") for row in rows}


def test_an_inventory_is_planned_from_a_nodes_file_with_its_catalog_templated(tmp_path):
    inventory(tmp_path)
    completed, tasks = plan(tmp_path, "-e", "@%s" % (tmp_path / "nodes.yml"))
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr
    planned = tasks["Plan every service instance at once"]
    assert planned["feasible"] is True
    table = tasks["Show the plan"]["msg"]
    assert table[0].startswith("NODE") and _counts(table, "embed") == {"gpu-a": 2, "gpu-b": 2}
    # Untemplated, "{{ registry }}/postgres:16.4" would be refused as an image reference: the plan read it templated.
    assert "expected an image reference" not in completed.stdout
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert "embed-3" in page and "canary-not-shown-1234" not in page + completed.stdout


def test_a_scale_preview_is_checked_and_planned_as_scale_yml_would(tmp_path):
    inventory(tmp_path)
    completed, tasks = plan(tmp_path, "-e", "@%s" % (tmp_path / "nodes.yml"), "-e", "scale=embed=6")
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert _counts(tasks["Show the plan"]["msg"], "embed") == {"gpu-a": 3, "gpu-b": 3}
    completed, tasks = plan(tmp_path, "-e", "@%s" % (tmp_path / "nodes.yml"), "-e", "scale=embed=13")
    assert completed.returncode != 0
    assert "scale.replicas: got 13; expected at most 12" in tasks["Plan every service instance at once"]["msg"]
    completed, tasks = plan(tmp_path, "-e", "@%s" % (tmp_path / "nodes.yml"), "-e", "scale=postgres=2")
    assert completed.returncode != 0 and "it is not scalable" in tasks["Plan every service instance at once"]["msg"]


def test_a_misspelt_secret_variable_fails_the_plan_with_the_deploys_message(tmp_path):
    inventory(tmp_path, secret_var="vault_db_pasword")
    completed, tasks = plan(tmp_path, "-e", "@%s" % (tmp_path / "nodes.yml"))
    assert completed.returncode != 0
    assert tasks["Plan every service instance at once"]["msg"] == (
        "The catalog's secrets cannot be read; nothing was changed:\n"
        "services.postgres.secrets.db_password: the variable vault_db_password is not defined (define it, vaulted, in "
        "the inventory or with -e @file, and give the vault password)")
    assert "canary-not-shown-1234" not in completed.stdout + completed.stderr


def test_the_hosts_facts_in_the_fact_cache_and_the_diff_against_a_record(tmp_path):
    inventory(tmp_path)
    filler = tmp_path / "fill.yml"
    (tmp_path / "filter_plugins").mkdir()
    (tmp_path / "filter_plugins" / "gpu_of.py").write_text(
        "def gpu_of(index, host):\n"
        "    return {'index': index, 'uuid': 'GPU-%s-%d' % (host, index), 'model': 'NVIDIA L40S',\n"
        "            'memory_total': 48 * 2 ** 30, 'source': 'nvml', 'error': None, 'mig_mode': None}\n\n\n"
        "class FilterModule:\n    def filters(self):\n        return {'gpu_of': gpu_of}\n")
    filler.write_text(yaml.safe_dump(FILL_CACHE))
    filled = run([os.path.join(BIN, "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"), str(filler)], tmp_path)
    assert filled.returncode == 0, filled.stdout[-2000:]
    completed, tasks = plan(tmp_path)
    assert completed.returncode == 0, completed.stdout[-3000:]
    scheduled = tasks["Plan the inventory's hosts from their facts, as site.yml and scale.yml plan them"]
    assert scheduled["changed"] is False and scheduled["plan"]["feasible"] is True
    assert scheduled["changes"]["added"] == ["embed-0", "embed-1", "embed-2", "embed-3", "postgres-0"]
    record = tmp_path / "record.json"
    record.write_text(json.dumps(dict(scheduled["record"], revision=1)))
    completed, tasks = plan(tmp_path, "-e", "gangplank_plan_record=%s" % record, "-e", "scale=embed=6")
    assert completed.returncode == 0, completed.stdout[-3000:]
    scheduled = tasks["Plan the inventory's hosts from their facts, as site.yml and scale.yml plan them"]
    assert scheduled["changes"]["added"] == ["embed-4", "embed-5"] and scheduled["changes"]["moved"] == []
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert "embed-4 (embed), new in this plan" in page and "embed-0 (embed), new in this plan" not in page
    shown = tasks["Show the plan"]["msg"]
    assert any(line.startswith("against the record: ") and '"embed-4"' in line for line in shown)


def test_a_clone_in_the_collection_layout_plans_without_any_setup(tmp_path):
    # git clone URL ansible_collections/gangplank/platform: ansible.cfg finds the collection there, with no shim and
    # no ANSIBLE_COLLECTIONS_PATH.
    clone = tmp_path / "ansible_collections" / "gangplank" / "platform"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.splitlines()
    for name in listed:
        source = os.path.join(ROOT, name)
        if os.path.isfile(source) and not os.path.islink(source):
            target = clone / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(open(source, "rb").read())
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "PYTHONPATH", "ANSIBLE_CONFIG")}
    environment.update(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOCALHOST_WARNING="false",
                       ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/plan.yml", "-e", "@examples/cluster.yml",
                                "-e", "gangplank_plan_html="], cwd=clone, env=environment, capture_output=True, text=True,
                               timeout=300, check=False)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "couldn't resolve module/action" not in completed.stdout + completed.stderr
