# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host is: GPU, NVMe and node facts, the facts cache and the runtime role's host decisions. Imports only
the ground floor of module_utils."""
