# -*- coding: utf-8 -*-
"""The AWX execution environment, built for real: `ansible-builder build` of execution-environment.yml from a
Debian 12 base image made on this machine (scripts/lib/ee_base_image.sh; no registry), then the collection's
plan playbook and the AWX project's wrapper playbooks run inside the built image as AWX runs them (podman run).
The base image is cached (Podman's image store, .build/ee/base-*.tar), and so are the build's layers: a warm
run rebuilds only what a change of the collection touches."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
WORK = os.path.join(ROOT, ".build", "ee")
IMAGE = "localhost/gangplank-ee:test"
COLLECTION = "/usr/share/ansible/collections/ansible_collections/gangplank/platform"
# The settings Podman needs on a machine like this one's (hybrid cgroups, no CAP_SYS_RESOURCE): TESTBED.md.
PODMAN_CONF = '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
PROBLEM = {
    "nodes": {"node-a": {"cpu": 8, "memory": "16Gi"}, "node-b": {"cpu": 4, "memory": "8Gi"}},
    "services": {"web": {"replicas": 2, "resources": {"cpu": 3, "memory": "1Gi"}}},
}


def run(argv, timeout=300, **options):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, timeout=timeout, **options)


@pytest.fixture(scope="module")
def podman_env():
    os.makedirs(WORK, exist_ok=True)
    conf = os.path.join(WORK, "containers.conf")
    with open(conf, "w") as handle:
        handle.write(PODMAN_CONF)
    return dict(os.environ, CONTAINERS_CONF=conf)


@pytest.fixture(scope="module")
def tarball():
    """The collection tarball, built where execution-environment.yml's additional_build_files read it."""
    output = os.path.join(ROOT, ".build", "ee-collection")
    shutil.rmtree(output, ignore_errors=True)
    built = run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", output])
    assert built.returncode == 0, built.stdout + built.stderr
    (name,) = os.listdir(output)
    return os.path.join(output, name)


@pytest.fixture(scope="module")
def image(podman_env, tarball):
    assert os.geteuid() == 0, "the base image is made with debootstrap and chroot, which need root"
    base = run([os.path.join(ROOT, "scripts", "lib", "ee_base_image.sh")], timeout=900,
               env=dict(podman_env, PYTHON=sys.executable))
    assert base.returncode == 0, base.stdout + base.stderr
    built = run([os.path.join(BIN, "ansible-builder"), "build", "-f", "execution-environment.yml",
                 "-c", os.path.join(WORK, "context"), "-t", IMAGE,
                 "--build-arg", "EE_BASE_IMAGE=" + base.stdout.strip(),
                 "--build-arg", "PYCMD=/opt/ee/bin/python3", "--build-arg", "PKGMGR=/usr/local/sbin/ee-apt",
                 "-v", "2"], timeout=1800, env=podman_env)
    assert built.returncode == 0, built.stdout[-6000:] + built.stderr[-3000:]
    return IMAGE


def podman_run(podman_env, image, *argv, volumes=(), user=None):
    options = [arg for volume in volumes for arg in ("-v", volume)] + (["--user", user] if user else [])
    return run(["podman", "run", "--rm", "-e", "ANSIBLE_NOCOLOR=1", *options, image, *argv], timeout=300,
               env=podman_env)


def test_the_image_holds_the_tarballs_collection_its_dependencies_and_python_requirements(
        podman_env, image, tarball):
    inspected = run(["podman", "image", "inspect", image], env=podman_env)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)[0]["Config"]["Labels"]["ansible-execution-environment"] == "true"
    # The installed collection is the tarball just built (its FILES.json lists every file's checksum), not a
    # cached layer of an earlier build.
    with tarfile.open(tarball) as archive:
        files = json.load(archive.extractfile("FILES.json"))
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    shown = podman_run(podman_env, image, "cat", COLLECTION + "/FILES.json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout) == files
    listed = podman_run(podman_env, image, "ansible-galaxy", "collection", "list", "--format", "json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    versions = {name: info["version"] for found in json.loads(listed.stdout).values() for name, info in found.items()}
    assert versions["gangplank.platform"] == manifest["collection_info"]["version"]
    with open(os.path.join(ROOT, "awx", "requirements.yml")) as handle:
        for entry in yaml.safe_load(handle)["collections"]:
            assert entry["name"] in versions, (entry["name"], sorted(versions))
    # The collection's own Python requirements (meta/execution-environment.yml) and the SSH client from the
    # definition's [platform:dpkg] packages.
    probed = podman_run(podman_env, image, "sh", "-c",
                        "python3 -c 'import ortools, yaml; print(ortools.__version__)' && command -v ssh && command -v sshpass")
    assert probed.returncode == 0, probed.stdout + probed.stderr
    assert probed.stdout.splitlines()[1:] == ["/usr/bin/ssh", "/usr/bin/sshpass"]


def test_the_plan_playbook_runs_by_its_fqcn_inside_the_image(podman_env, image, tmp_path):
    problem = tmp_path / "problem.yml"
    problem.write_text(yaml.safe_dump(PROBLEM))
    problem.chmod(0o644)
    played = podman_run(podman_env, image, "ansible-playbook", "gangplank.platform.plan", "-e", "@/runner/problem.yml",
                        volumes=[str(problem) + ":/runner/problem.yml:ro"])
    assert played.returncode == 0, played.stdout + played.stderr
    # web needs 3 cpus an instance: node-a (8) holds two, node-b (4) one; spread, one on each.
    assert "plan: feasible (greedy): 2 instance(s) on 2 of 2 node(s), 0 move(s)" in played.stdout, played.stdout
    assert "node-a  3/8" in played.stdout and "node-b  3/4" in played.stdout, played.stdout
    assert re.search(r"localhost +: ok=\d+ +changed=1 +unreachable=0 +failed=0 ", played.stdout), played.stdout


def test_the_plan_playbook_fails_inside_the_image_when_the_gang_does_not_fit(podman_env, image, tmp_path):
    """Four instances of 3 cpus on nodes of 8 and 4: the exact solver (OR-Tools, installed in the image) proves it."""
    problem = tmp_path / "problem.yml"
    problem.write_text(yaml.safe_dump(dict(PROBLEM, services={"web": {"replicas": 4, "resources": {"cpu": 3}}})))
    problem.chmod(0o644)
    played = podman_run(podman_env, image, "ansible-playbook", "gangplank.platform.plan", "-e", "@/runner/problem.yml",
                        volumes=[str(problem) + ":/runner/problem.yml:ro"])
    assert played.returncode == 2, played.stdout + played.stderr
    assert "TASK [Fail when the gang does not fit]" in played.stdout
    assert "plan: INFEASIBLE (exact, infeasible in " in played.stdout, played.stdout
    assert "CP-SAT proved that no placement satisfies every constraint" in played.stdout, played.stdout


def test_the_awx_projects_playbooks_load_inside_the_image(podman_env, image, tmp_path):
    """AWX mounts the project at /runner/project and runs the job template's playbook there: the thin project
    that gangplank.platform.awx_project writes, run inside the image."""
    project = tmp_path / "project"
    project.mkdir()
    written = podman_run(podman_env, image, "ansible-playbook", "gangplank.platform.awx_project",
                         "-e", "awx_project_dir=/runner/project", volumes=[str(project) + ":/runner/project"],
                         user="0")
    assert written.returncode == 0, written.stdout + written.stderr
    checked = podman_run(podman_env, image, "sh", "-c",
                         "cd /runner/project && ansible-playbook --syntax-check site.yml scale.yml",
                         volumes=[str(project) + ":/runner/project:ro"])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "playbook: site.yml" in checked.stdout and "playbook: scale.yml" in checked.stdout, checked.stdout
