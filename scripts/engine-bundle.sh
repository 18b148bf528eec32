#!/usr/bin/env bash
# Collects a container engine's Debian packages with every dependency into one archive, for hosts
# that reach no package repository (the runtime role's runtime_offline_bundle).
#   scripts/engine-bundle.sh podman|docker OUTPUT.tar
# Run it as root on a machine of the hosts' release (Debian 12 for bookworm hosts) that reaches a
# repository: the controller, or any container of that release. apt resolves the packages against an
# empty package database, so the archive holds the whole dependency closure and installs on a host
# that has only the minimal base system. Nothing is installed on this machine and its apt state is
# not changed (its package lists are only read; run apt-get update first if they are old).
# The packages are the runtime role's defaults (runtime_podman_packages, runtime_docker_packages,
# runtime_docker_python_packages); give others after the output to add them.
set -euo pipefail

usage() {
    echo "usage: scripts/engine-bundle.sh podman|docker OUTPUT.tar [EXTRA_PACKAGE ...]" >&2
    exit 2
}

(($# >= 2)) || usage
engine=$1 output=$2
shift 2
case $engine in
    podman) packages=(podman runc catatonit) ;;
    docker) packages=(docker.io python3-requests) ;;
    *) usage ;;
esac
packages+=("$@")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/archives/partial" "$work/state" "$work/bundle"
: >"$work/state/status"
# Recommends are left out: the role installs exactly what is in the bundle (apt, from these files only).
apt-get --quiet --yes --download-only --no-install-recommends \
    -o Dir::State::status="$work/state/status" -o Dir::Cache::archives="$work/archives" -o Debug::NoLocking=1 \
    -o APT::Sandbox::User=root \
    install "${packages[@]}" >"$work/apt.log" || {
    cat "$work/apt.log" >&2
    echo "engine-bundle: apt-get could not collect ${packages[*]} (see above)" >&2
    exit 1
}
mv "$work"/archives/*.deb "$work/bundle/"
printf '%s\n' "${packages[@]}" >"$work/bundle/PACKAGES"
tar -C "$work/bundle" -cf "$output.tmp" .
mv "$output.tmp" "$output"
printf 'engine-bundle: %s: %d packages for %s (%s)\n' "$output" "$(find "$work/bundle" -name '*.deb' | wc -l)" \
    "${packages[*]}" "$(du -h "$output" | cut -f1)"
