# -*- coding: utf-8 -*-
"""The framework's PreFilter: service-only plugins are asked once per service, and the first to fail speaks."""
from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, SKIPPED, FilterPlugin, Framework, PreFilterPlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins import gpu as gpu_plugin
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins import node_resources_fit
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.queue_sort import HeavyFirst
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import ClusterState
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, service


class _ServiceOnly(PreFilterPlugin):
    name = "ServiceOnly"
    service_only = True
    asked = 0

    def pre_filter(self, cycle, cluster, instance):
        type(self).asked += 1
        if instance.service.name == "refused":
            return Status.unschedulable("refused by its service")
        return SKIPPED if instance.service.name == "skipped" else OK


class _PerInstance(PreFilterPlugin):
    name = "PerInstance"

    def pre_filter(self, cycle, cluster, instance):
        if instance.ordinal == 1:
            return Status.unschedulable("the second instance is refused")
        return OK


def _framework():
    problem = parse_problem({"nodes": {"a": node()}, "services": {
        name: service(replicas=2) for name in ("kept", "skipped", "refused")}})
    _ServiceOnly.asked = 0
    return problem, Framework(problem, [HeavyFirst, _PerInstance, _ServiceOnly], {})


def test_a_service_only_pre_filter_is_asked_once_per_service():
    problem, framework = _framework()
    cluster = ClusterState(problem)
    for _round in range(3):
        status, _cycle, _filters = framework.run_pre_filter(cluster, Instance(problem.services["kept"], 0, None))
        assert status.ok
        status, _cycle, _filters = framework.run_pre_filter(cluster, Instance(problem.services["skipped"], 0, None))
        assert status.ok
    assert _ServiceOnly.asked == 2


def test_the_first_plugin_to_fail_is_the_one_reported():
    problem, framework = _framework()
    cluster = ClusterState(problem)
    refused = problem.services["refused"]
    first = framework.run_pre_filter(cluster, Instance(refused, 0, None))[0]
    assert (first.ok, first.reasons, first.plugin) == (False, ("refused by its service",), "ServiceOnly")
    # The per-instance plugin comes first in the profile: it speaks for the instance it refuses.
    second = framework.run_pre_filter(cluster, Instance(refused, 1, None))[0]
    assert (second.ok, second.reasons, second.plugin) == (False, ("the second instance is refused",), "PerInstance")
    assert framework.run_pre_filter(cluster, Instance(problem.services["kept"], 1, None))[0].reasons == (
        "the second instance is refused",)


class _StaticOnly(FilterPlugin):
    name = "StaticOnly"

    def filter_static(self, instance, node, staying):
        return OK


class _Dynamic(FilterPlugin):
    name = "Dynamic"

    def filter(self, cycle, cluster, instance, node_state):
        return Status.unschedulable("node(s) said no")


def test_run_filters_is_given_only_the_filters_that_read_the_node_state():
    problem = parse_problem({"nodes": {"a": node()}, "services": {"web": service()}})
    framework = Framework(problem, [HeavyFirst, _StaticOnly, _Dynamic], {})
    cluster = ClusterState(problem)
    instance = Instance(problem.services["web"], 0, None)
    status, cycle, filters = framework.run_pre_filter(cluster, instance)
    assert status.ok
    assert [plugin.name for plugin in filters] == ["StaticOnly", "Dynamic"]
    assert [plugin.name for plugin in filters.dynamic] == ["Dynamic"]
    refused = framework.run_filters(filters.dynamic, cycle, cluster, instance, cluster.nodes["a"])
    assert (refused.ok, refused.reasons) == (False, ("node(s) said no",))


def test_each_plugin_keeps_its_cycle_state_under_its_own_key():
    problem = parse_problem({"nodes": {"a": node(gpus=[gpu(0)])}, "services": {
        "web": service(cpu=2, resources={"gpu": {"memory": "10Gi"}}, sidecars=["log"]),
        "log": {"sidecar": True, "resources": {"cpu": "500m", "memory": "1Gi"}}}})
    framework = Framework(problem, PLUGINS, WEIGHTS)
    cluster = ClusterState(problem)
    instance = Instance(problem.services["web"], 0, None)
    status, cycle, filters = framework.run_pre_filter(cluster, instance)
    assert status.ok
    # NodeResourcesFit's PreFilter wrote the instance's request with its sidecar's, under its own key alone.
    assert list(cycle) == [node_resources_fit.STATE_KEY]
    assert (cycle[node_resources_fit.STATE_KEY].cpu, cycle[node_resources_fit.STATE_KEY].services) == (2500, ("web", "log"))
    assert framework.run_filters(filters.dynamic, cycle, cluster, instance, cluster.nodes["a"]).ok
    # GPU remembered its choice for the node under its own key; Quota and GPUFragmentation read it through gpu_choice.
    assert sorted(cycle) == sorted([node_resources_fit.STATE_KEY, gpu_plugin.STATE_KEY])
    assert cycle[gpu_plugin.STATE_KEY] == {"a": (cluster.nodes["a"].version, [(0, 10 * 2 ** 30)])}
    assert gpu_plugin.gpu_choice(cycle, instance, cluster.nodes["a"]) == [(0, 10 * 2 ** 30)]
