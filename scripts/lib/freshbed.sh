#!/usr/bin/env bash
# The fresh-host bed: hosts that have never seen this project, reached over real SSH as a sudo user.
#   scripts/lib/freshbed.sh up   [NAME=ADDRESS ...]   start these hosts (default: inventories/fresh/hosts.yml's)
#   scripts/lib/freshbed.sh down [NAME=ADDRESS ...]   remove them (their engines' containers and images with them)
#   scripts/lib/freshbed.sh image [--rebuild]         only build the host image (--rebuild: from scratch)
# Each host is a privileged container of its own (own root file system, /etc, engine storage) made
# from a minimal Debian 12 (debootstrap --variant=minbase with openssh-server, sudo and python3: no
# podman, no docker). It runs sshd on ADDRESS:22 (a loopback address) and publishes the demo's app
# ports (FRESHBED_PORTS) on the same address, so the controller talks to 127.0.0.0/8 only. User
# `gangplank` logs in with the key .build/fresh/id_ed25519 and has passwordless sudo.
# The root file system is built once into .build/fresh/host-<recipe hash>.tar (about a minute and
# 280 MB, from Debian's packages) and rebuilt only when the recipe below changes. Up and down are
# idempotent. This machine's own /etc is left alone: the outer podman reads .build/fresh/containers.conf.
set -euo pipefail

# debootstrap and privileged containers need root.
((EUID == 0)) || exec sudo --preserve-env=FRESHBED_DIR,FRESHBED_MIRROR,FRESHBED_PORTS,FRESHBED_HOSTS,FRESHBED_SUBNET "$0" "$@"
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
# Descriptors inherited from the caller are not passed on: Podman's helpers (conmon, aardvark-dns) stay running after
# this script and keep every descriptor they inherit, so a lock taken around this script (flock LOCKFILE
# scripts/lib/freshbed.sh up) would be held by them until the bed's containers are gone. Closing this process's copy
# does not release the caller's lock. (sudo, above, closes them itself.)
for fd in "/proc/$$/fd"/*; do
    fd=${fd##*/}
    if ((fd > 2)); then
        eval "exec $fd>&-"
    fi
done
FRESHBED_DIR=${FRESHBED_DIR:-$PWD/.build/fresh}
FRESHBED_SUITE=bookworm
FRESHBED_MIRROR=${FRESHBED_MIRROR:-http://deb.debian.org/debian}
FRESHBED_PACKAGES=openssh-server,sudo,python3
FRESHBED_PORTS=${FRESHBED_PORTS:-5432 5672 8080 9000}
FRESHBED_USER=gangplank
# The hosts' own network. Not podman's default 10.88.0.0/16, which a host's own Podman takes for its
# bridge: the host's route back to the controller would then lead into that bridge.
FRESHBED_NETWORK=gangplank-freshbed
FRESHBED_SUBNET=${FRESHBED_SUBNET:-10.213.61.0/24}
export CONTAINERS_CONF=$FRESHBED_DIR/containers.conf
# shellcheck source=scripts/lib/rootfs.sh
source scripts/lib/rootfs.sh

log() { printf 'freshbed: %s\n' "$*" >&2; }

# What goes into the image, as text: its hash names the image, so a change here rebuilds it.
recipe() {
    printf 'suite=%s packages=%s user=%s\n' "$FRESHBED_SUITE" "$FRESHBED_PACKAGES" "$FRESHBED_USER"
    declare -f customize
}

# Turns the debootstrapped tree $1 into a host: the sudo user, sshd reading keys from
# /etc/ssh/authorized_keys/%u (mounted at run time), and an entry point that makes host keys.
customize() {
    local root=$1
    chroot "$root" useradd --create-home --shell /bin/bash "$FRESHBED_USER"
    printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$FRESHBED_USER" >"$root/etc/sudoers.d/$FRESHBED_USER"
    chmod 0440 "$root/etc/sudoers.d/$FRESHBED_USER"
    printf 'AuthorizedKeysFile /etc/ssh/authorized_keys/%%u\nPasswordAuthentication no\nUseDNS no\n' \
        >"$root/etc/ssh/sshd_config.d/freshbed.conf"
    rm -f "$root"/etc/ssh/ssh_host_*
    cat >"$root/usr/local/sbin/freshbed-init" <<'INIT'
#!/bin/sh
# Each host gets host keys of its own, then sshd in the foreground.
set -e
ssh-keygen -A >/dev/null
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e
INIT
    chmod 0755 "$root/usr/local/sbin/freshbed-init"
    # An image has no machine id; a fresh host is expected to have one.
    : >"$root/etc/machine-id"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
}

outer_podman_conf() {
    mkdir -p "$FRESHBED_DIR"
    # The same detected-or-not settings as the local bed's image build (scripts/lib/testbed.sh).
    # The bed's network definition stays here too, not in /etc/containers/networks.
    printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n[network]\nnetwork_config_dir = "%s"\n' \
        "$FRESHBED_DIR/networks" >"$CONTAINERS_CONF"
}

image_name() {
    local hash
    hash=$(recipe | sha256sum)
    printf 'localhost/gangplank-fresh-host:%s' "${hash:0:12}"
}

build_image() {
    local image tar
    image=$(image_name)
    tar=$FRESHBED_DIR/host-${image##*:}.tar
    if podman image exists "$image"; then
        return
    fi
    if [[ ! -s $tar ]]; then
        log "building the host image (debootstrap $FRESHBED_SUITE, about a minute)"
        # Older recipes' archives are of no further use: rootfs_tar deletes them.
        rootfs_tar "$tar" "$FRESHBED_SUITE" "$FRESHBED_PACKAGES" "$FRESHBED_MIRROR" customize
    fi
    log "importing $tar as $image"
    podman import -q "$tar" "$image" >/dev/null
}

ssh_key() {
    [[ -s $FRESHBED_DIR/id_ed25519 ]] && return
    ssh-keygen -q -t ed25519 -N '' -C freshbed -f "$FRESHBED_DIR/id_ed25519"
}

# NAME=ADDRESS pairs: the arguments, else the hosts of inventories/fresh/hosts.yml (kept in step with it).
FRESHBED_HOSTS=${FRESHBED_HOSTS:-fresh1=127.0.0.61 fresh2=127.0.0.62 fresh3=127.0.0.63}
hosts() {
    if (($#)); then
        printf '%s\n' "$@"
    else
        # Word splitting wanted: a space-separated list.
        # shellcheck disable=SC2086
        printf '%s\n' $FRESHBED_HOSTS
    fi
}

container() { printf 'gangplank-fresh-%s' "$1"; }

up() {
    local entry name address ports=() port
    for port in $FRESHBED_PORTS; do ports+=("$port"); done
    build_image
    ssh_key
    podman network exists "$FRESHBED_NETWORK" || podman network create --subnet "$FRESHBED_SUBNET" "$FRESHBED_NETWORK" >/dev/null
    for entry in $(hosts "$@"); do
        name=${entry%%=*} address=${entry#*=}
        if [[ "$(podman container inspect -f '{{.State.Running}}' "$(container "$name")" 2>/dev/null)" == true ]]; then
            continue
        fi
        podman rm -f -v "$(container "$name")" >/dev/null 2>&1 || true
        close_connections
        local publish=(-p "$address:22:22")
        for port in "${ports[@]}"; do publish+=(-p "$address:$port:$port"); done
        log "starting $name on $address"
        # Engine storage on volumes, not on the container's overlay root (no overlay on overlay).
        # Its address in the bed's network is fixed (the subnet's, with the loopback address's last number): the
        # same after a restart, so that a host that publishes on it (tests/e2e/fresh.py) finds it again after a reboot.
        podman run -d -q --name "$(container "$name")" --hostname "$name" --privileged --init \
            --label gangplank.io/freshbed=true --network "$FRESHBED_NETWORK" --ip "${FRESHBED_SUBNET%.*}.${address##*.}" \
            --network-alias "$name" "${publish[@]}" \
            -v /var/lib/containers -v /var/lib/docker \
            -v "$FRESHBED_DIR/id_ed25519.pub:/etc/ssh/authorized_keys/$FRESHBED_USER:ro" \
            "$(image_name)" /usr/local/sbin/freshbed-init >/dev/null
    done
    for entry in $(hosts "$@"); do
        name=${entry%%=*} address=${entry#*=}
        wait_ssh "$name" "$address"
    done
}

wait_ssh() {
    local tries
    for ((tries = 0; tries < 100; tries++)); do
        if ssh -q -i "$FRESHBED_DIR/id_ed25519" -o BatchMode=yes -o StrictHostKeyChecking=no \
            -o UserKnownHostsFile=/dev/null -o ConnectTimeout=2 "$FRESHBED_USER@$2" true 2>/dev/null; then
            return
        fi
        sleep 0.2
    done
    log "$1 does not answer on $2:22"
    podman logs --tail 20 "$(container "$1")" >&2 || true
    return 1
}

down() {
    local entry
    for entry in $(hosts "$@"); do
        podman rm -f -v -t 0 "$(container "${entry%%=*}")" >/dev/null 2>&1 || true
    done
    close_connections
}

# Ansible's persistent SSH connections (inventories/fresh puts them here): a new host on an address
# must not be reached through a connection to the one before it.
close_connections() {
    local socket
    for socket in "$FRESHBED_DIR"/cp/*; do
        if [[ -S $socket ]]; then
            ssh -O exit -o ControlPath="$socket" freshbed >/dev/null 2>&1 || true
        fi
    done
}

main() {
    outer_podman_conf
    case "${1:-}" in
        image)
            if [[ ${2:-} == --rebuild ]]; then
                rm -f "$FRESHBED_DIR/host-$(image_name | sed 's/.*://').tar"
                podman untag "$(image_name)" >/dev/null 2>&1 || true
            fi
            build_image
            ;;
        up) shift; up "$@" ;;
        down) shift; down "$@" ;;
        *) echo "usage: scripts/lib/freshbed.sh up|down [NAME=ADDRESS ...] | image" >&2; return 2 ;;
    esac
}

main "$@"
