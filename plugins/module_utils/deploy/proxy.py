# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local proxy: a stable address per service on every host (docs/connecting-services.md, The local address).

Each host runs one HAProxy whose frontends listen on the site's proxy address (``gangplank_proxy_address``, a
link-local address on the host's loopback interface, which the host and its containers reach on Podman and Docker
alike), one per proxied port of a service, and balance over the service's instances on every host: their publish
address and host port, from the plan's endpoints (module_utils/deploy/endpoints.py), with HAProxy's own health
checks. The catalog's ``proxy`` entries are checked by module_utils/planning/proxy.py.

- ``proxy_config(endpoints, deploy, settings) -> str``: the whole configuration, the same text on every host. A pure
  function: the same input gives the same bytes. Any value that would change the configuration's meaning (a line
  break, a space, ``#``) is refused with ProxyError naming its path; nothing of it is written.
- ``proxy_frontends(deploy, address)``: service -> port -> ``address:listen``, what config templates see.
- ``host_settings(hosts, site, own)``: each host's settings, the site's with the host's own ``address``, ``socket`` and
  ``pid_file`` where it has them (several hosts on one machine, as on the test bed), checked per host: an error names
  the host and the variable.
- ``proxy_directories(settings)``: the host command that makes the directories of the proxy's pid file and admin
  socket, each root's on every component and writable by nobody else (root_paths.WALK): root later trusts the pid file
  (it signals the process it names) and HAProxy replaces the socket, so no other user may plant a link or a file there.

Standard library only.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import root_paths
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import valid_host_name
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.planning.proxy import ProxyError, proxy_listens

DEFAULT_ADDRESS = "169.254.30.1"
# The proxy's files on each host that root trusts, the role's variable that names each, and its default.
HOST_PATHS = (("socket", "deploy_proxy_socket", "/run/gangplank/proxy.sock"),
              ("pid_file", "deploy_proxy_pid_file", "/run/gangplank/proxy.pid"))

_SETTING_KEYS = ("address", "check_interval", "fall", "rise", "connect_timeout", "idle_timeout", "drain_timeout",
                 "port_range", "socket", "pid_file")
# Names and paths that go into the configuration as single words: no space, '#', quote, backslash or control.
_WORD = re.compile(r"[A-Za-z0-9._:@/%+=~!$&()*,;?\[\]-]{1,255}")
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_INSTANCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,253}")
_SOCKET = re.compile(r"/[A-Za-z0-9._/-]{1,200}")
_PORT_NAME = re.compile(r"[a-z]([a-z0-9-]{0,13}[a-z0-9])?")


def _word(value, path, expected):
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        raise ProxyError("%s: expected %s, without spaces, line breaks or '#' (the value is not shown: it would "
                         "change the proxy's configuration)" % (path, expected))
    return value


def _address(value, path):
    try:
        return ipaddress.ip_address(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _number(settings, key, default, minimum, maximum):
    value = settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not minimum <= value <= maximum:
        raise ProxyError("proxy.%s: got %s; expected a number from %s to %s" % (key, show(value), minimum, maximum))
    return value


def _milliseconds(seconds):
    return "%dms" % max(1, round(seconds * 1000))


def _settings(settings, address_name="proxy.address"):
    settings = dict(settings or {})
    unknown = sorted(str(key) for key in settings if key not in _SETTING_KEYS)
    if unknown:
        raise ProxyError("proxy: unknown settings %s; expected some of %s" % (", ".join(unknown), ", ".join(_SETTING_KEYS)))
    address = settings.get("address", DEFAULT_ADDRESS)
    parsed = _address(address, "proxy.address")
    if parsed is None or parsed.is_unspecified or parsed.is_multicast:
        raise ProxyError("%s: expected one IP address of the host (such as %s), not a name, a network or "
                         "0.0.0.0" % (address_name, DEFAULT_ADDRESS))
    port_range = settings.get("port_range")
    if port_range is not None and not (isinstance(port_range, (list, tuple)) and len(port_range) == 2
                                       and all(isinstance(item, int) and not isinstance(item, bool) for item in port_range)):
        raise ProxyError("proxy.port_range: expected [first, last], two port numbers")
    paths = {key: _host_path(settings.get(key, default), variable, default) for key, variable, default in HOST_PATHS}
    return {
        "address": parsed,
        "interval": _number(settings, "check_interval", 1, 0.1, 3600),
        "fall": _number(settings, "fall", 2, 1, 100),
        "rise": _number(settings, "rise", 1, 1, 100),
        "connect": _number(settings, "connect_timeout", 1, 0.1, 3600),
        "idle": _number(settings, "idle_timeout", 300, 1, 86400),
        "drain": _number(settings, "drain_timeout", 30, 1, 86400),
        "port_range": tuple(port_range) if port_range is not None else None,
        "socket": paths["socket"],
        "pid_file": paths["pid_file"],
    }


def _host_path(path, variable, default):
    """A file of the proxy's that root trusts on the host: absolute, normalised, not in a directory every user can
    write (the host checks every directory on the way, proxy_directories)."""
    if not isinstance(path, str) or not _SOCKET.fullmatch(path) or posixpath.normpath(path) != path \
            or posixpath.dirname(path) == "/":
        raise ProxyError("%s: expected an absolute, normalised path of letters, digits, '.', '_', '-' and '/' in a "
                         "directory other than / (such as %s)" % (variable, default))
    shared = root_paths.shared_place(path)
    if shared:
        raise ProxyError("%s: %s is inside %s, which every user can write; expected a path in a directory only root "
                         "can write on every component, such as %s" % (variable, path, shared, default))
    return path


# What a host may set for itself (host_settings), and the variable that names each.
HOST_SETTINGS = (("address", "gangplank_proxy_address"), ("socket", "deploy_proxy_socket"),
                 ("pid_file", "deploy_proxy_pid_file"))


def host_settings(hosts, site, own):
    """host -> its settings: ``site`` (the settings every host shares) with the host's own ``address``, ``socket`` and
    ``pid_file`` from ``own`` (host -> those it sets; a host without an entry takes the site's). Each host's are checked
    as proxy_config() checks them: ProxyError names the host and the variable."""
    result = {}
    for host in hosts:
        # A name that could mislead is shown quoted and bounded.
        named = host if valid_host_name(host) else show(host)
        mine = (own or {}).get(host) or {}
        if not isinstance(mine, dict) or set(mine) - {key for key, _variable in HOST_SETTINGS}:
            raise ProxyError("%s: the host's proxy settings: expected some of %s"
                             % (named, ", ".join(variable for _key, variable in HOST_SETTINGS)))
        settings = dict(site or {}, **mine)
        try:
            _settings(settings, address_name="gangplank_proxy_address")
        except ProxyError as error:
            raise ProxyError("%s: %s" % (named, error)) from None
        result[host] = settings
    return result


# $@: the directories; each walked from / (root_paths.WALK); prints "made <path>..." for those it made.
_DIRECTORIES = "umask 022\n" + root_paths.CHECK + r"""for directory do
  (set -- "$directory"
""" + root_paths.WALK + r"""  [ -z "$made" ] || echo "made$made") || exit 1
done
"""


def proxy_directories(settings=None):
    """The argv that makes (or checks) the directories of the proxy's pid file and socket on a host, every component
    root's and writable by nobody else; it fails naming the first that is not, and prints ``made ...`` when it made
    one. ProxyError for a setting that cannot be such a path."""
    options = _settings(settings)
    directories = sorted({posixpath.dirname(options[key]) for key, _variable, _default in HOST_PATHS})
    return ["sh", "-c", _DIRECTORIES, "gangplank-proxy-dirs"] + directories


def _endpoint(address, port):
    parsed = ipaddress.ip_address(address) if _address(address, "") is not None else None
    if parsed is not None and parsed.version == 6:
        return "ipv6@%s:%d" % (parsed, port)
    return "%s:%d" % (address, port)


def _check_lines(spec, port, path):
    """The health check of a backend: the service's HTTP probe when it is made on the proxied port, else a TCP
    connect."""
    health = spec.get("health") or {}
    same_port = (health.get("port_name") == port) if isinstance(port, str) else (health.get("port") == port)
    if health.get("type") != "http" or not same_port:
        return []
    check_path = _word(health.get("path") or "/", path + ".health.http.path", "a URL path beginning with /")
    lines = ["    option httpchk GET %s" % check_path]
    statuses = health.get("expect_status")
    if statuses:
        lines.append("    http-check expect rstatus ^(%s)$" % "|".join(str(int(status)) for status in statuses))
    else:
        lines.append("    http-check expect status 200")
    return lines


def proxy_config(endpoints, deploy, settings=None):
    """The proxy's configuration (see the module's doc) from the plan's endpoints (service -> endpoints), the parsed
    catalog's deploy specs (their ``proxy``, ``health`` and ``stop_timeout``) and the site's settings."""
    options = _settings(settings)
    listens = proxy_listens(deploy)
    address = options["address"]
    bind = "ipv6@%s" % address if address.version == 6 else str(address)
    drain = max([options["drain"]] + [int((deploy[service] or {}).get("stop_timeout") or 0) for service, *_rest in listens])
    lines = [
        "# The local proxy of gangplank.platform, generated from the plan's endpoints: changes here are overwritten.",
        "global",
        "    maxconn 4000",
        # A reload (master-worker, USR2) hands the listening sockets to the new worker: no connection is refused.
        "    stats socket %s mode 600 level admin expose-fd listeners" % options["socket"],
        # The old worker serves the connections it holds until they end, at most this long (the instances' stop time).
        "    hard-stop-after %ds" % drain,
        "",
        "defaults",
        "    mode tcp",
        "    timeout connect %s" % _milliseconds(options["connect"]),
        "    timeout client %ds" % options["idle"],
        "    timeout server %ds" % options["idle"],
        "    timeout check %s" % _milliseconds(options["connect"]),
        # A connection refused or timed out goes to another instance, so that a stopped or unreachable one costs no
        # request while the checks mark it down.
        "    retries 3",
        "    option redispatch 1",
        "    default-server inter %s fastinter %s downinter %s fall %d rise %d" % (
            _milliseconds(options["interval"]), _milliseconds(options["interval"]), _milliseconds(options["interval"]),
            options["fall"], options["rise"]),
    ]
    for service, port, listen, path in listens:
        service_path = "services.%s" % service
        if not _NAME.fullmatch(service):
            raise ProxyError("services: a service name is not lowercase letters, digits and '-' (not shown)")
        if options["port_range"] and options["port_range"][0] <= listen <= options["port_range"][1]:
            raise ProxyError("%s: got %d; expected a port outside gangplank_port_range %d-%d, from which host ports "
                             "are given" % (path, listen, options["port_range"][0], options["port_range"][1]))
        if isinstance(port, str) and not _PORT_NAME.fullmatch(port):
            raise ProxyError("%s: a port name is not well formed (not shown)" % path.rsplit(".", 1)[0])
        name = "%s_%s" % (service, port)
        lines += ["", "frontend %s" % name, "    bind %s:%d" % (bind, listen), "    default_backend %s" % name,
                  "", "backend %s" % name, "    balance roundrobin"]
        lines += _check_lines(deploy[service], port, service_path)
        key = str(port)
        for position, entry in enumerate((endpoints or {}).get(service) or []):
            entry_path = "endpoints.%s[%d]" % (service, position)
            instance = entry.get("instance") if isinstance(entry, dict) else None
            if not isinstance(instance, str) or not _INSTANCE.fullmatch(instance):
                raise ProxyError("%s.instance: expected an instance name (not shown)" % entry_path)
            host_port = (entry.get("ports") or {}).get(key)
            if host_port is None:
                continue
            if isinstance(host_port, bool) or not isinstance(host_port, int) or not 1 <= host_port <= 65535:
                raise ProxyError("%s.ports.%s: expected a port number" % (entry_path, key))
            where = _word(entry.get("address"), entry_path + ".address", "an IP address or a host name")
            lines.append("    server %s %s check" % (instance, _endpoint(where, host_port)))
    return "\n".join(lines) + "\n"


def proxy_frontends(deploy, address=DEFAULT_ADDRESS):
    """service -> port (its name, or its number as text) -> ``address:listen``: where a service answers on every
    host, for config templates (``gangplank_proxy``)."""
    parsed = _address(address, "proxy.address")
    if parsed is None:
        raise ProxyError("proxy.address: expected one IP address of the host (such as %s)" % DEFAULT_ADDRESS)
    shown = "[%s]" % parsed if parsed.version == 6 else str(parsed)
    result = {}
    for service, port, listen, _path in proxy_listens(deploy):
        result.setdefault(service, {})[str(port)] = "%s:%d" % (shown, listen)
    return result
