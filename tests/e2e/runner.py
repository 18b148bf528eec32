# -*- coding: utf-8 -*-
"""AWX's executor for the end-to-end tests: a job run through ansible-runner (the Python package AWX's execution
environment uses), in a private data directory laid out as AWX lays it out (inventory/, env/extravars, env/envvars,
project/, artifacts/), with the survey answers of the "Scale service" job template as extra variables, and the
result read back from the runner's artifacts (the playbook_on_stats event's artifact_data, which AWX shows as the
job's artifacts: docs/awx.md). Used on the local bed (test_runner.py) and the fresh-host bed (test_fresh.py)."""

from __future__ import annotations

import glob
import json
import os
import shutil

import ansible_runner
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import BIN, ROOT


def survey():
    """The "Scale service" survey of awx/configure.yml."""
    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    templates = next(task for task in play["tasks"] if task["name"] == "Create the job templates")["loop"]
    return next(template for template in templates if template["name"] == "Scale service")["survey"]["spec"]


def answers(**given):
    """What AWX passes as extra variables for these answers: each answered question, and each default of one not answered."""
    variables = {}
    for question in survey():
        name = question["variable"]
        if name in given:
            variables[name] = given.pop(name)
        elif "default" in question:
            variables[name] = question["default"]
    assert not given, "not survey questions: %s" % sorted(given)
    return variables


class Job:
    """One AWX job: a private data directory of its own under the bed."""

    count = 0

    def __init__(self, bed, playbook, extravars):
        Job.count += 1
        self.private = bed.base / ("job-%d" % Job.count)
        inventory = self.private / "inventory"
        inventory.mkdir(parents=True)
        shutil.copy(bed.inventory, inventory / "hosts.yml")
        shutil.copytree(bed.base / "group_vars", inventory / "group_vars")
        shutil.copytree(bed.base / "templates", inventory / "templates")
        (self.private / "env").mkdir()
        (self.private / "env" / "extravars").write_text(yaml.safe_dump(extravars))
        (self.private / "env" / "envvars").write_text(yaml.safe_dump({
            "ANSIBLE_COLLECTIONS_PATH": os.environ.get("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".build", "collections")),
            "ANSIBLE_NOCOLOR": "1", **bed.canary.environment}))
        # AWX checks the project out; the playbook path is relative to it.
        os.symlink(ROOT, str(self.private / "project"))
        # ansible-playbook from PATH (the venv's, as the execution environment's); the inventory file itself, since
        # inventory/ also holds the catalog's templates, which are no inventory source.
        self.runner = ansible_runner.run(private_data_dir=str(self.private), playbook=playbook, quiet=True,
                                         inventory=str(inventory / "hosts.yml"), timeout=900,
                                         envvars={"PATH": BIN + os.pathsep + os.environ.get("PATH", "")})

    def events(self):
        """The job events as the runner stored them in its artifacts."""
        found = []
        for path in sorted(glob.glob(str(self.private / "artifacts" / "*" / "job_events" / "*.json"))):
            with open(path) as handle:
                found.append(json.load(handle))
        return found

    def artifacts(self):
        """AWX's job artifacts: the set_stats data of the playbook_on_stats event."""
        stats = [event for event in self.events() if event.get("event") == "playbook_on_stats"]
        assert len(stats) == 1, [event.get("event") for event in self.events()][-5:]
        return stats[0]["event_data"].get("artifact_data") or {}

    def failures(self):
        return [event["event_data"].get("res", {}).get("msg", "") for event in self.events() if event.get("event") == "runner_on_failed"]
