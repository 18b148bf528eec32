# -*- coding: utf-8 -*-
"""Run a module's main() in-process: exit_json and fail_json raise instead of exiting."""

from __future__ import annotations

from ansible.module_utils import basic


class ExitJson(Exception):
    """exit_json was called; args[0] is the result."""


class FailJson(Exception):
    """fail_json was called; args[0] is the result (with failed: true)."""


def capture_module_exits(monkeypatch, warnings=None):
    """Patch AnsibleModule so a module's result is raised; module.warn() goes to ``warnings`` when given."""

    def exit_json(self, **kwargs):
        if warnings is not None:
            kwargs["warnings"] = list(warnings)
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        kwargs["failed"] = True
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    if warnings is not None:
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))
    return warnings
