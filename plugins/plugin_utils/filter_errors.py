# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the collection's filters turn the errors of their module_utils functions into a failed task."""

from __future__ import annotations

import functools

from ansible.errors import AnsibleFilterError


def filter_errors(*errors, name=None):
    """Decorates a filter: an error of the classes ``errors`` it raises becomes an AnsibleFilterError with the same
    message, after ``<name>: `` when ``name`` is given, and without the traceback of the error it replaces (its message
    names the path and what was expected; never a value that may be a secret)."""
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except errors as error:
                raise AnsibleFilterError("%s: %s" % (name, error) if name else str(error)) from None
        return wrapper
    return decorate
