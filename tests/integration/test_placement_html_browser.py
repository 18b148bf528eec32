# -*- coding: utf-8 -*-
"""The placement picture (plugins/module_utils/planning/placement_html.py) in a real browser: headless Chromium
(Debian's ``chromium``; scripts/test.sh installs it when missing) loads the page of the bundled example
and of a 50-node plan, renders each to PNG, and dumps the DOM. The page must load without a single
console message (it has no script, so any message is an error: a blocked fetch, a CSP violation), and
the node and instance names must be in the DOM. The PNGs are kept in .build/pictures/ to look at.

Without chromium these tests skip, unless GANGPLANK_BROWSER_TESTS=required (scripts/test.sh sets it)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import BAR_WIDTH, render_html, status_result
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_gpu_topology import TOPOLOGIES, server, whole

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PICTURES = os.path.join(ROOT, ".build", "pictures")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from generate import generate  # noqa: E402  (benchmarks/ is not a package)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?:?\d*\] (.*)")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("GANGPLANK_BROWSER_TESTS") != "required",
    reason="chromium is not installed (apt-get install chromium; scripts/test.sh installs it)")


def browse(tmp_path, page, *arguments):
    """Run headless Chromium on ``page`` (a file); (stdout, the console messages)."""
    assert CHROMIUM is not None, "chromium is required (GANGPLANK_BROWSER_TESTS=required) but not installed"
    completed = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         "--user-data-dir=%s" % (tmp_path / "profile"), "--enable-logging=stderr", "--v=0", *arguments,
         "file://%s" % page],
        capture_output=True, text=True, timeout=120, check=False, cwd=str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout, CONSOLE.findall(completed.stderr)


def png_size(path):
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path
    return struct.unpack(">II", head[16:24])


def picture(tmp_path, name, result, window):
    page = tmp_path / (name + ".html")
    page.write_text(render_html(result, title=name), encoding="utf-8")
    dom, console = browse(tmp_path, page, "--dump-dom")
    assert console == [], console
    png = tmp_path / (name + ".png")
    _stdout, console = browse(tmp_path, page, "--screenshot=%s" % png, "--window-size=%s" % window)
    assert console == [], console
    width, height = png_size(png)
    assert (width, height) == tuple(int(part) for part in window.split(","))
    assert png.stat().st_size > 20000, "the screenshot is nearly blank"
    os.makedirs(PICTURES, exist_ok=True)
    shutil.copy(png, os.path.join(PICTURES, name + ".png"))
    return dom


def test_the_example_cluster_renders(tmp_path):
    with open(os.path.join(ROOT, "examples", "cluster.yml"), encoding="utf-8") as handle:
        result = plan(yaml.safe_load(handle))
    dom = picture(tmp_path, "example-cluster", result, "1400,1000")
    for name in list(result["usage"]) + list(result["placements"]):
        assert ">%s<" % name in dom, name
    assert "GPU0 H100 80GB HBM3" in dom and "nvme0n1" in dom
    assert dom.count("<svg") >= 3 * 2       # at least CPU and memory bars per node


def test_a_50_node_plan_renders(tmp_path):
    result = plan(generate(50, 1000, 1))
    assert result["feasible"]
    dom = picture(tmp_path, "plan-50-nodes", result, "1600,3000")
    missing = [name for name in list(result["usage"]) + list(result["placements"]) if ">%s<" % name not in dom]
    assert missing == []
    gpus = sum(len(usage["gpus"]) for usage in result["usage"].values())
    assert dom.count("GPU0 ") + dom.count("GPU7 ") >= gpus // 4


def test_gpus_are_drawn_in_their_link_groups(tmp_path):
    """The four published topologies (NVSwitch, PCIe with NVLink bridges in pairs, dual-socket PCIe, mixed): each
    node's GPUs inside their NVLink boxes, those inside their NUMA boxes, every GPU once."""
    result = plan({"nodes": {kind: server(kind, name=kind) for kind in TOPOLOGIES}, "services": {"train": whole(2, replicas=3)}})
    dom = picture(tmp_path, "gpu-link-groups", result, "1400,1000")
    assert dom.count('class="gpus nvlink"') == 1 + 4 + 0 + 2 and dom.count('class="gpus numa"') == 0 + 2 + 2 + 2
    assert dom.count('<span class="grp">NVLink \u00d718</span>') == 1 and dom.count(">NUMA node 1<") == 3
    assert len(re.findall(r'class="what">GPU\d ', dom)) == 4 * 8


def test_an_infeasible_plan_with_hostile_names_shows_the_reasons_and_runs_nothing(tmp_path):
    hostile = '<script>console.error("x")</script><img src=http://127.0.0.1:9/a>'
    problem = {"nodes": {hostile: {"cpu": 1, "memory": "1Gi", "labels": {"zone": hostile}}},
               "services": {"db": {"resources": {"cpu": 2}}, "web": {"resources": {"cpu": "100m"}}}}
    result = plan(problem, exact_seconds=0)
    assert not result["feasible"]
    dom = picture(tmp_path, "infeasible", result, "1000,600")
    assert "0/1 nodes are available: 1 Insufficient cpu (asked 2 CPUs; the most free on a node is 1 CPU)." in dom
    assert ">db-0<" in dom
    # Its node is drawn too, empty, beside the unplaced instances.
    assert "Nodes (nothing is placed)" in dom and dom.count('<section class="card') == 1 and "CPU 0/1" in dom
    assert "<script" not in dom and "<img" not in dom
    feasible = plan({"nodes": problem["nodes"], "services": {"web": problem["services"]["web"]}})
    dom = picture(tmp_path, "hostile", feasible, "1000,600")
    assert "&lt;script&gt;" in dom and "<script" not in dom and "<img" not in dom


def test_the_status_page_draws_gpus_to_scale_and_marks_each_instances_health(tmp_path):
    """playbooks/status.yml's picture: the bound instances, a GPU with 20Gi of 80Gi taken drawn as a quarter bar,
    a free GPU as free, and each instance marked healthy, failing or unknown."""
    gib = 1024 ** 3
    bindings = {"gpu-a": {"infer-0": {"service": "infer", "ordinal": 0, "rank": 1,
                                      "gpus": [{"index": 0, "uuid": "GPU-a0", "model": "NVIDIA A100-SXM4-80GB", "memory": 20 * gib}]},
                          "web-0": {"service": "web", "ordinal": 0, "rank": 0}},
                "cpu-b": {"web-1": {"service": "web", "ordinal": 1, "rank": 0}}}
    gpus = {"gpu-a": [{"index": 0, "uuid": "GPU-a0", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * gib},
                      {"index": 1, "uuid": "GPU-a1", "model": "NVIDIA A100-SXM4-80GB", "memory_total": 80 * gib}]}
    health = {"infer-0": "healthy", "web-0": "unhealthy: connection refused", "web-1": "not probed"}
    page = tmp_path / "status.html"
    page.write_text(render_html(status_result(bindings, gpus=gpus), title="status", health=health), encoding="utf-8")
    dom, console = browse(tmp_path, page, "--dump-dom")
    assert console == [], console
    assert "GPU0 A100-SXM4-80GB 20Gi/80Gi" in dom and "GPU1 A100-SXM4-80GB free: 80Gi" in dom
    quarter = re.search(r'<rect x="0\.00" y="0" width="([0-9.]+)" height="\d+" fill="[^"]+" class="seg"><title>infer-0', dom)
    assert quarter and float(quarter.group(1)) == BAR_WIDTH / 4
    assert re.search(r'class="chip ok"[^>]*><b class="mark">\u2714</b>infer-0<', dom)
    assert re.search(r'class="chip bad"[^>]*><b class="mark">\u2718</b>web-0<', dom)
    assert re.search(r'class="chip unknown"[^>]*><b class="mark">\?</b>web-1<', dom)
    picture(tmp_path, "status", status_result(bindings, gpus=gpus), "1000,600")


def test_console_messages_are_caught(tmp_path):
    """The check above can fail: a page that logs, or that tries to load anything, is caught."""
    page = tmp_path / "noisy.html"
    page.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
                    '</head><body><img src="http://127.0.0.1:9/a.png"></body></html>', encoding="utf-8")
    _dom, console = browse(tmp_path, page, "--dump-dom")
    assert any("Content Security Policy" in message for message in console), console


def test_the_tutorial_plan_names_its_instances_on_the_cards(tmp_path):
    """docs/catalog-to-plan.md's plan at the demo's size: each GPU share's instance is named under its segment (no
    hover needed), the services' colours are those of the page's palette, and the pinned model server shows its CPUs."""
    example = os.path.join(ROOT, "docs", "examples", "catalog-to-plan")
    with open(os.path.join(example, "nodes.yml"), encoding="utf-8") as handle:
        nodes = yaml.safe_load(handle)["nodes"]
    with open(os.path.join(example, "inventory", "group_vars", "all", "catalog.yml"), encoding="utf-8") as handle:
        catalog = yaml.safe_load(handle)["gangplank_services"]
    services = {name: {key: value for key, value in entry.items() if key not in ("image", "secrets")}
                for name, entry in catalog.items()}
    result = plan({"nodes": nodes, "services": services})
    assert result["feasible"]
    dom = picture(tmp_path, "catalog-to-plan", result, "1400,1100")
    named = re.findall(r'<div class="names">(.*?)</div>', dom)
    shown = {name for row in named for name in re.findall(r">([a-z-]+-\d+(?: \d+%)?)</span>", row)}
    assert {"embed-0", "embed-1", "embed-2", "embed-3", "llm-0"} <= shown, shown
    assert '<span class="pin">CPUs ' in dom
    assert "free: 80Gi" in dom and "0/80Gi whole" not in dom
