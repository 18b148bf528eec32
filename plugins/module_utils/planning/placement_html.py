# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan result as one self-contained HTML page: the cluster's GPU memory map as a picture.

``render_html(result)`` takes a result of the scheduler (docs/problem-format.md, "Result"), feasible
or not, and returns one HTML document with inline CSS and inline SVG only: no script, no network
(a Content-Security-Policy forbids every fetch), so it opens the same on an air-gapped controller.

Per node a card: CPU and memory bars, each GPU as a bar split by the instances sharing its memory
(one colour per service; the instance, its service and its share on hover), on a node whose usage says how its GPUs
group by their links (``gpu_groups``, scheduler/topology.py link_groups) the GPUs of each NVLinked group in a box
("NVLink x4") and those of each NUMA node in a dashed box around them, NVMe devices split the
same way, the labels the scheduler plants, and the node's instances. Moved instances are marked
(and listed with where they came from), preempted ones listed, and an infeasible plan shows every
unplaced instance with its reason. Cards sit in a grid, so 50 nodes of 8 GPUs stay readable.

Every name in a result is hostile input (node, service and instance names, GPU models, labels,
reasons): each one is escaped with ``html.escape`` for text and attributes alike, and never used
as an id, a class or a style. Plain Python, no Ansible import.
"""

from __future__ import annotations

import hashlib
import html
import reprlib

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import SERVICE_LABEL_PREFIX
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_cpu, format_size

# Bounds of a picture: what the scheduler can return is already bounded (docs/problem-format.md); these
# keep a hand-made result from making a page no browser opens.
MAX_NODES = 10000
MAX_INSTANCES = 100000
MAX_TEXT = 200                  # characters of any one name shown; longer ones are cut with an ellipsis

MAX_GPU_GROUPS = 64             # entries of usage.<node>.gpu_groups.nvlink or .numa (one per GPU at most)
MAX_GROUP_GPUS = 64             # GPUs of one of them

BAR_WIDTH = 260                 # pixels of a bar inside a card
BAR_HEIGHT = 14


class PictureError(ValueError):
    """The result is not a plan result: ``path`` names the part, the message what was expected."""

    def __init__(self, path, message):
        super().__init__("%s: %s" % (path, message))
        self.path = path


def _str(value):
    """str() of a value from the input, in bounded time and size: text and numbers as str() gives them; anything
    else (a nested value, a billion-laughs document a YAML file can hold) as reprlib renders it, which is repr() for a
    small one and cut short for a large or deep one."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        try:
            return str(value)
        except ValueError:      # an integer too long for str()
            return reprlib.repr(value)
    return reprlib.repr(value)


def _text(value):
    """Escaped text for HTML content and quoted attributes, cut to MAX_TEXT characters."""
    value = _str(value)
    if len(value) > MAX_TEXT:
        value = value[:MAX_TEXT - 1] + "\u2026"
    return html.escape(value, quote=True)


def service_colour(service):
    """A stable colour per service name (an HSL hue from its hash): the same service, the same colour."""
    digest = hashlib.sha256(_str(service).encode("utf-8", "replace")).digest()
    hue = int.from_bytes(digest[:2], "big") % 360
    lightness = 42 + digest[2] % 3 * 8
    return "hsl(%d,62%%,%d%%)" % (hue, lightness)


class Palette:
    """The colours of one page: its services (sorted by name) get hues spread evenly round the wheel, neighbours also
    apart in lightness, so no two services of a plan look alike (hashed hues put two of six services 4 degrees apart);
    a service the page did not list gets its hashed colour (service_colour)."""

    def __init__(self, services=()):
        names = sorted({_str(service) for service in services})
        self.colours = {}
        count = len(names)
        for position, name in enumerate(names):
            if count <= 12:
                hue = position * 360.0 / max(count, 1)
            else:
                hue = position * 137.508        # the golden angle: any run of neighbours stays apart
            lightness = (38, 52, 30)[position % 3] if count > 6 else (40, 48)[position % 2]
            self.colours[name] = "hsl(%d,65%%,%d%%)" % (int(hue) % 360, lightness)

    def __call__(self, service):
        return self.colours.get(_str(service)) or service_colour(service)


_HASHED = Palette()


def _mapping(value, path):
    if not isinstance(value, dict):
        raise PictureError(path, "got %s; expected a mapping" % type(value).__name__)
    return value


def _field(result, key, default):
    """``result[key]``, or ``default`` when it is absent or null (an infeasible result has no usage)."""
    value = result.get(key)
    return default if value is None else value


def _list(value, path):
    if not isinstance(value, list):
        raise PictureError(path, "got %s; expected a list" % type(value).__name__)
    return value


# Above any amount the planner accepts (sizes up to 1 PiB = 2^50, CPU up to 10^9 millicores), and far below what
# float division (a bar's width, a size's text) overflows at.
MAX_AMOUNT = 2 ** 60


def _amount(value, path):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AMOUNT:
        # reprlib: as repr for a plain value, but bounded in depth and size for a nested or huge one.
        raise PictureError(path, "got %s; expected a whole number from 0 to 2^60" % _text(reprlib.repr(value)[:40]))
    return value


NAME_PIXELS = 5.6               # width of a character of a name under a bar (10px system-ui), to judge what fits
NAMES_WIDTH = 280               # pixels of the narrowest bar (a card is at least 300 wide, padding 10 each side)


def _names(segments, total):
    """The names under a bar's segments ([(amount, colour, hover text, name)]), each in a box as wide as its segment:
    the name where it fits, nothing where it does not (its hover text says it)."""
    if total <= 0 or not any(len(segment) > 3 and segment[3] for segment in segments):
        return ""
    spans = []
    left = 100.0
    for segment in segments:
        amount, title = segment[0], segment[2]
        name = segment[3] if len(segment) > 3 else ""
        if amount <= 0 or left <= 0:
            continue
        share = min(left, 100.0 * amount / total)
        left -= share
        fits = name and len(_str(name)) * NAME_PIXELS <= NAMES_WIDTH * share / 100.0
        spans.append('<span style="width:%.2f%%" title="%s">%s</span>' % (share, _text(title), _text(name) if fits else ""))
    return '<div class="names">%s</div>' % "".join(spans)


def _bar(segments, total, label, empty_title):
    """An SVG bar of ``total`` split into ``segments`` ([(amount, colour, hover text[, name])]), with a label over it
    and, for segments that name an instance, the names under it where they fit."""
    parts = ['<svg class="bar" width="100%%" height="%d" viewBox="0 0 %d %d" preserveAspectRatio="none" role="img">' % (
        BAR_HEIGHT, BAR_WIDTH, BAR_HEIGHT)]
    parts.append('<rect x="0" y="0" width="%d" height="%d" class="free"><title>%s</title></rect>' % (
        BAR_WIDTH, BAR_HEIGHT, _text(empty_title)))
    offset = 0.0
    for segment in segments:
        amount, colour, title = segment[:3]
        if total <= 0 or amount <= 0:
            continue
        width = min(BAR_WIDTH - offset, BAR_WIDTH * amount / total)
        if width <= 0:
            break
        parts.append('<rect x="%.2f" y="0" width="%.2f" height="%d" fill="%s" class="seg"><title>%s</title></rect>' % (
            offset, max(width, 1.0), BAR_HEIGHT, colour, _text(title)))
        offset += width
    parts.append("</svg>")
    return '<div class="row"><span class="what">%s</span>%s%s</div>' % (_text(label), "".join(parts), _names(segments, total))


def _used_bar(name, used, total, formatter, colour="#5b7fa6"):
    label = "%s %s/%s" % (name, formatter(used), formatter(total))
    return _bar([(used, colour, "%s used: %s of %s" % (name, formatter(used), formatter(total)))], total, label,
                "%s free: %s" % (name, formatter(max(total - used, 0))))


def _gpu_rows(node, usage, on_gpu, palette=_HASHED):
    rows = []
    for position, gpu in enumerate(_list(usage.get("gpus", []), "usage.%s.gpus" % node)):
        path = "usage.%s.gpus[%d]" % (node, position)
        _mapping(gpu, path)
        used = _amount(gpu.get("used", 0), path + ".used")
        # A status picture knows what the instances take, not the device's size: the bar is what they take.
        known = gpu.get("total") is not None
        total = _amount(gpu.get("total"), path + ".total") if known else used
        takers = on_gpu.get(_str(gpu.get("uuid")), [])
        segments = [(memory, palette(service), "%s (%s): %s on GPU %s%s" % (
            instance, service, format_size(memory), _str(gpu.get("index")),
            ", %s%% of its cores" % _str(cores) if cores is not None else ""),
            instance if cores is None else "%s %s%%" % (instance, _str(cores)))
            for instance, service, memory, cores in takers]
        if known and not used:
            label = "GPU%s %s free: %s" % (_str(gpu.get("index")), _short_model(gpu.get("model", "")), format_size(total))
        elif known:
            label = "GPU%s %s %s/%s" % (_str(gpu.get("index")), _short_model(gpu.get("model", "")), format_size(used),
                                        format_size(total))
        else:
            label = "GPU%s %s %s taken" % (_str(gpu.get("index")), _short_model(gpu.get("model", "")), format_size(used))
        rows.append(_bar(segments, total, label, "GPU %s (%s) free: %s" % (
            _str(gpu.get("index")), _str(gpu.get("uuid")), format_size(max(total - used, 0)))))
    return rows


def _group_list(groups, key, path, positions, least):
    """usage.<node>.gpu_groups.<key>: [(the GPUs' positions in usage.gpus, the entry)], each GPU in one entry at most."""
    entries = groups.get(key)
    entries = [] if entries is None else _list(entries, path)
    if len(entries) > MAX_GPU_GROUPS:
        raise PictureError(path, "got %d groups; expected at most %d" % (len(entries), MAX_GPU_GROUPS))
    found, taken = [], set()
    for number, entry in enumerate(entries):
        where = "%s[%d]" % (path, number)
        _mapping(entry, where)
        members = _list(entry.get("gpus"), where + ".gpus")
        if not least <= len(members) <= MAX_GROUP_GPUS:
            raise PictureError(where + ".gpus", "got %d GPUs; expected %d to %d" % (len(members), least, MAX_GROUP_GPUS))
        chosen = []
        for item, index in enumerate(members):
            position = positions.get(_amount(index, "%s.gpus[%d]" % (where, item)))
            if position is None or position in taken:
                raise PictureError("%s.gpus[%d]" % (where, item), "got %d; expected the index of a GPU of the node's gpus, "
                                   "in one group at most" % index)
            taken.add(position)
            chosen.append(position)
        found.append((sorted(chosen), entry))
    return found


def _gpu_groups(node, usage):
    """The node's GPU groups by link (usage.<node>.gpu_groups, as the scheduler's link_groups gives them):
    ([(positions, NVLink lanes)], [(positions, NUMA node or None)]) with every NVLink group inside one NUMA group
    (when there are any), or None when the usage does not say."""
    path = "usage.%s.gpu_groups" % node
    groups = usage.get("gpu_groups")
    if groups is None:
        return None
    _mapping(groups, path)
    positions = {}
    for position, gpu in enumerate(usage.get("gpus") or []):
        index = gpu.get("index") if isinstance(gpu, dict) else None
        if isinstance(index, int) and not isinstance(index, bool):
            positions.setdefault(index, position)
    nvlink = [(members, _amount(entry.get("nvlinks", 0), "%s.nvlink[%d].nvlinks" % (path, number)))
              for number, (members, entry) in enumerate(_group_list(groups, "nvlink", path + ".nvlink", positions, 2))]
    numa = []
    for number, (members, entry) in enumerate(_group_list(groups, "numa", path + ".numa", positions, 1)):
        numa_node = entry.get("numa_node")
        numa.append((members, None if numa_node is None else _amount(numa_node, "%s.numa[%d].numa_node" % (path, number))))
    if numa:
        home = {position: number for number, (members, _numa_node) in enumerate(numa) for position in members}
        for number, (members, _lanes) in enumerate(nvlink):
            if len({home.get(position) for position in members}) != 1 or home.get(members[0]) is None:
                raise PictureError("%s.nvlink[%d].gpus" % (path, number), "expected the GPUs of one NUMA group")
    return nvlink, numa


def _gpu_indices(usage, members):
    return ", ".join(_str((usage.get("gpus") or [])[position].get("index")) for position in members)


def _nvlink_box(usage, rows, members, lanes):
    label = "NVLink \u00d7%d" % lanes if lanes else "NVLink"
    lanes_text = ", %d link(s) between each pair at least" % lanes if lanes else ""
    title = "GPUs %s: NVLinked all to all%s" % (_gpu_indices(usage, members), lanes_text)
    return '<div class="gpus nvlink" title="%s"><span class="grp">%s</span>%s</div>' % (
        _text(title), _text(label), "".join(rows[position] for position in members))


def _grouped_gpu_rows(node, usage, on_gpu, palette=_HASHED):
    """The GPU rows of a card, in boxes by link where the usage says how the GPUs group; as _gpu_rows otherwise."""
    rows = _gpu_rows(node, usage, on_gpu, palette)
    groups = _gpu_groups(node, usage)
    if groups is None:
        return rows
    nvlink, numa = groups
    nvlink_of = {members[0]: (members, lanes) for members, lanes in nvlink}
    inside_nvlink = {position for members, _lanes in nvlink for position in members}

    def boxed(members):
        parts = []
        for position in members:
            if position in nvlink_of:
                parts.append(_nvlink_box(usage, rows, *nvlink_of[position]))
            elif position not in inside_nvlink:
                parts.append(rows[position])
        return parts

    numa_of = {members[0]: (members, numa_node) for members, numa_node in numa}
    inside_numa = {position for members, _numa_node in numa for position in members}
    parts = []
    for position in range(len(rows)):
        if position in numa_of:
            members, numa_node = numa_of[position]
            label = "NUMA node %d" % numa_node if numa_node is not None else "NUMA node"
            title = "GPUs %s share a NUMA node; to the other NUMA nodes' GPUs they go across the CPUs' interconnect" % (
                _gpu_indices(usage, members))
            parts.append('<div class="gpus numa" title="%s"><span class="grp">%s</span>%s</div>' % (
                _text(title), _text(label), "".join(boxed(members))))
        elif position not in inside_numa:
            parts.extend(boxed([position]))
    return parts


def _short_model(model):
    """The model without the vendor prefix, e.g. 'A100-SXM4-80GB' for 'NVIDIA A100-SXM4-80GB'."""
    model = _str(model)
    return model[len("NVIDIA "):] if model.startswith("NVIDIA ") else model


def _nvme_rows(node, usage, on_nvme, palette=_HASHED):
    rows = []
    for position, device in enumerate(_list(usage.get("nvme", []), "usage.%s.nvme" % node)):
        path = "usage.%s.nvme[%d]" % (node, position)
        _mapping(device, path)
        size = _amount(device.get("size", 0), path + ".size")
        used = _amount(device.get("used", 0), path + ".used")
        takers = on_nvme.get(_str(device.get("name")), [])
        segments = [(taken, palette(service), "%s (%s): %s on %s" % (instance, service, format_size(taken), _str(device.get("name"))),
                     instance) for instance, service, taken in takers]
        rows.append(_bar(segments, size, "%s %s/%s" % (_str(device.get("name")), format_size(used), format_size(size)),
                         "%s free: %s" % (_str(device.get("name")), format_size(max(size - used, 0)))))
    return rows


def _chip(instance, service, moved_from=None, health=None, palette=_HASHED, cpuset=None, new=False):
    classes = "chip moved" if moved_from else "chip new" if new else "chip"
    title = "%s (%s)" % (_str(instance), _str(service))
    mark = ""
    if new and not moved_from:
        title += ", new in this plan"
        mark = "+ "
    pinned = ""
    if cpuset:
        # cpu_pinning numa: the CPUs (and memory node) its containers are pinned to.
        title += ", pinned to CPUs %s" % _str(cpuset)
        pinned = ' <span class="pin">CPUs %s</span>' % _text(cpuset)
    if moved_from:
        title += ", moved from %s" % _str(moved_from)
        mark = "\u21aa "
    if health:
        verdict = health_verdict(health)
        title += ", %s" % _str(health)
        classes += " " + verdict
        # In an element of its own: the instance's name stays a text node of its own.
        mark += '<b class="mark">%s</b>' % HEALTH_MARKS[verdict]
    return '<span class="%s" style="border-left-color:%s" title="%s">%s%s%s</span>' % (
        classes, palette(service), _text(title), mark, _text(instance), pinned)


# The live health of an instance at a glance: a mark on its chip (and its colour), the full state on hover.
HEALTH_MARKS = {"ok": "\u2714", "bad": "\u2718", "unknown": "?"}


def health_verdict(health):
    """ok (healthy, or running without a probe), unknown (not probed), or bad (failing, stopped, missing)."""
    health = _str(health)
    if health in ("healthy", "running", "no probe"):
        return "ok"
    if health in ("not probed", "unknown", "", "waiting: host down"):
        return "unknown"
    return "bad"


def _card(node, usage, placements, moved, labels, health, palette=_HASHED, added=frozenset()):
    path = "usage." + node
    _mapping(usage, path)
    cpu = _mapping(usage.get("cpu_millicores", {}), path + ".cpu_millicores")
    memory = _mapping(usage.get("memory", {}), path + ".memory")
    on_gpu, on_nvme = {}, {}
    instances = _list(usage.get("instances", []), path + ".instances")
    for position, name in enumerate(instances):
        if not isinstance(name, str):
            raise PictureError("%s.instances[%d]" % (path, position), "got %s; expected an instance name" % type(name).__name__)
        placement = placements.get(name) or {}
        service = _str(placement.get("service", ""))
        for claim in _list(placement.get("gpus") or [], "placements.%s.gpus" % name):
            if isinstance(claim, dict):
                taken = _amount(claim.get("memory", 0), "placements.%s.gpus.memory" % name)
                cores = claim.get("cores")
                cores = _amount(cores, "placements.%s.gpus.cores" % name) if cores is not None else None
                on_gpu.setdefault(_str(claim.get("uuid")), []).append((name, service, taken, cores))
        nvme = placement.get("nvme")
        if isinstance(nvme, dict):
            taken = _amount(nvme.get("size", 0), "placements.%s.nvme.size" % name)
            on_nvme.setdefault(_str(nvme.get("name")), []).append((name, service, taken))
    empty = "" if instances else " empty"
    if usage.get("down"):
        # A host that is down (status): its recorded instances wait for it.
        parts = ['<section class="card down">', '<h2 class="node">%s <span class="down-mark">DOWN</span></h2>' % _text(node),
                 '<p class="sub">down: %d instance(s) wait for it</p>' % len(instances)]
    else:
        parts = ['<section class="card%s">' % empty,
                 '<h2 class="node">%s</h2>' % _text(node),
                 '<p class="sub">%d instance(s)%s</p>' % (len(instances), ", free" if not instances else "")]
    if "cpu_millicores" in usage:       # a status picture (status_result) has no CPU and memory figures
        parts.append(_used_bar("CPU", _amount(cpu.get("used", 0), path + ".cpu_millicores.used"),
                               _amount(cpu.get("total", 0), path + ".cpu_millicores.total"), format_cpu))
        parts.append(_used_bar("MEM", _amount(memory.get("used", 0), path + ".memory.used"),
                               _amount(memory.get("total", 0), path + ".memory.total"), format_size))
    parts.extend(_grouped_gpu_rows(node, usage, on_gpu, palette))
    parts.extend(_nvme_rows(node, usage, on_nvme, palette))
    planted = sorted((_str(key), _str(value)) for key, value in _mapping(labels or {}, "result.node_labels." + node).items())
    if planted:
        # The scheduler's own labels are all gangplank.io/service.<name>: "true"; shown by name to save room.
        shown = [key[len(SERVICE_LABEL_PREFIX):] if key.startswith(SERVICE_LABEL_PREFIX) and value == "true"
                 else "%s=%s" % (key, value) for key, value in planted]
        parts.append('<p class="labels" title="labels planted on the node">%s* %s</p>' % (_text(SERVICE_LABEL_PREFIX), " ".join(
            '<span class="label">%s</span>' % _text(text) for text in shown)))
    if instances:
        parts.append('<p class="chips">%s</p>' % " ".join(
            _chip(name, (placements.get(name) or {}).get("service", ""), moved.get(name), (health or {}).get(name), palette,
                  (placements.get(name) or {}).get("cpuset_cpus"), name in added)
            for name in instances))
    parts.append("</section>")
    return "".join(parts)


def _legend(placements, palette=_HASHED):
    services = sorted({_str(placement.get("service", "")) for placement in placements.values() if isinstance(placement, dict)})
    return '<p class="legend">%s</p>' % " ".join(
        '<span class="key"><svg width="12" height="12"><rect width="12" height="12" fill="%s"/></svg> %s</span>' % (
            palette(service), _text(service)) for service in services)


def _summary(result, placements, usage):
    if not result.get("feasible"):
        return "INFEASIBLE: %s; nothing is placed" % result.get("summary", "")
    if result.get("path") == "status":
        down = sorted(node for node, entry in usage.items() if isinstance(entry, dict) and entry.get("down"))
        return "%d instance(s) on %d node(s), as bound on the nodes, with their live health%s" % (
            len(placements), len(usage), "; down: %s" % ", ".join(down) if down else "")
    used = sum(1 for entry in usage.values() if isinstance(entry, dict) and entry.get("instances"))
    whole = sum(1 for entry in usage.values() if isinstance(entry, dict)
                for gpu in entry.get("gpus") or [] if isinstance(gpu, dict) and not gpu.get("used"))
    gpus = sum(len(entry.get("gpus") or []) for entry in usage.values() if isinstance(entry, dict))
    return "feasible (%s): %d instance(s) on %d of %d node(s); %d of %d GPU(s) whole and free; %d move(s)" % (
        result.get("path", "greedy"), len(placements), used, len(usage), whole, gpus, len(result.get("moves") or []))


_STYLE = """
body{font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:16px;color:#1d2430;background:#f4f6f9}
h1{font-size:18px;margin:0 0 4px}
.summary{margin:0 0 8px;font-weight:600}
.bad-plan{color:#a0181c}
.legend .key{display:inline-block;margin:0 12px 4px 0;white-space:nowrap}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:10px}
.card{background:#fff;border:1px solid #cdd5e0;border-radius:6px;padding:8px 10px;overflow:hidden}
.card.empty{background:#eef7ee}
.card.down{background:#f4f4f4;border:2px dashed #a0181c}
.down-mark{color:#fff;background:#a0181c;border-radius:3px;padding:0 4px;font-size:11px;vertical-align:middle}
.node{font-size:14px;margin:0;overflow-wrap:anywhere}
.sub{margin:0 0 4px;color:#5a6472;font-size:11px}
.row{display:flex;flex-direction:column;margin:2px 0}
.what{font-size:11px;color:#39424e;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
svg.bar{display:block;width:100%}
svg.bar rect.free{fill:#e4e8ee}
svg.bar rect.seg{stroke:#fff;stroke-width:1}
.labels{margin:4px 0 0;font-size:10px;color:#5a6472;overflow-wrap:anywhere}
.label{background:#eef1f5;border-radius:3px;padding:0 3px;margin-right:3px;display:inline-block}
.chips{margin:4px 0 0;line-height:1.9}
.chip{border:1px solid #cdd5e0;border-left:5px solid #888;border-radius:3px;padding:0 4px;font-size:11px;
 white-space:nowrap;display:inline-block;max-width:100%;overflow:hidden;text-overflow:ellipsis;vertical-align:middle}
.chip.moved{border-style:dashed;border-left-style:solid;background:#fff7e0}
.chip.new{background:#e8f1fd;border-color:#7aa2d6}
.chip.bad{background:#fde8e8;color:#a0181c}
.chip.ok{background:#e9f6ec}
.chip.unknown{background:#f1f1f1;color:#555}
.chip .mark{font-weight:normal;margin-right:3px}
.chip .pin{color:#5a6472;font-size:10px}
.names{display:flex;font-size:10px;line-height:12px;height:12px;color:#1d2430}
.names span{overflow:hidden;white-space:nowrap;flex:none;padding-left:1px;text-overflow:clip}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff}
td,th{border:1px solid #cdd5e0;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
h2.section{font-size:15px;margin:14px 0 4px}
.note{margin:0;white-space:pre-wrap}
.beside{display:grid;grid-template-columns:minmax(280px,2fr) 3fr;gap:12px;align-items:start}
"""
# Only a page with a node whose GPUs are grouped by link carries this: every other page stays as it was, byte for byte.
_GROUP_STYLE = """.gpus{border:1px solid #cdd5e0;border-radius:4px;padding:0 4px 2px;margin:3px 0}
.gpus.nvlink{border-color:#76b900;background:#f5faec}
.gpus.numa{border-style:dashed;border-color:#8a96a8}
.grp{display:block;font-size:10px;font-weight:600;color:#4d5a6b}
.gpus.nvlink>.grp{color:#3f6300}
"""


def _table(headers, rows):
    head = "".join("<th>%s</th>" % _text(header) for header in headers)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _text(cell) for cell in row) for row in rows)
    return "<table><tr>%s</tr>%s</table>" % (head, body)


MAX_GPUS_PER_HOST = 64


def _host_gpus(devices, host):
    """The GPUs a host's stored facts list (its ``gangplank_gpus``), by uuid, with their size; {} when unknown."""
    gpus = {}
    listed = _list(devices.get(host) or [], "gpus." + host)
    if len(listed) > MAX_GPUS_PER_HOST:
        raise PictureError("gpus." + host, "got %d GPUs; expected at most %d" % (len(listed), MAX_GPUS_PER_HOST))
    for position, gpu in enumerate(listed):
        path = "gpus.%s[%d]" % (host, position)
        _mapping(gpu, path)
        gpus[_str(gpu.get("uuid"))] = {"index": gpu.get("index", position), "uuid": gpu.get("uuid"), "model": gpu.get("model", ""),
                                       "used": 0, "total": _amount(gpu.get("memory_total"), path + ".memory_total")}
    return gpus


def status_result(bindings, gpus=None, down=None, gpu_groups=None):
    """A result to picture from what each node is bound to run: ``{host: {instance: binding}}`` (the instances of
    each node's gangplank.fact, as playbooks/status.yml reads them). The nodes' CPU and memory are not known there,
    so the cards have no CPU and memory bars. ``gpus`` ({host: the host's gangplank_gpus, as its stored hardware
    facts list them}) gives each GPU its size: its bar is then drawn to scale, and a GPU nobody takes is shown free;
    a GPU of a host without them has the bar of what its instances take. ``down`` ({host: {instance: binding}}, the
    record's instances of the hosts that are down) adds a card per down host, marked down, with what waits for it.
    ``gpu_groups`` ({host: how its GPUs group by their links, as a plan's usage.<node>.gpu_groups, or None}) draws
    each such host's GPUs in their link groups."""
    _mapping(bindings, "bindings")
    groups = _mapping({} if gpu_groups is None else gpu_groups, "gpu_groups")
    down = _mapping({} if down is None else down, "down")
    bindings = dict(bindings, **{host: instances for host, instances in down.items() if host not in bindings})
    devices = _mapping({} if gpus is None else gpus, "gpus")
    placements, usage = {}, {}
    for host in sorted(bindings, key=str):
        instances = _mapping(bindings[host] or {}, "bindings." + _str(host))
        gpus = _host_gpus(devices, _str(host))
        for name in sorted(instances, key=str):
            binding = _mapping(instances[name], "bindings.%s.%s" % (host, name))
            placements[_str(name)] = binding
            for claim in _list(binding.get("gpus") or [], "bindings.%s.%s.gpus" % (host, name)):
                _mapping(claim, "bindings.%s.%s.gpus" % (host, name))
                fresh = {"index": claim.get("index"), "uuid": claim.get("uuid"), "model": claim.get("model", ""), "used": 0, "total": None}
                entry = gpus.setdefault(_str(claim.get("uuid")), fresh)
                entry["used"] += _amount(claim.get("memory", 0), "bindings.%s.%s.gpus.memory" % (host, name))
        usage[_str(host)] = {"gpus": sorted(gpus.values(), key=lambda gpu: (_str(gpu["index"]).zfill(4), _str(gpu["uuid"]))),
                             "instances": sorted(_str(name) for name in instances), "down": host in down}
        if groups.get(host) is not None:
            usage[_str(host)]["gpu_groups"] = groups[host]
    return {"feasible": True, "path": "status", "placements": placements, "usage": usage, "moves": [], "node_labels": {}}


def health_of(rows):
    """Instance -> live state from status rows (deploy.status_rows: one per container, sidecars included): the
    container's state unless it runs, else its probe's verdict; the first that is not fine wins for an instance."""
    health = {}
    for position, row in enumerate(_list(rows, "rows")):
        _mapping(row, "rows[%d]" % position)
        state = _str(row.get("state", ""))
        verdict = _str(row.get("health", "")) if state == "running" else state
        instance = _str(row.get("instance", ""))
        if health.get(instance) in (None, "healthy", "no probe"):
            health[instance] = verdict
    return health


def _preempted_rows(result):
    """(instance, node it was evicted from or "", reason) for the preemptible instances a plan leaves out: the
    scheduler's ``preempted`` maps each to its reason, and ``evictions`` says which of them ran where."""
    preempted = _field(result, "preempted", {})
    evicted = {}
    for position, entry in enumerate(_list(_field(result, "evictions", []), "result.evictions")):
        _mapping(entry, "result.evictions[%d]" % position)
        evicted[_str(entry.get("instance"))] = entry.get("from", "")
    if isinstance(preempted, dict):
        return [(name, evicted.get(_str(name), ""), reason) for name, reason in preempted.items()]
    return [(entry.get("instance"), entry.get("node", ""), entry.get("reason", "")) if isinstance(entry, dict)
            else (entry, "", "") for entry in _list(preempted, "result.preempted")]


def render_html(result, title="gangplank placement", health=None, notes=(), added=()):
    """One HTML document for a plan ``result``; PictureError when it is not shaped like one.

    ``health`` maps instance names to a live state shown on their chips (status.yml); ``notes`` are
    extra lines shown under the summary (e.g. what a rebalance gains); ``added``: the instances new in this plan
    (against the record: gang_schedule's changes.added), marked "+" on their chips.
    """
    _mapping(result, "result")
    placements = _mapping(_field(result, "placements", {}), "result.placements")
    usage = _mapping(_field(result, "usage", {}), "result.usage")
    if len(usage) > MAX_NODES:
        raise PictureError("result.usage", "got %d nodes; expected at most %d" % (len(usage), MAX_NODES))
    if len(placements) > MAX_INSTANCES:
        raise PictureError("result.placements", "got %d instances; expected at most %d" % (len(placements), MAX_INSTANCES))
    for name, placement in placements.items():
        _mapping(placement, "result.placements." + _str(name))
    moved = {}
    for position, move in enumerate(_list(_field(result, "moves", []), "result.moves")):
        _mapping(move, "result.moves[%d]" % position)
        moved[_str(move.get("instance"))] = move.get("from")
    labels = _mapping(_field(result, "node_labels", {}), "result.node_labels")
    feasible = bool(result.get("feasible"))
    # The cards first: they check the shape of every node's usage that the summary counts.
    palette = Palette(placement.get("service", "") for placement in placements.values())
    added = frozenset(_str(name) for name in _list(list(added or ()), "added"))
    # An infeasible plan places nothing: its nodes are drawn empty (what each has), beside the unplaced instances.
    cards = [_card(node, usage[node], placements if feasible else {}, moved, labels.get(node) if feasible else None,
                   health, palette, added) for node in usage]
    grouped = any(isinstance(entry, dict) and entry.get("gpu_groups") is not None for entry in usage.values())
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
             'img-src data:">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>%s</title><style>%s</style></head><body>" % (_text(title), _STYLE + _GROUP_STYLE if grouped else _STYLE),
             "<h1>%s</h1>" % _text(title),
             '<p class="summary%s" id="summary">%s</p>' % (
                 "" if feasible else " bad-plan", _text(_summary(result, placements, usage)))]
    for note in notes:
        parts.append('<p class="note">%s</p>' % _text(note))
    if feasible:
        parts.append(_legend(placements, palette))
        parts.append('<div class="grid" id="nodes">')
        parts.extend(cards)
        parts.append("</div>")
        if moved:
            parts.append('<h2 class="section">Moves</h2>')
            rows = [(move.get("instance"), move.get("from"), move.get("to")) for move in result.get("moves") or []]
            parts.append(_table(("instance", "from", "to"), rows))
    else:
        unplaced = _mapping(_field(result, "unschedulable", {}), "result.unschedulable")
        parts.append('<div class="beside"><div class="unplaced">')
        parts.append('<h2 class="section">Unplaced instances (%d)</h2>' % len(unplaced))
        parts.append(_table(("instance", "why it could not be placed"), sorted((_str(name), _str(why)) for name, why in unplaced.items())))
        parts.append("</div>")
        if cards:
            parts.append('<div><h2 class="section">Nodes (nothing is placed)</h2><div class="grid" id="nodes">')
            parts.extend(cards)
            parts.append("</div></div>")
        parts.append("</div>")
    rows = _preempted_rows(result)
    if rows:
        parts.append('<h2 class="section">Preempted instances (%d)</h2>' % len(rows))
        parts.append(_table(("instance", "evicted from", "why"), rows))
    parts.append("</body></html>\n")
    return "".join(parts)
