# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: debs_to_install
short_description: The .deb files of an offline bundle that are not installed at their version
version_added: 0.1.0
description:
  - Compares the bundle's file names with the installed packages as C(<package>_<version>_<arch>.deb) (an epoch's
    C(:) written C(%3a), as in a file name) and keeps the files whose package is not installed at that version or a
    newer one (Debian's version order, as C(dpkg --compare-versions)), sorted by name (ignoring case), as paths in the
    directory the bundle was unpacked to.
options:
  _input:
    description: The bundle's files, as C(ansible.builtin.find) returns them (each with its C(path)).
    type: list
    elements: dict
    required: true
  installed:
    description: The installed packages, one C(<package>_<version>_<arch>.deb) a line, from C(dpkg-query).
    type: list
    elements: str
    required: true
  directory:
    description: The directory the bundle was unpacked to.
    type: str
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Install the bundle's packages without any repository
  ansible.builtin.command:
    argv: "{{ ['apt-get', 'install', '--yes'] + debs.files | gangplank.platform.debs_to_install(installed.stdout_lines, dir) }}"
"""

RETURN = r"""
_value:
  description: The paths of the files to install, sorted by name (apt orders them by their dependencies).
  type: list
  elements: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    kind, RuntimeHostError, debs_to_install as _debs)
from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


@filter_errors(RuntimeHostError, name="debs_to_install")
def debs_to_install(found, installed, directory):
    for name, value in (("files", found), ("installed", installed)):
        if isinstance(value, (str, Mapping)):
            raise AnsibleFilterError(f"debs_to_install: {name}: expected a list, got {kind(value)}")
    return _debs(found, installed, directory)


class FilterModule:
    def filters(self):
        return {"debs_to_install": debs_to_install}
