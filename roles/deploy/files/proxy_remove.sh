#!/bin/sh
# Removes the local proxy of gangplank.platform from this host (docs/connecting-services.md): its systemd unit, else its
# master process, its address on the loopback interface and its files. Prints "changed" when it removed anything, else
# "unchanged". Run as root by the deploy role (a catalog that no longer asks for the proxy) and by teardown.
#   proxy_remove.sh ADDRESS/PREFIX MASTER_PID FILE...
# MASTER_PID is the master the deploy read found (plugins/module_utils/deploy/deploy_read.py: named by a pid file of
# root's, a process of root running HAProxy), 0 for none: the pid file itself is never read here.
set -u

unit=/etc/systemd/system/gangplank-proxy.service

address=$1 master=$2
case $master in '' | *[!0-9]*) echo "proxy_remove.sh: the master's pid must be digits" >&2; exit 2 ;; esac
changed=
if [ -f "$unit" ]; then
    systemctl disable --now gangplank-proxy.service >/dev/null 2>&1
    rm -f "$unit"
    systemctl daemon-reload >/dev/null 2>&1
    changed=changed
elif [ "$master" -gt 0 ] && [ -d "/proc/$master" ]; then
    kill "$master" && changed=changed
    # The master stops its workers, then itself: at most 10 s, so that nothing listens once this says so.
    waited=0
    while [ "$waited" -lt 100 ] && [ -d "/proc/$master" ] && ! grep -q '^State:.*Z' "/proc/$master/status" 2>/dev/null; do
        sleep 0.1
        waited=$((waited + 1))
    done
fi
if ip -o address show dev lo 2>/dev/null | grep -qF " $address "; then
    ip address del "$address" dev lo && changed=changed
fi
shift 2
for file in "$@"; do
    if [ -e "$file" ] || [ -L "$file" ]; then
        rm -f "$file" && changed=changed
    fi
done
echo "${changed:-unchanged}"
