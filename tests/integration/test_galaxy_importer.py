# -*- coding: utf-8 -*-
"""Galaxy's own importer (galaxy-importer, the checks Galaxy runs on an upload) on the tarball that
`ansible-galaxy collection build` makes: no error and no warning, with ansible-doc and ansible-lint on and
without a container (its settings: tests/galaxy-importer.cfg)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def test_galaxy_importer_finds_no_error_and_no_warning_in_the_tarball(tmp_path):
    built = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path",
                            str(tmp_path), ROOT], cwd=str(tmp_path), capture_output=True, text=True, check=False,
                           timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (tarball,) = tmp_path.glob("gangplank-platform-*.tar.gz")
    # Only the tarball's copy of the collection: not this checkout (the shim on PYTHONPATH), not its ansible.cfg.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "GALAXY_IMPORTER_")) and key != "PYTHONPATH"}
    env.update(GALAXY_IMPORTER_CONFIG=os.path.join(ROOT, "tests", "galaxy-importer.cfg"),
               PATH=BIN + os.pathsep + env.get("PATH", ""), ANSIBLE_NOCOLOR="1")
    imported = subprocess.run([sys.executable, "-m", "galaxy_importer.main", str(tarball)], cwd=str(tmp_path),
                              capture_output=True, text=True, check=False, timeout=1200, env=env)
    output = imported.stdout + imported.stderr
    assert imported.returncode == 0, output
    assert "Importer processing completed successfully" in output, output
    # The checks that matter ran: the documentation of every plugin, and ansible-lint on the collection.
    assert "Getting doc strings via ansible-doc" in output, output
    assert "Linting collection via ansible-lint" in output and "ansible-lint run complete" in output, output
    problems = [line for line in output.splitlines() if line.startswith(("WARNING:", "ERROR:", "CRITICAL:"))]
    assert problems == [], "\n".join(problems)
    with open(tmp_path / "importer_result.json") as handle:
        result = json.load(handle)
    assert result["metadata"]["namespace"] == "gangplank" and result["metadata"]["name"] == "platform"
    modules = sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", "modules"))
                     if name.endswith(".py") and not name.startswith("_"))
    documented = sorted(entry["name"] for entry in result["contents"] if entry["content_type"] == "module")
    assert documented == modules
