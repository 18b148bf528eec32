# shellcheck shell=bash
# Sourced by scripts/demo.sh and scripts/test.sh: makes this machine able to run the local test
# bed (inventories/local). Idempotent and offline apart from Debian's packages:
#   - installs podman, buildah (the e2e tests make a storage-only container with it), runc, catatonit,
#     busybox-static, and haproxy and iproute2 (the demo's local proxy, one per host) when one is missing (apt);
#   - builds the demo image FROM scratch with busybox (no registry is needed) and saves it to
#     .build/testbed/images/gangplank-demo.tar, the offline bundle the runtime role loads.
# The engine's own settings are the runtime role's job, not this script's.

TESTBED_DIR=${TESTBED_DIR:-$PWD/.build/testbed}
TESTBED_IMAGE=localhost/gangplank-demo:1

testbed_packages() {
    if command -v podman >/dev/null && command -v buildah >/dev/null && [ -x /bin/busybox ] && [ -x /usr/libexec/podman/catatonit ] &&
        [ -x /usr/sbin/haproxy ] && [ -x /usr/sbin/ip ]; then
        return
    fi
    local sudo=()
    ((EUID == 0)) || sudo=(sudo)
    echo "testbed: installing podman, buildah, runc, catatonit, busybox-static, haproxy and iproute2" >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc catatonit busybox-static \
        haproxy iproute2 >/dev/null
}

testbed_image() {
    local bundle=$TESTBED_DIR/images/gangplank-demo.tar
    [ -s "$bundle" ] && return
    local context
    context=$(mktemp -d)
    cp /bin/busybox "$context/busybox"
    cat >"$context/Containerfile" <<'CONTAINERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/mkdir", "-p", "/tmp", "/www"]
CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]
CONTAINERFILE
    mkdir -p "$TESTBED_DIR/images"
    # The build's RUN step needs a working engine, before the runtime role has configured it.
    testbed_conf "$context/containers.conf"
    CONTAINERS_CONF=$context/containers.conf podman build -q -t "$TESTBED_IMAGE" "$context" >/dev/null
    podman save -q -o "$bundle.tmp" "$TESTBED_IMAGE"
    mv "$bundle.tmp" "$bundle"
    # Leave the image to the runtime role, which loads it from the bundle as on an air-gapped site.
    podman rmi -f "$TESTBED_IMAGE" >/dev/null
    rm -rf "$context"
}

# Settings that let podman run containers on a machine like CI's (hybrid cgroups, no systemd,
# no CAP_SYS_RESOURCE), used only for the image build above.
testbed_conf() {
    printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' >"$1"
}

testbed_packages
testbed_image
