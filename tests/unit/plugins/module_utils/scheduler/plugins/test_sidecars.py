# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, service, solve


def test_sidecars_go_with_their_app_and_have_no_instances():
    services = {"web": service(replicas=2, sidecars=["log", "metrics"]), "api": service(),
                "log": {"sidecar": True, "resources": {"cpu": "100m"}}, "metrics": {"sidecar": True}}
    result = solve({"a": node()}, services)
    assert sorted(result["placements"]) == ["api-0", "web-0", "web-1"]
    assert result["placements"]["web-0"]["sidecars"] == ["log", "metrics"]
    assert result["placements"]["api-0"]["sidecars"] == []
    assert result["usage"]["a"]["cpu_millicores"]["used"] == 3000 + 200
