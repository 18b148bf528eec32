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

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import render_status, status_rows
from ansible_collections.gangplank.platform.plugins.module_utils.placement_html import (
    health_of, render_html, status_result,
)

# A probe during status is a look, not a wait: two tries, half a second apart.
STATUS_PROBE = {"retries": 2, "interval": 0.5}
DOWN_SEPARATOR = " is down; waiting for it: "


def status_probes(containers):
    """The health_wait probes that look once at every container that has a probe."""
    return [dict(container["probe"], **STATUS_PROBE) for container in containers if container.get("probe")]


def hardware_gpus(content):
    """The GPUs of the hardware facts file the last full gathering stored (base64, as slurp reads it): [] when there
    is no file or it is not such a file, since the picture then draws the bound GPUs only."""
    if not content:
        return []
    try:
        facts = json.loads(base64.b64decode(content)).get("facts")
    except (binascii.Error, ValueError, AttributeError):
        return []
    gpus = facts.get("gangplank_gpus") if isinstance(facts, dict) else None
    return gpus if isinstance(gpus, list) else []


def host_status(host, containers, existing, probes, instances, hardware):
    """One host's part of the report: its rows, its bound instances and its GPUs (no container spec: they carry
    the catalog's env)."""
    return {"rows": status_rows(host, containers, existing, probes), "bound": instances,
            "gpus": hardware_gpus(hardware)}


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
    """The status picture: every host's bound instances, its GPUs to scale and each instance's health; the down
    hosts' instances marked as waiting."""
    rows = [row for host in hosts for row in statuses[host]["rows"]]
    result = status_result({host: statuses[host]["bound"] for host in hosts},
                           gpus={host: statuses[host]["gpus"] for host in hosts}, down=down)
    health = health_of(rows)
    # The instances of a host that is down are not probed: they wait for it.
    health.update({str(name): "waiting: host down" for instances in down.values() for name in instances})
    return render_html(result, title="gangplank status: %d host(s)" % len(hosts), health=health)


def status_report(hosts, statuses, down, picture=False):
    """Over every live host: the table's lines, then a line per host that is down; and the picture when asked."""
    rows = [row for host in hosts for row in statuses[host]["rows"]]
    report = {"lines": render_status(rows) + waiting_lines(down), "down": down}
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
    line = "%s: %d instance(s): %s" % (service, len(instances), ", ".join(
        "%s@%s" % (entry["instance"], entry["address"]) for entry in instances))
    return {"instances": instances, "line": line}
