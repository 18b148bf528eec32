# -*- coding: utf-8 -*-
"""The local proxy's frontends in the catalog and its configuration generated from the plan's endpoints."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import parse_catalog, read_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import endpoints
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.proxy import (
    ProxyError, host_settings, proxy_config, proxy_directories, proxy_frontends,
)

API = {"replicas": 2, "image": "localhost/app:1", "ports": [{"name": "http", "container_port": 8080}],
       "health": {"http": {"port": "http", "path": "/health"}}, "proxy": [{"port": "http", "listen": 18080}]}
DB = {"image": "localhost/app:1", "ports": [5432], "health": {"tcp": {"port": 5432}},
      "proxy": [{"port": 5432, "listen": 15432}]}
PLAN = {"n1": {"instances": {"api-0": {"service": "api", "ordinal": 0, "host_ports": {"http": 20001}},
                             "db-0": {"service": "db", "ordinal": 0}}},
        "n2": {"instances": {"api-1": {"service": "api", "ordinal": 1, "host_ports": {"http": 20000}}}}}
ADDRESSES = {"n1": "10.0.0.1", "n2": "10.0.0.2"}
SERVICES = {"db": {"stateful": True, "ports": [5432], "image": "localhost/db:1", "health": {"tcp": {"port": 5432}}},
            "api": {"replicas": 2, "ports": [8080], "depends_on": ["db"], "image": "localhost/api:1",
                    "health": {"http": {"port": 8080, "path": "/health"}}}}


def config(services=None, plan=None, settings=None):
    services = services or {"api": API, "db": DB}
    deploy = parse_catalog(services).deploy
    return proxy_config(endpoints(plan or PLAN, services, ADDRESSES), deploy, settings)


def blocks(text):
    """section header -> its lines."""
    found, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            current = found.setdefault(line, [])
        elif line.strip() and current is not None:
            current.append(line.strip())
    return found


def test_a_frontend_per_proxied_port_balances_over_every_instance_with_the_services_probe():
    found = blocks(config())
    assert found["frontend api_http"] == ["bind 169.254.30.1:18080", "default_backend api_http"]
    assert found["backend api_http"] == ["balance roundrobin", "option httpchk GET /health",
                                         "http-check expect status 200",
                                         "server api-0 10.0.0.1:20001 check", "server api-1 10.0.0.2:20000 check"]
    # A TCP probe, or none, makes a TCP connect check.
    assert found["backend db_5432"] == ["balance roundrobin", "server db-0 10.0.0.1:5432 check"]
    assert "frontend db_5432" in found


def test_the_same_input_gives_the_same_bytes_and_the_check_interval_is_the_sites():
    assert config() == config()
    text = config(settings={"check_interval": 0.5, "fall": 3, "rise": 2})
    assert "    default-server inter 500ms fastinter 500ms downinter 500ms fall 3 rise 2\n" in text


def test_a_reload_hands_over_the_listeners_and_drains_for_the_longest_stop_timeout():
    text = config(services={"api": dict(API, stop_timeout=45), "db": DB})
    assert "expose-fd listeners" in text
    assert "    hard-stop-after 45s\n" in text
    assert "    option redispatch 1\n" in text


def test_expected_statuses_of_the_probe_become_the_checks():
    api = dict(API, health={"http": {"port": "http", "path": "/ready", "expect_status": [200, 204]}})
    found = blocks(config(services={"api": api, "db": DB}))
    assert found["backend api_http"][1:3] == ["option httpchk GET /ready", "http-check expect rstatus ^(200|204)$"]


def test_a_service_with_no_instance_keeps_its_frontend_with_an_empty_backend():
    found = blocks(config(plan={"n1": {"instances": {}}}))
    assert found["backend api_http"] == ["balance roundrobin", "option httpchk GET /health",
                                         "http-check expect status 200"]


def test_an_ipv6_address_is_written_for_haproxy():
    services = {"api": API, "db": DB}
    text = proxy_config(endpoints(PLAN, services, {"n1": "fd00::1", "n2": "10.0.0.2"}), parse_catalog(services).deploy,
                        {"address": "fd00:30::1"})
    assert "    server api-0 ipv6@fd00::1:20001 check\n" in text
    assert "    bind ipv6@fd00:30::1:18080\n" in text


@pytest.mark.parametrize("path", ["/health check", "/health\nlisten evil", "/health#x", "/a\tb"])
def test_a_probe_path_that_would_inject_into_the_configuration_is_refused_naming_it(path):
    services = {"api": API, "db": DB}
    deploy = parse_catalog(services).deploy
    deploy["api"]["health"]["path"] = path      # the catalog refuses most of these itself; the generator on its own too
    with pytest.raises(ProxyError) as raised:
        proxy_config(endpoints(PLAN, services, ADDRESSES), deploy)
    assert str(raised.value).startswith("services.api.health.http.path: ")
    assert path not in str(raised.value)


@pytest.mark.parametrize("address", ["10.0.0.1 backup", "10.0.0.1\nserver x", "a#b", ""])
def test_an_endpoint_address_that_would_inject_is_refused_naming_it(address):
    deploy = parse_catalog({"api": API, "db": DB}).deploy
    found = {"api": [{"instance": "api-0", "node": "n1", "address": address, "ports": {"http": 20001}}], "db": []}
    with pytest.raises(ProxyError) as raised:
        proxy_config(found, deploy)
    assert str(raised.value).startswith("endpoints.api[0].address: ")


def test_an_instance_name_that_would_inject_is_refused():
    deploy = parse_catalog({"api": API, "db": DB}).deploy
    found = {"api": [{"instance": "api-0 x", "node": "n1", "address": "10.0.0.1", "ports": {"http": 20001}}]}
    with pytest.raises(ProxyError, match=r"^endpoints\.api\[0\]\.instance: "):
        proxy_config(found, deploy)


@pytest.mark.parametrize("settings, path", [
    ({"address": "0.0.0.0"}, "proxy.address"), ({"address": "host.example"}, "proxy.address"),
    ({"address": "10.0.0.1\nlisten x"}, "proxy.address"), ({"check_interval": 0}, "proxy.check_interval"),
    ({"fall": True}, "proxy.fall"), ({"socket": "/run/x sock"}, "deploy_proxy_socket"), ({"colour": 1}, "proxy"),
])
def test_bad_settings_are_refused_naming_them(settings, path):
    with pytest.raises(ProxyError) as raised:
        config(settings=settings)
    assert str(raised.value).startswith(path + ": ")


def test_a_listen_port_inside_the_host_port_range_is_refused():
    with pytest.raises(ProxyError, match=r"^services\.api\.proxy\[0\]\.listen: got 18080; expected a port outside"):
        config(settings={"port_range": [18000, 19000]})


@pytest.mark.parametrize("proxy, path, expected", [
    ([{"port": "grpc", "listen": 18080}], "services.api.proxy[0].port", "dynamic ports (http)"),
    ([{"port": 9090, "listen": 18080}], "services.api.proxy[0].port", "one of the service's ports"),
    ([{"port": "http", "listen": 0}], "services.api.proxy[0].listen", "from 1 to 65535"),
    ([{"port": "http", "listen": 18080}, {"port": "http", "listen": 18081}], "services.api.proxy[1].port",
     "not proxied twice"),
    ([{"port": "http"}], "services.api.proxy[0].listen", "is required"),
    ([{"port": "http", "listen": 18080, "mode": "http"}], "services.api.proxy[0].mode", "unknown key"),
    ("http", "services.api.proxy", "list"),
    ([], "services.api.proxy", "a list of frontends"),
])
def test_the_catalog_refuses_a_bad_proxy_naming_the_path(proxy, path, expected):
    errors = dict(read_catalog({"api": dict(API, proxy=proxy)}).errors)
    assert path in errors, errors
    assert expected in errors[path]


def test_two_frontends_on_one_port_or_on_a_static_port_are_refused():
    errors = dict(read_catalog({"api": API, "db": dict(DB, proxy=[{"port": 5432, "listen": 18080}])}).errors)
    assert "already" not in str(errors)
    assert "services.db.proxy[0].listen" in errors and "services.api.proxy[0]" in errors["services.db.proxy[0].listen"]
    errors = dict(read_catalog({"api": dict(API, proxy=[{"port": "http", "listen": 5432}]), "db": DB}).errors)
    assert "services.api.proxy[0].listen" in errors and "services.db.ports" in errors["services.api.proxy[0].listen"]


def test_a_catalog_without_proxy_keeps_its_specs_as_they_were():
    plain = {"api": {key: value for key, value in API.items() if key != "proxy"}}
    deploy = parse_catalog(plain).deploy
    assert "proxy" not in deploy["api"]
    assert "proxy" in parse_catalog({"api": API}).deploy["api"]


def test_templates_see_each_services_local_address_by_port():
    deploy = parse_catalog({"api": API, "db": DB}).deploy
    assert proxy_frontends(deploy) == {"api": {"http": "169.254.30.1:18080"}, "db": {"5432": "169.254.30.1:15432"}}
    assert proxy_frontends(deploy, "fd00::1") == {"api": {"http": "[fd00::1]:18080"}, "db": {"5432": "[fd00::1]:15432"}}


def test_asking_for_the_proxy_changes_no_container_and_a_site_without_it_gets_no_proxy_step():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step

    def two_hosts():
        def read(instances):
            return {"engine_found": True, "containers": [], "leftovers": [], "forwards": [], "secrets": [],
                    "missing": "", "note": "", "ranks": [["db"], ["api"]],
                    "settings": {"instances": instances, "data_dir": "/var/lib/gangplank/instances", "engine": "podman",
                                 "limits": False, "secret_dir": "/run/gangplank/secrets"}}

        def binding(service, ordinal, rank):
            return {"service": service, "ordinal": ordinal, "node": "x", "gpus": [], "nvme": None, "sidecars": [],
                    "rank": rank}
        return {"h1": read({"db-0": binding("db", 0, 0), "api-0": binding("api", 0, 1)}),
                "h2": read({"api-1": binding("api", 1, 1)})}

    plain = containers_step(["h1", "h2"], two_hosts(), SERVICES)
    assert "proxy" not in plain
    proxied = dict(SERVICES, db=dict(SERVICES["db"], proxy=[{"port": 5432, "listen": 15432}]))
    assert "proxy" not in SERVICES["db"]
    step = containers_step(["h1", "h2"], two_hosts(), proxied)
    # The same containers, specs and spec hashes: the proxy is no part of a container.
    assert step["containers"] == plain["containers"]
    assert step["proxy"]["config"] == proxy_config(step["endpoints"], parse_catalog(proxied).deploy)
    assert step["proxy"]["frontends"] == {"db": {"5432": "169.254.30.1:15432"}}
    text = step["proxy"]["config"]
    assert "    server db-0 h1:5432 check\n" in text


@pytest.mark.parametrize("key, variable, path, expected", [
    ("pid_file", "deploy_proxy_pid_file", "/tmp/proxy.pid", "/tmp/proxy.pid is inside /tmp, which every user can write"),
    ("socket", "deploy_proxy_socket", "/dev/shm/p.sock", "/dev/shm/p.sock is inside /dev/shm, which every user can write"),
    ("pid_file", "deploy_proxy_pid_file", "/var/lock/x/p.pid", "inside /var/lock"),
    ("pid_file", "deploy_proxy_pid_file", "/run/../tmp/p.pid", "expected an absolute, normalised path"),
    ("pid_file", "deploy_proxy_pid_file", "proxy.pid", "expected an absolute, normalised path"),
    ("socket", "deploy_proxy_socket", "/proxy.sock", "in a directory other than /"),
    ("pid_file", "deploy_proxy_pid_file", "/run/p.pid\nx", "expected an absolute, normalised path"),
    ("pid_file", "deploy_proxy_pid_file", 7, "expected an absolute, normalised path"),
])
def test_a_pid_file_or_socket_where_other_users_write_is_refused_naming_the_variable(key, variable, path, expected):
    for make in (lambda: config(settings={key: path}), lambda: proxy_directories({key: path})):
        with pytest.raises(ProxyError) as raised:
            make()
        assert str(raised.value).startswith(variable + ": ") and expected in str(raised.value)


def walk(*directories):
    argv = proxy_directories({"pid_file": directories[0] + "/proxy.pid", "socket": directories[-1] + "/proxy.sock"})
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="the host's side runs as root: directories of root's are needed")
def test_the_directories_are_made_roots_and_a_link_or_a_directory_others_can_write_stops_it():
    base = tempfile.mkdtemp(prefix="gangplank-proxy-test-", dir="/run")
    try:
        done = walk(base + "/a/b", base + "/c")
        made = ["made %s/a %s/a/b" % (base, base), "made %s/c" % base]
        assert done.returncode == 0 and done.stdout.split("\n")[:2] == made, done.stdout
        assert stat.S_IMODE(os.stat(base + "/a/b").st_mode) == 0o755
        again = walk(base + "/a/b", base + "/c")
        assert again.returncode == 0 and again.stdout == ""
        os.symlink(base + "/c", base + "/link")
        done = walk(base + "/link", base + "/c")
        assert done.returncode == 1 and done.stdout.strip() == "%s/link is a symbolic link; expected a directory of root's" % base
        os.chmod(base + "/c", 0o777)
        done = walk(base + "/a/b", base + "/c")
        assert done.returncode == 1 and "%s/c can be written by other users (mode 777)" % base in done.stdout
        os.chmod(base + "/c", 0o755)
        os.chown(base + "/c", 65534, 65534)
        done = walk(base + "/a/b", base + "/c/d")
        assert done.returncode == 1 and "%s/c is owned by uid 65534" % base in done.stdout
        assert not os.path.exists(base + "/c/d")
    finally:
        subprocess.run(["rm", "-rf", "--", base], check=False)


def reads_of(own=None):
    """Two hosts' reads, each host's own proxy settings (``own``: host -> them) in its settings where given."""
    def read(host, instances):
        settings = {"instances": instances, "data_dir": "/var/lib/gangplank/instances", "engine": "podman",
                    "limits": False, "secret_dir": "/run/gangplank/secrets", "publish_address": ADDRESSES["n" + host[-1]]}
        if own is not None and host in own:
            settings["proxy"] = own[host]
        return {"engine_found": True, "containers": [], "leftovers": [], "forwards": [], "secrets": [],
                "missing": "", "note": "", "ranks": [["db"], ["api"]], "settings": settings}

    def binding(service, ordinal, rank):
        return {"service": service, "ordinal": ordinal, "node": "x", "gpus": [], "nvme": None, "sidecars": [],
                "rank": rank, "host_ports": {}}
    return {"h1": read("h1", {"db-0": binding("db", 0, 0), "api-0": binding("api", 0, 1)}),
            "h2": read("h2", {"api-1": binding("api", 1, 1)})}


PROXIED = dict(SERVICES, db=dict(SERVICES["db"], proxy=[{"port": 5432, "listen": 15432}]))
SITE = {"address": "169.254.30.1", "check_interval": 1.0, "fall": 2, "rise": 1, "port_range": [20000, 32000],
        "socket": "/run/gangplank/proxy.sock", "pid_file": "/run/gangplank/proxy.pid"}
OWN = {"h1": {"address": "169.254.30.11", "socket": "/run/gangplank/h1/proxy.sock",
              "pid_file": "/run/gangplank/h1/proxy.pid"},
       "h2": {"address": "169.254.30.12", "socket": "/run/gangplank/h2/proxy.sock",
              "pid_file": "/run/gangplank/h2/proxy.pid"}}


def test_a_site_that_sets_the_proxy_once_gets_the_same_configuration_plan_and_specs_as_without_host_settings():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step

    before = containers_step(["h1", "h2"], reads_of(), PROXIED, proxy=SITE)
    # Every host hands its settings, all the same: a site that sets them once (group_vars or the defaults).
    same = {host: {"address": SITE["address"], "socket": SITE["socket"], "pid_file": SITE["pid_file"]}
            for host in ("h1", "h2")}
    after = containers_step(["h1", "h2"], reads_of(same), PROXIED, proxy=SITE)
    assert after == before
    assert sorted(after["proxy"]) == ["config", "directories", "frontends"]
    # The text the generator gives with the site's settings alone, byte for byte.
    assert after["proxy"]["config"] == proxy_config(after["endpoints"], parse_catalog(PROXIED).deploy, SITE)
    assert after["proxy"]["frontends"] == {"db": {"5432": "169.254.30.1:15432"}}
    assert after["proxy"]["directories"] == proxy_directories(SITE)


def test_hosts_with_their_own_address_socket_and_pid_file_each_get_their_own_configuration():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step

    plain = containers_step(["h1", "h2"], reads_of(), PROXIED, proxy=SITE)
    step = containers_step(["h1", "h2"], reads_of(OWN), PROXIED, proxy=SITE)
    # The proxy is no part of a container: the same specs, render lists and endpoints.
    assert step["containers"] == plain["containers"] and step["endpoints"] == plain["endpoints"]
    assert sorted(step["proxy"]) == ["hosts"] and sorted(step["proxy"]["hosts"]) == ["h1", "h2"]
    deploy = parse_catalog(PROXIED).deploy
    for host in ("h1", "h2"):
        mine = step["proxy"]["hosts"][host]
        settings = dict(SITE, **OWN[host])
        assert mine["config"] == proxy_config(step["endpoints"], deploy, settings)
        assert blocks(mine["config"])["frontend db_5432"][0] == "bind %s:15432" % OWN[host]["address"]
        assert "stats socket %s mode 600" % OWN[host]["socket"] in mine["config"]
        assert mine["frontends"] == {"db": {"5432": "%s:15432" % OWN[host]["address"]}}
        assert mine["directories"][-1] == "/run/gangplank/%s" % host
    # Both balance over the same instances: only the address and the socket differ.
    h1, h2 = (step["proxy"]["hosts"][host]["config"] for host in ("h1", "h2"))
    assert [line for line in h1.splitlines() if "server " in line] == [line for line in h2.splitlines() if "server " in line]
    assert [line for line in h1.splitlines() if "30.11" not in line and "/h1/" not in line] \
        == [line for line in h2.splitlines() if "30.12" not in line and "/h2/" not in line]


def test_a_host_that_sets_only_its_address_keeps_the_sites_paths():
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step

    step = containers_step(["h1", "h2"], reads_of({"h2": {"address": "169.254.30.12"}}), PROXIED, proxy=SITE)
    assert step["proxy"]["hosts"]["h1"]["frontends"] == {"db": {"5432": "169.254.30.1:15432"}}
    assert step["proxy"]["hosts"]["h2"]["frontends"] == {"db": {"5432": "169.254.30.12:15432"}}
    assert step["proxy"]["hosts"]["h2"]["directories"] == proxy_directories(SITE)


@pytest.mark.parametrize("own, expected", [
    ({"address": "0.0.0.0"}, "h2: gangplank_proxy_address: expected one IP address of the host"),
    ({"address": "node2.example"}, "h2: gangplank_proxy_address: expected one IP address of the host"),
    ({"socket": "/tmp/h2/proxy.sock"}, "h2: deploy_proxy_socket: /tmp/h2/proxy.sock is inside /tmp"),
    ({"pid_file": "/run/x y.pid"}, "h2: deploy_proxy_pid_file: expected an absolute, normalised path"),
    ({"colour": "red"}, "h2: the host's proxy settings: expected some of gangplank_proxy_address"),
])
def test_a_bad_setting_of_one_host_is_refused_naming_the_host_and_the_variable(own, expected):
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step

    with pytest.raises(ProxyError) as raised:
        containers_step(["h1", "h2"], reads_of({"h1": OWN["h1"], "h2": own}), PROXIED, proxy=SITE)
    assert str(raised.value).startswith(expected)
    assert "node2.example" not in str(raised.value)


def test_host_settings_are_the_sites_with_each_hosts_own():
    assert host_settings(["a", "b"], SITE, {"b": {"address": "127.0.0.9"}}) == {
        "a": SITE, "b": dict(SITE, address="127.0.0.9")}
    with pytest.raises(ProxyError, match=r'^"a\\nb": gangplank_proxy_address: '):
        host_settings(["a\nb"], SITE, {"a\nb": {"address": "x"}})
