# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: plan_html
short_description: Render a gang plan as one self-contained HTML page
version_added: 0.1.0
description:
  - Turns the result of M(gangplank.platform.gang_plan) or M(gangplank.platform.gang_schedule) (its C(plan)) into one
    HTML document with inline CSS and SVG only (no script, no network); per node a card with CPU and memory bars, each
    GPU as a bar split by the instances sharing its memory (a colour per service, the instance on hover), on a node
    whose usage has C(gpu_groups) (it lists gpu_links) its GPUs in boxes by NVLink group and NUMA node, NVMe devices,
    planted labels and the node's instances; moves and preempted instances marked; an infeasible plan lists every
    unplaced instance with its reason.
  - Every name is escaped; the page stays readable at 50 nodes of 8 GPUs (cards in a grid).
options:
  _input:
    description:
      - A plan result, with at least C(feasible); C(placements), C(usage), C(moves) and C(node_labels) when feasible.
      - With O(status), per host the instances it is bound to run (the C(instances) of its C(gangplank.fact)).
    type: dict
    required: true
  status:
    description:
      - The input is per host the bound instances (playbooks/status.yml), not a plan; the nodes' CPU and memory are not
        known there, so the cards have no CPU and memory bars. Each GPU's bar is to scale when O(gpus) gives its size,
        else it is what its instances take.
    type: bool
    default: false
  gpus:
    description:
      - With O(status), per host its GPUs as its stored hardware facts list them (C(gangplank_gpus), each with C(uuid),
        C(index), C(model) and C(memory_total) in bytes), at most 64 per host; a GPU nobody takes is then shown free.
    type: dict
    default: {}
  gpu_links:
    description:
      - With O(status), per host the links between its GPUs as its stored hardware facts list them
        (C(gangplank_gpu_links), see M(gangplank.platform.gpu_facts)); with that host's O(gpus), its GPUs are drawn in
        boxes by NVLink group and NUMA node, as on a plan's page. Links that are not what the facts modules write are an
        error naming the host and the entry.
    type: dict
    default: {}
  down:
    description:
      - With O(status), per host that is down (in the placement record, not live in this run) its recorded instances;
        each gets a card marked down, with the instances that wait for it.
    type: dict
    default: {}
  title:
    description: The page's title and heading.
    type: str
    default: gangplank placement
  health:
    description:
      - Live state per instance name, shown on the instances (a mark, healthy, failing or unknown, and the full state
        on hover); or the status rows of M(gangplank.platform.deploy_status), one per
        container, from which each instance's state is taken.
    type: raw
    default: {}
  notes:
    description: Lines shown under the summary.
    type: list
    elements: str
    default: []
  added:
    description:
      - The instances new in this plan (the C(changes.added) of M(gangplank.platform.gang_schedule), against the
        placement record), each marked C(+) on its chip; moved instances are marked from the plan's C(moves).
    type: list
    elements: str
    default: []
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Write the plan as a picture on the controller (from gang_plan's result)
  ansible.builtin.copy:
    content: "{{ gangplank_plan.plan | gangplank.platform.plan_html(title='my cluster') }}"
    dest: /tmp/gangplank-plan.html
    mode: "0644"
  delegate_to: localhost

- name: Picture what each host is bound to run, its GPUs in their link groups
  ansible.builtin.copy:
    content: >-
      {{ bound | gangplank.platform.plan_html(status=true, title='bound now',
         gpus={'gpu1': hostvars['gpu1'].gangplank_gpus},
         gpu_links={'gpu1': hostvars['gpu1'].gangplank_gpu_links}) }}
    dest: /tmp/gangplank-status.html
    mode: "0644"
  delegate_to: localhost
  vars:
    bound: "{{ {'gpu1': hostvars['gpu1'].ansible_local.gangplank.instances} }}"
"""

RETURN = r"""
_value:
  description: The HTML document.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

# The picture's modules (the scheduler's model among them) are imported when the filter runs, not with this file:
# Ansible loads every filter file of the collection in each worker that templates any of them, once per task and host.

MAX_MESSAGE = 1000      # characters of an error, on one line: names from the input are cut, never printed whole


def _gpu_groups(gpus, gpu_links):
    """{host: its GPUs' link groups} of the hosts that have links, from their gangplank_gpus and gangplank_gpu_links."""
    if not isinstance(gpus or {}, dict) or not isinstance(gpu_links or {}, dict):
        raise AnsibleFilterError("plan_html: gpus and gpu_links must be mappings of host to that host's facts")
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import gpu_groups
    from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import NodeFactsError
    from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
    groups = {}
    for host in sorted(gpu_links or {}, key=str):
        facts = {"gangplank_gpus": (gpus or {}).get(host) or [], "gangplank_gpu_links": gpu_links[host]}
        try:
            groups[host] = gpu_groups(str(host), facts)
        except NodeFactsError as error:
            # The facts' own paths, as this filter's options name them.
            message = str(error).replace("%s: ansible_facts.gangplank_gpu_links" % host, "gpu_links.%s" % host, 1)
            message = message.replace("%s: ansible_facts.gangplank_gpus" % host, "gpus.%s" % host, 1)
            raise AnsibleFilterError("plan_html: %s" % one_line(message, MAX_MESSAGE)) from None
        except ProblemError as error:
            # What the scheduler refuses of the GPUs and links (text with control characters, a link to no GPU): its
            # paths are those of its own node ("nodes.host.gpus[0]", GPUs by index), the first errors on one line.
            shown = "; ".join("%s: %s" % (path.replace("nodes.host.", "", 1), message) for path, message in error.errors[:3])
            more = " (%d more)" % (len(error.errors) - 3) if len(error.errors) > 3 else ""
            raise AnsibleFilterError(one_line("plan_html: gpus.%s and gpu_links.%s are not what the facts modules write: %s%s"
                                              % (host, host, shown, more), MAX_MESSAGE)) from None
    return groups


def plan_html(result, title="gangplank placement", health=None, notes=None, status=False, gpus=None, down=None,
              gpu_links=None, added=None):
    from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import (
        PictureError, health_of, render_html, status_result,
    )
    if not status and (not isinstance(result, dict) or "feasible" not in result):
        raise AnsibleFilterError("plan_html expects a plan result (a mapping with 'feasible'), got %s" % type(result).__name__)
    if not isinstance(added or [], list):
        raise AnsibleFilterError("plan_html: added must be a list of instance names")
    if not isinstance(health or {}, (dict, list)) or not isinstance(notes or [], list):
        raise AnsibleFilterError("plan_html: health must be a mapping of instance to state (or status rows) and notes a list of lines")
    try:
        if status:
            result = status_result(result, gpus=gpus, down=down, gpu_groups=_gpu_groups(gpus, gpu_links))
        if isinstance(health, list):
            health = health_of(health)
        if status and isinstance(down, dict):
            # The instances of a host that is down are not probed: they wait for it.
            health = dict(health or {}, **{str(name): "waiting: host down" for instances in down.values()
                                           if isinstance(instances, dict) for name in instances})
        return render_html(result, title=str(title), health=health or {}, notes=[str(note) for note in notes or []],
                           added=[str(name) for name in added or []])
    except PictureError as error:
        raise AnsibleFilterError("plan_html: the plan result is not valid: %s" % one_line(str(error), MAX_MESSAGE)) from None


class FilterModule:
    def filters(self):
        return {"plan_html": plan_html}
