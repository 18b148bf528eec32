#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: health_wait
short_description: Wait until every listed health probe on this host passes, polling them all at once
version_added: 0.1.0
description:
  - Polls HTTP, TCP and command probes on the managed host until each one passes or has used up its retries.
  - All probes are polled concurrently, one thread each, so waiting for many instances takes as long as the slowest one,
    not the sum of them.
  - Each probe is attempted; on success it is done. On failure its last output is kept (the HTTP status and the first 500 bytes
    of the body, the connection error, or the command's return code and the last 500 characters of its output),
    then the probe sleeps O(probes[].interval) and tries again, until O(probes[].retries) failures are used up.
  - Fails when any probe is unhealthy, with one line per unhealthy probe in C(msg) and the per-probe results.
  - Never changes anything on the host, so it always reports C(changed=false).
options:
  probes:
    description:
      - The probes to wait for.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - The probe's name, unique in the list. Results are returned under it.
        type: str
        required: true
      type:
        description:
          - 'The kind of probe: C(http) (a GET request), C(tcp) (a connection is accepted) or C(command) (a command exits with 0).'
        type: str
        required: true
      url:
        description:
          - The URL to GET. Required with O(probes[].type=http).
          - Redirects are not followed (a redirect's status is the result) and no proxy is used. HTTPS certificates are verified.
        type: str
      expect_status:
        description:
          - The HTTP status codes that count as healthy.
          - When not given, any status from 200 to 399 counts as healthy.
        type: list
        elements: int
      host:
        description:
          - The host to connect to with O(probes[].type=tcp).
        type: str
        default: 127.0.0.1
      port:
        description:
          - The port to connect to. Required with O(probes[].type=tcp).
        type: int
      argv:
        description:
          - The command and its arguments, a list of strings, run without a shell. Required with O(probes[].type=command).
          - A single string is refused rather than split, so that arguments are never guessed.
          - The command is killed (with its process group) when it runs longer than O(probes[].timeout).
        type: raw
      timeout:
        description:
          - Seconds one attempt may take.
        type: float
        default: 2
      interval:
        description:
          - Seconds to sleep after a failed attempt.
        type: float
        default: 1
      retries:
        description:
          - Failed attempts after which the probe gives up.
        type: int
        default: 60
      start_period:
        description:
          - Seconds from the start of the wait during which failures do not count against O(probes[].retries),
            for services that take a while to start.
        type: float
        default: 0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is probed; C(healthy) is null.
  diff_mode:
    support: none
  platform:
    platforms: posix
author:
  - Gangplank maintainers (@gangplank)
notes:
  - Probes run on the managed host, so C(127.0.0.1) is that host.
seealso:
  - module: ansible.builtin.wait_for
    description: Waits for one port, path or string at a time.
  - module: ansible.builtin.uri
    description: Makes one HTTP request; with C(until) and C(retries) it polls one URL at a time.
"""

EXAMPLES = r"""
- name: Wait until every instance on this node is healthy
  gangplank.platform.health_wait:
    probes:
      - name: infer-0
        type: http
        url: http://127.0.0.1:8000/health
        start_period: 30
      - name: infer-1
        type: http
        url: http://127.0.0.1:8001/health
        expect_status: [200]
      - name: db
        type: tcp
        port: 5432
        retries: 30
        interval: 2
      - name: metrics
        type: command
        argv: [curl, -fsS, http://127.0.0.1:9100/metrics]
        timeout: 5

- name: Wait for the probes of the instances bound to this node
  gangplank.platform.health_wait:
    probes: "{{ gangplank_health_probes }}"
  register: health

- name: Show how long each took
  ansible.builtin.debug:
    msg: "{{ health.probes | dict2items | map(attribute='value.seconds') | list }}"
"""

RETURN = r"""
healthy:
  description:
    - Whether every probe passed. Null in check mode, where nothing is probed.
  returned: always
  type: bool
  sample: true
seconds:
  description:
    - Wall-clock seconds the whole wait took.
  returned: always
  type: float
  sample: 3.52
probes:
  description:
    - The result of each probe, by probe name.
  returned: always
  type: dict
  contains:
    healthy:
      description: Whether the probe passed. Null in check mode.
      type: bool
    attempts:
      description: The attempts made.
      type: int
    seconds:
      description: Seconds from the probe's first attempt to its last.
      type: float
    last_output:
      description:
        - The output of the last attempt, for example C(HTTP 503 ...), a connection error, or C(rc=1 ...) with the command's output.
      type: str
  sample:
    infer-0:
      healthy: true
      attempts: 4
      seconds: 3.018
      last_output: 'HTTP 200: {"status": "ok"}'
msg:
  description:
    - On failure, one line per unhealthy probe naming its type, target, attempts, seconds and last output.
    - 'In check mode, C(check mode: not probed).'
  returned: on failure or in check mode
  type: str
  sample: "db: tcp 127.0.0.1:5432 failed 30 times over 60.12s; last: connection to 127.0.0.1:5432 failed: [Errno 111] Connection refused"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.health import ARGUMENT_SPEC, wait_result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = wait_result(module.params["probes"], module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
