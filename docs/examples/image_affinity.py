# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ImageAffinity: an example user plugin for a scheduler profile (docs/problem-format.md, "Profiles").

A node labelled ``gangplank.io/image: <text>`` is reserved for the services whose image contains that
text (Filter), and those services prefer such nodes (Score). Say a node holds a licensed toolchain
baked for ``registry.local/cad/``: only CAD images may run there, and they go there first.

Register it in a profile::

    user_plugins: [image_affinity.py]           # relative to the profile file, or absolute
    plugins:
      filter: {enabled: [ImageAffinity]}
      score: {enabled: [{name: ImageAffinity, weight: 20}]}

It follows the rules for user plugins: the filter is ``filter_static`` (it reads only the service and
the node's own labels), so the scheduler caches it and the exact solver honours it; the score depends on
the service and the node only.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, FilterPlugin, ScorePlugin, Status,
)

LABEL = "gangplank.io/image"


def _matches(service, node):
    wanted = node.labels.get(LABEL)
    return wanted is None or (service.image is not None and wanted in service.image)


class ImageAffinity(FilterPlugin, ScorePlugin):
    name = "ImageAffinity"

    def filter_static(self, instance, node, staying):
        if _matches(instance.service, node):
            return OK
        return Status.unschedulable("node(s) were reserved for other images", self.name)

    def score(self, cycle, cluster, instance, node_state):
        node = node_state.node
        return 100.0 if LABEL in node.labels and _matches(instance.service, node) else 0.0


PLUGIN = ImageAffinity
