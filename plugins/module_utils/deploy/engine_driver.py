# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A container's whole life on the host, per engine: one option table and an ``EngineDriver`` per engine, after
community.docker's module_container (an option group with a name and a converter per engine, ``add_engine``).

- ``OPTIONS`` maps each key of a container spec (deploy.desired_containers, with its rollout labels) to the option
  of containers.podman.podman_container and of community.docker.docker_container, with a converter each; an empty
  option is left out (the module's default). A new spec key is one ``OPTIONS.add(...)`` line.
- ``start_calls(spec)``: the calls that start a container, its secrets first (Podman secrets; Docker's private
  directory and files, Docker having no secrets without Swarm), then the container.
- ``pull_calls(images, registries, passwords)``: the calls that bring a rank's images onto the host before any of its
  containers is created: a login to each registry with credentials that an image is pulled from, then each image,
  pulled only when the host does not hold it (an image loaded from a bundle is never pulled).
  ``logout_calls(images, registries)``: a logout of each registry logged in to, run whatever the pulls gave.
- ``remove_calls(name, secrets)``: the container, then its secrets, by the names given (``owned_secrets`` picks a
  container's own from the names the deploy read found): never a listing on the host.
- ``kill_argv(name, signal)``: the command that signals a kept container whose config file changed in place.
- ``bridge_command(spec)``: Podman only, for a container on the engine's own network: the host command run before it
  starts that gives each of Podman's bridges a fixed MAC address (its present one), and ``bridge_warnings`` reads what
  it printed. A Linux bridge whose address nobody set takes the lowest address of its ports, so it changes as
  containers come and go; the other containers keep the old address for their gateway until their ARP entry is
  renewed, and what they send meanwhile is lost (a client calling the local proxy saw its calls time out for tens of
  seconds after an instance whose port's address the bridge had taken was removed). Newer netavark releases set the
  address themselves, as Docker does on its bridge.

A call is ``Call(module, args, no_log)``: gangplank.platform.container runs the list in order on the host (a call with
``no_log`` carries a secret's value). Standard library only.
"""

from __future__ import annotations

import posixpath
import re
from collections import namedtuple

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.mps import SUFFIX as MPS_SUFFIX
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import CHANGE_SIGNALS

# A container name as the deploy makes them (deploy.container_name): a signal goes to no other argument.
_CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")


class EngineError(ValueError):
    """The spec cannot be turned into the engine's calls."""


# One step on the host: the module's name, its arguments, and whether they hold a secret's value.
Call = namedtuple("Call", "module args no_log")

SECRET_FILE_MODE = "0700"


class Option:
    """One spec key: its option name and converter per engine (None: the engine has no such option)."""

    def __init__(self, key, always=False):
        self.key = key
        self.always = always
        self.engines = {}

    def add_engine(self, engine, name, convert=None):
        """``convert(value, spec, context)`` gives the option's value (default: the spec's value as is)."""
        self.engines[engine] = (name, convert)
        return self


class OptionTable:
    """The spec keys in the order the engines' modules receive them."""

    def __init__(self):
        self.options = []

    def add(self, key, podman=None, docker=None, podman_convert=None, docker_convert=None, always=False):
        option = Option(key, always=always)
        if podman:
            option.add_engine("podman", podman, podman_convert)
        if docker:
            option.add_engine("docker", docker, docker_convert)
        self.options.append(option)
        return option

    def arguments(self, engine, spec, context):
        """The engine module's options for ``spec``: an empty value is left out unless the option is ``always`` set."""
        arguments = {}
        for option in self.options:
            if engine not in option.engines:
                continue
            name, convert = option.engines[engine]
            value = spec[option.key] if option.always else spec.get(option.key)
            if convert:
                value = convert(value, spec, context)
            if option.always or value:
                arguments[name] = value
        return arguments


def _text(value, _spec, _context):
    return str(value) if value else None


def _docker_env(env, spec, context):
    """Docker's env secrets set as variables (docs/catalog.md: visible to docker inspect), their values winning over
    the catalog's env."""
    env = dict(env)
    for secret in spec.get("secrets") or []:
        if secret["delivery"] == "env":
            env[secret["env"]] = _secret_value(spec, secret, context["secret_values"])
    return env


def _required(spec, key):
    if key not in spec:
        raise EngineError("has no %s" % key)
    return spec[key]


OPTIONS = OptionTable()
OPTIONS.add("name", podman="name", docker="name", always=True)
OPTIONS.add("image", podman="image", docker="image", always=True)
# Images are on the host before a container is created (a bundle's, or pulled by pull_calls): never pulled here.
OPTIONS.add("pull", docker="pull", docker_convert=lambda _value, _spec, _context: "never")
OPTIONS.add("env", podman="env", docker="env", docker_convert=_docker_env, always=True)
OPTIONS.add("command", podman="command", docker="command")
OPTIONS.add("user", podman="user", docker="user")
# An MPS client (a GPU share, module_utils/deploy/mps.py) requires its daemon with Podman: Podman starts the daemon first
# whenever it starts the instance, and does not remove the daemon under it. Docker has no start dependency
# (gangplank.platform.container waits for the daemon's limits first).
OPTIONS.add("mps_client", podman="requires", podman_convert=lambda value, _spec, _context: [value["daemon"]] if value else None)
OPTIONS.add("ports", podman="publish", docker="published_ports")
# GPUs by CDI name; Docker takes them as a device request.
OPTIONS.add("devices", podman="device", docker="device_requests",
            docker_convert=lambda value, _spec, _context: [{"driver": "cdi", "device_ids": value}] if value else None)
OPTIONS.add("volumes", podman="volume", docker="volumes")
# Docker's file secrets: private files bind-mounted read-only.
OPTIONS.add("mounts", docker="mounts")
OPTIONS.add("network", podman="network", docker="network_mode")
OPTIONS.add("cpus", podman="cpus", docker="cpus", docker_convert=lambda value, _spec, _context: float(value) if value else None)
OPTIONS.add("cpuset_cpus", podman="cpuset_cpus", docker="cpuset_cpus")
OPTIONS.add("cpuset_mems", podman="cpuset_mems", docker="cpuset_mems")
OPTIONS.add("memory", podman="memory", docker="memory", podman_convert=_text, docker_convert=_text)
# Podman's ``--secret`` options, naming the secrets start_calls() makes first.
OPTIONS.add("podman_secrets", podman="secrets")
OPTIONS.add("init", podman="init", docker="init", always=True)
OPTIONS.add("stop_timeout", podman="stop_timeout", docker="stop_timeout", always=True)
OPTIONS.add("restart_policy", podman="restart_policy", docker="restart_policy", always=True)
OPTIONS.add("labels", podman="label", docker="labels", always=True)


def _secret_value(spec, secret, secret_values):
    if secret["var"] not in secret_values:
        # The variable's name only, never a value.
        raise EngineError("%s: the value of %s (secret %s) was not given" % (spec["name"], secret["var"], secret["name"]))
    return secret_values[secret["var"]]


def image_registry(image):
    """The registry an image reference names (``host[:port]``), or "" for one without (the engine's default)."""
    first, sep, _rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return ""


_REGISTRY = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.-]{0,251}[a-zA-Z0-9])?(?::[0-9]{1,5})?")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_USERNAME = re.compile(r"[^\s:]{1,256}")
_PATH = re.compile(r"/[^\0\n]{0,4095}")
REGISTRY_KEYS = {"registry": _REGISTRY, "username": _USERNAME, "password_var": _VARIABLE, "ca_cert_dir": _PATH}


def check_registries(registries, path="deploy_registries"):
    """Each entry a dict of REGISTRY_KEYS, registry, username and password_var required, each value matched whole;
    an EngineError names the path and what was expected (never a value that could be a secret: none of these is)."""
    if not isinstance(registries, list):
        raise EngineError("%s: expected a list of registries" % path)
    for index, entry in enumerate(registries):
        where = "%s[%d]" % (path, index)
        if not isinstance(entry, dict):
            raise EngineError("%s: expected a dict with registry, username and password_var" % where)
        for key in sorted(entry):
            if key not in REGISTRY_KEYS:
                raise EngineError("%s.%s: unknown key; expected %s" % (where, key, ", ".join(sorted(REGISTRY_KEYS))))
        for key, pattern in REGISTRY_KEYS.items():
            if key not in entry:
                if key == "ca_cert_dir":
                    continue
                raise EngineError("%s.%s: missing" % (where, key))
            value = entry[key]
            if not isinstance(value, str) or not pattern.fullmatch(value):
                raise EngineError("%s.%s: got %r; expected %s" % (where, key, value if isinstance(value, str) and len(value) < 300 else type(value).__name__, {
                    "registry": "a registry host[:port], as image references name it",
                    "username": "a user name without spaces or ':'",
                    "password_var": "the name of the variable that holds the password",
                    "ca_cert_dir": "an absolute directory path on the hosts"}[key]))
        if entry["registry"] in [other["registry"] for other in registries[:index]]:
            raise EngineError("%s.registry: %s is given twice" % (where, entry["registry"]))


def _once(items):
    """Each item once, in the order of its first appearance."""
    return list(dict.fromkeys(items))


def _registry_of(image, registries):
    registry = image_registry(image)
    for entry in registries or []:
        if entry["registry"] == registry:
            return entry
    return None


class EngineDriver:
    """The calls that start and remove a container and its secrets on one engine."""

    engine = ""
    module = ""

    def __init__(self, secret_dir=None):
        # Docker's private secret files live below it (cluster_secret_dir).
        self.secret_dir = secret_dir

    def container_arguments(self, spec, secret_values=None, recreate=False):
        """The engine module's arguments that start ``spec`` (made anew with ``recreate``)."""
        arguments = OPTIONS.arguments(self.engine, spec, {"secret_values": secret_values or {}})
        arguments.update(recreate=bool(recreate), state="started")
        return arguments

    def start_calls(self, spec, secret_values=None, recreate=False):
        """The container's secrets, then the container."""
        secret_values = secret_values or {}
        container = Call(self.module, self.container_arguments(spec, secret_values, recreate), False)
        return self.secret_calls(spec, secret_values, recreate) + [container]

    def secret_calls(self, spec, secret_values, recreate):
        raise NotImplementedError

    def pull_calls(self, images, registries=(), passwords=None):
        """A login per registry with credentials that one of ``images`` names (``no_log``: it carries the password),
        then a pull of each image, in order. ``registries``: ``{registry, username, password_var, ca_cert_dir}``;
        ``passwords``: each ``password_var`` -> its value."""
        check_registries(list(registries))
        images = _once(images)
        passwords = passwords or {}
        calls, logged_in = [], []
        for image in images:
            entry = _registry_of(image, registries)
            if entry and entry["registry"] not in logged_in:
                if entry["password_var"] not in passwords:
                    raise EngineError("registry %s: the value of %s was not given" % (entry["registry"], entry["password_var"]))
                logged_in.append(entry["registry"])
                calls.append(Call(self.login_module, self.login_arguments(entry, passwords[entry["password_var"]]), True))
        for image in images:
            calls.append(Call(self.pull_module, self.pull_arguments(image, _registry_of(image, registries)), False))
        return calls

    def logout_calls(self, images, registries=()):
        """A logout of each registry that pull_calls logged in to: no credentials stay on the host."""
        calls, done = [], []
        for image in _once(images):
            entry = _registry_of(image, registries)
            if entry and entry["registry"] not in done:
                done.append(entry["registry"])
                calls.append(Call(self.logout_module, self.logout_arguments(entry), False))
        return calls

    def login_arguments(self, entry, password):
        raise NotImplementedError

    def logout_arguments(self, entry):
        raise NotImplementedError

    def pull_arguments(self, image, entry):
        raise NotImplementedError

    def remove_calls(self, name=None, secrets=()):
        """The container ``name`` (when given), then the secrets named (as owned_secrets() gives them)."""
        calls = [Call(self.module, {"name": name, "state": "absent"}, False)] if name else []
        return calls + [self.secret_remove_call(secret) for secret in secrets]

    def secret_remove_call(self, secret):
        raise NotImplementedError

    def owned_secrets(self, name, found):
        raise NotImplementedError

    def bridge_command(self, spec):
        """The host command that fixes the MAC address of the engine's bridges before ``spec`` starts (BRIDGE_COMMAND),
        or None where there is nothing to do: Docker sets its bridge's address itself, and a container with a network
        of its own (``none``, a sidecar's ``container:<name>``) adds no port to a bridge."""
        return None

    def kill_argv(self, name, signal):
        """The command that sends ``signal`` (one of the catalog's CHANGE_SIGNALS, by name) to the container ``name``'s
        main process: a config file with ``change: signal`` that was rewritten in place. The same on both engines."""
        if not isinstance(signal, str) or signal not in CHANGE_SIGNALS:
            raise EngineError("signal: got %r; expected one of %s" % (signal, ", ".join(CHANGE_SIGNALS)))
        if not isinstance(name, str) or not _CONTAINER_NAME.fullmatch(name):
            raise EngineError("name: got %r; expected a container name" % (name,))
        return [self.engine, "kill", "--signal", signal, name]


# Podman's bridges (netavark's podman<N>, the CNI plugins' cni-podman<N>) whose MAC address nobody set
# (addr_assign_type 3 is "set"), each given its present address: from then on the kernel keeps it whatever ports come
# and go. One line each: "kept <bridge> <address>", "no-ip <bridge>" (no ip command), "failed <bridge> <message>".
BRIDGE_COMMAND = r"""for device in /sys/class/net/podman[0-9]* /sys/class/net/cni-podman[0-9]*; do
  [ -d "$device/bridge" ] || continue
  [ "$(cat "$device/addr_assign_type" 2>/dev/null)" != 3 ] || continue
  bridge=${device##*/}; address=$(cat "$device/address") || continue
  if ! command -v ip >/dev/null 2>&1; then echo "no-ip $bridge"
  elif message=$(ip link set dev "$bridge" address "$address" 2>&1); then echo "kept $bridge $address"
  else echo "failed $bridge $(printf '%s' "$message" | tr -c '[:print:]' ' ' | cut -c1-200)"; fi
done; true"""
_BRIDGE_LINE = re.compile(r"(kept|no-ip|failed) ((?:cni-)?podman[0-9]{1,5})(?: (.{1,200}))?")


def bridge_warnings(stdout):
    """The warnings of BRIDGE_COMMAND's output: each bridge of Podman's whose MAC address could not be fixed."""
    warnings = []
    for line in (stdout or "").splitlines()[:64]:
        match = _BRIDGE_LINE.fullmatch(line)
        if not match or match.group(1) == "kept":
            continue
        reason = "the host has no ip command (iproute2)" if match.group(1) == "no-ip" else (
            "ip link set failed: %s" % (match.group(3) or "no message"))
        warnings.append("Podman's bridge %s keeps no fixed MAC address (%s): while containers start and stop, the "
                        "other containers on it may lose their gateway for up to a minute" % (match.group(2), reason))
    return warnings


class PodmanDriver(EngineDriver):
    """Podman: one Podman secret per container and secret, ``<container>.<secret>``."""

    engine = "podman"
    module = "containers.podman.podman_container"
    secret_module = "containers.podman.podman_secret"
    login_module = "containers.podman.podman_login"
    logout_module = "containers.podman.podman_logout"
    pull_module = "containers.podman.podman_image"

    def login_arguments(self, entry, password):
        arguments = {"registry": entry["registry"], "username": entry["username"], "password": password}
        if entry.get("ca_cert_dir"):
            arguments["certdir"] = entry["ca_cert_dir"]
        return arguments

    def logout_arguments(self, entry):
        return {"registry": entry["registry"]}

    def pull_arguments(self, image, entry):
        """Pulled when the host does not hold it (``force`` false); the credentials are the login's."""
        arguments = {"name": image, "pull": True, "force": False, "state": "present"}
        if entry and entry.get("ca_cert_dir"):
            arguments["ca_cert_dir"] = entry["ca_cert_dir"]
        return arguments

    def secret_calls(self, spec, secret_values, recreate):
        """Made anew for a container that is created or recreated: Podman copies the secret into the container then,
        so a running container keeps the value it started with, and a stopped one restarts with it."""
        if not (recreate or spec.get("action") in ("create", "recreate")):
            return []
        return [Call(self.secret_module, {"name": secret["engine_name"], "data": _secret_value(spec, secret, secret_values),
                                          "force": True, "state": "present"}, True)
                for secret in spec.get("secrets") or []]

    def secret_remove_call(self, secret):
        return Call(self.secret_module, {"name": secret, "state": "absent"}, False)

    def bridge_command(self, spec):
        return BRIDGE_COMMAND if not spec.get("network") else None

    def owned_secrets(self, name, found):
        """The Podman secrets named ``<name>.<secret>`` among ``found`` (compared as text, never as a pattern). An MPS
        daemon ``<name>.mps`` owns none: ``<name>.mps.<secret>`` is its instance's secret."""
        if name.endswith(MPS_SUFFIX):
            return []
        return [secret for secret in found or [] if secret.startswith(name + ".")]


class DockerDriver(EngineDriver):
    """Docker: a file secret is a private file ``<secret_dir>/<container>/<secret>``, bind-mounted read-only (as compose
    does); an env secret is a variable of the container (OPTIONS)."""

    engine = "docker"
    module = "community.docker.docker_container"
    login_module = "community.docker.docker_login"
    logout_module = "community.docker.docker_login"
    pull_module = "community.docker.docker_image_pull"

    def login_arguments(self, entry, password):
        """The daemon trusts a registry's CA from /etc/docker/certs.d/<registry>/ca.crt (docs/deploy.md)."""
        return {"registry_url": entry["registry"], "username": entry["username"], "password": password}

    def logout_arguments(self, entry):
        return {"registry_url": entry["registry"], "state": "absent"}

    def pull_arguments(self, image, entry):
        return {"name": image, "pull": "not_present"}

    def secret_calls(self, spec, secret_values, recreate):
        files = [secret for secret in spec.get("secrets") or [] if secret.get("path")]
        directories = []
        for secret in files:
            container_dir = posixpath.dirname(secret["path"])
            for directory in (posixpath.dirname(container_dir), container_dir):
                if directory not in directories:
                    directories.append(directory)
        calls = [Call("ansible.builtin.file", {"path": directory, "state": "directory", "mode": SECRET_FILE_MODE}, False)
                 for directory in directories]
        for secret in files:
            args = {"dest": secret["path"], "content": _secret_value(spec, secret, secret_values), "mode": secret["mode"]}
            if secret.get("uid") is not None:
                args["owner"] = secret["uid"]
            if secret.get("gid") is not None:
                args["group"] = secret["gid"]
            calls.append(Call("ansible.builtin.copy", args, True))
        return calls

    def secret_remove_call(self, secret):
        """``secret``: a container's directory, or ``<container>/<secret>``, below the secret directory."""
        if not self.secret_dir:
            raise EngineError("secret_dir: not given; Docker's secrets are files below it")
        return Call("ansible.builtin.file", {"path": posixpath.join(self.secret_dir, secret), "state": "absent"}, False)

    def owned_secrets(self, name, found):
        """The container's private directory, whatever it holds."""
        return [name]


DRIVERS = {"podman": PodmanDriver, "docker": DockerDriver}


def driver(engine, secret_dir=None):
    """The EngineDriver of ``engine``."""
    if engine not in DRIVERS:
        raise EngineError("engine: got %r; expected one of %s" % (engine, ", ".join(sorted(DRIVERS))))
    return DRIVERS[engine](secret_dir)
