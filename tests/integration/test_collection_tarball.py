# -*- coding: utf-8 -*-
"""The collection as Galaxy ships it: `ansible-galaxy collection build`, then install the tarball into an empty
collections path; the tarball leaves the benchmarks, the tests and their data out, and every module, a filter and a
role run by their FQCN from the installed copy (not from this checkout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
MODULES = sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", "modules"))
                 if name.endswith(".py") and not name.startswith("_"))


def run(argv, cwd, env=None):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=300, env=env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the tarball's member names, an environment whose only gangplank.platform is the installed tarball)."""
    work = tmp_path_factory.mktemp("galaxy")
    built = run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(work), ROOT],
                cwd=str(work))
    assert built.returncode == 0, built.stdout + built.stderr
    tarball = next(work.glob("gangplank-platform-*.tar.gz"))
    with tarfile.open(tarball) as archive:
        members = archive.getnames()
    collections = work / "collections"
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    # Only the installed copy: no ansible.cfg of this checkout (the run's folder is elsewhere), no shim.
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    # --no-deps: containers.podman and community.docker come with the `ansible` package, as in the venv.
    # --force: a gangplank.platform found elsewhere (this checkout on sys.path) does not count as installed here.
    done = run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force",
                "-p", str(collections), str(tarball)], cwd=str(work), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (collections / "ansible_collections" / "gangplank" / "platform" / "MANIFEST.json").exists(), done.stdout
    return members, env, work


def only_the_installed_copy(env):
    """env, where the only gangplank.platform Ansible finds is the installed one: this checkout is not on sys.path
    (PYTHONPATH holds the shim when pytest runs; the `ansible` package's collections in site-packages stay, for the
    json callback)."""
    env = {key: value for key, value in env.items() if key != "PYTHONPATH"}
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    return env


def test_the_tarball_holds_what_a_site_runs_and_no_benchmark_or_test(installed):
    members, _env, _work = installed
    tops = {name.split("/", 1)[0] for name in members}
    assert {"plugins", "roles", "playbooks", "docs", "meta", "MANIFEST.json", "FILES.json"} <= tops
    assert {"README.md", "COPYING", "CHANGELOG.md", "changelogs/changelog.yaml", "docs/docsite/extra-docs.yml",
            "docs/docsite/links.yml"} <= set(members)
    # No benchmark, test, test data (molecule scenarios, the test beds' inventories) or build tooling; of the scripts
    # only the one air-gapped sites run to make their engine bundles.
    assert not tops & {"benchmarks", "tests", "inventories", "requirements-test.txt", "ansible.cfg"}
    assert [name for name in members if name.startswith("scripts/")] == ["scripts/engine-bundle.sh"]
    assert not [name for name in members if "/molecule" in name or name.startswith("changelogs/fragments")
                or name.endswith((".pyc", ".tar.gz", ".plugin-cache.yaml"))]
    assert {"plugins/modules/%s.py" % name for name in MODULES} <= set(members)
    guides = {"docs/docsite/rst/%s.rst" % name[:-3] for name in os.listdir(os.path.join(ROOT, "docs"))
              if name.endswith(".md")}
    assert guides <= set(members)


def test_the_manifest_names_only_the_collections_the_roles_use(installed):
    _members, _env, work = installed
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        dependencies = yaml.safe_load(handle)["dependencies"]
    assert sorted(dependencies) == ["community.docker", "containers.podman"]
    used = set()
    # The roles and playbooks name the modules they run; the engine driver (plugins/module_utils) names the
    # engines' modules that the container action runs.
    for folder in ("roles", "playbooks", "plugins"):
        for path, _dirs, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".yml", ".yaml", ".py")):
                    with open(os.path.join(path, name), encoding="utf-8") as handle:
                        text = handle.read()
                    used.update(collection for collection in dependencies if collection + "." in text)
    assert used == set(dependencies)
    assert work.exists()


def test_every_module_is_found_by_its_fqcn_in_the_installed_copy(installed):
    _members, env, work = installed
    listed = run([os.path.join(BIN, "ansible-doc"), "--json", "-t", "module"]
                 + ["gangplank.platform." + name for name in MODULES], cwd=str(work), env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    docs = json.loads(listed.stdout)
    assert sorted(docs) == ["gangplank.platform." + name for name in MODULES]
    for name, doc in docs.items():
        assert doc["doc"]["filename"].startswith(str(work / "collections")), name


def test_every_module_runs_by_its_fqcn_from_the_installed_copy(installed):
    """Each module (or its action plugin) loads with its module_utils from the tarball and checks its arguments: an
    unknown option (or a missing required one) is refused by its own argument spec, which runs once everything
    imported."""
    _members, env, work = installed
    tasks = [{"name": name, "gangplank.platform." + name: {"no_such_option": 1}, "ignore_errors": True,
              "register": "result_" + name} for name in MODULES]
    tasks.append({"name": "Read a cluster state folder", "gangplank.platform.cluster_state": {
        "path": str(work / "state"), "action": "read"}, "register": "state_read"})
    tasks.append({"name": "Probe nothing", "gangplank.platform.health_wait": {"probes": []}, "register": "probed"})
    playbook = work / "modules.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "tasks": tasks}]))
    done = run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-e",
                "ansible_python_interpreter=" + sys.executable, str(playbook)], cwd=str(work),
               env=dict(env, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json"))
    answer = json.loads(done.stdout)
    results = {task["task"]["name"]: task["hosts"]["localhost"] for task in answer["plays"][0]["tasks"]}
    for name in MODULES:
        result = results[name]
        assert result.get("failed") is True, (name, result)
        message = result.get("msg", "")
        assert "no_such_option" in message or message.startswith("missing required arguments: "), (name, message)
    assert results["Read a cluster state folder"].get("failed") is not True, results["Read a cluster state folder"]
    assert results["Probe nothing"].get("healthy") is True, results["Probe nothing"]
    assert done.returncode == 0, done.stderr


def test_a_filter_and_a_role_run_by_their_fqcn_from_the_installed_copy(installed):
    """The facts role (with the cluster role it depends on) on this machine over a local connection, with simulated
    GPUs and NVMe: it only reads. Then the plan_table filter renders what gang_plan planned from the example problem
    of the installed copy's own examples/."""
    _members, env, work = installed
    collection = work / "collections" / "ansible_collections" / "gangplank" / "platform"
    with open(collection / "examples" / "cluster.yml", encoding="utf-8") as handle:
        problem = yaml.safe_load(handle)
    play = {
        "hosts": "sim", "gather_facts": False,
        "vars": {
            "gangplank_simulated_gpus": [{"model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"}],
            "gangplank_simulated_nvme": [{"name": "nvme0n1", "size": "3576Gi", "mount": "/mnt/nvme0n1",
                                          "free": "3000Gi"}],
            "gangplank_nvme_labels": {"nvme0n1": ["cache"]},
            # Nothing on this machine's paths: the role reads a fact file and a cache that are not there.
            "gangplank_state_dir": str(work / "state"),
            "gangplank_fact_path": str(work / "facts.d"),
        },
        "roles": ["gangplank.platform.facts"],
        "post_tasks": [
            {"name": "Plan the example problem", "gangplank.platform.gang_plan": {"problem": problem},
             "register": "planned"},
            {"name": "Render the plan", "ansible.builtin.debug": {
                "msg": "{{ planned | gangplank.platform.plan_table }}"}},
        ],
    }
    playbook = work / "role.yml"
    playbook.write_text(yaml.safe_dump([play]))
    inventory = work / "role-hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"sim": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    done = run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), str(playbook)], cwd=str(work),
               env=only_the_installed_copy(env))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    answer = json.loads(done.stdout)
    tasks = {task["task"]["name"].split(" : ", 1)[-1]: task["hosts"]["sim"] for task in answer["plays"][0]["tasks"]}
    gpus = tasks["Read the GPUs"]["ansible_facts"]["gangplank_gpus"]
    assert [(gpu["model"], gpu["source"]) for gpu in gpus] == [("NVIDIA A100-SXM4-80GB", "simulated")]
    facts = tasks["Work out the node labels and the scheduler's node entry"]["ansible_facts"]
    assert facts["facts_node_labels"]["nvidia.com/gpu.count"] == "1"
    assert [gpu["model"] for gpu in facts["facts_node"]["gpus"]] == ["NVIDIA A100-SXM4-80GB"]
    assert tasks["Plan the example problem"]["feasible"] is True
    table = "\n".join(tasks["Render the plan"]["msg"])
    assert all(node in table for node in problem["nodes"]), table
    assert not (work / "state").exists() or not any((work / "state").iterdir())


def test_the_scheduler_action_group_takes_module_defaults_in_the_installed_copy(installed):
    """meta/runtime.yml's action group: `module_defaults: group/gangplank.platform.scheduler` reaches gang_plan (an
    action plugin): an infeasible problem is reported, not failed, when the group's default says so."""
    _members, env, work = installed
    problem = {"nodes": {"n1": {"cpu": 1, "memory": "1Gi"}},
               "services": {"big": {"replicas": 1, "resources": {"cpu": 4, "memory": "1Gi"}}}}
    play = {"hosts": "localhost", "connection": "local", "gather_facts": False,
            "module_defaults": {"group/gangplank.platform.scheduler": {"fail_on_infeasible": False}},
            "tasks": [{"name": "Plan a gang that does not fit", "gangplank.platform.gang_plan": {"problem": problem},
                       "register": "planned"}]}
    playbook = work / "group.yml"
    playbook.write_text(yaml.safe_dump([play]))
    done = run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-e",
                "ansible_python_interpreter=" + sys.executable, str(playbook)], cwd=str(work),
               env=only_the_installed_copy(env))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    answer = json.loads(done.stdout)
    result = answer["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result.get("failed") is not True and result["feasible"] is False, result


def test_the_installed_readme_starts_with_installing_and_the_licence_ships(installed):
    _members, _env, work = installed
    collection = work / "collections" / "ansible_collections" / "gangplank" / "platform"
    readme = (collection / "README.md").read_text(encoding="utf-8")
    sections = [line[3:] for line in readme.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["Installing the collection", "Using it"], sections
    assert {"Licensing", "Support", "Release notes"} <= set(sections), sections
    assert "GNU GENERAL PUBLIC LICENSE" in (collection / "COPYING").read_text(encoding="utf-8")
    manifest = json.loads((collection / "MANIFEST.json").read_text(encoding="utf-8"))["collection_info"]
    assert manifest["issues"] and manifest["documentation"] and manifest["homepage"], manifest
    assert not [author for author in manifest["authors"] if ".invalid" in author], manifest["authors"]
    # A build from the source tree between releases says so: its changelog fragments are not in CHANGELOG.md yet.
    assert manifest["version"].endswith("-dev"), manifest["version"]
