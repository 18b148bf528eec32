# -*- coding: utf-8 -*-
"""The runtime role's decisions, moved from Jinja to filters over module_utils/facts/runtime_host.py: each filter gives what
the expression it replaced gave (both rendered by ansible-core's Templar with the role's own variables), above all
the argv of the read whose output and inputs' JSON make the fingerprint stored on every host."""

from __future__ import annotations

import base64
import copy

import pytest

from ansible.errors import AnsibleError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import STATE_SCRIPT, inputs_json
from ansible_collections.gangplank.platform.tests.unit.plugins.filter.jinja_render import render, role_variables

ROLE_FILES = ("roles/cluster/defaults/main.yml", "roles/cluster/vars/main.yml",
              "roles/runtime/defaults/main.yml", "roles/runtime/vars/main.yml")

# The expressions the role used before (roles/runtime/vars/main.yml and tasks/*.yml), as Jinja read them.
OLD_STATE_ARGV = """['sh', '-c', runtime__state_script, 'sh', cluster_runtime_state_file,
      runtime__engine_binary[cluster_engine],
      runtime_podman_conf if cluster_engine == 'podman' else runtime_docker_conf, cluster_engine,
      'cdi' if runtime_cdi | bool else 'nocdi',
      (runtime__engine_packages[cluster_engine] + runtime__python_packages[cluster_engine]) | join(' ')
      if runtime_install_packages | bool or runtime_offline_bundle | length > 0 else '',
      runtime__inputs | to_json(sort_keys=true)]
     + runtime_image_bundles | map(attribute='images') | flatten | unique"""
OLD_LIMITS_ANSWER = ("(runtime__limits.stdout_lines | default([]) | select | first | default('') | trim)"
                     " if runtime__limits.rc | default(1) == 0 else ''")
OLD_STATE_RECORD = ("runtime__fingerprint ~ '\n' ~ (('limits ' ~ cluster_engine ~ ' ' ~ runtime__limits_answer ~ '\n')"
                    " if runtime__limits_answer else '')")
OLD_CAPABILITIES = (r"(runtime__status.content | b64decode | regex_search('CapEff:\s*([0-9a-f]+)', '\1') | first)"
                    " | int(base=16)")
OLD_SYS_RESOURCE = "(runtime__capabilities | int // 16777216) % 2 == 1"
OLD_PODMAN_SETTINGS = """{'containers': {}, 'engine': {}}
         | combine({'engine': {'runtime': 'runc'}} if not runtime__unified_cgroups else {}, recursive=true)
         | combine({'engine': {'cgroup_manager': 'cgroupfs'}} if not runtime__systemd else {}, recursive=true)
         | combine({'containers': {'default_ulimits': []}} if not runtime__sys_resource else {}, recursive=true)
         | combine(runtime_podman_settings, recursive=true)"""
OLD_DOCKER_SETTINGS = """runtime__current
         | combine({'features': {'cdi': true}} if runtime__nvidia_driver and runtime_cdi | bool else {}, recursive=true)
         | combine(runtime_docker_settings, recursive=true)"""
OLD_CDI_STALE = """runtime__cdi_list.rc != 0 or
    (gangplank_gpus | default([]) | map(attribute='uuid') | map('regex_replace', '^', 'nvidia.com/gpu=')
     | difference(runtime__cdi_list.stdout_lines) | length > 0) or
    runtime__cdi_list.stdout_lines | select('match', '^nvidia.com/gpu=') | list | length == 0"""
OLD_NEW_DEBS = """runtime__debs.files | map(attribute='path') | map('basename')
                 | difference(runtime__installed.stdout_lines | map('replace', ':', '%3a'))
                 | sort | map('regex_replace', '^', runtime_bundle_dir ~ '/packages/')"""


def variables(**overrides):
    found = role_variables(*ROLE_FILES)
    found["runtime__state_script"] = STATE_SCRIPT
    found.update(overrides)
    return found


STATE_CASES = {
    "defaults": {},
    "docker, GPUs, no CDI": {"gangplank_container_engine": "docker", "runtime_cdi": False,
                             "gangplank_gpus": [{"uuid": "GPU-1"}, {"uuid": "GPU-2"}, {"index": 3}]},
    "offline bundle only": {"runtime_install_packages": False, "runtime_offline_bundle": "/srv/docker-bookworm.tar",
                            "gangplank_container_engine": "docker"},
    "installs nothing": {"runtime_install_packages": "no", "gangplank_state_dir": "/srv/gp"},
    "settings and bundles": {
        "runtime_podman_settings": {"engine": {"events_logger": "file", "env": ["A=é", "B=\u202e"]},
                                    "containers": {"pids_limit": 2048, "ratio": 0.5, "nothing": None}},
        "runtime_docker_settings": {"log-opts": {"max-size": "10m"}},
        "gangplank_image_bundles": [{"path": "/b/one.tar", "images": ["localhost/a:1", "localhost/A:1", "b:ü"]},
                                    {"path": "/b/two.tar", "images": ["b:ü", "c:2"]}]},
}


@pytest.mark.parametrize("overrides", STATE_CASES.values(), ids=STATE_CASES.keys())
def test_the_reads_argv_and_so_the_fingerprint_are_what_the_old_expression_gave(overrides):
    given = variables(**overrides)
    old = render(OLD_STATE_ARGV, given)
    new = render("runtime__state_argv", given)
    assert new == old
    assert new[10] == render("runtime__inputs | to_json(sort_keys=true)", given)


def test_the_inputs_json_of_a_fixed_input_is_the_one_stored_fingerprints_hashed():
    # What to_json(sort_keys=true) made of these inputs before the move: the fingerprint hashes these bytes.
    inputs = {"version": 1, "engine": "podman", "packages": ["podman", "runc"],
              "podman_settings": {"engine": {"x": "é"}}, "cdi": True, "install_packages": False, "offline_bundle": "",
              "gpus": ["GPU-1"], "image_bundles": []}
    assert inputs_json(inputs) == (
        '{"cdi": true, "engine": "podman", "gpus": ["GPU-1"], "image_bundles": [], "install_packages": false, '
        '"offline_bundle": "", "packages": ["podman", "runc"], "podman_settings": {"engine": {"x": "\\u00e9"}}, '
        '"version": 1}')


def test_the_read_refuses_inputs_it_cannot_use():
    given = variables()
    given["runtime__inputs"] = {"engine": "podman"}
    with pytest.raises(AnsibleError, match="runtime_state_argv: inputs: missing cdi, docker_conf, image_bundles"):
        render("runtime__state_argv", given)
    given = variables(gangplank_container_engine="lxc")
    with pytest.raises(AnsibleError, match="runtime_state_argv: inputs.engine: 'lxc' is none of docker, podman"):
        render("runtime__state_argv", given)
    given = variables(gangplank_image_bundles=[{"path": "/b.tar"}])
    with pytest.raises(AnsibleError, match=r"image_bundles\[0\].images: expected a list of image names"):
        render("runtime__state_argv", given)


LIMITS_CASES = {
    "answered": {"rc": 0, "stdout_lines": ["", "  cgroup controllers: [cpu memory pids]  ", "more"]},
    "failed": {"rc": 125, "stdout_lines": ["Error: no engine"]},
    "skipped": {"skipped": True, "changed": False},
    "blank": {"rc": 0, "stdout_lines": ["   ", "second"]},
    "silent": {"rc": 0, "stdout_lines": []},
}


@pytest.mark.parametrize("limits", LIMITS_CASES.values(), ids=LIMITS_CASES.keys())
@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_the_state_record_is_what_the_old_expression_wrote(limits, engine):
    given = variables(runtime__limits=limits, runtime__fingerprint="f" * 64, gangplank_container_engine=engine)
    old = render(OLD_STATE_RECORD.replace("runtime__limits_answer", "(" + OLD_LIMITS_ANSWER + ")"), given)
    assert render("runtime__fingerprint | gangplank.platform.runtime_state_record(cluster_engine, runtime__limits)",
                  given) == old
    assert old.startswith("f" * 64 + "\n")


def status(capabilities):
    text = f"Name:\tsh\nCapInh:\t0000000000000000\nCapEff:\t{capabilities}\nCapBnd:\t000001ffffffffff\n"
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("capabilities", ["000001ffffffffff", "00000000a80425fb", "0000000001000000",
                                          "0000000000000000"])
def test_sys_resource_is_what_the_old_expression_read(capabilities):
    given = variables(runtime__status={"content": status(capabilities)})
    old = render(OLD_SYS_RESOURCE.replace("runtime__capabilities", "(" + OLD_CAPABILITIES + ")"), given)
    new = render("runtime__status.content | b64decode | gangplank.platform.has_capability('sys_resource')", given)
    assert new is old
    assert render("runtime__status.content | b64decode | gangplank.platform.has_capability('CAP_SYS_RESOURCE')",
                  given) is old


def test_has_capability_names_what_it_cannot_read():
    given = variables(text="Name:\tsh\n")
    with pytest.raises(AnsibleError, match="has_capability: no CapEff line in the process status"):
        render("text | gangplank.platform.has_capability('sys_resource')", given)
    with pytest.raises(AnsibleError, match="has_capability: capability 'sys_magic': not a Linux capability"):
        render("text | gangplank.platform.has_capability('sys_magic')", given)


@pytest.mark.parametrize("site", [{}, {"engine": {"runtime": "crun", "events_logger": "file"}},
                                  {"containers": {"default_ulimits": ["nofile=1024:1024"]}, "network": {"x": 1}}])
@pytest.mark.parametrize("unified, systemd, sys_resource", [(a, b, c) for a in (True, False) for b in (True, False)
                                                            for c in (True, False)])
def test_podman_settings_are_what_the_old_expression_combined(site, unified, systemd, sys_resource):
    given = variables(runtime__unified_cgroups=unified, runtime__systemd=systemd, runtime__sys_resource=sys_resource,
                      runtime_podman_settings=site)
    new = render("{'unified_cgroups': runtime__unified_cgroups, 'systemd': runtime__systemd, "
                 "'sys_resource': runtime__sys_resource} | gangplank.platform.podman_settings(runtime_podman_settings)",
                 given)
    assert new == render(OLD_PODMAN_SETTINGS, given)


def test_podman_settings_refuse_what_is_not_a_boolean():
    with pytest.raises(AnsibleError, match="podman_settings: expected the booleans unified_cgroups, systemd"):
        render("{'unified_cgroups': 'no'} | gangplank.platform.podman_settings({})", variables())


@pytest.mark.parametrize("current", [{}, {"features": {"buildkit": True}, "log-driver": "journald"},
                                     {"features": None, "data-root": "/srv/docker"}])
@pytest.mark.parametrize("site", [{}, {"features": {"cdi": False}}, {"log-opts": {"max-size": "10m"}}])
@pytest.mark.parametrize("driver, cdi", [(True, True), (True, False), (False, True)])
def test_docker_settings_are_what_the_old_expression_combined(current, site, driver, cdi):
    given = variables(runtime__current=copy.deepcopy(current), runtime__nvidia_driver=driver, runtime_cdi=cdi,
                      runtime_docker_settings=site)
    new = render("runtime__current | gangplank.platform.docker_settings(runtime__nvidia_driver and runtime_cdi | bool,"
                 " runtime_docker_settings)", given)
    assert new == render(OLD_DOCKER_SETTINGS, given)


def test_docker_settings_refuse_a_daemon_json_that_is_not_an_object():
    with pytest.raises(AnsibleError, match="docker_settings: the current settings: expected a mapping, got list"):
        render("[] | gangplank.platform.docker_settings(true, {})", variables())


CDI_CASES = {
    "listed": ({"rc": 0, "stdout_lines": ["INFO found 2 devices", "nvidia.com/gpu=GPU-1", "nvidia.com/gpu=GPU-2",
                                          "nvidia.com/gpu=all"]}, [{"uuid": "GPU-1"}, {"uuid": "GPU-2"}]),
    "a new GPU": ({"rc": 0, "stdout_lines": ["nvidia.com/gpu=GPU-1"]}, [{"uuid": "GPU-1"}, {"uuid": "GPU-3"}]),
    "failed": ({"rc": 1, "stdout_lines": ["nvidia.com/gpu=GPU-1"]}, [{"uuid": "GPU-1"}]),
    "no GPU listed": ({"rc": 0, "stdout_lines": ["INFO found 0 devices"]}, []),
    "no GPU facts": ({"rc": 0, "stdout_lines": ["nvidia.com/gpu=all"]}, []),
    "indented": ({"rc": 0, "stdout_lines": [" nvidia.com/gpu=GPU-1"]}, [{"uuid": "GPU-1"}]),
}


@pytest.mark.parametrize("cdi_list, gpus", CDI_CASES.values(), ids=CDI_CASES.keys())
def test_a_stale_cdi_spec_is_what_the_old_condition_found(cdi_list, gpus):
    given = variables(runtime__cdi_list=cdi_list, gangplank_gpus=gpus)
    new = render("runtime__cdi_list | gangplank.platform.cdi_spec_stale(gangplank_gpus | default([]))", given)
    assert new is render(OLD_CDI_STALE, given)


def test_a_gpu_without_uuid_is_named():
    given = variables(runtime__cdi_list={"rc": 0, "stdout_lines": []}, gangplank_gpus=[{"uuid": "GPU-1"}, {"index": 1}])
    with pytest.raises(AnsibleError, match=r"cdi_spec_stale: gpus\[1\].uuid: expected the GPU's UUID"):
        render("runtime__cdi_list | gangplank.platform.cdi_spec_stale(gangplank_gpus)", given)


def test_the_debs_to_install_are_what_the_old_expression_chose():
    files = [{"path": f"/var/lib/gangplank/bundles/packages/{name}"} for name in (
        "runc_1.1.5+ds1-1_amd64.deb", "libc6_2.36-9+deb12u7_amd64.deb", "Zlib_1_amd64.deb",
        "podman_4.3.1+ds1-8_amd64.deb",
        "tzdata_2024a-0+deb12u1_all.deb", "libgpgme11_1.18.0-3+b1_amd64.deb", "passwd_1%3a4.13+dfsg1-1_amd64.deb")]
    installed = ["libc6_2.36-9+deb12u7_amd64.deb", "tzdata_2023c-5_all.deb", "passwd_1:4.13+dfsg1-1_amd64.deb"]
    given = variables(runtime__debs={"files": files}, runtime__installed={"stdout_lines": installed})
    new = render("runtime__debs.files | gangplank.platform.debs_to_install(runtime__installed.stdout_lines,"
                 " runtime__package_dir)", given)
    assert new == render(OLD_NEW_DEBS, given)
    assert new[0] == "/var/lib/gangplank/bundles/packages/libgpgme11_1.18.0-3+b1_amd64.deb" and len(new) == 5


def test_debs_to_install_name_a_file_without_path():
    given = variables(runtime__debs={"files": [{"size": 3}]})
    with pytest.raises(AnsibleError, match=r"debs_to_install: files\[0\].path: expected the path of a .deb file"):
        render("runtime__debs.files | gangplank.platform.debs_to_install([], '/d')", given)


def test_the_role_checks_images_with_the_engines_command():
    given = variables(item=[{"path": "/b.tar"}, "localhost/a:1"])
    expected = ["podman", "image", "exists", "localhost/a:1"]
    assert render("runtime__image_check[cluster_engine] + [item.1]", given) == expected
    given.update(gangplank_container_engine="docker")
    assert render("runtime__image_check[cluster_engine] + [item.1]", given) == [
        "docker", "image", "inspect", "--format", "present", "localhost/a:1"]


def test_has_capability_reads_only_the_capeff_line():
    # A process named like the line is not the line; nor is a value longer than 64 bits.
    given = variables(text="Name:\tCapEff: ffffffff\nCapEff:\t0000000000000000\n")
    assert render("text | gangplank.platform.has_capability('sys_resource')", given) is False
    given = variables(text="Name:\tsh\nCapEff:\t" + "f" * 17 + "\n")
    with pytest.raises(AnsibleError, match="has_capability: no CapEff line in the process status"):
        render("text | gangplank.platform.has_capability('sys_resource')", given)
