# -*- coding: utf-8 -*-
"""docs/catalog-to-plan.md: every command of its console blocks runs (real ansible-playbook, localhost) and prints
the lines the tutorial shows under it; a command the tutorial shows failing fails."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TUTORIAL = os.path.join(ROOT, "docs", "catalog-to-plan.md")
BIN = os.path.dirname(sys.executable)


def console_blocks():
    """(command, [lines it must print]) of each ```console block of the tutorial."""
    with open(TUTORIAL, encoding="utf-8") as handle:
        text = handle.read()
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = body.strip("\n").split("\n")
        assert lines[0].startswith("$ "), lines[0]
        blocks.append((lines[0][2:], [line for line in lines[1:] if line.strip()]))
    return blocks


def test_the_tutorial_has_its_commands():
    commands = [command for command, _lines in console_blocks()]
    assert len(commands) == 4 and all("playbooks/plan.yml" in command for command in commands)
    assert any("scale=embed=9" in command for command in commands)


@pytest.mark.parametrize("command, shown", console_blocks(), ids=lambda value: str(value)[-40:])
def test_each_command_prints_what_the_tutorial_shows(tmp_path, command, shown):
    args = shlex.split(command)
    assert args[0] == "ansible-playbook"
    args[0] = os.path.join(BIN, "ansible-playbook")
    args += ["-e", "gangplank_plan_html=%s" % (tmp_path / "plan.html")]
    completed = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                               env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false"))
    output = completed.stdout + completed.stderr
    failing = any(line.startswith(("scale.", "The catalog's secrets")) for line in shown)
    assert (completed.returncode != 0) == failing, output[-3000:]
    for line in shown:
        assert line in output.replace("\\n", "\n"), (line, output[-3000:])
    assert "tutorial-db-password" not in output
    if not failing:
        assert "tutorial-db-password" not in (tmp_path / "plan.html").read_text(encoding="utf-8")
