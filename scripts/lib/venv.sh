# shellcheck shell=bash
# Project Python environment. Source it, do not run it:
#     source scripts/lib/venv.sh
# It works from any directory and is safe to source again (each step is skipped when already done):
#   - .venv/ in the repository root, made with the machine's python3 (3.11+ needed by the
#     ansible-core 2.19 controller; set PYTHON=/path/to/python3.11 to pick another interpreter);
#   - requirements-test.txt (which includes requirements.txt) installed into it, again only when a
#     requirements file or the venv's Python changed: the hash is kept in .venv/.requirements.sha256;
#   - the collection path shim .build/collections/ansible_collections/gangplank/platform, a relative
#     symlink to the repository root, so the working tree is importable as gangplank.platform.
# Afterwards these are set in the caller's shell:
#   REPO_ROOT                  absolute path of the repository root
#   VIRTUAL_ENV, PATH          .venv, with .venv/bin first on PATH
#   ANSIBLE_COLLECTIONS_PATH   the shim's folder first, then the venv's site-packages, whose
#                              ansible_collections/ holds the `ansible` package's collections
#                              (containers.podman, community.docker, ...)

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    echo "venv.sh: source this file (source scripts/lib/venv.sh); running it changes nothing" >&2
    exit 2
fi

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"

_gangplank_err() {
    printf 'venv.sh: error: %s\n' "$*" >&2
}

# True when $1 is a Python interpreter of version 3.11 or newer.
_gangplank_python_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}

_gangplank_make_venv() {
    local venv="$REPO_ROOT/.venv" py="${PYTHON:-python3}" found version
    if [[ -x $venv/bin/python ]] && _gangplank_python_ok "$venv/bin/python" \
        && "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        return 0
    fi
    if ! found="$(command -v "$py")"; then
        _gangplank_err "'$py' not found. Install Python 3.11 or newer, or set PYTHON=/path/to/python3.11."
        return 1
    fi
    version="$("$found" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo unknown)"
    if ! _gangplank_python_ok "$found"; then
        _gangplank_err "Python 3.11 or newer is needed (ansible-core 2.19 controller), but $found is" \
            "Python $version. Install Python 3.11+, or set PYTHON=/path/to/python3.11."
        return 1
    fi
    if [[ -e $venv ]]; then
        echo "venv.sh: $venv has no working Python 3.11+ with pip; recreating it"
        rm -rf "$venv" || return 1
    fi
    echo "venv.sh: creating $venv with $found (Python $version)"
    if ! "$found" -m venv "$venv"; then
        _gangplank_err "'$found -m venv $venv' failed (on Debian or Ubuntu: apt-get install python3-venv)."
        rm -rf "$venv"
        return 1
    fi
}

_gangplank_install_requirements() {
    local venv="$REPO_ROOT/.venv" stamp="$REPO_ROOT/.venv/.requirements.sha256" want have=""
    want="$("$venv/bin/python" -VV && cat "$REPO_ROOT/requirements.txt" "$REPO_ROOT/requirements-test.txt")" \
        || return 1
    want="$(printf '%s' "$want" | sha256sum)"
    want="${want%% *}"
    [[ -f $stamp ]] && have="$(<"$stamp")"
    if [[ $have == "$want" ]]; then
        return 0
    fi
    echo "venv.sh: installing requirements-test.txt into .venv (first run or requirements changed;" \
        "a cold install takes a few minutes)"
    if ! "$venv/bin/python" -m pip install --quiet --progress-bar off -r "$REPO_ROOT/requirements-test.txt"; then
        _gangplank_err "pip install -r requirements-test.txt failed (see pip's output above)."
        return 1
    fi
    printf '%s\n' "$want" >"$stamp"
}

_gangplank_link_collection() {
    local parent="$REPO_ROOT/.build/collections/ansible_collections/gangplank"
    local link="$parent/platform"
    mkdir -p "$parent" || return 1
    if [[ -e $link && ! -L $link ]]; then
        _gangplank_err "$link exists and is not a symlink; remove it and source venv.sh again."
        return 1
    fi
    # Relative, so the shim survives moving or copying the repository.
    ln -sfn ../../../.. "$link" || return 1
    if [[ "$(cd "$link" && pwd -P)" != "$REPO_ROOT" ]]; then
        _gangplank_err "$link does not lead to $REPO_ROOT."
        return 1
    fi
}

_gangplank_export_env() {
    local site
    site="$("$REPO_ROOT/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || return 1
    if [[ ! -d $site/ansible_collections/containers/podman ]]; then
        _gangplank_err "$site/ansible_collections has no containers.podman: is the 'ansible' package" \
            "installed (requirements.txt)?"
        return 1
    fi
    export VIRTUAL_ENV="$REPO_ROOT/.venv"
    if [[ $PATH != "$VIRTUAL_ENV/bin:"* ]]; then
        export PATH="$VIRTUAL_ENV/bin:$PATH"
    fi
    unset PYTHONHOME
    export ANSIBLE_COLLECTIONS_PATH="$REPO_ROOT/.build/collections:$site"
}

if _gangplank_make_venv && _gangplank_install_requirements && _gangplank_link_collection \
    && _gangplank_export_env; then
    unset -f _gangplank_err _gangplank_python_ok _gangplank_make_venv _gangplank_install_requirements \
        _gangplank_link_collection _gangplank_export_env
else
    unset -f _gangplank_err _gangplank_python_ok _gangplank_make_venv _gangplank_install_requirements \
        _gangplank_link_collection _gangplank_export_env
    return 1
fi
