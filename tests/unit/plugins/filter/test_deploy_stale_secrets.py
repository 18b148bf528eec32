# -*- coding: utf-8 -*-
"""deploy_stale_secrets: every host's secrets that no container uses any more, in one task (the decision itself is
tested in tests/unit/plugins/module_utils/test_deploy_read.py)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.deploy_stale_secrets import deploy_stale_secrets


def test_the_stale_secrets_filter_covers_every_host_once():
    reads = [{"engine_found": True, "containers": [], "leftovers": [], "secrets": ["n1-a-0.x"]},
             {"engine_found": False, "containers": [], "leftovers": [], "secrets": ["n2-a-0.x"]},
             {"engine_found": True, "containers": [], "leftovers": [], "secrets": ["n3-a-0/x"]}]
    desired = {"n1": [{"name": "n1-a-0", "secrets": [{"name": "x", "engine_name": "n1-a-0.x", "path": None}]}], "n2": [], "n3": []}
    assert deploy_stale_secrets(["n1", "n2", "n3"], reads, desired, ["podman", "podman", "docker"]) == {"n3": ["n3-a-0/x"]}
    for read, engine in zip(reads, ["podman", "podman", "docker"]):
        read["settings"] = {"engine": engine}
    assert deploy_stale_secrets(["n1", "n2", "n3"], reads, desired) == {"n3": ["n3-a-0/x"]}


def test_hosts_and_reads_of_other_lengths_are_refused():
    with pytest.raises(AnsibleFilterError, match="2 hosts, but 1 reads"):
        deploy_stale_secrets(["n1", "n2"], [{}], {}, ["podman"])
