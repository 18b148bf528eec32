# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The app catalog's parser: what the scheduler places, and how each service runs as a container.

A catalog entry is a scheduling problem's service (docs/problem-format.md) plus the deploy keys
(DEPLOY_KEYS), which only the deploy side reads (docs/catalog.md). This parser checks the deploy keys
with the same wording as the scheduler's parser and hands the scheduler only its own keys, so each side
stays strict about what it owns. It imports nothing of the scheduler: planning a catalog is planning.py's.

Parse once and pass the value:

- ``parse_catalog(services) -> Catalog``, or ProblemError naming every mistake of the deploy keys (and every
  entry that is not a mapping). What the deploy side calls.
- ``read_catalog(services) -> Catalog`` with the mistakes in ``errors`` instead, and an entry that is not a
  mapping left in ``scheduling`` for the scheduler's parser to name (planning.py reports both sides together).
- ``split_catalog(services) -> (scheduling, deploy)``: parse_catalog's two fields, for older callers.
- ``handed_catalog(value) -> Catalog``: the Catalog of ``{scheduling, deploy}``, a parse an earlier task of the same
  run returned as plain data (registered, then passed as an option), so a run parses its catalog once;
  ``catalog_secrets(deploy) -> dict`` and ``handed_secrets(value) -> dict``: the same for the secrets alone.

``Catalog`` (a NamedTuple, so ``scheduling, deploy, errors = read_catalog(...)`` also works):

- ``scheduling``: service name -> the entry's scheduler keys (SERVICE_KEYS), plus ``image`` once checked here:
  a problem's ``services`` (docs/problem-format.md).
- ``deploy``: service name -> its deploy spec, a dict with ``image`` (str or None), ``command`` (argv list or
  None), ``env`` (name -> text), ``init`` (bool), ``stop_timeout`` (s), ``restart_policy`` (RESTART_POLICIES),
  ``health`` (the probe: ``type`` http/tcp/command, ``timeout``, ``interval``, ``retries``, ``start_period``, and
  ``port``, ``path``, ``expect_status`` or ``argv``; or None), ``config`` (files: ``dest``, ``mode``, ``group``,
  ``diff``, and ``src`` or ``content``; a file that does not restart its container also ``change`` and, for a signal,
  ``signal``), ``secrets`` (each: ``name``, ``var``, ``delivery`` file/env, ``env``,
  ``target``, ``mode``, ``uid``, ``gid``), ``nvme_path``, ``max_unavailable`` (int or "N%"), ``down_grace`` (s or
  None) and ``ports`` (the service's ports, for the probe); a service that asks for the local proxy also has ``proxy``
  (its frontends, module_utils/planning/proxy.py), and one with dynamic ports ``dynamic_ports``.
- ``errors``: [(path, message), ...] of the deploy keys; always empty from parse_catalog.
"""

from __future__ import annotations

import math
import posixpath
import re
from typing import NamedTuple

from ansible_collections.gangplank.platform.plugins.module_utils.planning.down_hosts import MAX_DOWN_GRACE
from ansible_collections.gangplank.platform.plugins.module_utils.health import MAX_RETRIES, MAX_SECONDS
from ansible_collections.gangplank.platform.plugins.module_utils.messages import describe, printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.planning.proxy import ProxyError, proxy_listens, read_proxy
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import (
    MAX_ENTRIES, MAX_ITEMS, MAX_SERVICES, SERVICE_KEYS,
)
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError, Reader, join_path
# A leaf of plain quantities (it imports nothing of the scheduler): the catalog reads volume sizes as the problem does.
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import parse_size
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, well_formed

DEPLOY_KEYS = ("image", "command", "env", "init", "stop_timeout", "restart_policy", "health", "config", "nvme_path",
               "max_unavailable", "down_grace", "secrets", "volumes", "proxy")
RESTART_POLICIES = ("no", "on-failure", "always", "unless-stopped")
PROBE_TYPES = ("http", "tcp", "command")
_HEALTH_KEYS = PROBE_TYPES + ("timeout", "interval", "retries", "start_period")
_HTTP_KEYS = ("port", "path", "expect_status")
_CONFIG_KEYS = ("dest", "src", "content", "mode", "group", "diff", "change", "signal")
# What a deploy does to a running container whose config file renders differently (docs/catalog.md): restart it (the
# default), rewrite the file in place and send it a signal, or rewrite the file in place only.
CONFIG_CHANGES = ("restart", "signal", "none")
# The signals a config file's change may send, by name, as `podman kill --signal` and `docker kill --signal` take them.
CHANGE_SIGNALS = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGWINCH")
DEFAULT_CHANGE_SIGNAL = "SIGHUP"
_SECRET_KEYS = ("var", "env", "target", "mode", "uid", "gid")

# GPU visibility is the scheduler's: the instance gets the devices it was granted, a sidecar none.
GPU_VISIBILITY_VARIABLES = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES",
                            "NVIDIA_MIG_MONITOR_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                            "GPU_DEVICE_ORDINAL")
# An image reference as the engines parse it (distribution/reference): [registry[:port]/]path[:tag][@digest].
_DOMAIN = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(r"(?:%s/)?%s(?:/%s)*(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?"
                    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,})?"
                    % (_DOMAIN, _PATH_COMPONENT, _PATH_COMPONENT))
_IMAGE_EXPECTED = ("an image reference such as localhost/app:1 or registry:5000/app@sha256:<64 hex digits> "
                   "([registry/]name[:tag][@digest], not starting with '-')")
# A pinned digest the engines can pull: sha256 with its 64 lowercase hex digits (distribution/reference).
_SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_IMAGE = 512
_MAX_NUMBER_DIGITS = 64         # as a label value (reader.py)
_PORTS_SHOWN = 10
# Characters that would end an argument, a line or a volume specification ("src:dest:options").
_CONTROL = re.compile(r"[\x00\n\r]")
_VOLUME_SEPARATORS = re.compile(r"[:,\x00\n\r]")

DEFAULT_NVME_PATH = "/mnt/nvme"
# Secrets (docs/catalog.md): each names the Ansible variable that holds its value; only the deploy role reads the value.
MAX_SECRETS = 64
SECRET_DIR_IN_CONTAINER = "/run/secrets"
DEFAULT_SECRET_MODE = "0400"
# A rendered config file may hold a secret (a template reads any variable): private unless the catalog says otherwise.
DEFAULT_CONFIG_MODE = "0600"
MAX_ID = 2 ** 31 - 1
# Secret names become file and engine object names: no '/', no leading '.' or '-', bounded.
_SECRET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_SECRET_NAME_EXPECTED = "a secret name that is a safe file name: 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_VARIABLE_EXPECTED = "the name of the Ansible variable that holds the value (letters, digits and '_', at most 128), not the value"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ENV_NAME_EXPECTED = "an environment variable name (letters, digits and '_', not starting with a digit, at most 128)"
_MODE = re.compile(r"0?[0-7]{3}")
# Volumes (docs/catalog.md): each instance's own directory, on the node's data filesystem or on its NVMe placement.
VOLUME_PLACES = ("disk", "nvme")
_VOLUME_KEYS = ("name", "path", "where", "size", "uid", "gid", "mode")
MAX_VOLUMES = 32
# A volume's name is a directory name on the host: no '/', no leading '.' or '-', bounded.
_VOLUME_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
_VOLUME_NAME_EXPECTED = "a volume name: 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit"
DEFAULT_VOLUME_MODE = "0750"
_MAX_SECRET_NAME = 63
_MAX_VARIABLE = 128
DEFAULT_STOP_TIMEOUT = 10
DEFAULT_RESTART_POLICY = "always"
# How many instances of a service a rolling restart may have down at once (docs/catalog.md): a count or a percentage
# of the service's instances, rounded up. Stateful services restart one at a time unless the catalog says otherwise.
DEFAULT_MAX_UNAVAILABLE_STATEFUL = 1
DEFAULT_MAX_UNAVAILABLE_STATELESS = "25%"
MAX_UNAVAILABLE_LIMIT = 100000
_PERCENT = re.compile(r"([0-9]{1,3})%")
_MAX_UNAVAILABLE_EXPECTED = "an integer from 1 to %d, or a percentage from 1%% to 100%% such as '25%%'" % MAX_UNAVAILABLE_LIMIT


class _HidingReader(Reader):
    """The catalog's reader for the places that may hold a secret (a secret's name, variable and delivery, an env
    value): a mistake names the path and the value's type and size (messages.describe), never the value. It shares the
    reader's errors and count."""

    def __init__(self, reader):  # pylint: disable=super-init-not-called
        self.__dict__ = reader.__dict__

    def bad(self, path, value, expected):
        self.error(path, "got %s (not shown: it may be a secret); expected %s" % (describe(value), expected))

    def mapping(self, value, path, keys=None, required=(), optional_none=True, maximum=MAX_ITEMS, key_expected=None):
        """As Reader.mapping; a key that is not a string of one line is described at ``path`` (a value written where a
        name goes would be shown in the key's path), with ``key_expected`` if given."""
        if isinstance(value, dict) and len(value) <= maximum:
            hidden = [key for key in value if not isinstance(key, str) or has_control(key)]
            for key in hidden:
                self.error(path, "has a key that is %s (not shown: it may be a secret); expected %s" % (
                    describe(key), key_expected or "a string key without control characters (line breaks, tabs, NUL, "
                                                   "bidi overrides, lone surrogates)"))
            if hidden:
                value = {key: item for key, item in value.items() if key not in hidden}
        return Reader.mapping(self, value, path, keys, required, optional_none, maximum)


def _digest_well_formed(image):
    """A reference by sha256 digest carries all of its 64 lowercase hex digits."""
    _name, at, digest = image.partition("@")
    return not at or not digest.startswith("sha256:") or bool(_SHA256_DIGEST.fullmatch(digest))


def _max_unavailable(reader, spec, path):
    """The catalog's max_unavailable as given (an integer, or 'N%'), or the default for a stateful or stateless service."""
    value = spec.get("max_unavailable")
    if value is None:
        return DEFAULT_MAX_UNAVAILABLE_STATEFUL if spec.get("stateful") is True else DEFAULT_MAX_UNAVAILABLE_STATELESS
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_UNAVAILABLE_LIMIT:
        return value
    # fullmatch: "$" also matches before a final newline, so match let "50%\n" (a YAML block scalar) through.
    match = _PERCENT.fullmatch(value) if isinstance(value, str) else None
    if match and 1 <= int(match.group(1)) <= 100:
        return value
    reader.bad(path, value, _MAX_UNAVAILABLE_EXPECTED)
    return DEFAULT_MAX_UNAVAILABLE_STATEFUL


def unavailable_count(max_unavailable, replicas):
    """How many of ``replicas`` instances may be down at once: a percentage rounded up, at least 1."""
    if isinstance(max_unavailable, str):
        percent = int(max_unavailable.rstrip("%"))
        return max(1, -(-percent * replicas // 100))
    return max(1, max_unavailable)


def _text(reader, value, path):
    """A string, number or boolean as text without NUL or line breaks (they would cut an argument or a line)."""
    text = reader.label_value(value, path, single_line=False)
    if text is not None and _CONTROL.search(text):
        reader.bad(path, value, "text without NUL or line breaks")
        return None
    return text


def _hidden_value_text(reader, value, path):
    """As _text, for a value that may be a secret (an env value): a mistake names its type, never the value."""
    text = None
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, int) and value.bit_length() <= _MAX_NUMBER_DIGITS * 4 and len(str(value)) <= _MAX_NUMBER_DIGITS:
        text = str(value)
    elif isinstance(value, float) and math.isfinite(value):
        text = repr(value)
    if text is not None and not _CONTROL.search(text) and text.encode("utf-8", "surrogatepass").decode("utf-8", "ignore") == text:
        return text
    reader.error(path, "got a value of type %s (not shown: it may be a secret); expected a string, a boolean or a number "
                       "of at most %d digits, as text without NUL, line breaks or lone surrogates" % (type(value).__name__, _MAX_NUMBER_DIGITS))
    return None


def _argv(reader, value, path):
    """A command as a list of strings: a single string is refused rather than split."""
    if not isinstance(value, list) or not value:
        reader.bad(path, value, "a non-empty list of strings (the command and its arguments, run without a shell)")
        return None
    if len(value) > MAX_ITEMS:
        reader.error(path, "has %d items; expected at most %d" % (len(value), MAX_ITEMS))
        return None
    argv = [_text(reader, item, join_path(path, position)) for position, item in enumerate(value)]
    return None if None in argv else argv


def _number(reader, value, path, default, minimum):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value) or value < minimum:
        reader.bad(path, value, "a number of seconds >= %s" % minimum)
        return default
    if value > MAX_SECONDS:
        reader.bad(path, value, "a number of seconds >= %s, at most %d" % (minimum, MAX_SECONDS))
        return default
    return float(value)


def _finite(number):
    # float() of a huge integer overflows; compare integers as they are.
    return isinstance(number, int) or math.isfinite(number)


def _container_path(reader, value, path, expected):
    """An absolute, normalised path in the container other than /, that cannot add volume options."""
    text = reader.string(value, path, "an absolute path in the container")
    if text is None or not text.startswith("/"):
        if text is not None:
            reader.bad(path, value, expected)
        return None
    if posixpath.normpath(text) != text:
        reader.bad(path, value, "an absolute, normalised path in the container")
        return None
    if text == "/" or _VOLUME_SEPARATORS.search(text):
        # "/cache:U,suid" would add volume options, and a file mounted on / would replace the container's root.
        reader.bad(path, value, "a path in the container other than /, without ':', ',', NUL or line breaks")
        return None
    return text


def _health(reader, value, path, ports, port_names=()):
    spec = reader.mapping(value, path, _HEALTH_KEYS)
    if not spec:
        return None
    kinds = [kind for kind in PROBE_TYPES if kind in spec]
    if len(kinds) != 1:
        reader.bad(path, value, "exactly one probe: http, tcp or command")
        return None
    kind = kinds[0]
    probe = {
        "type": kind,
        "timeout": _number(reader, spec.get("timeout"), join_path(path, "timeout"), 2.0, 0.1),
        "interval": _number(reader, spec.get("interval"), join_path(path, "interval"), 1.0, 0),
        "retries": reader.integer(spec.get("retries"), join_path(path, "retries"), minimum=1, limit=MAX_RETRIES,
                                  default=60),
        "start_period": _number(reader, spec.get("start_period"), join_path(path, "start_period"), 0.0, 0),
    }
    kind_path = join_path(path, kind)
    if kind == "command":
        probe["argv"] = _argv(reader, spec[kind], kind_path)
        return probe
    target = reader.mapping(spec[kind], kind_path, _HTTP_KEYS if kind == "http" else ("port",), required=("port",),
                            optional_none=False)
    if isinstance(target.get("port"), str) and port_names:
        # A dynamic port, by name: the probe asks the host port the instance was given.
        if target["port"] not in port_names:
            reader.bad(join_path(kind_path, "port"), target["port"],
                       "one of the service's ports, or the name of a dynamic one (%s)" % ", ".join(port_names))
        port = None
        probe["port_name"] = target["port"] if target["port"] in port_names else None
    else:
        port = reader.integer(target["port"], join_path(kind_path, "port"), minimum=1, maximum=65535) \
            if "port" in target else None
    if port is not None and port not in ports:
        # Probes run on the host against published ports, so the port must be one the service publishes.
        # The first ports only: the list may hold 1,024 (or a hostile list of thousands); the error stays one short line.
        shown = ", ".join(map(str, ports[:_PORTS_SHOWN])) + (", ..." if len(ports) > _PORTS_SHOWN else "")
        reader.bad(join_path(kind_path, "port"), port, "one of the service's ports (%s)" % (shown or "none listed"))
    probe["port"] = port
    if kind == "http":
        probe["path"] = reader.string(target.get("path", "/"), join_path(kind_path, "path"), "a URL path beginning with /")
        if probe["path"] is not None and (not probe["path"].startswith("/") or not probe["path"].isprintable()
                                          or " " in probe["path"]):
            reader.bad(join_path(kind_path, "path"), probe["path"], "a URL path beginning with /")
        statuses = reader.sequence(target.get("expect_status"), join_path(kind_path, "expect_status"))
        probe["expect_status"] = [reader.integer(item, join_path(join_path(kind_path, "expect_status"), position),
                                                 minimum=100, maximum=599)
                                  for position, item in enumerate(statuses)] or None
    return probe


_DEST_EXPECTED = "an absolute, normalised path in the container"
_NVME_PATH_EXPECTED = "an absolute path in the container"


def _config(reader, value, path):
    files = []
    destinations = set()
    for position, item in enumerate(reader.sequence(value, path)):
        item_path = join_path(path, position)
        spec = reader.mapping(item, item_path, _CONFIG_KEYS, required=("dest",), optional_none=False)
        if not isinstance(item, dict):
            continue
        dest = _container_path(reader, spec["dest"], join_path(item_path, "dest"), _DEST_EXPECTED) if "dest" in spec else None
        if dest is not None and dest in destinations:
            reader.bad(join_path(item_path, "dest"), dest, "a path not listed twice")
        destinations.add(dest)
        if ("src" in spec) == ("content" in spec):
            # Not the item itself: its content may hold a secret.
            reader.error(item_path, "has %s; expected exactly one of src (a Jinja2 template file) or content (the file's text)"
                         % ("both src and content" if "src" in spec else "neither src nor content"))
            continue
        mode = _file_mode(reader, spec.get("mode"), join_path(item_path, "mode"), DEFAULT_CONFIG_MODE, others=True)
        group = reader.integer(spec["group"], join_path(item_path, "group"), maximum=MAX_ID) if spec.get("group") is not None else None
        # Rendered files may hold secrets: their text is never shown unless the catalog asks for full diffs.
        entry = {"dest": dest, "mode": mode, "group": group, "diff": reader.boolean(spec.get("diff"), join_path(item_path, "diff"))}
        if "src" in spec:
            entry["src"] = reader.string(spec["src"], join_path(item_path, "src"), "a template file path")
        else:
            content = spec["content"]
            if not isinstance(content, str):
                reader.error(join_path(item_path, "content"), "got a value of type %s (not shown: it may hold a secret); expected a string"
                             % type(content).__name__)
            entry["content"] = content
        entry.update(_config_change(reader, spec, item_path))
        files.append(entry)
    return files


def _config_change(reader, spec, path):
    """A config file's ``change`` and ``signal``, only where it does not restart: a file that restarts its container
    (the default) keeps the entry it always had, so its specs and their hashes stay as they were."""
    change = spec.get("change", "restart")
    if not isinstance(change, str) or change not in CONFIG_CHANGES:
        reader.bad(join_path(path, "change"), change, "one of %s" % ", ".join(CONFIG_CHANGES))
        return {}
    if "signal" in spec and change != "signal":
        reader.error(join_path(path, "signal"), "is set, but change is %s; expected signal only with change: signal" % change)
        return {}
    if change == "restart":
        return {}
    if change == "none":
        return {"change": "none"}
    signal = spec.get("signal", DEFAULT_CHANGE_SIGNAL)
    if not isinstance(signal, str) or signal not in CHANGE_SIGNALS:
        reader.bad(join_path(path, "signal"), signal, "one of %s" % ", ".join(CHANGE_SIGNALS))
        return {}
    return {"change": "signal", "signal": signal}


def _octal_mode(value):
    """A mode from an octal string ("0640") or the integer YAML reads from 0640 (at most 0o777); None for anything
    else."""
    if isinstance(value, str) and _MODE.fullmatch(value):
        return int(value, 8)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o777:
        return value
    return None


def _file_mode(reader, value, path, default, others=False):
    """A file mode as four octal digits ('0400') from the catalog's octal string or the integer YAML reads from 0400.

    The owner may read; nobody may execute; others may not write, and may read only where ``others`` allows it."""
    if value is None:
        return default
    mode = _octal_mode(value)
    forbidden = 0o133 if others else 0o137
    if mode is None or not mode & 0o400 or mode & forbidden:
        reader.bad(path, value, "a file mode such as '0400' or '0640' that the owner may read, nobody may execute%s"
                   % (" and others may not write" if others else " and others may not read"))
        return default
    return "%04o" % mode


def _secrets(reader, value, path, env, config):
    """The service's secrets, by name: each names the Ansible variable with its value (never the value) and is
    delivered as a file (default) or, with ``env``, as an environment variable.

    A value written where a name goes (``var: "hunter2"``, ``secrets: "hunter2"``) must not be shown: every mistake
    here names the path and the value's type and size (_HidingReader), never the value."""
    reader = _HidingReader(reader)
    secrets = []
    targets = {entry["dest"] for entry in config}
    env_names = set()
    entries = reader.mapping(value, path, maximum=MAX_SECRETS, key_expected=_SECRET_NAME_EXPECTED)
    for name, item in sorted(entries.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str):
            continue                            # reader.mapping named it
        if not well_formed(name, _SECRET_NAME, _MAX_SECRET_NAME):
            # At the mapping's path: the key's path would show it.
            reader.error(path, "has a key that is %s (not shown: it may be a secret); expected %s"
                         % (describe(name), _SECRET_NAME_EXPECTED))
            continue
        item_path = join_path(path, name)
        if isinstance(item, str):
            item = {"var": item}                # the short form: the variable's name
        elif not isinstance(item, dict):
            reader.bad(item_path, item, "the name of the Ansible variable that holds the value, or a mapping with var "
                       "(and env, or target, mode, uid and gid)")
            continue
        spec = reader.mapping(item, item_path, _SECRET_KEYS, required=("var",), optional_none=False)
        if "var" not in spec:
            continue
        var = spec["var"]
        if not well_formed(var, _VARIABLE, _MAX_VARIABLE):
            reader.bad(join_path(item_path, "var"), var, _VARIABLE_EXPECTED)
            continue
        secret = {"name": name, "var": var, "delivery": "file", "env": None, "target": None, "mode": None, "uid": None,
                  "gid": None}
        if spec.get("env") is not None:
            file_keys = [key for key in ("target", "mode", "uid", "gid") if spec.get(key) is not None]
            if file_keys:
                reader.error(item_path, "sets env and %s; expected env (delivery as an environment variable) or the "
                             "file's target, mode, uid and gid, not both" % ", ".join(file_keys))
                continue
            env_name = spec["env"]
            env_path = join_path(item_path, "env")
            if not well_formed(env_name, _ENV_NAME, _MAX_VARIABLE):
                reader.bad(env_path, env_name, _ENV_NAME_EXPECTED)
                continue
            if env_name in GPU_VISIBILITY_VARIABLES or env_name.startswith("GANGPLANK_"):
                reader.bad(env_path, env_name, "a variable name other than GANGPLANK_* and the GPU visibility variables "
                           "(the scheduler sets those)")
                continue
            if env_name in env or env_name in env_names:
                reader.bad(env_path, env_name, "a variable name that the service's env and its other secrets do not set")
                continue
            env_names.add(env_name)
            secret.update(delivery="env", env=env_name)
        else:
            target_path = join_path(item_path, "target")
            target = (_container_path(reader, spec["target"], target_path, _DEST_EXPECTED) if spec.get("target") is not None
                      else posixpath.join(SECRET_DIR_IN_CONTAINER, name))
            if target is not None and target in targets:
                reader.bad(target_path, target, "a path in the container that no config file or other secret uses")
            targets.add(target)
            secret.update(target=target, mode=_file_mode(reader, spec.get("mode"), join_path(item_path, "mode"),
                                                         DEFAULT_SECRET_MODE),
                          uid=reader.integer(spec["uid"], join_path(item_path, "uid"), maximum=MAX_ID)
                          if spec.get("uid") is not None else None,
                          gid=reader.integer(spec["gid"], join_path(item_path, "gid"), maximum=MAX_ID)
                          if spec.get("gid") is not None else None)
        secrets.append(secret)
    return secrets


def _env(reader, value, path):
    """The service's env. Its values may be secrets: a mistake names the path and the value's type, never the value
    (a reserved name included). Names are shown: they are not secrets."""
    env = {}
    if value is not None and not isinstance(value, dict):
        # Not the value itself: its entries may be secrets.
        reader.error(path, "got a value of type %s (not shown: it may hold secrets); expected a mapping" % type(value).__name__)
        return env
    for key, item in sorted(reader.mapping(value, path).items(), key=lambda kv: str(kv[0])):
        if not isinstance(key, str) or has_control(key):
            continue                            # reader.mapping named it
        if not key or "=" in key:
            reader.bad(join_path(path, key), key, "a variable name without '='")
            continue
        if key in GPU_VISIBILITY_VARIABLES:
            # The name, never the value (M7: the value was quoted back).
            reader.error(join_path(path, key), "is reserved (the value is not shown): GPU visibility is set by the "
                         "scheduler, from the GPUs it granted the instance (none to a sidecar); remove %s from env" % key)
            continue
        converted = _hidden_value_text(reader, item, join_path(path, key))
        if converted is not None:
            env[key] = converted
    return env


def _deploy_spec(reader, spec, path):
    listed = spec.get("ports") if isinstance(spec.get("ports"), list) else []     # the scheduler names a bad list
    ports = [port for port in listed if isinstance(port, int) and not isinstance(port, bool)]
    # Dynamic ports ({name, container_port}): the scheduler's parser names a bad one; the well-formed ones are kept.
    dynamic = [{"name": item["name"], "container_port": item["container_port"]} for item in listed
               if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("container_port"), int)
               and not isinstance(item.get("container_port"), bool)]
    image = spec.get("image")
    if image is not None:
        image = reader.string(image, join_path(path, "image"), "an image reference such as localhost/app:1")
        if image is not None and not (well_formed(image, _IMAGE, _MAX_IMAGE) and _digest_well_formed(image)):
            reader.bad(join_path(path, "image"), image, _IMAGE_EXPECTED)
            image = None
    restart = spec.get("restart_policy", DEFAULT_RESTART_POLICY)
    if restart is False:
        restart = "no"          # YAML 1.1 reads the documented `restart_policy: no` as false
    if not isinstance(restart, str) or restart not in RESTART_POLICIES:
        reader.bad(join_path(path, "restart_policy"), restart, "one of " + ", ".join(RESTART_POLICIES))
    nvme_path = spec.get("nvme_path", DEFAULT_NVME_PATH)
    nvme_path = _container_path(reader, nvme_path, join_path(path, "nvme_path"), _NVME_PATH_EXPECTED)
    env = _env(reader, spec.get("env"), join_path(path, "env"))
    config = _config(reader, spec.get("config"), join_path(path, "config"))
    secrets = _secrets(reader, spec.get("secrets"), join_path(path, "secrets"), env, config)
    result = {
        "image": image,
        "command": _argv(reader, spec["command"], join_path(path, "command")) if spec.get("command") is not None else None,
        "env": env,
        "init": reader.boolean(spec.get("init"), join_path(path, "init")),
        "stop_timeout": reader.integer(spec.get("stop_timeout"), join_path(path, "stop_timeout"), limit=MAX_SECONDS,
                                       default=DEFAULT_STOP_TIMEOUT),
        "restart_policy": restart,
        "health": _health(reader, spec.get("health"), join_path(path, "health"), ports,
                          tuple(item["name"] for item in dynamic)),
        "config": config,
        "secrets": secrets,
        "nvme_path": nvme_path,
        "max_unavailable": _max_unavailable(reader, spec, join_path(path, "max_unavailable")),
        # Read by the schedule (down_hosts.replacements): seconds its host may be down before an instance is replaced.
        "down_grace": None if spec.get("down_grace") is None else reader.integer(
            spec["down_grace"], join_path(path, "down_grace"), maximum=MAX_DOWN_GRACE),
        "ports": ports,
        "volumes": _volumes(reader, spec, join_path(path, "volumes"), config, secrets, nvme_path),
    }
    if spec.get("proxy") is not None:
        # Only a service that asks for the local proxy says so (module_utils/planning/proxy.py): other specs stay as they were.
        result["proxy"] = read_proxy(reader, spec["proxy"], join_path(path, "proxy"), ports,
                                     tuple(item["name"] for item in dynamic))
    if dynamic:
        # Only a service with dynamic ports says so: every other spec stays as it was, byte for byte.
        result["dynamic_ports"] = dynamic
    return result


def _directory_mode(reader, value, path):
    """A directory's mode as four octal digits, from an octal string or the integer YAML reads from 0750; its owner
    may read, write and enter it."""
    if value is None:
        return DEFAULT_VOLUME_MODE
    mode = _octal_mode(value)
    if mode is None or mode & 0o700 != 0o700:
        reader.bad(path, value, "a directory mode such as '0750' or '0700' whose owner may read, write and enter it")
        return DEFAULT_VOLUME_MODE
    return "%04o" % mode


def _inside(path, other):
    return path == other or path.startswith(other.rstrip("/") + "/")


def _volumes(reader, spec, path, config, secrets, nvme_path):
    """The service's volumes: each instance's own directory on the node's data filesystem (``disk``) or on its NVMe
    placement (``nvme``), bind-mounted at ``path``. Only a stateful service has them: its instances stay on their node,
    where their data is."""
    value = spec.get("volumes")
    if value is None:
        return []
    volumes = []
    items = reader.sequence(value, path, MAX_VOLUMES)
    if items and spec.get("stateful") is not True:
        reader.error(path, "has %d volume(s) on a service that is not stateful; expected volumes only with stateful: true "
                     "(its instances stay on the node their data is on)" % len(items))
    resources = spec.get("resources") if isinstance(spec.get("resources"), dict) else {}
    taken = {entry["dest"]: "config file" for entry in config if entry["dest"] is not None}
    taken.update({entry["target"]: "secret" for entry in secrets if entry["target"] is not None})
    nvme_volumes = [item for item in items if isinstance(item, dict) and item.get("where") == "nvme"]
    if resources.get("nvme") and nvme_path and not nvme_volumes:
        taken[nvme_path] = "NVMe directory (nvme_path)"
    names = set()
    nvme_total = 0
    for position, item in enumerate(items):
        item_path = join_path(path, position)
        entry = reader.mapping(item, item_path, _VOLUME_KEYS, required=("name", "path"), optional_none=False)
        if not isinstance(item, dict) or not {"name", "path"} <= set(entry):
            continue
        name = entry["name"]
        if not well_formed(name, _VOLUME_NAME, 63):
            reader.bad(join_path(item_path, "name"), name, _VOLUME_NAME_EXPECTED)
            name = None
        elif name in names:
            reader.bad(join_path(item_path, "name"), name, "a volume name not used twice in the service")
        names.add(name)
        target = _container_path(reader, entry["path"], join_path(item_path, "path"), _DEST_EXPECTED)
        if target is not None:
            clash = next((what for other, what in sorted(taken.items()) if _inside(target, other) or _inside(other, target)),
                         None)
            if clash is not None:
                reader.bad(join_path(item_path, "path"), target, "a path in the container that no %s is at, inside or "
                           "above" % clash)
            taken[target] = "other volume"
        where = entry.get("where", "disk")
        if where not in VOLUME_PLACES:
            reader.bad(join_path(item_path, "where"), where, "one of " + ", ".join(VOLUME_PLACES)
                       + " (the node's data directory, or the instance's NVMe placement)")
            where = None
        elif where == "nvme" and not resources.get("nvme"):
            reader.bad(join_path(item_path, "where"), where, "disk, or nvme with an NVMe request (resources.nvme) that "
                       "places the instance on a device")
        size = None
        if entry.get("size") is not None:
            try:
                size = parse_size(entry["size"])
            except ValueError as error:
                reader.bad(join_path(item_path, "size"), entry["size"], str(error))
        if where == "nvme" and size:
            nvme_total += size
        ids = {key: reader.integer(entry[key], join_path(item_path, key), maximum=MAX_ID) if entry.get(key) is not None
               else None for key in ("uid", "gid")}
        volumes.append({"name": name, "path": target, "where": where, "size": size, "uid": ids["uid"],
                        "gid": ids["gid"], "mode": _directory_mode(reader, entry.get("mode"), join_path(item_path, "mode"))})
    if nvme_total and isinstance(resources.get("nvme"), dict):
        try:
            asked = parse_size(resources["nvme"].get("size") or 0)
        except ValueError:
            asked = None                        # the scheduler's parser names it
        if asked is not None and nvme_total > asked:
            reader.error(path, "has NVMe volumes of %d bytes in all; expected NVMe volumes that fit in the service's "
                         "NVMe request (resources.nvme.size, %d bytes)" % (nvme_total, asked))
    return volumes


def has_volumes(services):
    """Whether some entry of the catalog ``services`` (unparsed) declares volumes: a quick look before a parse."""
    return isinstance(services, dict) and any(isinstance(entry, dict) and entry.get("volumes")
                                              for entry in services.values())


def disk_request(volumes):
    """The bytes a service's instance asks of its node's data filesystem: its disk volumes' sizes."""
    return sum(volume["size"] or 0 for volume in volumes if volume["where"] == "disk")


_MAX_DEPTH = 64


def plain_data(value, path):
    """A copy of ``value`` as plain dicts, lists and scalars, or ProblemError naming ``path``.

    Bounded like the parser: at most MAX_ENTRIES entries and _MAX_DEPTH levels, so that YAML aliases that
    expand a small document into a huge one, or a deep one, are refused instead of copied.
    """
    budget = [MAX_ENTRIES]

    def copy(item, depth):
        if depth > _MAX_DEPTH:
            raise ProblemError([(path, "is nested more than %d levels deep" % _MAX_DEPTH)])
        if isinstance(item, (dict, list, tuple)):
            budget[0] -= len(item)
            if budget[0] < 0:
                raise ProblemError([(path, "has more than %d list items and mapping entries in all" % MAX_ENTRIES)])
            if isinstance(item, dict):
                return {key if isinstance(key, (str, int, float, bool)) or key is None else str(key): copy(entry, depth + 1)
                        for key, entry in item.items()}
            return [copy(entry, depth + 1) for entry in item]
        return item
    return copy(value, 0)


class Catalog(NamedTuple):
    """A catalog read once: what the scheduler places, and how each service runs (see the module's docstring)."""
    scheduling: dict
    deploy: dict
    errors: list


def read_catalog(services):
    """The Catalog of ``services`` (the catalog's mapping of service name to entry), with the deploy keys' mistakes
    in ``errors`` rather than raised.

    Only the deploy keys and unknown keys are checked here; the scheduler's parser checks the rest,
    so a caller can report both sides' mistakes at once (planning.py does).
    """
    reader = Reader()
    raw = reader.mapping(services, "services", optional_none=False, maximum=MAX_SERVICES)
    scheduling, deploy = {}, {}
    known = SERVICE_KEYS + DEPLOY_KEYS
    for name, entry in raw.items():
        # printable(): str() of an integer key of more than 4,300 digits raises.
        path = join_path("services", name if isinstance(name, str) else printable(name))
        if not isinstance(entry, dict):
            scheduling[name] = entry          # the scheduler names this mistake
            continue
        reader.mapping(entry, path, known)
        scheduling[name] = {key: value for key, value in entry.items() if key in SERVICE_KEYS}
        deploy[name] = _deploy_spec(reader, entry, path)
        if deploy[name]["image"] is not None:
            scheduling[name]["image"] = deploy[name]["image"]     # checked here; user plugins may read it
        disk = disk_request(deploy[name]["volumes"])
        if disk:
            # The scheduler places the disk volumes' sizes on the node's data filesystem (resources.disk).
            resources = entry.get("resources")
            if isinstance(resources, dict) and resources.get("disk") is not None:
                reader.bad(join_path(join_path(path, "resources"), "disk"), resources["disk"],
                           "no resources.disk where the service's volumes have sizes (their sum is its request)")
            elif resources is None or isinstance(resources, dict):
                scheduling[name]["resources"] = dict(resources or {}, disk=disk)
    _check_proxy_listens(reader, deploy)
    return Catalog(scheduling, deploy, reader.errors)


def _check_proxy_listens(reader, deploy):
    """The local proxy's frontends across services: one listen port each, none a static port of the site (a host port
    published on every address would take it)."""
    try:
        listens = proxy_listens(deploy)
    except ProxyError as error:
        path, _sep, message = str(error).partition(": ")
        reader.error(path, message)
        return
    static = {port: name for name in sorted(deploy) for port in deploy[name]["ports"]}
    for _service, _port, listen, path in listens:
        if listen in static:
            reader.bad(path, listen, "a port that no service publishes on its host (services.%s.ports has it)"
                       % static[listen])


def parse_catalog(services):
    """The Catalog of ``services`` (its ``errors`` empty), or ProblemError naming every mistake of its deploy keys.

    Unlike read_catalog, which leaves an entry that is not a mapping to the scheduler's parser, this refuses it:
    the deploy side reads the entries without that parser."""
    return checked_catalog(read_catalog(services))


def checked_catalog(catalog):
    """``catalog`` (read_catalog()'s, or handed_catalog()'s) when it has no mistake and every entry is a mapping (or
    null, an empty entry, as the scheduler's parser reads it); else ProblemError naming each: parse_catalog()'s
    checks, for a catalog read once and handed along."""
    errors = list(catalog.errors) + [
        (str(join_path("services", name if isinstance(name, str) else printable(name))), "got %s; expected a mapping" % show(entry))
        for name, entry in catalog.scheduling.items() if entry is not None and not isinstance(entry, dict)]
    if errors:
        raise ProblemError(errors)
    return catalog


def split_catalog(services):
    """(the scheduler's services, each service's deploy spec): parse_catalog's, as a pair."""
    catalog = parse_catalog(services)
    return catalog.scheduling, catalog.deploy


def catalog_data(catalog):
    """``catalog`` (read_catalog()'s) as plain data for a later task of the run, which takes it back with
    handed_catalog(): ``{scheduling, deploy, errors}``, each mistake as ``[path, message]``. It holds the catalog's
    text, its env included (a task that returns it is no_log), and never a secret's value: the catalog names secrets by
    their variables only."""
    return {"scheduling": catalog.scheduling, "deploy": catalog.deploy,
            "errors": [[str(path), message] for path, message in catalog.errors]}


def handed_catalog(value, path="catalog"):
    """The Catalog of ``value``, ``{scheduling, deploy}`` or catalog_data()'s ``{scheduling, deploy, errors}``: the
    catalog as an earlier task of the run read it and handed it along; or ProblemError at ``path`` when it is not one.
    Mistakes it holds stay in its ``errors`` (checked_catalog() raises them)."""
    keys = set(value) if isinstance(value, dict) else None
    errors = value.get("errors", []) if keys else None
    if (keys not in ({"scheduling", "deploy"}, {"scheduling", "deploy", "errors"})
            or not all(isinstance(value[key], dict) for key in ("scheduling", "deploy"))
            or not all(isinstance(spec, dict) for spec in value["deploy"].values())
            or not isinstance(errors, list)
            or not all(isinstance(error, (list, tuple)) and len(error) == 2 and all(isinstance(part, str) for part in error)
                       for error in errors)):
        raise ProblemError([(path, "got %s; expected the parsed catalog an earlier step returned (its scheduling "
                                   "and deploy mappings)" % describe(value))])
    return Catalog(value["scheduling"], value["deploy"], [tuple(error) for error in errors])


_HANDED_SECRET_KEYS = frozenset(("name", "var", "delivery", "env", "target", "mode", "uid", "gid"))


def catalog_secrets(deploy):
    """Service name -> its secrets (each as its deploy spec has it: ``name``, ``var``, ``delivery`` ...), for the
    services of the deploy specs ``deploy`` that have some: what reading the secrets' values needs of the catalog, as
    plain data for a later task of the run to take back with handed_secrets(). Names and variables, never a value."""
    return {name: spec["secrets"] for name, spec in deploy.items() if spec.get("secrets")}


def handed_secrets(value, path="secrets"):
    """Deploy specs that hold only their secrets, from catalog_secrets()'s ``value`` (what an earlier task of the run
    handed along), or ProblemError at ``path`` when it is not one."""
    if isinstance(value, dict):
        specs = {}
        for name, secrets in value.items():
            if not (isinstance(name, str) and isinstance(secrets, list) and all(
                    isinstance(secret, dict) and set(secret) <= _HANDED_SECRET_KEYS
                    and isinstance(secret.get("name"), str) and isinstance(secret.get("var"), str)
                    for secret in secrets)):
                break
            specs[name] = {"secrets": secrets}
        else:
            return specs
    raise ProblemError([(path, "got %s; expected the catalog's secrets an earlier step returned (service name to its "
                               "list of secrets, each with its name and variable)" % describe(value))])
