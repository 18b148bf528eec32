#!/usr/bin/env bash
# The real-GPU checks in one script, for a GPU machine with PyTorch and nvidia-ml-py but no Ansible, no container
# engine and no package registry (tests/gpu/test_mps_shares.py says what is checked; docs/gpu-sharing.md).
#
#   bash tests/gpu/run_on_gpu.sh prepare   # here, with PyPI reachable: the project's venv, the wheels and ansible.posix
#                                          # (the json callback the integration test reads) into .build/device/ (ignored)
#   bash tests/gpu/run_on_gpu.sh           # there, from the project root, with .build/device/ copied along
#
# It writes everything it prints to ${OUT:-/tmp}/gpu_suite.txt. Every step is bounded by `timeout`; it changes no GPU
# setting (compute mode, MIG, clocks). Exit status: 0 when every step that ran passed.
set -u
cd "$(dirname "$0")/../.." || exit 2
if [ "${1:-}" = prepare ]; then
    # The project's venv (made from PyPI when missing) holds the `ansible` package and its collections.
    # shellcheck source=scripts/lib/venv.sh
    source scripts/lib/venv.sh || exit 1
    device=.build/device
    rm -rf "$device/wheels.tmp" "$device/collections.tmp"
    mkdir -p "$device/collections.tmp/ansible_collections/ansible"
    python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$device/wheels.tmp" "ansible-core==2.19.*" "resolvelib<2" cryptography cffi pycparser pytest pluggy \
        iniconfig || exit 1
    # ansible.posix is a namespace package (no __file__): its folder is the one in __path__ that holds the collection.
    posix=$(python - <<'PY'
import os
import sys

import ansible_collections.ansible.posix as posix

folders = [folder for folder in posix.__path__ if os.path.isfile(os.path.join(folder, "plugins", "callback", "json.py"))]
if not folders:
    sys.exit("run_on_gpu.sh: ansible.posix with its json callback is not in the venv (the ansible package)")
print(folders[0])
PY
) || exit 1
    cp -r "$posix" "$device/collections.tmp/ansible_collections/ansible/posix" || exit 1
    rm -rf "$device/wheels" "$device/collections"
    mv "$device/wheels.tmp" "$device/wheels" && mv "$device/collections.tmp" "$device/collections" || exit 1
    echo "prepared: $device/wheels and $device/collections (carry $device to the GPU machine)"
    exit 0
fi

exec > >(tee "${OUT:-/tmp}/gpu_suite.txt") 2>&1
rc=0
step() {    # step SECONDS NAME COMMAND...: one bounded step, its status shown
    local seconds=$1 name=$2; shift 2
    echo "=== $name"
    timeout "$seconds" "$@"; local status=$?
    echo "=== $name: exit $status"
    [ "$status" -eq 0 ] || rc=1
}
echo "=== the machine"
which python3 nvidia-smi nvidia-cuda-mps-control podman docker nvidia-ctk
timeout 30 nvidia-smi --query-gpu=index,uuid,name,memory.total,compute_mode,driver_version --format=csv
python3 -c 'import sys, torch, pynvml; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'

# Ansible and pytest from the wheels brought along (no registry there); the collection through a symlink.
if ls .build/device/wheels/*.whl >/dev/null 2>&1; then
    timeout 120 python3 -m pip install -q --no-index --no-deps --target /tmp/gangplank-site .build/device/wheels/*.whl || rc=1
    export PYTHONPATH=/tmp/gangplank-site PATH=/tmp/gangplank-site/bin:$PATH
fi
mkdir -p /tmp/gangplank-ac/ansible_collections/gangplank
ln -sfn "$PWD" /tmp/gangplank-ac/ansible_collections/gangplank/platform
export ANSIBLE_COLLECTIONS_PATH=/tmp/gangplank-ac:$PWD/.build/device/collections
export PYTHONPATH=/tmp/gangplank-ac:$PWD/.build/device/collections:${PYTHONPATH:-}

# The shares under MPS and the watchdog (about 2 minutes on an H100), and the topology facts (seconds).
if python3 -c 'import pytest' 2>/dev/null; then
    step 420 "GPU shares and topology facts (pytest tests/gpu)" python3 -m pytest tests/gpu -v -s -p no:cacheprovider --import-mode=importlib
else
    step 420 "GPU shares (tests/gpu/test_mps_shares.py as a script)" python3 tests/gpu/test_mps_shares.py
    step 120 "GPU topology facts (tests/gpu/test_gpu_topology_facts.py as a script)" python3 tests/gpu/test_gpu_topology_facts.py
fi
# The unit tests of the watchdog's decisions and of the GPU facts, and playbooks/facts.yml on this host.
if python3 -c 'import pytest, ansible' 2>/dev/null; then
    step 300 "unit: watchdog, GPU facts" python3 -m pytest -q -p no:cacheprovider --import-mode=importlib \
        tests/unit/roles tests/unit/plugins/module_utils/test_gpu_watchdog_state.py \
        tests/unit/plugins/module_utils/test_gpu_facts.py tests/unit/plugins/modules/test_gpu_facts.py
    step 300 "integration: playbooks/facts.yml" python3 -m pytest -q -p no:cacheprovider --import-mode=importlib \
        tests/integration/test_facts_playbook.py
else
    echo "=== no pytest or ansible-core here (run 'prepare' first): the unit and facts checks were not run"
fi
echo "=== done: exit $rc"
exit $rc
