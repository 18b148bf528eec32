#!/bin/sh
# Ends what a killed run left of the containers given as arguments (tasks/wave.yml before their start,
# tasks/teardown.yml), each argument as the deploy read named it (plugins/module_utils/deploy/deploy_read.py):
#   <pid>:<id>:<name>  a monitor (with its container's init process) that keeps the container's published ports
#                      after the engine lost the container, so that every later start failed with "address already
#                      in use": checked again against the process's arguments, killed, then the container's state
#                      removed from the OCI runtime the monitor ran (its "-r" argument), which would otherwise stay
#                      in /run for ever;
#   broken:<name>      a container whose storage is gone (podman rm -f);
#   forward:<rule>     a port forwarding rule no running container owns (iptables -D, the rule's words as the read
#                      checked them: plain characters only);
#   <name>             a storage-only name (podman rm --storage, all of them at the end).
set -u

storage=""
for leftover; do
    case $leftover in
        broken:*)
            podman rm -f "${leftover#broken:}"
            ;;
        forward:*)
            # The rule's words, split on purpose.
            # shellcheck disable=SC2086
            iptables -w -t nat -D ${leftover#forward:} || true
            ;;
        *:*:*)
            pid=${leftover%%:*}
            id=${leftover#*:}
            id=${id%%:*}
            if grep -qa -- "$id" "/proc/$pid/cmdline" 2>/dev/null; then
                runtime=$(tr '\0' '\n' < "/proc/$pid/cmdline" | awk 'previous == "-r" {print; exit} {previous = $0}')
                # The monitor's children (the container's init) and the monitor, as separate words.
                # shellcheck disable=SC2046
                kill -KILL $(cat "/proc/$pid/task/$pid/children" 2>/dev/null) "$pid"
                waited=0
                while [ "$waited" -lt 50 ] && [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
                    sleep 0.1
                    waited=$((waited + 1))
                done
                [ -z "$runtime" ] || "$runtime" delete --force "$id" >/dev/null 2>&1 || true
            fi
            ;;
        *)
            storage="$storage $leftover"
            ;;
    esac
done
# The names, split on purpose (each a plain container name, deploy_read.parse).
# shellcheck disable=SC2086
[ -z "$storage" ] || podman rm --storage $storage
