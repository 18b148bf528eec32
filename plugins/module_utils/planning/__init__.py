# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning a catalog: its parser, the scale request, down hosts, retained volumes, the whole-cluster schedule
and the plan's picture. Imports the scheduler core, the extenders' transport, the facts wing and the ground floor."""
