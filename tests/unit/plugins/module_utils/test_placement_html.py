# -*- coding: utf-8 -*-
"""The placement picture as text: escaping of hostile names, what each card shows, bad input named by path.
(tests/integration/test_placement_html_browser.py loads it in a real browser.)"""

from __future__ import annotations

import copy
import html.parser
import re

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import (
    PictureError, render_html, service_colour,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.quantity import format_size
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan

PROBLEM = {
    "nodes": {
        "gpu-a": {"cpu": 16, "memory": "64Gi",
                  "gpus": [{"index": 0, "uuid": "GPU-a0", "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"},
                           {"index": 1, "uuid": "GPU-a1", "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"}],
                  "nvme": [{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"]}]},
        "cpu-b": {"cpu": 8, "memory": "32Gi"},
    },
    "services": {
        "infer": {"replicas": 2, "resources": {"cpu": 1, "gpu": {"memory": "30Gi"}, "nvme": {"label": "cache", "size": "100Gi"}}},
        "web": {"replicas": 2, "resources": {"cpu": 1}},
    },
}


class Tags(html.parser.HTMLParser):
    """Every element of a page, to prove that no name became markup."""

    def __init__(self):
        super().__init__()
        self.tags = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def tags_of(page):
    parser = Tags()
    parser.feed(page)
    return parser.tags


def test_cards_show_gpus_split_by_instance_nvme_and_labels():
    result = plan(PROBLEM)
    page = render_html(result, title="t")
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert tags_of(page) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "section",
                             "span", "svg", "rect", "table", "tr", "th", "td"}
    gpu_node = page[page.index(">gpu-a<"):]
    # Both infer instances share GPU0 (30Gi each of 80Gi): two segments, each named on hover.
    assert "GPU0 A100-SXM4-80GB 60Gi/80Gi" in gpu_node
    assert "<title>infer-0 (infer): 30Gi on GPU 0</title>" in gpu_node
    assert "<title>infer-1 (infer): 30Gi on GPU 0</title>" in gpu_node
    assert "GPU1 A100-SXM4-80GB 0/80Gi whole" in gpu_node
    assert "nvme0n1 200Gi/1Ti" in gpu_node and "<title>infer-0 (infer): 100Gi on nvme0n1</title>" in gpu_node
    assert ">infer<" in page      # the planted label, shown by service name
    assert page.count(service_colour("infer")) >= 3        # legend, two GPU segments, chips
    assert "1 of 2 GPU(s) whole and free" in page


def test_moves_and_preempted_are_marked():
    result = plan(PROBLEM)
    result["moves"] = [{"instance": "web-0", "from": "gpu-a", "to": result["placements"]["web-0"]["node"]}]
    result["preempted"] = {"batch-3": "lower priority", "batch-4": "no room"}
    result["evictions"] = [{"instance": "batch-3", "from": "cpu-b"}]
    page = render_html(result)
    assert 'class="chip moved"' in page and "moved from gpu-a" in page and "\u21aa web-0" in page
    assert "<h2 class=\"section\">Moves</h2>" in page and "<td>web-0</td><td>gpu-a</td>" in page
    assert "Preempted instances (2)" in page and "<td>batch-3</td><td>cpu-b</td><td>lower priority</td>" in page
    assert "<td>batch-4</td><td></td><td>no room</td>" in page


def test_infeasible_lists_every_unplaced_instance_with_its_reason():
    result = plan({"nodes": {"a": {"cpu": 1, "memory": "1Gi"}}, "services": {"db": {"replicas": 2, "resources": {"cpu": 1}}}},
                  exact_seconds=0)
    page = render_html(result)
    assert "INFEASIBLE" in page and "Unplaced instances (1)" in page
    assert "<td>db-1</td><td>0/1 nodes are available: 1 Insufficient cpu.</td>" in page


HOSTILE = '"><script>alert(1)</script><svg onload=alert(2)>&amp;'


def test_hostile_names_are_text_everywhere():
    problem = {"nodes": {HOSTILE: {"cpu": 4, "memory": "4Gi", "labels": {"x": HOSTILE},
                                   "gpus": [{"index": 0, "uuid": HOSTILE + "u", "model": HOSTILE, "memory": "8Gi"}],
                                   "nvme": [{"name": HOSTILE, "size": "1Gi", "labels": ["c"]}]}},
               "services": {"web": {"resources": {"cpu": 1, "gpu": {"memory": "1Gi"}, "nvme": {"label": "c", "size": "1Mi"}}}}}
    result = plan(problem)
    result["moves"] = [{"instance": HOSTILE, "from": HOSTILE, "to": HOSTILE}]
    result["unschedulable"] = {}
    page = render_html(result, title=HOSTILE, health={"web-0": HOSTILE}, notes=[HOSTILE])
    assert "<script" not in page and "<svg onload" not in page and "script" not in tags_of(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&amp;amp;" in page
    infeasible = {"feasible": False, "summary": HOSTILE, "unschedulable": {HOSTILE: HOSTILE}}
    page = render_html(infeasible)
    assert "<script" not in page and page.count("&lt;script&gt;") == 3


def test_a_long_name_is_cut():
    result = plan({"nodes": {"n" * 250: {"cpu": 1, "memory": "1Gi"}}, "services": {}})
    page = render_html(result)
    assert "n" * 199 + "\u2026" in page and "n" * 200 not in page


def test_colours_are_stable_and_differ():
    assert service_colour("infer") == service_colour("infer")
    assert len({service_colour(name) for name in ("api", "db", "infer", "queue", "train", "web")}) >= 5


def test_output_is_deterministic():
    assert render_html(plan(PROBLEM)) == render_html(plan(PROBLEM))


@pytest.mark.parametrize("path, value, expected", [
    (("usage",), [], "result.usage: got list; expected a mapping"),
    (("usage", "gpu-a", "gpus"), {}, "usage.gpu-a.gpus: got dict; expected a list"),
    (("usage", "gpu-a", "gpus", 0, "used"), -1, "usage.gpu-a.gpus[0].used: got -1; expected a whole number of 0 or more"),
    (("usage", "gpu-a", "memory", "total"), True, "usage.gpu-a.memory.total: got True"),
    (("moves",), [1], "result.moves[0]: got int; expected a mapping"),
])
def test_bad_results_are_named_by_path(path, value, expected):
    result = copy.deepcopy(plan(PROBLEM))
    target = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(PictureError) as raised:
        render_html(result)
    assert expected in str(raised.value)


JUNK = (None, [], {}, "x", -1, 1.5, True, [1], {"a": 1}, 2 ** 70)


def _leaves(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, path + (index,))


def test_any_broken_part_gives_a_picture_error_or_a_page_never_a_traceback():
    import random
    base = plan(PROBLEM)
    base["moves"] = [{"instance": "web-0", "from": "cpu-b", "to": "gpu-a"}]
    base["preempted"] = {"x-0": "r"}
    base["evictions"] = [{"instance": "x-0", "from": "cpu-b"}]
    paths = [path for path in _leaves(base) if path]
    rng = random.Random(16)
    for _round in range(3000):
        result = copy.deepcopy(base)
        path = rng.choice(paths)
        target = result
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = rng.choice(JUNK)
        try:
            page = render_html(result)
        except PictureError as error:
            assert error.path and str(error).startswith(error.path), error
        else:
            assert page.endswith("</html>\n")


def test_a_status_picture_shows_the_bound_instances_with_their_health():
    from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import status_result
    result = plan(PROBLEM)
    bindings = {}
    for name, placement in result["placements"].items():
        bindings.setdefault(placement["node"], {})[name] = dict(placement, rank=0)
    bindings["idle"] = {}
    page = render_html(status_result(bindings), health={"infer-0": "healthy", "infer-1": "unhealthy: refused"})
    assert "4 instance(s) on 3 node(s), as bound on the nodes" in page and ">idle<" in page
    assert "GPU0 A100-SXM4-80GB 60Gi taken" in page and "CPU " not in page
    assert 'class="chip bad"' in page and "infer-1 (infer), unhealthy: refused" in page
    with pytest.raises(PictureError, match="bindings.gpu-a: got list"):
        status_result({"gpu-a": ["x"]})


GiB = 1024 ** 3
STORED_GPUS = {"gpu-a": [{"index": 0, "uuid": "GPU-a0", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * GiB},
                         {"index": 1, "uuid": "GPU-a1", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * GiB}]}


def _status_bindings():
    bindings = {}
    for name, placement in plan(PROBLEM)["placements"].items():
        bindings.setdefault(placement["node"], {})[name] = dict(placement, rank=0)
    return bindings


def _bar_widths(page, label):
    """The widths of the used segments of the bar labelled ``label`` (its SVG follows the label)."""
    start = page.index(">%s<" % label)
    svg = page[start:page.index("</svg>", start)]
    return [float(width) for width in re.findall(r'width="([0-9.]+)" height="\d+" fill=', svg)]


def test_a_status_picture_draws_each_gpu_to_scale_with_the_stored_facts():
    from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import BAR_WIDTH, status_result
    bindings = _status_bindings()
    taken = {}
    for binding in bindings["gpu-a"].values():
        for claim in binding.get("gpus") or []:
            taken[claim["uuid"]] = taken.get(claim["uuid"], 0) + claim["memory"]
    page = render_html(status_result(bindings, gpus=STORED_GPUS))
    for index, uuid in enumerate(("GPU-a0", "GPU-a1")):
        used = taken.get(uuid, 0)
        label = "GPU%d A100-SXM4-80GB %s/80Gi%s" % (index, format_size(used), "" if used else " whole")
        assert label in page
        # The bar is what the instances take of the GPU's size, not a full bar.
        assert sum(_bar_widths(page, label)) == pytest.approx(BAR_WIDTH * used / (80 * GiB), abs=1.01)
    # Without the stored facts the bar is what the instances take (the old picture).
    assert "taken" in render_html(status_result(bindings))


@pytest.mark.parametrize("gpus, says", [
    ({"gpu-a": "x"}, "gpus.gpu-a: got str"),
    ({"gpu-a": [{"uuid": "GPU-a0"}]}, r"gpus.gpu-a\[0\].memory_total: got None"),
    ({"gpu-a": [{"uuid": "GPU-a0", "memory_total": -1}]}, r"gpus.gpu-a\[0\].memory_total: got -1"),
    ({"gpu-a": [{"uuid": "u%d" % n, "memory_total": 1} for n in range(65)]}, "got 65 GPUs; expected at most 64"),
    ([], "gpus: got list"),
])
def test_bad_stored_gpus_are_an_error_naming_the_path(gpus, says):
    from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import status_result
    with pytest.raises(PictureError, match=says):
        status_result(_status_bindings(), gpus=gpus)


def test_each_instance_is_marked_healthy_failing_or_unknown():
    from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import status_result
    bindings = _status_bindings()
    names = sorted(name for host in bindings.values() for name in host)
    health = dict(zip(names, ["healthy", "unhealthy: connection refused", "not probed", "missing"]))
    page = render_html(status_result(bindings), health=health)
    assert 'class="chip ok"' in page and '<b class="mark">\u2714</b>%s<' % names[0] in page
    assert 'class="chip bad"' in page and '\u2718</b>%s<' % names[1] in page and '\u2718</b>%s<' % names[3] in page
    assert 'class="chip unknown"' in page and '?</b>%s<' % names[2] in page
    assert all(">%s<" % name in page for name in names)      # each name is a text node of its own


def test_a_status_picture_shows_a_down_host_with_what_waits_for_it():
    from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import status_result
    bindings = _status_bindings()
    gone = {"db-0": {"service": "db", "ordinal": 0, "node": "gone", "gpus": []}}
    page = render_html(status_result(bindings, down={"gone": gone}), health={"db-0": "waiting: host down"})
    assert "; down: gone" in page and 'class="card down"' in page and "DOWN" in page
    assert "down: 1 instance(s) wait for it" in page and 'class="chip unknown"' in page
    with pytest.raises(PictureError, match="down: got list"):
        status_result(bindings, down=[])
