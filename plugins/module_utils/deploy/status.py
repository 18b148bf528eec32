# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status report (the deploy role's status action, tasks/status.yml) and the lines that name the hosts that are
down: what each host should run and how it runs, then over every host the table, the down hosts' recorded instances
and the picture. Plain Python, no Ansible import; the rows themselves are deploy.status_rows."""

from __future__ import annotations

import base64
import binascii
import json
import shlex
import time

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import render_status, status_rows
from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.gpu_watchdog_state import (
    MAX_STATE_BYTES, StateError, condition_lines, parse_state, render_share_rows, share_rows,
)
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import (
    NodeFactsError, gpu_links, scheduler_gpus, usable_gpus,
)
from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import (
    health_of, render_html, status_result,
)
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.planning.retained import retained_of
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_size
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import link_groups
from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

# A probe during status is a look, not a wait: two tries, half a second apart.
STATUS_PROBE = {"retries": 2, "interval": 0.5}
DOWN_SEPARATOR = " is down; waiting for it: "
# The longest cell of the GPU share table and the longest watchdog line shown: a host's fact file and the watchdog's
# state file are read from the host, and each value is shown as one bounded line.
MAX_CELL = 128
MAX_LINE = 1000


def status_probes(containers):
    """The health_wait probes that look once at every container that has a probe."""
    return [dict(container["probe"], **STATUS_PROBE) for container in containers if container.get("probe")]


def hardware_facts(content):
    """The facts of the hardware facts file the last full gathering stored (base64, as slurp reads it); {} when there
    is no file or it is not such a file."""
    if not content:
        return {}
    try:
        facts = json.loads(base64.b64decode(content)).get("facts")
    except (binascii.Error, ValueError, AttributeError):
        return {}
    return facts if isinstance(facts, dict) else {}


def hardware_gpus(facts):
    """The GPUs of the stored hardware facts (hardware_facts): [] when there are none or they are not a list, since the
    picture then draws the bound GPUs only."""
    gpus = facts.get("gangplank_gpus")
    return gpus if isinstance(gpus, list) else []


def hardware_gpu_groups(host, facts):
    """How the host's GPUs group by their links (the scheduler's topology.link_groups, as a plan's usage.<node>
    .gpu_groups holds them), from the stored hardware facts' (hardware_facts) GPUs and gangplank_gpu_links; None
    where those say nothing of links or are not what the facts modules write (the picture then draws the GPUs in one
    list)."""
    try:
        return gpu_groups(host, facts)
    except (NodeFactsError, ProblemError):
        return None


def gpu_groups(host, facts):
    """hardware_gpu_groups, but facts that are not what the facts modules write raise NodeFactsError or ProblemError
    (naming the fact and entry) rather than giving None; None where the facts list no links."""
    hostvars = {"inventory_hostname": host, "ansible_facts": facts}
    gpus = sorted(usable_gpus(hostvars), key=lambda gpu: gpu["index"])
    links = gpu_links(hostvars, gpus)
    if not links:
        return None
    problem = parse_problem({"nodes": {"host": {"cpu": "0", "memory": 0, "gpus": scheduler_gpus(gpus),
                                                "gpu_links": links}}, "services": {}})
    return link_groups(problem.nodes["host"])


def host_status(host, containers, existing, probes, instances, hardware):
    """One host's part of the report: its rows, its bound instances, its GPUs and how they group by their links
    (no container spec: they carry the catalog's env)."""
    facts = hardware_facts(hardware)
    return {"rows": status_rows(host, containers, existing, probes), "bound": instances,
            "gpus": hardware_gpus(facts), "gpu_groups": hardware_gpu_groups(host, facts)}


def has_gpu_instances(instances):
    """Whether a bound instance of the host has GPUs (only then is the GPU watchdog's state read)."""
    return any(isinstance(binding, dict) and binding.get("gpus") for binding in (instances or {}).values())


def state_read_command(path):
    """The host command that reads the GPU watchdog's state file ``path``: at most one byte more than a state file may
    hold (a larger file is seen as larger without being read whole), of a regular file only (a FIFO would wait for a
    writer), as base64."""
    return ("f=%s; if [ ! -e \"$f\" ]; then echo 'file not found'; exit 3; fi; "
            "if [ ! -f \"$f\" ]; then echo 'not a regular file'; exit 4; fi; "
            "head -c %d -- \"$f\" | base64" % (shlex.quote(path), MAX_STATE_BYTES + 1))


def state_read(done):
    """gpu_status's ``read`` from the result of state_read_command (rc, stdout, stderr): the content, or why not."""
    out, err = str(done.get("stdout") or ""), str(done.get("stderr") or "").strip()
    if done.get("rc") != 0 or (err and not out.strip()):
        return {"failed": True, "msg": one_line((out.strip() or err or "cannot be read").splitlines()[0], 200)}
    return {"content": "".join(out.split())}


def gpu_status(host, instances, read, path, sharing="none", now=None):
    """The host's GPU share rows (memory used, from the GPU watchdog's last poll, against granted; the SM share;
    enforced or advisory) and the watchdog's lines (not polling, over a grant, bypasses), from ``read`` (state_read, or
    the slurp module's result) for the watchdog's state file ``path``. A state file that is missing or not what the watchdog writes
    is a line naming it; the rows then show no use."""
    now = time.time() if now is None else now
    state, lines = None, []
    if read.get("failed"):
        reason = (str(read.get("msg") or "").splitlines() or ["cannot be read"])[0][:200]
        if "not found" in reason or "does not exist" in reason:
            reason = "it has not run here (no %s)" % path
        lines.append("%s: GPU watchdog: %s" % (host, reason))
    else:
        try:
            state = parse_state(base64.b64decode(read.get("content") or "", validate=True), path)
        except (binascii.Error, ValueError) as error:
            message = str(error) if isinstance(error, StateError) else "the GPU watchdog's state file %s is not base64" % path
            lines.append("%s: %s" % (host, message))
        if state is not None:
            lines += condition_lines(host, state, now)
    return {"shares": share_rows(host, instances, state, sharing), "watchdog_lines": lines}


def down_instances(record, live_hosts, inventory_hosts):
    """{host: {instance: placement}} of the record's instances on hosts of the inventory that are not live, by
    host name, each host's instances in the record's order."""
    placement = record.get("placement") if isinstance(record, dict) else None
    live, inventory = set(live_hosts), set(inventory_hosts)
    down = {}
    for name, entry in (placement or {}).items():
        node = entry.get("node") if isinstance(entry, dict) else None
        if isinstance(node, str) and node in inventory and node not in live:
            down.setdefault(node, {})[name] = entry
    return {host: down[host] for host in sorted(down)}


def waiting_lines(waiting, separator=DOWN_SEPARATOR):
    """'<host><separator><instance>, <instance>' for each host that is down, in the order given; the instances are
    a list (the schedule role's schedule_waiting) or the keys of a mapping (down_instances)."""
    return ["%s%s%s" % (host, separator, ", ".join(str(name) for name in instances))
            for host, instances in (waiting or {}).items()]


def status_page(hosts, statuses, down):
    """The status picture: every host's bound instances, its GPUs to scale in their link groups and each instance's
    health; the down hosts' instances marked as waiting."""
    rows = [row for host in hosts for row in statuses[host]["rows"]]
    result = status_result({host: statuses[host]["bound"] for host in hosts},
                           gpus={host: statuses[host]["gpus"] for host in hosts}, down=down,
                           gpu_groups={host: statuses[host].get("gpu_groups") for host in hosts})
    health = health_of(rows)
    # The instances of a host that is down are not probed: they wait for it.
    health.update({str(name): "waiting: host down" for instances in down.values() for name in instances})
    # The GPU shares (used against granted, the SM share, enforced or advisory) and the watchdog's lines, as notes.
    return render_html(result, title="gangplank status: %d host(s)" % len(hosts), health=health, notes=gpu_lines(hosts, statuses))


def gpu_lines(hosts, statuses):
    """The GPU share table over every host (gpu_status's rows), then the GPU watchdog's lines; every text from a host
    (instance names and GPU uuids of its fact file, the watchdog's findings) as one bounded line (validation.one_line)."""
    shares = [dict(row, **{key: one_line(row[key], MAX_CELL) for key in ("node", "instance", "gpu", "sharing", "watchdog")})
              for host in hosts for row in statuses[host].get("shares") or []]
    return render_share_rows(shares) + [one_line(line, MAX_LINE) for host in hosts
                                        for line in statuses[host].get("watchdog_lines") or []]


def retained_lines(record):
    """One line per instance whose volumes the record keeps on its node (module_utils/planning/retained.py), with their sizes."""
    retained = retained_of(record)
    return ["retained volumes of %s on %s: %s" % (name, entry["node"], ", ".join(
        "%s (%s%s)" % (volume["name"], volume["where"], ", " + format_size(volume["size"]) if volume["size"] else "")
        for volume in entry["volumes"])) for name, entry in retained.items()]


def status_report(hosts, statuses, down, picture=False, record=None):
    """Over every live host: the table's lines, then a line per host that is down and one per instance with retained
    volumes (from the placement ``record``); and the picture when asked."""
    rows = [row for host in hosts for row in statuses[host]["rows"]]
    report = {"lines": render_status(rows) + waiting_lines(down) + retained_lines(record or {}), "down": down}
    # The GPU shares and the GPU watchdog's lines, shown apart from the table (tasks/status.yml).
    report["gpu_lines"] = gpu_lines(hosts, statuses)
    if picture:
        report["html"] = status_page(hosts, statuses, down)
    return report


def service_instances(node_instances, service, hosts, addresses, ports):
    """playbooks/scale.yml's report: the instances of ``service`` on the live ``hosts``, by ordinal, each with its
    node, the address it is reached at (``addresses``: host -> address) and the service's ports; and the line
    '<service>: <n> instance(s): <instance>@<address>, ...'."""
    live = set(hosts)
    found = [(name, binding) for node, instances in (node_instances or {}).items() if node in live
             for name, binding in (instances or {}).items() if binding.get("service") == service]
    found.sort(key=lambda item: item[1].get("ordinal", 0))
    instances = [{"instance": name, "node": binding["node"], "ordinal": binding.get("ordinal"),
                  "address": addresses.get(binding["node"], binding["node"]), "ports": ports,
                  "gpus": [gpu.get("uuid") for gpu in binding.get("gpus") or []]} for name, binding in found]
    for entry, (_name, binding) in zip(instances, found):
        if isinstance(binding.get("host_ports"), dict):
            # Only an instance with dynamic ports says so: its host port by name (docs/connecting-services.md).
            entry["host_ports"] = dict(binding["host_ports"])
    line = "%s: %d instance(s): %s" % (service, len(instances), ", ".join(
        "%s@%s" % (entry["instance"], entry["address"]) for entry in instances))
    return {"instances": instances, "line": line}
