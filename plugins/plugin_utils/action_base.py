# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one preamble of the collection's action plugins: the base result, the arguments checked against the action's
argument spec, and the errors of its module_utils functions turned into a failed result."""

from __future__ import annotations

from ansible.plugins.action import ActionBase


def failed(result, msg, **extra):
    """``result`` as a failed task's: ``failed``, ``changed`` false, ``msg`` (it names the path and what was expected;
    never a value that may be a secret) and the ``extra`` keys."""
    return dict(result, failed=True, changed=False, msg=msg, **extra)


class GangplankAction(ActionBase):
    """An action plugin whose ``act(args, task_vars, result)`` returns the task's result.

    ``run()`` starts the result (ActionBase.run), checks the task's arguments against ``ARGUMENT_SPEC`` with the
    rules of ``ARGUMENT_RULES`` (validate_argument_spec's keywords: ``required_if``, ``required_one_of``,
    ``mutually_exclusive`` ...; a bad argument fails the task as Ansible words it) and hands ``act`` the checked
    arguments, the task's variables (a mapping, empty when there are none) and the result so far. An error of the
    classes ``ERRORS`` that ``act`` raises fails the task, without a traceback, with the entries of ``failure(error)``
    (by default its text as ``msg``)."""

    TRANSFERS_FILES = False
    ARGUMENT_SPEC = {}
    ARGUMENT_RULES = {}
    ERRORS = ()

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC, **self.ARGUMENT_RULES)
        try:
            return self.act(args, task_vars or {}, result)
        except self.ERRORS as error:
            return dict(result, failed=True, changed=False, **self.failure(error))

    def act(self, args, task_vars, result):
        """The task's result from its checked ``args``, its ``task_vars`` and the ``result`` ActionBase.run began."""
        raise NotImplementedError

    @staticmethod
    def failure(error):
        """The failed result's entries besides ``failed`` and ``changed`` for ``error``, one of ``ERRORS``: its ``msg``
        (and any other key the action documents, such as ``errors``)."""
        return {"msg": str(error)}
