# -*- coding: utf-8 -*-
"""The placement picture as text: escaping of hostile names, what each card shows, bad input named by path.
(tests/integration/test_placement_html_browser.py loads it in a real browser.)"""

from __future__ import annotations

import copy
import hashlib
import html.parser
import re

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import (
    Palette, PictureError, render_html, service_colour,
)
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_size
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_gpu_topology import server, whole

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
    # And named on the card, under their segments, where the name fits.
    assert '<div class="names"><span style="width:37.50%" title="infer-0 (infer): 30Gi on GPU 0">infer-0</span>' in gpu_node
    assert "GPU1 A100-SXM4-80GB free: 80Gi" in gpu_node
    assert "nvme0n1 200Gi/1Ti" in gpu_node and "<title>infer-0 (infer): 100Gi on nvme0n1</title>" in gpu_node
    assert ">infer<" in page      # the planted label, shown by service name
    assert page.count(Palette(["infer"])("infer")) >= 3        # legend, two GPU segments, chips
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
    assert "<td>db-1</td><td>0/1 nodes are available: 1 Insufficient cpu (asked 1 CPU; the most free on a node is 0 CPUs).</td>" in page


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
    (("usage", "gpu-a", "gpus", 0, "used"), -1, "usage.gpu-a.gpus[0].used: got -1; expected a whole number from 0 to 2^60"),
    # A float of it would overflow: the bar's width and the size's text are floats.
    pytest.param(("usage", "gpu-a", "gpus", 0, "used"), 10 ** 400,
                 "usage.gpu-a.gpus[0].used: got 100000000000000000...0000000000000000000; expected a whole number from 0 to 2^60",
                 id="a-used-amount-a-float-cannot-hold"),
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
    _render_broken(base, [path for path in _leaves(base) if path], random.Random(16), 3000)


def _render_broken(base, paths, rng, rounds):
    """``rounds`` times: one part of ``base`` at a path from ``paths`` replaced by junk; the page renders, or the
    PictureError names the path first."""
    for _round in range(rounds):
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
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import status_result
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
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import BAR_WIDTH, status_result
    bindings = _status_bindings()
    taken = {}
    for binding in bindings["gpu-a"].values():
        for claim in binding.get("gpus") or []:
            taken[claim["uuid"]] = taken.get(claim["uuid"], 0) + claim["memory"]
    page = render_html(status_result(bindings, gpus=STORED_GPUS))
    for index, uuid in enumerate(("GPU-a0", "GPU-a1")):
        used = taken.get(uuid, 0)
        label = "GPU%d A100-SXM4-80GB %s" % (index, "%s/80Gi" % format_size(used) if used else "free: 80Gi")
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
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import status_result
    with pytest.raises(PictureError, match=says):
        status_result(_status_bindings(), gpus=gpus)


def test_each_instance_is_marked_healthy_failing_or_unknown():
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import status_result
    bindings = _status_bindings()
    names = sorted(name for host in bindings.values() for name in host)
    health = dict(zip(names, ["healthy", "unhealthy: connection refused", "not probed", "missing"]))
    page = render_html(status_result(bindings), health=health)
    assert 'class="chip ok"' in page and '<b class="mark">\u2714</b>%s<' % names[0] in page
    assert 'class="chip bad"' in page and '\u2718</b>%s<' % names[1] in page and '\u2718</b>%s<' % names[3] in page
    assert 'class="chip unknown"' in page and '?</b>%s<' % names[2] in page
    assert all(">%s<" % name in page for name in names)      # each name is a text node of its own


def test_a_status_picture_shows_a_down_host_with_what_waits_for_it():
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import status_result
    bindings = _status_bindings()
    gone = {"db-0": {"service": "db", "ordinal": 0, "node": "gone", "gpus": []}}
    page = render_html(status_result(bindings, down={"gone": gone}), health={"db-0": "waiting: host down"})
    assert "; down: gone" in page and 'class="card down"' in page and "DOWN" in page
    assert "down: 1 instance(s) wait for it" in page and 'class="chip unknown"' in page
    with pytest.raises(PictureError, match="down: got list"):
        status_result(bindings, down=[])


# --- GPUs in their link groups ------------------------------------------------------------------------

# The four published topologies (tests/unit/.../scheduler/test_gpu_topology.py) and how their GPUs group.
LINK_GROUPS = {
    "nvswitch": {"nvlink": [{"gpus": list(range(8)), "nvlinks": 18}], "numa": []},
    "pcie_bridged": {"nvlink": [{"gpus": [0, 1], "nvlinks": 4}, {"gpus": [2, 3], "nvlinks": 4}, {"gpus": [4, 5], "nvlinks": 4},
                                {"gpus": [6, 7], "nvlinks": 4}],
                     "numa": [{"gpus": [0, 1, 2, 3], "numa_node": 0}, {"gpus": [4, 5, 6, 7], "numa_node": 1}]},
    "dual_socket": {"nvlink": [], "numa": [{"gpus": [0, 1, 2, 3], "numa_node": 0}, {"gpus": [4, 5, 6, 7], "numa_node": 1}]},
    "mixed": {"nvlink": [{"gpus": [0, 1, 2, 3], "nvlinks": 4}, {"gpus": [4, 5], "nvlinks": 2}],
              "numa": [{"gpus": [0, 1, 2, 3], "numa_node": 0}, {"gpus": [4, 5, 6, 7], "numa_node": 1}]},
}


def _topology_plan(kinds=tuple(LINK_GROUPS)):
    return plan({"nodes": {kind: server(kind, name=kind) for kind in kinds}, "services": {"train": whole(2, replicas=3)}})


def _card_of(page, node):
    start = page.index(">%s<" % node)
    return page[start:page.index("</section>", start)]


def _boxes(card):
    """The group boxes of a card in order, as (kind, label, the GPU indices inside), nested ones after their parent."""
    found = []
    for match in re.finditer(r'<div class="gpus (nvlink|numa)" title="[^"]*"><span class="grp">([^<]*)</span>', card):
        depth, position, end = 1, match.end(), match.end()
        while depth:
            opening, closing = card.find("<div", position), card.find("</div>", position)
            if opening != -1 and opening < closing:
                depth, position = depth + 1, opening + 4
            else:
                depth, position, end = depth - 1, closing + 6, closing
        inside = card[match.end():end]
        found.append((match.group(1), match.group(2), [int(index) for index in re.findall(r'class="what">GPU(\d+) ', inside)]))
    return found


def test_the_plan_says_how_the_gpus_of_the_four_published_topologies_group():
    result = _topology_plan()
    for kind, expected in LINK_GROUPS.items():
        assert result["usage"][kind]["gpu_groups"] == expected, kind
    # A node without links says nothing: its usage is as it was.
    assert "gpu_groups" not in plan(PROBLEM)["usage"]["gpu-a"]


def test_each_card_draws_its_gpus_in_their_nvlink_and_numa_boxes():
    page = render_html(_topology_plan())
    assert _boxes(_card_of(page, "nvswitch")) == [("nvlink", "NVLink \u00d718", list(range(8)))]
    assert _boxes(_card_of(page, "pcie_bridged")) == [
        ("numa", "NUMA node 0", [0, 1, 2, 3]), ("nvlink", "NVLink \u00d74", [0, 1]), ("nvlink", "NVLink \u00d74", [2, 3]),
        ("numa", "NUMA node 1", [4, 5, 6, 7]), ("nvlink", "NVLink \u00d74", [4, 5]), ("nvlink", "NVLink \u00d74", [6, 7])]
    assert _boxes(_card_of(page, "dual_socket")) == [("numa", "NUMA node 0", [0, 1, 2, 3]), ("numa", "NUMA node 1", [4, 5, 6, 7])]
    assert _boxes(_card_of(page, "mixed")) == [
        ("numa", "NUMA node 0", [0, 1, 2, 3]), ("nvlink", "NVLink \u00d74", [0, 1, 2, 3]),
        ("numa", "NUMA node 1", [4, 5, 6, 7]), ("nvlink", "NVLink \u00d72", [4, 5])]
    mixed = _card_of(page, "mixed")
    # Every GPU drawn once, in index order, its bar unchanged inside the boxes.
    assert re.findall(r'class="what">GPU(\d+) ', mixed) == [str(index) for index in range(8)]
    assert 'title="GPUs 4, 5: NVLinked all to all, 2 link(s) between each pair at least"' in mixed
    assert tags_of(page) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "section",
                             "span", "svg", "rect", "table", "tr", "th", "td"}


def test_a_result_without_gpu_groups_renders_byte_for_byte_as_before():
    # The page of PROBLEM (no gpu_links) as it was before GPU groups: change this only with the page's look on purpose.
    page = render_html(plan(PROBLEM), title="t")
    assert hashlib.sha256(page.encode("utf-8")).hexdigest() == "e6ba4cfb6f385d1ff1aefd30abbc4d23d02444ed688be6deac5d27e31fee246d"
    result = _topology_plan(("nvswitch",))
    del result["usage"]["nvswitch"]["gpu_groups"]
    page = render_html(result)
    assert ".gpus{" not in page and 'class="gpus' not in page


def test_groups_from_outside_are_escaped_and_checked():
    result = _topology_plan(("mixed",))
    result["usage"]["mixed"]["gpus"][0]["model"] = HOSTILE
    page = render_html(result)
    assert "<script" not in page and "script" not in tags_of(page)
    # A NUMA group without numa_node is labelled without a number; an NVLink group without lanes without a count.
    groups = result["usage"]["mixed"]["gpu_groups"]
    del groups["numa"][0]["numa_node"]
    groups["nvlink"][1]["nvlinks"] = 0
    boxes = _boxes(_card_of(render_html(result), "mixed"))
    assert ("numa", "NUMA node", [0, 1, 2, 3]) in boxes and ("nvlink", "NVLink", [4, 5]) in boxes


@pytest.mark.parametrize("change, expected", [
    (lambda groups: groups.update(nvlink={}), "usage.mixed.gpu_groups.nvlink: got dict; expected a list"),
    (lambda groups: groups["nvlink"][0].update(gpus=[0, 9]),
     "usage.mixed.gpu_groups.nvlink[0].gpus[1]: got 9; expected the index of a GPU of the node's gpus, in one group at most"),
    (lambda groups: groups["nvlink"][1].update(gpus=[3, 4]), "usage.mixed.gpu_groups.nvlink[1].gpus[0]: got 3"),
    (lambda groups: groups["nvlink"][0].update(gpus=[0]), "usage.mixed.gpu_groups.nvlink[0].gpus: got 1 GPUs; expected 2 to 64"),
    (lambda groups: groups["nvlink"][0].update(gpus=["0", 1]),
     "usage.mixed.gpu_groups.nvlink[0].gpus[0]: got &#x27;0&#x27;; expected a whole number"),
    (lambda groups: groups["nvlink"][1].update(nvlinks=-2), "usage.mixed.gpu_groups.nvlink[1].nvlinks: got -2"),
    (lambda groups: groups["numa"][1].update(numa_node="1"), "usage.mixed.gpu_groups.numa[1].numa_node: got &#x27;1&#x27;"),
    (lambda groups: groups.update(nvlink=[{"gpus": [3, 4]}]),
     "usage.mixed.gpu_groups.nvlink[0].gpus: expected the GPUs of one NUMA group"),
    (lambda groups: groups.update(numa=[{"gpus": [0]}] * 65), "usage.mixed.gpu_groups.numa: got 65 groups; expected at most 64"),
    (lambda groups: groups.clear() or groups.update(x=1) or None, None),
])
def test_bad_gpu_groups_are_named_by_path(change, expected):
    result = _topology_plan(("mixed",))
    change(result["usage"]["mixed"]["gpu_groups"])
    if expected is None:
        assert render_html(result).endswith("</html>\n")     # keys it does not know are left alone
        return
    with pytest.raises(PictureError) as raised:
        render_html(result)
    assert expected in str(raised.value)


def test_any_broken_group_gives_a_picture_error_or_a_page_never_a_traceback():
    import random
    base = _topology_plan(("mixed", "pcie_bridged"))
    paths = [("usage",) + path for path in _leaves(base["usage"]) if path and "gpu_groups" in path]
    _render_broken(base, paths, random.Random(39), 1000)


def test_the_services_of_a_page_get_colours_kept_apart():
    # Hashed hues put postgres and api-gateway, reranker and nightly-batch within a few degrees of each other.
    services = ["api-gateway", "embed", "llm", "nightly-batch", "postgres", "reranker"]
    palette = Palette(services)
    hues = sorted(int(palette(name)[4:].split(",")[0]) for name in services)
    assert min(b - a for a, b in zip(hues, hues[1:] + [hues[0] + 360])) >= 60
    assert palette("postgres") != palette("api-gateway") and palette("unknown") == service_colour("unknown")
    many = Palette(["s%02d" % i for i in range(40)])
    assert len(set(many.colours.values())) == 40


def test_gpu_cores_and_cpu_pinning_are_drawn():
    result = plan({"nodes": {"a": {"cpu": 64, "memory": "256Gi", "gpu_sharing": "mps", "numa_cpus": {"0": "0-31"},
                                   "gpus": [{"index": 0, "uuid": "GPU-0", "model": "NVIDIA A100-SXM4-80GB",
                                             "memory": "80Gi", "numa_node": 0}]}},
                   "services": {"share": {"resources": {"cpu": 1, "gpu": {"memory": "40Gi", "cores": 30}},
                                          "cpu_pinning": "numa"}}})
    page = render_html(result)
    assert ">share-0 30%</span>" in page
    assert "40Gi on GPU 0, 30% of its cores" in page
    assert '<span class="pin">CPUs 0-31</span>' in page and "pinned to CPUs 0-31" in page


def test_new_and_moved_instances_are_marked():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "8Gi"}, "b": {"cpu": 1, "memory": "8Gi"}},
               "services": {"web": {"replicas": 2, "resources": {"cpu": 1}}, "db": {"resources": {"cpu": 1}}},
               "previous": {"web-0": {"node": "gone"}}}
    result = plan(problem)
    page = render_html(result, added=["web-1", "db-0"])
    assert 'class="chip new"' in page and 'title="web-1 (web), new in this plan"' in page
    assert result["moves"] == [{"instance": "web-0", "from": "gone", "to": result["placements"]["web-0"]["node"]}]
    assert 'class="chip moved"' in page and "web-0 (web), moved from gone" in page
    assert 'class="chip new"' not in render_html(result)


def test_an_infeasible_plan_draws_its_nodes_empty_beside_the_unplaced_instances():
    result = plan({"nodes": {"a": {"cpu": 2, "memory": "8Gi"}, "b": {"cpu": 1, "memory": "8Gi"}},
                   "services": {"db": {"resources": {"cpu": 4}}, "web": {"resources": {"cpu": 1}}}}, exact_seconds=0)
    assert not result["feasible"] and result["placements"] == {}
    assert result["usage"]["a"] == {"cpu_millicores": {"used": 0, "total": 2000}, "memory": {"used": 0, "total": 8 * GiB},
                                    "gpus": [], "nvme": [], "instances": []}
    page = render_html(result)
    unplaced, nodes = page.split("Nodes (nothing is placed)")
    assert "Unplaced instances (1)" in unplaced and "<td>db-0</td>" in unplaced
    assert ">a</h2>" in nodes and ">b</h2>" in nodes and "CPU 0/2" in nodes and "chip" not in nodes.split("</style>")[-1]
