# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gang scheduler core: plain Python, no Ansible import.

Entry point: ``plan(problem_mapping) -> result_mapping`` in ``scheduler.py``.
"""
