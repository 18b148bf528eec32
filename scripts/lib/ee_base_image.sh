#!/usr/bin/env bash
# A base image for building the execution environment (execution-environment.yml) without a registry:
#   scripts/lib/ee_base_image.sh            build it unless present; print its name
#   scripts/lib/ee_base_image.sh --rebuild  from scratch
# Debian 12 (debootstrap --variant=minbase with python3 and python3-venv), imported into Podman as
# localhost/gangplank-ee-base:<recipe hash>. What ansible-builder's scripts expect of a base image, on Debian:
#   - a Python with pip: Debian's own python3 refuses ensurepip (ansible-builder's pip_install), so the
#     Python is a virtual environment, /opt/ee (build with --build-arg PYCMD=/opt/ee/bin/python3); its bin is
#     first on PATH, where the build finds ansible-galaxy once it has installed ansible-core;
#   - a package manager that takes "install -y PACKAGES" and "clean all" as dnf does:
#     /usr/local/sbin/ee-apt (build with --build-arg PKGMGR=/usr/local/sbin/ee-apt) refreshes apt's lists,
#     installs without recommends, and drops the lists again on clean; bindep reads the definition's
#     [platform:dpkg] entries;
#   - the collections of awx/requirements.yml already installed in /usr/share/ansible/collections, as
#     quay.io's awx-ee has its own: no Galaxy server is reachable here. They are copied from the `ansible`
#     package of the Python that runs this script (PYTHON, default python3), so the build's
#     `ansible-galaxy collection install -r requirements.yml` finds them installed;
#   - the certificate authorities this machine adds to Debian's (/usr/local/share/ca-certificates, e.g. a
#     proxy's that re-signs PyPI's certificates), for apt and for pip (PIP_CERT: pip reads its own bundle
#     otherwise).
# The root file system is built once into .build/ee/base-<hash>.tar (a minute or more, from Debian's
# packages) and rebuilt only when the recipe changes; the image is imported from it when missing.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
# shellcheck source=scripts/lib/rootfs.sh
source scripts/lib/rootfs.sh
EE_BASE_DIR=${EE_BASE_DIR:-$PWD/.build/ee}
EE_BASE_SUITE=bookworm
EE_BASE_MIRROR=${EE_BASE_MIRROR:-http://deb.debian.org/debian}
EE_BASE_PACKAGES=python3,python3-venv,ca-certificates
PYTHON=${PYTHON:-python3}
# The image's settings (podman import --change).
EE_BASE_CHANGES=(
    'ENV PATH=/opt/ee/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt'
    'CMD ["/bin/bash"]'
)

log() { printf 'ee_base_image: %s\n' "$*" >&2; }

# The collections of awx/requirements.yml and those they depend on (their MANIFEST.json), one
# "namespace/name version folder" a line, from the first folder of the ansible_collections package that has each.
collections() {
    "$PYTHON" - awx/requirements.yml <<'PY'
import json, os, sys, yaml
import ansible_collections
todo = [entry["name"] for entry in yaml.safe_load(open(sys.argv[1]))["collections"]]
seen = {}
while todo:
    name = todo.pop()
    if name in seen:
        continue
    for root in ansible_collections.__path__:
        folder = os.path.join(root, *name.split("."))
        if os.path.isfile(os.path.join(folder, "MANIFEST.json")):
            break
    else:
        sys.exit("ee_base_image: the collection %s is not installed for %s" % (name, sys.executable))
    info = json.load(open(os.path.join(folder, "MANIFEST.json")))["collection_info"]
    seen[name] = (info["version"], folder)
    todo.extend(info.get("dependencies") or {})
for name in sorted(seen):
    print(name.replace(".", "/"), *seen[name])
PY
}

apt_wrapper() {
    cat <<'WRAPPER'
#!/bin/sh
# ansible-builder's scripts run "$PKGMGR install -y [OPTIONS] PACKAGES" and "$PKGMGR clean all" (dnf's words).
set -e
case "$1" in
install)
    shift
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive exec apt-get install -y -qq --no-install-recommends "$@"
    ;;
clean)
    apt-get clean
    rm -rf /var/lib/apt/lists/*
    ;;
*)
    exec apt-get "$@"
    ;;
esac
WRAPPER
}

recipe() {
    printf 'suite=%s packages=%s\n' "$EE_BASE_SUITE" "$EE_BASE_PACKAGES"
    printf '%s\n' "${EE_BASE_CHANGES[@]}"
    # Names and versions (not where they are installed).
    cut -d ' ' -f 1-2 <<<"$1"
    cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true
    apt_wrapper
    declare -f customize
}

customize() {
    local root=$1 list=$2 name folder
    chroot "$root" python3 -m venv /opt/ee
    apt_wrapper >"$root/usr/local/sbin/ee-apt"
    chmod 0755 "$root/usr/local/sbin/ee-apt"
    while read -r name _ folder; do
        mkdir -p "$root/usr/share/ansible/collections/ansible_collections/${name%/*}"
        cp -a "$folder" "$root/usr/share/ansible/collections/ansible_collections/$name"
        find "$root/usr/share/ansible/collections/ansible_collections/$name" -name __pycache__ -prune -exec rm -rf {} +
    done <<<"$list"
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
        chroot "$root" update-ca-certificates >/dev/null
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
}

main() {
    local list hash image tar
    list=$(collections)
    hash=$(recipe "$list" | sha256sum)
    image=localhost/gangplank-ee-base:${hash:0:12}
    tar=$EE_BASE_DIR/base-${hash:0:12}.tar
    if [[ ${1:-} == --rebuild ]]; then
        rm -f "$tar"
        podman untag "$image" >/dev/null 2>&1 || true
    fi
    if ! podman image exists "$image"; then
        mkdir -p "$EE_BASE_DIR"
        if [[ ! -s $tar ]]; then
            log "building the base image (debootstrap $EE_BASE_SUITE)"
            rootfs_tar "$tar" "$EE_BASE_SUITE" "$EE_BASE_PACKAGES" "$EE_BASE_MIRROR" customize "$list"
        fi
        log "importing $tar as $image"
        local changes=() change
        for change in "${EE_BASE_CHANGES[@]}"; do changes+=(--change "$change"); done
        podman import -q "${changes[@]}" "$tar" "$image" >/dev/null
        # Images of older recipes.
        podman images --format '{{.Repository}}:{{.Tag}}' localhost/gangplank-ee-base | grep -vxF "$image" |
            xargs --no-run-if-empty podman rmi >/dev/null 2>&1 || true
    fi
    printf '%s\n' "$image"
}

((EUID == 0)) || { log "needs root (debootstrap, chroot)"; exit 1; }
main "$@"
