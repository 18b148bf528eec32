# -*- coding: utf-8 -*-
"""A vaulted canary in a test bed's catalog, and the search for it in everything a run leaves (docs/secrets.md).

``Canary.install`` gives a bed (a copy of inventories/local or inventories/fresh) a value encrypted with
ansible-vault (real, with a password file of the test's own), used by the api in its ``env``, as a file secret
(the catalog's ``secrets``: a Podman secret, or a private file on Docker) and in its rendered config template.
``Canary.run`` runs a playbook as an operator does (the default callback, any verbosity) and keeps every byte it
printed. ``leaks`` finds the canary, as written or base64-encoded at any offset, in texts and files; the tests expect
none outside the container's own files, secret and environment.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid

import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import BIN, ROOT

VARIABLE = "demo_db_password"
ENV_KEY = "DB_PASSWORD"
SECRET = "db_password"
SECRET_FILE = "/run/secrets/db_password"


def encodings(secret):
    """The canary as written and every run of base64 characters that encoding it can give, whatever bytes surround it."""
    raw = secret.encode()
    found = [raw]
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + raw)
        length = offset + len(raw)
        found.append(text[4 if offset else 0:(length // 3) * 4])
    return found


class Canary:
    """One bed's canary: ``value`` (what the catalog holds now), the vault password file, and ``transcripts``: the
    output of every run made through ``run``."""

    def __init__(self, base):
        self.base = base
        self.password_file = base / "vault-password"
        self.password_file.write_text(uuid.uuid4().hex + "\n")
        os.chmod(str(self.password_file), 0o600)
        self.value = self.new_value()
        self.transcripts = {}

    @staticmethod
    def new_value():
        return "canary" + uuid.uuid4().hex

    @property
    def environment(self):
        return {"ANSIBLE_VAULT_PASSWORD_FILE": str(self.password_file)}

    def vaulted(self, value):
        """``demo_db_password: !vault ...`` as ansible-vault writes it, for a variables file."""
        completed = subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt_string", "--vault-password-file",
                                    str(self.password_file), "--stdin-name", VARIABLE], input=value, cwd=ROOT,
                                   capture_output=True, text=True, check=True, timeout=120)
        return completed.stdout

    def install(self):
        """The vaulted canary in the bed's group_vars; the api reads it in its env, as a file secret and in its config template."""
        pages = {"gangplank_plan_html": str(self.base / "html" / "plan.html"), "gangplank_status_html": str(self.base / "html" / "status.html")}
        (self.base / "html").mkdir()
        (self.base / "group_vars" / "all" / "zz_canary.yml").write_text("---\n" + yaml.safe_dump(pages) + self.vaulted(self.value))
        catalog = self.base / "group_vars" / "all" / "catalog.yml"
        data = yaml.safe_load(catalog.read_text())
        data["gangplank_services"]["api"]["env"][ENV_KEY] = "{{ %s }}" % VARIABLE
        data["gangplank_services"]["api"]["secrets"] = {SECRET: VARIABLE}
        catalog.unlink()                                  # a link into the repository on the fresh bed
        catalog.write_text(yaml.safe_dump(data))
        template = self.base / "templates" / "api.conf.j2"
        text = template.read_text()
        template.unlink()
        template.write_text(text + "password = {{ %s }}\n" % VARIABLE)

    def rotated(self):
        """A new canary value, as a vaulted extra-variables file (-e @FILE): the old value stays a canary too."""
        self.retired = getattr(self, "retired", []) + [self.value]
        self.value = self.new_value()
        path = self.base / ("rotated-%d.yml" % len(self.retired))
        path.write_text("---\n" + self.vaulted(self.value))
        return path

    @property
    def values(self):
        return getattr(self, "retired", []) + [self.value]

    def run(self, key, inventory, playbook, *extra, timeout=900):
        """ansible-playbook with the default callback: (exit code, everything it printed). Kept under ``key``."""
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", **self.environment)
        env.pop("ANSIBLE_STDOUT_CALLBACK", None)
        completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory),
                                    os.path.join(ROOT, "playbooks", playbook), *extra],
                                   cwd=ROOT, env=env, capture_output=True, timeout=timeout, check=False)
        output = completed.stdout + completed.stderr
        self.transcripts[key] = output
        return completed.returncode, output.decode("utf-8", "replace")

    def leaks(self, texts=None, files=()):
        """Where any canary value (current or retired) shows: names of ``texts`` (key -> bytes) and paths of ``files``."""
        forms = [form for value in self.values for form in encodings(value)]
        found = []
        for key, data in sorted((self.transcripts if texts is None else texts).items()):
            data = data if isinstance(data, bytes) else data.encode()
            found += ["%s: %s" % (key, _context(data, form)) for form in forms if form in data]
        for path in files:
            try:
                with open(str(path), "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            found += ["%s: %s" % (path, _context(data, form)) for form in forms if form in data]
        return found


def _context(data, form):
    at = data.index(form)
    return data[max(0, at - 120):at + len(form) + 40].decode("utf-8", "replace")


def files_under(*roots, skip=()):
    """Every file under ``roots`` except those whose path contains one of ``skip``."""
    for root in roots:
        for folder, _dirs, names in os.walk(str(root)):
            for name in names:
                path = os.path.join(folder, name)
                if not any(part in path for part in skip):
                    yield path
