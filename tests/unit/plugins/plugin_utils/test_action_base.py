# -*- coding: utf-8 -*-
"""The actions' shared preamble: the arguments checked against the action's spec and rules, the action's errors as a
failed result without a traceback, any other error left to Ansible."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.playbook.task import Task
from ansible.plugins.loader import init_plugin_loader

from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction, failed


class Refused(ValueError):
    pass


class Echo(GangplankAction):
    _requires_connection = False
    ARGUMENT_SPEC = {"word": {"type": "str"}, "count": {"type": "int", "default": 1}, "other": {"type": "str"}}
    ARGUMENT_RULES = {"mutually_exclusive": [("word", "other")]}
    ERRORS = (Refused,)

    def act(self, args, task_vars, result):
        if args["word"] == "refuse":
            raise Refused("word: got refuse; expected another word")
        if args["word"] == "break":
            raise KeyError("word")
        return dict(result, words=[args["word"]] * args["count"], host=task_vars.get("inventory_hostname"))


class Detailed(Echo):
    @staticmethod
    def failure(error):
        return {"msg": "refused: %s" % error, "errors": [{"path": "word", "message": str(error)}]}


def run(action_class, args, task_vars=None):
    init_plugin_loader()
    task = Task()
    task.args = args
    action = action_class(task, MagicMock(), MagicMock(check_mode=False), loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    return action.run(task_vars=task_vars)


def test_the_action_gets_its_checked_arguments_and_the_task_variables():
    result = run(Echo, {"word": "hi", "count": "2"}, {"inventory_hostname": "h1"})
    assert result["words"] == ["hi", "hi"] and result["host"] == "h1" and not result.get("failed")
    assert run(Echo, {"word": "hi"})["host"] is None          # no variables: an empty mapping


def test_arguments_against_the_spec_or_its_rules_fail_the_task_before_the_action_runs():
    with pytest.raises(AnsibleActionFail, match="count"):
        run(Echo, {"word": "hi", "count": "many"})
    with pytest.raises(AnsibleActionFail, match="mutually exclusive"):
        run(Echo, {"word": "hi", "other": "x"})


def test_an_error_of_the_action_fails_the_task_with_its_message_and_any_other_error_is_left_to_ansible():
    result = run(Echo, {"word": "refuse"})
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == "word: got refuse; expected another word" and "Traceback" not in repr(result)
    detailed = run(Detailed, {"word": "refuse"})
    assert detailed["msg"].startswith("refused: word") and detailed["errors"][0]["path"] == "word"
    with pytest.raises(KeyError):
        run(Echo, {"word": "break"})


def test_failed_makes_a_failed_result_with_its_extra_keys():
    assert failed({"skipped": False}, "path: bad", errors=[1]) == {
        "skipped": False, "failed": True, "changed": False, "msg": "path: bad", "errors": [1]}
