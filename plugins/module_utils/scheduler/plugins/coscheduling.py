# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Coscheduling (Permit): all or nothing. The gang is bound only if every instance was placed."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, PermitPlugin, Status


class Coscheduling(PermitPlugin):
    name = "Coscheduling"

    def permit(self, attempt):
        if attempt.unplaced:
            return Status.unschedulable("%d of %d instance(s) could not be placed"
                                        % (len(attempt.unplaced), attempt.total), self.name)
        return OK
