# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploying a plan: container specs, the engine drivers, the host reads, secrets, endpoints, MPS shares, the
failure report and the status rows. Imports the planning, facts and watchdog wings and the ground floor; nothing
imports it but plugins."""
