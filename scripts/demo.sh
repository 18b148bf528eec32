#!/usr/bin/env bash
# The project's main command: plans the example cluster offline and prints the placement table.
#   scripts/demo.sh [extra ansible-playbook options, e.g. -v]
# Runs from any directory; the first run creates .venv (see scripts/lib/venv.sh).
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/lib/venv.sh
source scripts/lib/venv.sh
exec ansible-playbook playbooks/plan.yml -e @examples/cluster.yml "$@"
