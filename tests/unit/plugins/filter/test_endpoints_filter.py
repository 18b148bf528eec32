# -*- coding: utf-8 -*-
"""The endpoints filter: a gang_schedule result's endpoints per service."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.endpoints import endpoints

SERVICES = {"api": {"ports": [{"name": "http", "container_port": 8080}]}, "db": {"ports": [5432]}}
PLAN = {"hosts": {"n1": {"instances": {"api-0": {"service": "api", "ordinal": 0, "host_ports": {"http": 20000}},
                                       "db-0": {"service": "db", "ordinal": 0}}}}}


def test_the_plans_endpoints_with_the_hosts_publish_address():
    found = endpoints(PLAN, SERVICES, {"n1": {"gangplank_publish_address": "10.1.2.3"}})
    assert found == {"api": [{"instance": "api-0", "node": "n1", "address": "10.1.2.3", "ports": {"http": 20000}}],
                     "db": [{"instance": "db-0", "node": "n1", "address": "10.1.2.3", "ports": {"5432": 5432}}]}


def test_a_bad_address_is_refused_naming_the_host():
    with pytest.raises(AnsibleFilterError, match="host n1"):
        endpoints(PLAN, SERVICES, {"n1": {"gangplank_publish_address": "x\ny"}})


def test_not_a_plan_is_refused():
    with pytest.raises(AnsibleFilterError, match="expected a gang_schedule result"):
        endpoints([], SERVICES, {})
