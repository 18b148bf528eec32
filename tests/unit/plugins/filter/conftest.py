# -*- coding: utf-8 -*-
"""Filters rendered through ansible-core's Templar need its plugin loader; it may be set up once per process."""

from __future__ import annotations

import pytest

from ansible.plugins.loader import init_plugin_loader


@pytest.fixture(scope="session", autouse=True)
def plugin_loader():
    init_plugin_loader()
