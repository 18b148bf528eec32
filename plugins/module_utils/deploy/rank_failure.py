# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The message that stops a rollout on a host (the deploy role's "Stop the rollout" tasks): which rank, where and why
it stopped, then each unhealthy container with its probe, the probe's last output and the container's last log lines;
without probes to report, the failed task's message (never its result: it may hold secrets). Standard library only."""

from __future__ import annotations

NO_MESSAGE = "(the failed task gave no message; its result is not shown: it may hold secrets)"


def _probe_target(probe):
    if probe.get("type") == "tcp":
        return "%s:%s" % (probe.get("host"), probe.get("port"))
    if "url" in probe:
        return str(probe["url"])
    return " ".join(str(word) for word in probe.get("argv") or [])


def _headline(host, rank, services, waves, in_wave, failed, probes):
    if rank is None:
        unhealthy = [name for name, result in (probes or {}).items() if not result.get("healthy")]
        if unhealthy:
            first = ("Containers this run keeps as they are are not healthy on %s (%s); nothing was started."
                     % (host, ", ".join(unhealthy)))
        else:
            first = "Containers this run keeps as they are are not healthy on another host; nothing was started on %s." % host
        return [first, "Fix the cause and run again."]
    count = int(waves.get(str(rank), 1))
    rolling = count > 1
    later = "waves and " if rolling else ""
    named = "Rank %s (%s)" % (rank, ", ".join(str(service) for service in services))
    if failed is None:
        # any_errors_fatal: nothing failed on this host; another host's failure stopped it in the same rank.
        return ["%s stopped on %s: it failed on another host; later %sranks were not started here either." % (named, host, later)]
    where = " in wave %d of %d" % (int(in_wave) + 1, count) if rolling else ""
    return ["%s failed on %s%s; later %sranks were not started." % (named, host, where, later),
            "Fix the cause and run again: ranks that are healthy are kept, and the rollout continues from this one%s."
            % ("; the instances of later waves still run the old version" if rolling else "")]


def rank_failure(host, rank=None, services=(), waves=None, in_wave=0, containers=None, health=None, logs=(),
                 log_lines=20, failed=None):
    """The report, one line a list entry joined by line breaks.

    ``rank``: the rank that stopped, or None for the kept containers of the unchanged ranks; ``services``: its
    services; ``waves``: each rank (a string) to its number of waves; ``in_wave``: the wave that ran (from 0);
    ``containers``: name -> instance and probe; ``health``: gangplank.platform.health_wait's result (its ``probes``:
    name -> healthy, attempts, seconds, last_output); ``logs``: the results of the log reads, each with its ``item``
    (``key``: the container) and its output lines; ``failed``: the failed task's result, None when nothing failed on
    this host."""
    probes = (health or {}).get("probes") if isinstance(health, dict) else None
    lines = _headline(host, rank, services, waves or {}, in_wave, failed, probes)
    if probes is not None:
        for name in sorted(probes):
            result = probes[name]
            if result.get("healthy"):
                continue
            container = (containers or {}).get(name) or {}
            probe = container.get("probe") or {}
            lines += ["", "%s (instance %s on %s):" % (name, container.get("instance"), host),
                      "  probe: %s %s, %s attempt(s) over %ss" % (
                          probe.get("type"), _probe_target(probe), result.get("attempts"), result.get("seconds")),
                      "  last probe output: %s" % result.get("last_output"),
                      "  last %s log lines:" % log_lines]
            for log in logs or []:
                if (log.get("item") or {}).get("key") != name:
                    continue
                output = list(log.get("stdout_lines") or []) + list(log.get("stderr_lines") or [])
                lines += ["    %s" % line for line in output] or ["    (none)"]
    elif failed is not None:
        lines += ["", str(failed["msg"]) if isinstance(failed, dict) and "msg" in failed else NO_MESSAGE]
    return "\n".join(lines)
