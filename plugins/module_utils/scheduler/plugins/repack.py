# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Repack (PostFilter): when the gang does not fit with every instance kept in place,
ask for a second attempt that lets stateless instances move (heavy-first re-pack).

This is where kube-scheduler would preempt; here nothing is evicted, the whole
gang is planned again and each move is reported.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, PostFilterPlugin, Status


class Repack(PostFilterPlugin):
    name = "Repack"

    def __init__(self, problem):
        super().__init__(problem)
        self._movable = any(instance.previous is not None and not instance.service.stateful
                            for instance in problem.instances())

    def post_filter(self, attempt, instance, diagnosis):
        if self._movable and not attempt.cluster.moves_allowed:
            return OK
        return Status.unschedulable("no stateless instance may move", self.name)
