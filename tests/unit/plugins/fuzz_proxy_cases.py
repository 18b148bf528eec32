# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile inputs for the local proxy, as entry points of the fuzz harness (fuzz_cases.ENTRY_POINTS; the same
outcomes: ok, rejected, violation: ...).

- ``proxy_catalog``: a catalog whose services ask for the proxy (a dynamic port by name, a static one by number, an
  HTTP probe on the proxied port), mutated (``proxy`` entries, ports, probe paths, names); parsed, then the proxy's
  configuration generated from the endpoints of a plan. Rejected: errors naming a path, one short line each (the
  catalog's, or a ProxyError). A violation: a traceback, a configuration line that is not one of the shapes the
  generator writes (a value that added a directive, a line break or a comment), a frontend not listed in the catalog.
- ``proxy_settings``: the site's proxy inputs as the deploy role hands them (gangplank_proxy_address,
  gangplank_proxy_check_interval, _fall, _rise, gangplank_port_range, deploy_proxy_socket, deploy_proxy_pid_file),
  mutated; the configuration, the frontends and the host command for the directories. Rejected: a ProxyError of one
  line naming the input. A violation: a traceback, an accepted socket or pid file in a directory every user can write,
  or not absolute and normalised, or a configuration line of another shape.
- ``proxy_host_settings``: each host's own address, socket and pid file over the site's (several hosts on one
  machine), mutated; every host's configuration. Rejected: a ProxyError of one line naming the host. A violation: as
  for ``proxy_settings``, or an error that names no host.
"""

from __future__ import annotations

import copy
import posixpath
import re

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import root_paths
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import EndpointError, endpoints
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.proxy import (
    ProxyError, host_settings, proxy_config, proxy_directories, proxy_frontends)
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import parse_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError

CATALOG = {
    "api": {"replicas": 2, "image": "localhost/app:1", "ports": [{"name": "http", "container_port": 8080}],
            "health": {"http": {"port": "http", "path": "/health", "expect_status": [200, 204]}},
            "stop_timeout": 5, "proxy": [{"port": "http", "listen": 18080}]},
    "db": {"image": "localhost/app:1", "ports": [5432], "health": {"tcp": {"port": 5432}},
           "proxy": [{"port": 5432, "listen": 15432}]},
}
PLAN = {"n1": {"instances": {"api-0": {"service": "api", "ordinal": 0, "host_ports": {"http": 20001}},
                             "db-0": {"service": "db", "ordinal": 0}}},
        "n2": {"instances": {"api-1": {"service": "api", "ordinal": 1, "host_ports": {"http": 20000}}}}}
ADDRESSES = {"n1": "10.0.0.1", "n2": "fd00::2"}
SETTINGS = {"address": "169.254.30.1", "check_interval": 1.0, "fall": 2, "rise": 1, "port_range": [20000, 32000],
            "socket": "/run/gangplank/proxy.sock", "pid_file": "/run/gangplank/proxy.pid"}

# Every line the generator writes: a comment first, section headers, and directives of plain words.
_WORD = r"[A-Za-z0-9._:@/%+=~!$&()*,;?\[\]^|-]+"
_LINE = re.compile(r"(# The local proxy of gangplank\.platform, generated from the plan's endpoints: changes here are "
                   r"overwritten\.|(global|defaults)|(frontend|backend) [a-z0-9-]+_[a-z0-9-]+|    %s( %s)*|)"
                   % (_WORD, _WORD))


def _one_line(message):
    if "\n" in message or "\r" in message or len(message) > 2000:
        raise AssertionError("error not one short line: %r" % message[:300])


def _config_violation(text, listens):
    for line in text.split("\n"):
        if not _LINE.fullmatch(line):
            return "violation: a configuration line of another shape: %r" % line[:200]
    frontends = sorted(line.split()[1] for line in text.split("\n") if line.startswith("frontend "))
    if frontends != sorted(listens):
        return "violation: frontends %r for the catalog's %r" % (frontends, sorted(listens))
    return None


def run_proxy_catalog(services):
    """The catalog parsed, then the proxy's configuration and frontends from a plan's endpoints."""
    try:
        deploy = parse_catalog(services).deploy
    except ProblemError as error:
        for path, message in error.errors:
            _one_line("%s: %s" % (path, message))
        return "rejected"
    try:
        found = endpoints(PLAN, services, ADDRESSES)
        text = proxy_config(found, deploy, SETTINGS)
        frontends = proxy_frontends(deploy, SETTINGS["address"])
    except (ProxyError, EndpointError) as error:
        _one_line(str(error))
        return "rejected"
    listens = ["%s_%s" % (service, port) for service, ports in frontends.items() for port in ports]
    return _config_violation(text, listens) or "ok"


def run_proxy_settings(settings):
    """The settings as the deploy role hands them: the configuration, the frontends and the directories' command."""
    deploy = parse_catalog(CATALOG).deploy
    try:
        text = proxy_config(endpoints(PLAN, CATALOG, ADDRESSES), deploy, settings)
        frontends = proxy_frontends(deploy, settings.get("address", "169.254.30.1") if isinstance(settings, dict)
                                    else None)
        argv = proxy_directories(settings)
    except ProxyError as error:
        _one_line(str(error))
        return "rejected"
    for key in ("socket", "pid_file"):
        path = settings.get(key, SETTINGS[key])
        if posixpath.normpath(path) != path or not path.startswith("/") or root_paths.shared_place(path):
            return "violation: %s %r accepted" % (key, path)
    if argv[:3] != ["sh", "-c", argv[2]] or any(not item.startswith("/") for item in argv[4:]):
        return "violation: directories command %r" % argv[3:]
    listens = ["%s_%s" % (service, port) for service, ports in frontends.items() for port in ports]
    return _config_violation(text, listens) or "ok"


def proxy_settings_case(choose):
    from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases  # the harness's hostile values
    settings = copy.deepcopy(SETTINGS)
    extra = ("/tmp/proxy.pid", "/run/../tmp/p.sock", "/dev/shm/x/p.pid", "/run/lock/p.sock", "/p.pid", "run/p.pid",
             "/run/gangplank/proxy.pid\nx", "/run/a b.sock", "/run/gangplank/", "fd00::1", "169.254.30.1 backup",
             "10.0.0.1#", "::", "224.0.0.1")
    for _step in range(choose((1, 2))):
        key = choose(sorted(SETTINGS) + ["unknown"])
        settings[key] = choose(extra) if choose((True, False)) else fuzz_cases.hostile_value(choose)
    return settings


def proxy_catalog_case(choose):
    from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases  # the harness's hostile values
    pool = fuzz_cases.HOSTILE + ("/health\nlisten x", "/a b", "/#", "http", "grpc", 8080, 5432, 18080, 20000, [], {},
                                 {"port": "http", "listen": 15432}, {"port": "http"}, [{"port": 5432, "listen": 18080}])
    return fuzz_cases.mutate(CATALOG, choose, mutations=choose((1, 2)), pool=pool)


def run_proxy_host_settings(own):
    """Each host's own address, socket and pid file over the site's (several hosts on one machine): every host's
    configuration. Rejected: one line naming the host. A violation: a path accepted where every user writes, a
    configuration line of another shape, or a host's file that names another host's address."""
    hosts = sorted(own)
    try:
        per_host = host_settings(hosts, SETTINGS, own)
        texts = {host: run_proxy_settings(per_host[host]) for host in hosts}
    except ProxyError as error:
        _one_line(str(error))
        if not str(error).startswith(tuple("%s: " % host for host in hosts)):
            return "violation: an error that names no host: %r" % str(error)[:200]
        return "rejected"
    for host, outcome in texts.items():
        if outcome != "ok":
            return outcome if outcome.startswith("violation") else "violation: %s accepted by host_settings, then %s" % (
                host, outcome)
    return "ok"


def proxy_host_settings_case(choose):
    from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases  # the harness's hostile values
    own = {"node1": {"address": "169.254.30.11", "socket": "/run/gangplank/node1/proxy.sock",
                     "pid_file": "/run/gangplank/node1/proxy.pid"},
           "node2": {"address": "169.254.30.12"}}
    extra = ("/tmp/node2/proxy.pid", "/run/gangplank/node2/../../tmp/p.sock", "node2.example", "169.254.30.12 backup",
             "0.0.0.0", "fd00::12", "/run/gangplank/node2/proxy.sock")
    for _step in range(choose((1, 2))):
        host = choose(("node1", "node2"))
        key = choose(("address", "socket", "pid_file", "colour"))
        own[host][key] = choose(extra) if choose((True, False)) else fuzz_cases.hostile_value(choose)
    return own


ENTRY_POINTS = {
    "proxy_catalog": (proxy_catalog_case, run_proxy_catalog),
    "proxy_settings": (proxy_settings_case, run_proxy_settings),
    "proxy_host_settings": (proxy_host_settings_case, run_proxy_host_settings),
}
