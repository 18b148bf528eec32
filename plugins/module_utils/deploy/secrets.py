# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets: where each one goes on a host and in its container, and the keyed hash that stands for its value.

The catalog names a secret's Ansible variable, never its value (catalog.py reads the ``secrets`` key). The
deploy role reads the values once per host (the gangplank.platform.secret_values action) and hands the
engines the values only in the tasks that create them (no_log). Everything else (the container specs,
the plan, the labels, the placement record) holds the secret's name, its delivery and a keyed hash:
HMAC-SHA256 under a per-site key kept private on the control hosts, so that a short password cannot
be found again from its trace by trying every candidate (as a plain digest would allow).

Layout (docs/catalog.md):

- Podman: one Podman secret per container and secret, ``<container>.<secret>``, mounted at the
  secret's target (default ``/run/secrets/<name>``) with its mode, or set as an environment variable.
- Docker (no secrets without Swarm): a private file ``<secret_dir>/<container>/<secret>`` (the
  directory 0700, the file with the secret's mode; ``secret_dir`` is under /run, a tmpfs on most
  hosts), bind-mounted read-only at the target, as compose does; an env secret is set in the env.
"""

from __future__ import annotations

import hashlib
import hmac
import posixpath

from ansible_collections.gangplank.platform.plugins.module_utils.messages import describe

KEY_FILE = "secret-hash.key"
# The engines' bound: Podman refuses a secret over 512,000 bytes.
MAX_SECRET_BYTES = 512000
# All the values one host reads (distinct variables): a bound on the product of secrets per service and services.
MAX_TOTAL_SECRET_BYTES = 16 * 2 ** 20
MIN_KEY_CHARACTERS = 32
DEFAULT_SECRET_DIR = "/run/gangplank/secrets"
_HASH_PREFIX = "hmac-sha256:"
# A number is delivered as its decimal text. Python's str() refuses integers of more than 4,300 digits (the default
# int_max_str_digits); 4,000 digits is about 13,287 bits: a bound that needs no str() to check.
_MAX_INTEGER_DIGITS = 4000
_MAX_INTEGER_BITS = 13287


class SecretError(ValueError):
    """A secret cannot be read or delivered; the message names the catalog path and never the value."""


def keyed_hash(key, value):
    """HMAC-SHA256 of ``value`` under the site's key, as text: the only trace of a secret outside its delivery."""
    if not isinstance(key, str) or len(key.strip()) < MIN_KEY_CHARACTERS:
        raise SecretError("the site's secret hash key is missing or shorter than %d characters" % MIN_KEY_CHARACTERS)
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return _HASH_PREFIX + hmac.new(key.strip().encode("utf-8"), data, hashlib.sha256).hexdigest()


def engine_secret_name(container, secret):
    """The Podman secret of ``container``'s secret named ``secret``: one per container, so a rotation reaches a
    container only when it is recreated (a running one keeps the value it started with)."""
    return "%s.%s" % (container, secret)


def host_secret_path(secret_dir, container, secret):
    """The private file that holds a Docker container's file secret on the host."""
    return posixpath.join(secret_dir, container, secret)


def podman_secret_option(container, secret):
    """The secret as ``podman run --secret`` takes it: a file at its target with its mode, or an env variable."""
    name = engine_secret_name(container, secret["name"])
    if secret["delivery"] == "env":
        return "%s,type=env,target=%s" % (name, secret["env"])
    option = "%s,type=mount,target=%s,mode=%s" % (name, secret["target"], secret["mode"])
    for key in ("uid", "gid"):
        if secret.get(key) is not None:
            option += ",%s=%d" % (key, secret[key])
    return option


def container_secrets(container, secrets, engine, secret_dir):
    """The container's secrets with where each goes: ``engine_name`` and ``option`` (Podman) or ``path`` (Docker's
    private file; None for an env secret). Names and places only: the values stay with the deploy role."""
    entries = []
    for secret in secrets:
        entry = dict(secret)
        if engine == "podman":
            entry.update(engine_name=engine_secret_name(container, secret["name"]),
                         option=podman_secret_option(container, secret), path=None)
        else:
            entry.update(engine_name=None, option=None,
                         path=host_secret_path(secret_dir, container, secret["name"]) if secret["delivery"] == "file" else None)
        entries.append(entry)
    return entries


class Missing(Exception):
    """The variable is not defined."""


class Unreadable(Exception):
    """The variable is defined but cannot be read (a vault that cannot be opened, a template that fails)."""


def read_values(specs, lookup, key):
    """(values by variable name, keyed hashes by variable name, [(path, message), ...]) for every secret the catalog's
    deploy specs (catalog.split_catalog) name.

    ``lookup(variable)`` returns the variable's value, or raises Missing or Unreadable (with a reason that does
    not hold the value). Messages name the catalog path and the variable, never a value. ``key`` None: no hashes (a
    plan only checks that the values can be read).
    """
    values, hashes, errors = {}, {}, []
    total = 0
    for service in sorted(specs):
        for secret in specs[service].get("secrets") or []:
            path = "services.%s.secrets.%s" % (service, secret["name"])
            var = secret["var"]
            if var in values:
                problem = _delivery_problem(values[var], secret)
                if problem:
                    errors.append((path, problem % var))
                continue
            try:
                value = lookup(var)
            except Missing:
                errors.append((path, "the variable %s is not defined (define it, vaulted, in the inventory or with "
                                     "-e @file, and give the vault password)" % var))
                continue
            except Unreadable as error:
                errors.append((path, "the variable %s cannot be read: %s" % (var, error)))
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INTEGER_BITS:
                # str() refuses an integer of more than 4,300 digits (Python's int_max_str_digits): say what it is, by
                # its size only, at its path (M8: "{{ 10 ** 5000 }}" failed the task with Python's error).
                errors.append((path, "the variable %s holds %s; expected a string, or a number of at most %d digits "
                                     "(quote a longer one)" % (var, describe(value), _MAX_INTEGER_DIGITS)))
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str):
                errors.append((path, "the variable %s holds %s; expected a string" % (var, type(value).__name__)))
                continue
            size = len(value.encode("utf-8", "surrogatepass"))
            if not value:
                errors.append((path, "the variable %s is empty; expected a value (the engines refuse empty secrets)" % var))
                continue
            if size > MAX_SECRET_BYTES:
                errors.append((path, "the variable %s holds %d bytes; expected at most %d" % (var, size, MAX_SECRET_BYTES)))
                continue
            problem = _delivery_problem(value, secret)
            if problem:
                errors.append((path, problem % var))
                continue
            total += size
            if total > MAX_TOTAL_SECRET_BYTES:
                errors.append((path, "the catalog's secrets hold more than %d bytes in all; reading stopped here"
                                     % MAX_TOTAL_SECRET_BYTES))
                return {}, {}, errors
            values[var] = value
            if key is not None:
                hashes[var] = keyed_hash(key, value)
    return values, hashes, errors


def _delivery_problem(value, secret):
    if secret["delivery"] == "env" and "\x00" in value:
        return "the variable %s holds a NUL character, which an environment variable cannot carry; deliver it as a file"
    return None
