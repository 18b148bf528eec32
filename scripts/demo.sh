#!/usr/bin/env bash
# The project's main command: sets up the local test bed (inventories/local: three hosts that are
# all this machine), runs site.yml on it (runtime, facts, schedule, deploy rank by rank) and ends
# with the status table (placement and live health per instance).
#   scripts/demo.sh [extra ansible-playbook options, e.g. -v or --check]
# Runs from any directory; the first run creates .venv (scripts/lib/venv.sh), installs podman and
# builds the demo image offline (scripts/lib/testbed.sh).
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/lib/venv.sh
source scripts/lib/venv.sh
# shellcheck source=scripts/lib/testbed.sh
source scripts/lib/testbed.sh
ansible-playbook -i inventories/local/hosts.yml playbooks/site.yml "$@"
exec ansible-playbook -i inventories/local/hosts.yml playbooks/status.yml
