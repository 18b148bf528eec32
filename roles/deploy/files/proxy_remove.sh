#!/bin/sh
# Removes the local proxy of gangplank.platform from this host (docs/connecting-services.md): its systemd unit, else its
# master process, its address on the loopback interface and its files. Prints "changed" when it removed anything, else
# "unchanged". Run as root by the deploy role (a catalog that no longer asks for the proxy) and by teardown.
#   proxy_remove.sh ADDRESS/PREFIX PID_FILE CONFIG SOCKET LOG
#   proxy_remove.sh --pid-of PID_FILE     prints the master's pid where root can trust the file, else fails
set -u

unit=/etc/systemd/system/gangplank-proxy.service

# The pid a pid file names, only where root can trust it: a regular file (no link) of root's, naming a process of
# root (real and effective uid) whose program is HAProxy (" (deleted)" after an upgrade replaced the binary).
pid_of() {
    [ -f "$1" ] && [ ! -L "$1" ] && [ "$(stat -c %u -- "$1" 2>/dev/null)" = 0 ] || return 1
    p=$(head -c 20 -- "$1" 2>/dev/null | head -n 1)
    case $p in '' | *[!0-9]*) return 1 ;; esac
    awk '$1 == "Uid:" && $2 == "0" && $3 == "0" {r = 1} END {exit !r}' "/proc/$p/status" 2>/dev/null || return 1
    case $(readlink "/proc/$p/exe" 2>/dev/null) in
    */haproxy | */haproxy" (deleted)") printf '%s\n' "$p" ;;
    *) return 1 ;;
    esac
}

if [ "${1:-}" = --pid-of ]; then
    pid_of "$2"
    exit
fi

address=$1 pid_file=$2
changed=
if [ -f "$unit" ]; then
    systemctl disable --now gangplank-proxy.service >/dev/null 2>&1
    rm -f "$unit"
    systemctl daemon-reload >/dev/null 2>&1
    changed=changed
fi
if p=$(pid_of "$pid_file"); then
    kill "$p" && changed=changed
fi
if ip -o address show dev lo 2>/dev/null | grep -qF " $address "; then
    ip address del "$address" dev lo && changed=changed
fi
shift
for file in "$@"; do
    if [ -e "$file" ] || [ -L "$file" ]; then
        rm -f "$file" && changed=changed
    fi
done
echo "${changed:-unchanged}"
