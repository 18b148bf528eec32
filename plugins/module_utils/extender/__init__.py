# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The extenders' transport: HTTP and TLS for the scheduler's HTTP extenders, handed to the core by its callers.
Imports the scheduler core and the ground floor."""
