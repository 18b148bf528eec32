# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wording shared by this collection's error messages ("<path>: got <value>; expected ...")."""

from __future__ import annotations

import json


def show(value):
    """Render a value the way the user wrote it, briefly: JSON where possible, at most 80 characters."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
