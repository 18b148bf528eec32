# -*- coding: utf-8 -*-
"""bin/gangplank-plan with an HTTP scheduler extender (docs/extenders.md): the maintenance-list example as a real
process on loopback, the documented example files, a failing extender (exit 1, no plan) and an ignorable one (a
warning on stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLANNER = os.path.join(ROOT, "bin", "gangplank-plan")
EXAMPLES = os.path.join(ROOT, "docs", "examples")
TOKEN = "example-Token_123"


def run(*args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([PLANNER, *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_maintenance_example_end_to_end(tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    server = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "maintenance_extender.py"), "--maintenance",
                               os.path.join(EXAMPLES, "maintenance.txt"), "--port", "0", "--token-file",
                               str(tmp_path / "token")], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        with open(os.path.join(EXAMPLES, "maintenance_profile.yml"), encoding="utf-8") as stream:
            text = stream.read().replace("8888", str(port))
        # bearerTokenFile relative to the profile's folder, like user_plugins
        (tmp_path / "profile.yml").write_text(text.replace("    httpTimeout: 2s\n",
                                                           "    httpTimeout: 2s\n    bearerTokenFile: token\n"))
        problem = os.path.join(EXAMPLES, "maintenance_problem.yml")
        planned = run(problem, "--json", "--profile", str(tmp_path / "profile.yml"))
        assert planned.returncode == 0, planned.stderr
        result = json.loads(planned.stdout)
        nodes = {placement["node"] for placement in result["placements"].values()}
        assert "gpu-b" not in nodes and "cpu-b" not in nodes     # in maintenance; maintenance planned (scored last)
        assert result["extenders"][0]["filter_calls"] == 2 and TOKEN not in planned.stdout + planned.stderr
        table = run(problem, "--profile", str(tmp_path / "profile.yml"))
        assert table.stdout.splitlines()[-1].startswith("extender http://127.0.0.1:%d: 2 filter and 2 prioritize" % port)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    # the service is gone now: no plan, exit 1, the extender named
    failed = run(problem, "--profile", str(tmp_path / "profile.yml"))
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.startswith("gangplank-plan: a scheduler extender failed; no plan was made: extender "
                                    "http://127.0.0.1:%d: filter failed: connection refused (service " % port)
    assert "Traceback" not in failed.stderr
    (tmp_path / "profile.yml").write_text((tmp_path / "profile.yml").read_text().replace("ignorable: false",
                                                                                         "ignorable: true"))
    skipped = run(problem, "--profile", str(tmp_path / "profile.yml"))
    assert skipped.returncode == 0 and "plan: feasible" in skipped.stdout
    assert "gangplank-plan: warning: extender http://127.0.0.1:%d: filter failed: connection refused" % port \
        in skipped.stderr
