# -*- coding: utf-8 -*-
"""host_values, hosts_where and first_secret_key, which replaced expressions of the cluster and facts roles: each gives
what the expression it replaced gave, both rendered by ansible-core's Templar."""

from __future__ import annotations

import base64

import pytest

from ansible.errors import AnsibleError

from ansible_collections.gangplank.platform.plugins.filter.first_secret_key import first_secret_key
from ansible_collections.gangplank.platform.tests.unit.plugins.filter.jinja_render import render, role_variables

OLD_STATE_DIRS = """dict(cluster_control_hosts | zip(cluster_control_hosts | map('extract', hostvars)
     | map(attribute='gangplank_state_dir', default='/var/lib/gangplank')))"""
OLD_REUSED_HOSTS = """[] if not facts_reuse | bool else ansible_play_hosts
     | zip(ansible_play_hosts | map('extract', hostvars)
     | map(attribute='facts__cache', default={})
     | map(attribute='valid', default=false)) | selectattr(1) | map(attribute=0) | list"""
OLD_SECRET_KEY = """cluster__secret_key.results | selectattr('content', 'defined') | map(attribute='content')
         | map('b64decode')
         | map('trim') | select | first | default('new-key', true)"""

HOSTVARS = {"c1": {"gangplank_state_dir": "/srv/gp", "facts__cache": {"valid": True}},
            "c2": {"facts__cache": {"valid": False}},
            "c3": {"facts__cache": {"unreachable": True}},
            "c4": {}}


def test_each_control_hosts_state_directory_is_what_the_old_expression_gave():
    given = role_variables("roles/cluster/defaults/main.yml", "roles/cluster/vars/main.yml")
    given.update(hostvars=HOSTVARS, groups={"gangplank_control": ["c2", "c1", "c4"]})
    assert render("cluster_control_state_dirs", given) == render(OLD_STATE_DIRS, given) == {
        "c2": "/var/lib/gangplank", "c1": "/srv/gp", "c4": "/var/lib/gangplank"}


@pytest.mark.parametrize("reuse", [True, False, "yes"])
def test_the_reused_hosts_are_what_the_old_expression_chose(reuse):
    given = role_variables("roles/facts/defaults/main.yml", "roles/facts/vars/main.yml")
    given.update(hostvars=HOSTVARS, ansible_play_hosts=["c4", "c3", "c2", "c1"], facts_reuse=reuse)
    assert render("facts__reused_hosts", given) == render(OLD_REUSED_HOSTS, given)
    assert render("facts__reused_hosts", given) == (["c1"] if reuse in (True, "yes") else [])


def test_host_values_name_a_host_the_inventory_lacks():
    with pytest.raises(AnsibleError, match="host_values: c9: not a host of the inventory"):
        render("['c9'] | gangplank.platform.host_values(hostvars, 'x')", {"hostvars": HOSTVARS})
    with pytest.raises(AnsibleError, match="hosts_where: expected a list of hosts"):
        render("'c1' | gangplank.platform.hosts_where(hostvars, 'x')", {"hostvars": HOSTVARS})


def slurped(*contents):
    results = []
    for host, content in contents:
        result = {"item": host, "changed": False}
        if content is None:
            result.update(failed=True, msg="file not found")
        else:
            result["content"] = base64.b64encode(content.encode()).decode()
        results.append(result)
    return {"results": results}


SECRET_CASES = {
    "first found wins": [("c1", None), ("c2", "key-two\n"), ("c3", "key-three")],
    "blank is passed over": [("c1", " \n"), ("c2", "key-two")],
    "none has one": [("c1", None), ("c2", "")],
    "no control host": [],
}


@pytest.mark.parametrize("contents", SECRET_CASES.values(), ids=SECRET_CASES.keys())
def test_the_secret_key_is_the_one_the_old_expression_kept(contents):
    given = {"cluster__secret_key": slurped(*contents)}
    assert render("cluster__secret_key.results | gangplank.platform.first_secret_key('new-key')", given) == \
        render(OLD_SECRET_KEY, given)


def test_a_key_that_cannot_be_decoded_is_named_by_host_never_by_content():
    secret = "s3cr3t\xff"
    results = [{"item": "c1", "content": base64.b64encode(secret.encode("latin-1")).decode()}]
    with pytest.raises(AnsibleError) as raised:
        first_secret_key(results, "new-key")
    assert str(raised.value) == "first_secret_key: the key read on c1 is not base64-encoded UTF-8 text"
    assert "s3cr3t" not in str(raised.value) and results[0]["content"] not in str(raised.value)


def test_without_the_group_the_control_host_is_the_first_of_the_pattern():
    given = role_variables("roles/cluster/defaults/main.yml", "roles/cluster/vars/main.yml")
    given.update(hostvars=HOSTVARS, groups={"all": ["c3", "c1", "c2"], "ungrouped": [], "gpu": ["c2", "c1"]})
    assert render("cluster_control_hosts", given) == ["c3"]
    given["gangplank_hosts"] = "gpu"
    assert render("cluster_control_hosts", given) == ["c2"]


OLD_FIRST_READ = ("cluster_check_roles | length > 0 or ((facts_reuse | bool or facts_unreachable_ok | bool)"
                  " and facts_cache_file | length > 0)")
OLD_GATHER = ("ansible_facts.processor_vcpus is not defined or ansible_facts.memtotal_mb is not defined"
              " or ansible_facts.architecture is not defined")


@pytest.mark.parametrize("roles", [[], ["runtime"]])
@pytest.mark.parametrize("reuse, unreachable_ok", [(False, False), (True, False), (False, "yes"), ("true", True)])
@pytest.mark.parametrize("cache_file", ["", "/var/lib/gangplank/hardware-facts.json"])
def test_the_facts_roles_first_read_runs_when_it_did(roles, reuse, unreachable_ok, cache_file):
    given = role_variables("roles/facts/defaults/main.yml", "roles/facts/vars/main.yml")
    given.update(cluster_check_roles=roles, facts_reuse=reuse, facts_unreachable_ok=unreachable_ok,
                 facts_cache_file=cache_file)
    new = render("cluster_check_roles | length > 0 or facts__read_cache | bool", given)
    assert new is render(OLD_FIRST_READ, given)


@pytest.mark.parametrize("facts", [{}, {"processor_vcpus": 8, "memtotal_mb": 1024},
                                   {"processor_vcpus": 8, "memtotal_mb": 1024, "architecture": "x86_64", "other": 1},
                                   {"architecture": None, "processor_vcpus": 0, "memtotal_mb": 0}])
def test_the_facts_role_gathers_where_it_did(facts):
    given = role_variables("roles/facts/defaults/main.yml", "roles/facts/vars/main.yml")
    given["ansible_facts"] = facts
    new = render("facts__node_entry_facts | difference(ansible_facts) | length > 0", given)
    assert new is render(OLD_GATHER, given)
