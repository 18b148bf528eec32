#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run). Runs from any directory, reads no stdin.
# Steps, in order, stopping at the first failure with a non-zero exit:
#   1. venv         source scripts/lib/venv.sh (.venv, requirements, collection path shim)
#   2. unit         pytest tests/unit, one worker a CPU (pytest-xdist); collecting no test at all is an error
#   3. integration  pytest tests/integration, one worker a CPU, a file to a worker (chromium installed when
#                   missing, for the picture's browser test)
#   4. e2e          the local test bed (podman, the demo image), then pytest tests/e2e: site.yml for real
#                   (GANGPLANK_E2E_WORKERS=2: two groups of modules side by side, tests/e2e/conftest.py)
#   5. molecule     molecule test in each role: converge, idempotence, verify on this machine
#   6. sanity       ansible-test sanity --venv --python 3.11 on a copy of the files git would ship
#   7. lint         ansible-lint, profile production (.ansible-lint)
#   8. docs         antsibull-changelog lint (changelogs/), the site's guides up to date with docs/*.md
#                   (scripts/docs_guides.py --check), antsibull-docs lint-collection-docs --plugin-docs, then the
#                   site built (scripts/docs.sh) and its links checked (scripts/docs_links.py)
# Steps 6-8 read the checkout and write only below .build/, .ansible/ and the user's ~/.ansible and ~/.cache,
# nothing that e2e or molecule use: they run in the background while steps 4-5 run (much of whose time goes on
# waiting for containers, hosts and probes), in a process group of their own. What they print is shown after molecule, with their own times;
# a failure there fails the run all the same.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

SANITY_PYTHON=3.11
STEP=""
STEP_START=$SECONDS
SUMMARY=()

begin() {
    STEP=$1
    STEP_START=$SECONDS
    printf '\n==================== %s: %s ====================\n' "$1" "$2"
}

end() {
    local secs=$((SECONDS - STEP_START))
    SUMMARY+=("$STEP ${1:-ok} ${secs}s")
    printf -- '---- %s: %s (%ss)\n' "$STEP" "${1:-ok}" "$secs"
}

on_exit() {
    local rc=$?
    if [[ -n $STATIC_PID ]]; then
        kill -- -"$STATIC_PID" 2>/dev/null || true
    fi
    if ((rc != 0)); then
        printf '\ntest.sh: FAILED in step "%s" (exit %s) after %ss\n' "$STEP" "$rc" "$SECONDS" >&2
    fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Debian's package $1 (the command of the same name) installed when missing: with apt-get as root, else through
# sudo -n; $2 says what needs it, $3 what happens without it.
install_missing() {
    if command -v "$1" >/dev/null 2>&1; then
        return 0
    fi
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing $1 (apt) for $2"
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
    else
        sudo -n sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1"' sh "$1" >/dev/null 2>&1 ||
            echo "test.sh: warning: $1 is missing and cannot be installed here; $3" >&2
    fi
}

# Steps 6-8 in the background (start_static_checks), their output and summary in $STATIC_DIR; finish_static_checks
# waits for them and prints what they printed.
STATIC_DIR=""
STATIC_PID=""
STATIC_FIRST=0
start_static_checks() {
    # ansible-test's shellcheck test is skipped (with only a warning) when shellcheck is missing.
    install_missing shellcheck "the sanity shellcheck test" "sanity skips that test"
    STATIC_DIR="$REPO_ROOT/.build/test-static"
    rm -rf "$STATIC_DIR"
    mkdir -p "$STATIC_DIR"
    set -m # a process group of its own: on_exit stops all of it
    STATIC_FIRST=${#SUMMARY[@]}
    (
        trap static_checks_exit EXIT
        static_checks
    ) </dev/null >"$STATIC_DIR/output.log" 2>&1 &
    STATIC_PID=$!
    set +m
}

# In the background job, on its exit: the summary lines that its steps added, and the step that failed.
static_checks_exit() {
    local rc=$?
    printf '%s\n' "${SUMMARY[@]:STATIC_FIRST}" >"$STATIC_DIR/summary"
    if ((rc != 0)); then
        printf '%s\n' "$STEP" >"$STATIC_DIR/failed"
    fi
}

finish_static_checks() {
    local rc=0 line
    printf '\n==================== sanity, lint, docs: waiting for them (started before e2e) ====================\n'
    wait "$STATIC_PID" || rc=$?
    STATIC_PID=""
    cat "$STATIC_DIR/output.log"
    if [[ -f $STATIC_DIR/summary ]]; then
        while IFS= read -r line; do
            SUMMARY+=("$line")
        done <"$STATIC_DIR/summary"
    fi
    if ((rc != 0)); then
        STEP="$(cat "$STATIC_DIR/failed" 2>/dev/null || echo "sanity, lint, docs")"
        return "$rc"
    fi
}

# Runs pytest on $1 (further pytest options after it) with the collection importable as
# ansible_collections.gangplank.platform (through the shim made by venv.sh), printing the 25 slowest tests.
# pytest's exit code 5 (no test collected) is an error here.
run_pytest() {
    local rc=0
    PYTHONPATH="$REPO_ROOT/.build/collections${PYTHONPATH:+:$PYTHONPATH}" \
        python -m pytest "$@" -q -p no:cacheprovider --import-mode=importlib --durations=25 || rc=$?
    if ((rc == 5)); then
        echo "test.sh: error: pytest collected no test in $1" >&2
        return 1
    fi
    return "$rc"
}

# Copies the files git would ship (tracked, plus untracked ones not ignored) to
# $1 = .build/sanity/ansible_collections/gangplank/platform, removing whatever the last copy had that
# is gone now. tests/output is kept: ansible-test's delegation venv lives there (warm runs are fast).
copy_shipped_files() {
    local dest=$1 file
    if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "test.sh: error: $REPO_ROOT is not a git work tree; the sanity step ships what git lists" >&2
        return 1
    fi
    mkdir -p "$dest"
    find "$dest" -mindepth 1 -maxdepth 1 ! -name tests -exec rm -rf {} +
    if [[ -d $dest/tests ]]; then
        find "$dest/tests" -mindepth 1 -maxdepth 1 ! -name output -exec rm -rf {} +
    fi
    git ls-files -z --cached --others --exclude-standard --deduplicate |
        while IFS= read -r -d '' file; do
            # A tracked file deleted in the work tree is still listed by --cached: skip it.
            if [[ -e $file || -L $file ]]; then
                printf '%s\0' "$file"
            fi
        done |
        xargs -0 --no-run-if-empty cp -a --parents -t "$dest"
}

# The collections that galaxy.yml depends on come from the `ansible` pip package; ansible-test only
# sees collections beside the one under test, so each is linked into the sanity tree.
link_dependencies() {
    local root=$1 site dep
    site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
    for dep in $(python -c 'import yaml; print(*(yaml.safe_load(open("galaxy.yml")).get("dependencies") or {}))'); do
        if [[ ! -d $site/ansible_collections/${dep/.//} ]]; then
            echo "test.sh: error: dependency $dep (galaxy.yml) is not in $site/ansible_collections" >&2
            return 1
        fi
        mkdir -p "$root/ansible_collections/${dep%%.*}"
        ln -sfn "$site/ansible_collections/${dep/.//}" "$root/ansible_collections/${dep/.//}"
    done
}

# ansible-test puts pip into each venv it creates with a get-pip.py that it downloads from
# ci-files.testing.ansible.com into ~/.ansible/test/cache/ unless one is there already. That host is
# not reachable here (only package registries are); scripts/lib/get_pip.py does the same job with the
# pip wheel bundled with Python (see its docstring). A cached file that is not ours is left alone.
provide_get_pip() {
    local version cache
    version="$(python -c 'import sys, types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version=sys.argv[1]))["pip"])' "$SANITY_PYTHON")"
    cache="${HOME:?}/.ansible/test/cache/get_pip_${version//./_}.py"
    if [[ ! -f $cache ]] || { head -n 1 "$cache" | grep -q '^"""Put pip into an empty virtual environment' &&
        ! cmp -s scripts/lib/get_pip.py "$cache"; }; then
        echo "test.sh: installing scripts/lib/get_pip.py as $cache"
        install -D -m 0644 scripts/lib/get_pip.py "$cache"
    fi
}

# --------------------------------------------------------------------------------------------------
begin venv "scripts/lib/venv.sh"
# shellcheck source=scripts/lib/venv.sh
source scripts/lib/venv.sh
python -c 'import sys
from ansible.release import __version__ as core
from ansible_collections.ansible_release import ansible_version
print("Python %s, ansible-core %s, ansible %s" % (sys.version.split()[0], core, ansible_version))'
end

# --------------------------------------------------------------------------------------------------
begin unit "pytest tests/unit, one worker a CPU (pytest-xdist)"
run_pytest tests/unit --numprocesses auto
end

# --------------------------------------------------------------------------------------------------
begin integration "pytest tests/integration"
# The placement picture is tested in a real browser: Debian's headless chromium, installed when missing.
install_missing chromium "the placement picture's browser test" "the browser test will fail"
if [[ -n "$(find tests/integration -type f \( -name 'test_*.py' -o -name '*_test.py' \) -print -quit 2>/dev/null)" ]]; then
    # One worker a CPU, each test file whole on one worker (its tests build on each other, in order).
    GANGPLANK_BROWSER_TESTS=required run_pytest tests/integration --numprocesses auto --dist loadfile
    end
else
    echo "test.sh: tests/integration has no test_*.py or *_test.py file yet; skipping this step"
    end skipped
fi

# --------------------------------------------------------------------------------------------------
# Steps 6-8, run in the background (start_static_checks) from the start of e2e on.
static_checks() {
    # --------------------------------------------------------------------------------------------------
    begin sanity "ansible-test sanity --venv --python $SANITY_PYTHON"
    # ansible-test needs the collection at .../ansible_collections/<namespace>/<name>, holding only what
    # would ship; --venv makes it build its own venvs (ansible-core's requirements in
    # tests/output/.tmp/delegation, each sanity test's pinned tools in ~/.ansible/test/venv) from PyPI.
    # Those are kept between runs, so only the first run on a machine installs them.
    # The shellcheck command is installed by start_static_checks, before e2e (whose test bed may run apt-get too).
    SANITY_ROOT="$REPO_ROOT/.build/sanity"
    SANITY_COLLECTION="$SANITY_ROOT/ansible_collections/gangplank/platform"
    copy_shipped_files "$SANITY_COLLECTION"
    link_dependencies "$SANITY_ROOT"
    provide_get_pip
    (
        cd "$SANITY_COLLECTION"
        # The copy sits inside this repository's work tree, where .build/ is git-ignored: ansible-test
        # asks that outer repository for the file list, gets nothing and skips every test ("All targets
        # skipped"). A throwaway repository of its own (copy_shipped_files removes the last one; no
        # commit needed, untracked files count) makes ansible-test see exactly the copied files.
        git init --quiet
        unset ANSIBLE_COLLECTIONS_PATH
        ansible-test sanity --venv --python "$SANITY_PYTHON" --color no
    )
    end

    # --------------------------------------------------------------------------------------------------
    begin lint "ansible-lint (profile production, .ansible-lint)"
    ansible-lint
    end

    # --------------------------------------------------------------------------------------------------
    begin docs "antsibull-changelog lint, docs_guides.py --check, antsibull-docs lint-collection-docs"
    # The changelog fragments and changelogs/changelog.yaml (CONTRIBUTING.md, "Changelog fragments").
    antsibull-changelog lint
    antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
    # docs/docsite/rst/ is written from docs/*.md by scripts/docs.sh; every guide is listed in extra-docs.yml.
    python scripts/docs_guides.py --check
    # Every module's, plugin's and role's documentation as the docs site renders it (schema, markup, references),
    # and the guides (rstcheck, their references). antsibull-docs reads the collection at
    # ansible_collections/gangplank/platform: the shim of venv.sh; the collections galaxy.yml depends on come from
    # ANSIBLE_COLLECTIONS_PATH (the `ansible` package).
    (cd "$REPO_ROOT/.build/collections/ansible_collections/gangplank/platform" &&
        antsibull-docs lint-collection-docs --plugin-docs --check-extra-docs-refs .)
    # The site itself, built as users get it, and every link on it: pages, anchors, and the repository's files that
    # "Edit on GitHub" and the guides point at (scripts/docs_links.py).
    ./scripts/docs.sh
    python scripts/docs_links.py .build/docs/html
    end
}
start_static_checks

# --------------------------------------------------------------------------------------------------
begin e2e "test bed (scripts/lib/testbed.sh), then pytest tests/e2e"
# shellcheck source=scripts/lib/testbed.sh
source scripts/lib/testbed.sh
# GANGPLANK_E2E_WORKERS=2 runs the modules in two groups side by side, each group's modules one after another
# (tests/e2e/conftest.py says which module goes where and why); unset or 1, all one after another.
E2E_WORKERS=${GANGPLANK_E2E_WORKERS:-1}
if [[ ! $E2E_WORKERS =~ ^[12]$ ]]; then
    echo "test.sh: error: GANGPLANK_E2E_WORKERS must be 1 or 2 (two groups of modules at the most)" >&2
    exit 2
fi
if ((E2E_WORKERS == 2)); then
    run_pytest tests/e2e --numprocesses 2 --dist loadgroup
else
    run_pytest tests/e2e
fi
end

# --------------------------------------------------------------------------------------------------
begin molecule "molecule test in every role (converge, idempotence, verify)"
mkdir -p .build/molecule
for scenario in roles/*/molecule/default; do
    role_dir=${scenario%/molecule/default}
    role=${role_dir#roles/}
    printf 'molecule: %s ... ' "$role"
    if (cd "$role_dir" && ANSIBLE_NOCOLOR=1 NO_COLOR=1 molecule test) >".build/molecule/$role.log" 2>&1; then
        echo ok
    else
        echo "FAILED (last lines of .build/molecule/$role.log below)"
        tail -n 60 ".build/molecule/$role.log"
        exit 1
    fi
done
end

finish_static_checks

summary="$(printf '%s, ' "${SUMMARY[@]}")"
printf '\ntest.sh: all steps passed in %ss: %s\n' "$SECONDS" "${summary%, }"
