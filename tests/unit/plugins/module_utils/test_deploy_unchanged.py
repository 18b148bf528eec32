# -*- coding: utf-8 -*-
"""A site without volumes sees no change: the spec hashes of representative containers and the plan of the bundled
example are pinned as an earlier release made them, byte for byte (a changed hash would restart every container of a
running site; a changed plan would move or rebind instances)."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest
import yaml

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import SPEC_HASH, desired_containers, rollout
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.test_deploy import (
    DATA, HOST, INSTANCES, SERVICES, rendered_for,
)

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "examples", "cluster.yml")
OPTIONS = {
    "podman-cdi": {},
    "docker-simulated": {"engine": "docker", "gpu_mode": "simulated", "publish_address": "127.0.0.11"},
    "podman-no-limits": {"limits": False, "gpu_sharing": "none"},
}


def spec_hashes(options):
    specs = desired_containers(HOST, copy.deepcopy(INSTANCES), copy.deepcopy(SERVICES), DATA, **options)
    planned = rollout(HOST, specs, rendered_for(specs), [])
    return {container["name"]: container["labels"][SPEC_HASH] for container in planned["containers"]}


def _untimed(value):
    """``value`` without its measured times (``seconds``), which differ from run to run."""
    if isinstance(value, dict):
        return {key: _untimed(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [_untimed(item) for item in value]
    return value


def plan_digest():
    with open(EXAMPLE, encoding="utf-8") as handle:
        result = plan(yaml.safe_load(handle), exact_seconds=0)
    return hashlib.sha256(json.dumps(_untimed(result), sort_keys=True).encode("utf-8")).hexdigest()


# Made by this file's __main__ with the code of release d5ef36b (before volumes).
PINNED = {
    "docker-simulated": {
        "h1-api-0": "aada02959c64af50d7439dd5577e5fd1e85ff88c1f17e6bf0c745359a629744e",
        "h1-api-0-log": "4d5ebb15414e76ea9d439c98cc6190c5927a3331f4cbc6ec9f014450c6d9575c",
        "h1-api-1": "5983fe66470be79d0b5d29ca59ccfae804da81baf05fc4dce758364871392b42",
        "h1-api-1-log": "55df8e1fc4430022663dd1a155b7a6188eec9ed6a3461a5fd03a4f6db5ceddb5",
        "h1-db-0": "3a5de80c239fd42fd90d997abb90ac0ddcc4041cdfb2ac06f2acc867447392c1",
        "h1-infer-0": "cd73a0f6a8257303493a84d317d70cffa44ebc10ee8838394d021b6cb6d3cb8c"
    },
    "plan": "76ef39590df67abe462cd67a6fea5b3bb4583c02bea4295c5f7f16d6bfc31c99",
    "podman-cdi": {
        "h1-api-0": "064a22e6e0006551ca22cf664b1effd7864eecfe5fbf6336360aa3316d4a5f4f",
        "h1-api-0-log": "68f9d0ba0bce04e0b05265306722788935aba47d09e8dd54dce93d14e828d2af",
        "h1-api-1": "dba98789145e821b418b8f359b2d3ac6d6e151035fc545a5fc1b688a3677fcf9",
        "h1-api-1-log": "a14b32976fbdc4bab293c4ff569109fc8974f5bb0aa8937933b9a42751d8fd6a",
        "h1-db-0": "92c470cd751c3fca1320f4c7c87a65c6411126072e2d88d20b48b50f1ceab900",
        "h1-infer-0": "2cc809703e2d81f5ecafb94299fad8599eca6f83ca67d85c4861533c6252565d"
    },
    "podman-no-limits": {
        "h1-api-0": "064a22e6e0006551ca22cf664b1effd7864eecfe5fbf6336360aa3316d4a5f4f",
        "h1-api-0-log": "68f9d0ba0bce04e0b05265306722788935aba47d09e8dd54dce93d14e828d2af",
        "h1-api-1": "dba98789145e821b418b8f359b2d3ac6d6e151035fc545a5fc1b688a3677fcf9",
        "h1-api-1-log": "a14b32976fbdc4bab293c4ff569109fc8974f5bb0aa8937933b9a42751d8fd6a",
        "h1-db-0": "92c470cd751c3fca1320f4c7c87a65c6411126072e2d88d20b48b50f1ceab900",
        "h1-infer-0": "e87506016affe9d707764e055c1fd87db397a01ad13169b1126e95b3dc150cdb"
    }
}


@pytest.mark.parametrize("variant", sorted(OPTIONS))
def test_spec_hashes_of_containers_without_volumes_are_as_before(variant):
    assert spec_hashes(OPTIONS[variant]) == PINNED[variant]


def test_the_example_plan_is_as_before():
    assert plan_digest() == PINNED["plan"]


if __name__ == "__main__":
    print(json.dumps(dict({variant: spec_hashes(options) for variant, options in sorted(OPTIONS.items())},
                          plan=plan_digest()), indent=4, sort_keys=True))
