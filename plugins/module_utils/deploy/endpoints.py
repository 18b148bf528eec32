# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Endpoints from the plan: where each service's instances answer, known before any container starts.

``endpoints(hosts, services, addresses)``: service -> [{instance, node, address, ports: {name: host port}}] for the
instances a plan binds to live hosts (gang_schedule's ``hosts``), in instance order. A dynamic port is named by its
name, a static one by its number (as text). ``address`` is the host's publish address.

``endpoint_variable(service)`` and ``endpoint_value(entries, service_spec)`` make the variables an instance gets for
the services it depends on: ``GANGPLANK_ENDPOINTS_<SERVICE>`` (upper case, ``-`` as ``_``) = ``address:port`` of
each instance, comma-separated, the port being the service's first dynamic port.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import HOST_NAME_EXPECTED, valid_host_name

_INSTANCE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}(-(0|[1-9][0-9]{0,5})|@[A-Za-z0-9._-]{1,253})")
_PORT_NAME = re.compile(r"[a-z]([a-z0-9-]{0,13}[a-z0-9])?")


class EndpointError(Exception):
    pass


def _address(host, address):
    """A host's publish address: an IP address or a host name, checked (it goes into config files and env)."""
    if not isinstance(address, str) or not address:
        address = host
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        pass
    if not valid_host_name(address):
        raise EndpointError("host %s: the publish address is neither an IP address nor %s" % (host, HOST_NAME_EXPECTED))
    return address


def _ports(instance, entry, service):
    ports = {}
    for port in (service or {}).get("ports") or []:
        if isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535:
            ports[str(port)] = port
    given = entry.get("host_ports") or {}
    if not isinstance(given, dict):
        raise EndpointError("instance %s: host_ports is not a mapping" % instance)
    for name, port in sorted(given.items()):
        if not (isinstance(name, str) and _PORT_NAME.fullmatch(name) and isinstance(port, int)
                and not isinstance(port, bool) and 1 <= port <= 65535):
            raise EndpointError("instance %s: host_ports holds an entry that is not a port name and a port" % instance)
        ports[name] = port
    return ports


def endpoints(hosts, services, addresses):
    """service -> its endpoints (see the module's doc), every service of ``services`` listed (empty when none runs)."""
    result = {name: [] for name in sorted(services or {})}
    for host in sorted(hosts or {}):
        if not valid_host_name(host):
            raise EndpointError("host: the inventory name is not %s" % HOST_NAME_EXPECTED)
        address = _address(host, (addresses or {}).get(host))
        for instance, entry in sorted(((hosts[host] or {}).get("instances") or {}).items()):
            if not (isinstance(instance, str) and _INSTANCE.fullmatch(instance) and isinstance(entry, dict)):
                raise EndpointError("host %s: an instance name or entry is not well formed" % host)
            service = entry.get("service")
            if service not in result:
                continue
            result[service].append({"instance": instance, "node": host, "address": address,
                                    "ports": _ports(instance, entry, services[service]), "ordinal": entry.get("ordinal")})
    for service, entries in result.items():
        entries.sort(key=lambda entry: (entry["ordinal"] if isinstance(entry["ordinal"], int) else 0, entry["instance"]))
        for entry in entries:
            del entry["ordinal"]
    return result


def dynamic_port_names(service):
    """The names of a catalog service's dynamic ports, in catalog order."""
    return [port["name"] for port in (service or {}).get("ports") or []
            if isinstance(port, dict) and isinstance(port.get("name"), str)]


def endpoint_variable(service):
    return "GANGPLANK_ENDPOINTS_" + service.upper().replace("-", "_")


def endpoint_value(entries, service):
    """``address:port`` of each instance of ``service`` (a catalog entry), on its first dynamic port."""
    names = dynamic_port_names(service)
    if not names:
        return None
    return ",".join("[%s]:%d" % (entry["address"], entry["ports"][names[0]]) if ":" in entry["address"]
                    else "%s:%d" % (entry["address"], entry["ports"][names[0]])
                    for entry in entries if names[0] in entry["ports"])
