# shellcheck shell=bash
# Sourced by scripts/lib/freshbed.sh and scripts/lib/ee_base_image.sh (as root, from the repository root): a minimal
# Debian root file system, made once into a tar archive that the caller imports into Podman.
#   rootfs_tar TAR SUITE PACKAGES MIRROR CUSTOMIZE [ARG ...]
# Unless TAR exists already: debootstrap --variant=minbase --include=PACKAGES SUITE (from MIRROR; its log in
# debootstrap.log beside TAR) into a temporary folder beside TAR, then `CUSTOMIZE FOLDER ARG ...`, then the folder
# archived as TAR. The archives beside it of the same name up to the last '-' (older recipes') are deleted.
# debootstrap is installed with apt-get when missing; the caller's `log` function says so.

ROOTFS_TMP=""

rootfs_tar() {
    local tar=$1 suite=$2 packages=$3 mirror=$4 customize=$5 dir name
    shift 5
    [[ -s $tar ]] && return 0
    dir=${tar%/*} name=${tar##*/}
    command -v debootstrap >/dev/null || {
        log "installing debootstrap"
        env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    mkdir -p "$dir"
    ROOTFS_TMP=$(mktemp -d "$dir/root.XXXXXX")
    trap 'rm -rf "$ROOTFS_TMP"' EXIT
    debootstrap --variant=minbase --include="$packages" "$suite" "$ROOTFS_TMP" "$mirror" >"$dir/debootstrap.log"
    "$customize" "$ROOTFS_TMP" "$@"
    tar -C "$ROOTFS_TMP" -cf "$tar.tmp" .
    rm -rf "$ROOTFS_TMP"
    trap - EXIT
    mv "$tar.tmp" "$tar"
    find "$dir" -maxdepth 1 -name "${name%-*}-*.tar" ! -name "$name" -delete
}
