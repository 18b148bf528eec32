#!/usr/bin/env bash
# Builds the collection's docs site into .build/docs/html (static HTML: open .build/docs/html/index.html):
# every module, plugin, filter and role page from their own documentation (DOCUMENTATION, argument specs),
# rendered by antsibull-docs as docs.ansible.com renders collections, plus the guides docs/*.md
# (docs/docsite/extra-docs.yml; docs/docsite/links.yml). Runs from any directory, needs no network once its
# tools are installed:
#   1. .build/docs-venv from scripts/docs-requirements.txt (PyPI; again only when that file changes)
#   2. scripts/docs_guides.py: docs/docsite/rst/*.rst from docs/*.md (commit them with the .md)
#   3. antsibull-docs sphinx-init + collection (RST), then sphinx-build (HTML), offline (no intersphinx
#      inventories). A page whose documentation does not parse stops the build, unless --lenient is given: the
#      site is built anyway, with an error page for it. scripts/test.sh (step docs) lints the same docs.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
REPO_ROOT=$PWD
LENIENT=0
for arg in "$@"; do
    case $arg in
        --lenient) LENIENT=1 ;;
        -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "docs.sh: unknown argument $arg (only --lenient)" >&2; exit 2 ;;
    esac
done

VENV=$REPO_ROOT/.build/docs-venv
REQUIREMENTS=$REPO_ROOT/scripts/docs-requirements.txt
OUT=$REPO_ROOT/.build/docs
START=$SECONDS

# 1. The tools, in a venv of their own (Sphinx and its theme stay out of the project's .venv).
want="$(sha256sum <"$REQUIREMENTS")"
if [[ ! -x $VENV/bin/python || "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$want" ]]; then
    echo "docs.sh: installing scripts/docs-requirements.txt into .build/docs-venv (first run or requirements changed)"
    [[ -x $VENV/bin/python ]] || "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --progress-bar off -r "$REQUIREMENTS"
    printf '%s\n' "$want" >"$VENV/.requirements.sha256"
fi
export PATH="$VENV/bin:$PATH"

# The collection as ansible-doc finds it: ansible_collections/gangplank/platform, a link to this checkout (the
# same shim scripts/lib/venv.sh makes).
mkdir -p .build/collections/ansible_collections/gangplank
[[ -L .build/collections/ansible_collections/gangplank/platform ]] ||
    ln -sfn ../../../.. .build/collections/ansible_collections/gangplank/platform
export ANSIBLE_COLLECTIONS_PATH=$REPO_ROOT/.build/collections
export ANSIBLE_NOCOLOR=1

# 2. The guides.
python scripts/docs_guides.py

# 3. The site. sphinx-init writes the Sphinx project that antsibull-docs maintains (conf.py, build.sh);
# intersphinx is emptied because no inventory can be fetched here, so links into docs.ansible.com stay text.
rm -rf "$OUT/src" "$OUT/html"
mkdir -p "$OUT"
mkdir -m 0755 "$OUT/src"
antsibull-docs sphinx-init --use-current --squash-hierarchy --dest-dir "$OUT/src" \
    --project gangplank.platform --copyright "Gangplank maintainers" \
    --title "gangplank.platform" --html-short-title "gangplank.platform" \
    --extra-html-context 'display_github=True' gangplank.platform >/dev/null
REPOSITORY="$(python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["repository"])' galaxy.yml)"
cat >>"$OUT/src/conf.py" <<PY

# scripts/docs.sh: built offline, so no intersphinx inventory is fetched, and references into docs.ansible.com
# (ansible.builtin's modules, "common return values") are left as text without a warning.
intersphinx_mapping = {}
suppress_warnings = ['ref.ref']


# scripts/docs.sh: "Edit on GitHub" on a guide opens its source, docs/<name>.md (its RST page is written from it);
# the index is generated and has no source, so it has no such link. Module, plugin and role pages keep the links
# antsibull-docs writes from docs/docsite/links.yml.
def _edit_links(app, pagename, templatename, context, doctree):
    if pagename.startswith('docsite/'):
        context['meta'] = dict(context.get('meta') or {},
                               github_url='$REPOSITORY/blob/main/docs/%s.md' % pagename.split('/', 1)[1])
    else:
        context['display_github'] = False


def setup(app):
    app.connect('html-page-context', _edit_links)
PY
(
    cd "$OUT/src"
    mkdir -p rst
    chmod og-w rst
    strict=(--fail-on-error) sphinx_strict=(-W)
    ((LENIENT)) && strict=() sphinx_strict=()
    antsibull-docs --config-file antsibull-docs.cfg collection --cleanup everything --use-current \
        --squash-hierarchy "${strict[@]}" --dest-dir rst gangplank.platform
    sphinx-build -M html rst build -c . -q "${sphinx_strict[@]}" --keep-going
)
mv "$OUT/src/build/html" "$OUT/html"
echo "docs.sh: the site is in .build/docs/html (open .build/docs/html/index.html) after $((SECONDS - START))s"
