# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUTopology (Score): a multi-GPU instance goes where it gets the best-linked GPUs.

The GPU plugin chooses the devices on each node (the best-linked set that fits, scheduler/topology.py); this
scores the node by how good that set is: three quarters its link score relative to the best set the empty node
could give the request (a node whose well-linked groups are still whole scores 100), one quarter its mean link
score per pair relative to the best link there is (NVLink with 18 lanes on one board), so that between a node of NVLinked GPUs
and one whose GPUs meet at the host bridge, both whole, the first wins.

It reads the GPU plugin's cycle state (gpu.gpu_choice) and keeps none of its own. It scores every
node alike, and so is left out, for a problem whose nodes list no GPU links, and for requests of one GPU (their
device choice, not the node, is what topology changes: the GPU plugin's).
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import ScorePlugin
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import choose_gpus, gpu_choice
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import (
    BEST_LINK_SCORE, best_empty_score, link_matrix, set_score,
)

RELATIVE = 0.75                 # the share of the score relative to the empty node's best set; the rest absolute
BEST_LINK = BEST_LINK_SCORE      # 18 NVLink lanes on one board


class GPUTopology(ScorePlugin):
    name = "GPUTopology"

    def scores_alike(self):
        return not any(node.gpu_links for node in self.problem.nodes.values())

    def scores_alike_for(self, service):
        gpu = service.resources.gpu
        return gpu is None or gpu.count < 2

    def score(self, cycle, cluster, instance, node_state):
        request = instance.service.resources.gpu
        if request is None or request.count < 2:
            return 0.0
        chosen = gpu_choice(cycle, instance, node_state)
        if not chosen:
            return 0.0
        node = node_state.node
        score = set_score(link_matrix(node), [position for position, _take in chosen])
        best = best_empty_score(node, request, choose_gpus)
        pairs = request.count * (request.count - 1) // 2
        relative = 1.0 if not best else min(1.0, score / float(best))
        absolute = score / float(pairs * BEST_LINK)
        return 100.0 * (RELATIVE * relative + (1.0 - RELATIVE) * absolute)
