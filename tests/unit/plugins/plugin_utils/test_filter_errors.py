# -*- coding: utf-8 -*-
"""The filters' one error wrapper: the errors named become a failed task with the same message, others pass."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


class BadInput(ValueError):
    pass


@filter_errors(BadInput, name="example")
def example(value, fail=None):
    if fail:
        raise fail
    return value * 2


def test_the_errors_named_become_a_filter_error_with_the_filters_name():
    assert example(2) == 4 and example.__name__ == "example"
    with pytest.raises(AnsibleFilterError, match="^example: services.api.ports: got 'x'; expected a number$") as caught:
        example(1, fail=BadInput("services.api.ports: got 'x'; expected a number"))
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_without_a_name_the_message_is_as_is_and_other_errors_pass():
    @filter_errors(BadInput)
    def plain(error):
        raise error

    with pytest.raises(AnsibleFilterError, match="^node1: no GPUs$"):
        plain(BadInput("node1: no GPUs"))
    with pytest.raises(KeyError):
        plain(KeyError("x"))
