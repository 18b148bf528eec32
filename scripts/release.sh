#!/usr/bin/env bash
# Prepares a release of the collection (CONTRIBUTING.md, "Releasing"): one command from the changelog fragments
# to the tarball. Publishing is a separate, explicit step.
#
#   scripts/release.sh VERSION              lint, release the fragments as VERSION, build the tarball, print what
#                                           to commit, tag and publish
#   scripts/release.sh VERSION --publish    the same, then publish the tarball to Galaxy (ansible-galaxy
#                                           collection publish; the API key from $GALAXY_API_KEY, the server from
#                                           $GALAXY_SERVER or ansible-galaxy's default)
#
# Steps, stopping at the first failure:
#   1. checks: VERSION is semantic (X.Y.Z), the work tree has no uncommitted change (the release's changes are
#      then exactly this script's), VERSION is not tagged yet (a published version is never changed)
#   2. lints: antsibull-changelog lint, the site's guides up to date (scripts/docs_guides.py --check),
#      antsibull-docs lint-collection-docs --plugin-docs, ansible-lint
#   3. galaxy.yml's version := VERSION; antsibull-changelog release --version VERSION (the fragments go into
#      changelogs/changelog.yaml, CHANGELOG.md is written again). A VERSION already in changelog.yaml but not
#      tagged (prepared, never published, as 0.1.0 was) takes the new fragments with --update-existing.
#   4. ansible-galaxy collection build into .build/release/
#   5. prints the commit, the tag and the publish command (or, with --publish, publishes)
# It runs no git command that changes anything: the maintainer reviews the diff, commits and tags.
# No Galaxy server is needed for steps 1-5 without --publish.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

usage() {
    sed -n '2,9p' "$0" >&2
    exit 2
}

VERSION=""
PUBLISH=0
for arg in "$@"; do
    case $arg in
        --publish) PUBLISH=1 ;;
        -h | --help) usage ;;
        -*) echo "release.sh: unknown option $arg" >&2; usage ;;
        *) [[ -z $VERSION ]] || usage; VERSION=$arg ;;
    esac
done
[[ -n $VERSION ]] || usage

step() {
    printf '\n==================== release %s: %s ====================\n' "$VERSION" "$1"
}

# 1. Checks.
step "checks"
if [[ ! $VERSION =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
    echo "release.sh: $VERSION is not a version X.Y.Z (semantic versioning: CONTRIBUTING.md)" >&2
    exit 2
fi
if [[ -n "$(git status --porcelain --untracked-files=normal)" ]]; then
    echo "release.sh: the work tree has uncommitted changes (git status); commit them first, so that the" \
        "release's own changes can be reviewed alone" >&2
    exit 1
fi
if git rev-parse -q --verify "refs/tags/v$VERSION" >/dev/null; then
    echo "release.sh: v$VERSION is tagged already: a released version is never changed; pick the next one" >&2
    exit 1
fi

# shellcheck source=scripts/lib/venv.sh
source scripts/lib/venv.sh

# 2. Lints (what scripts/test.sh's lint and docs steps check; run the whole scripts/test.sh before releasing).
step "lints"
antsibull-changelog lint
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
python scripts/docs_guides.py --check
(cd "$REPO_ROOT/.build/collections/ansible_collections/gangplank/platform" &&
    antsibull-docs lint-collection-docs --plugin-docs --check-extra-docs-refs .)
ansible-lint

# 3. The version and the changelog.
step "changelog"
sed -i -E "s/^version: .*/version: $VERSION/" galaxy.yml
update=()
if python - "$VERSION" <<'PY'; then
import sys, yaml
with open("changelogs/changelog.yaml", encoding="utf-8") as handle:
    releases = (yaml.safe_load(handle) or {}).get("releases") or {}
sys.exit(0 if sys.argv[1] in releases else 1)
PY
    echo "release.sh: $VERSION is in changelogs/changelog.yaml but not tagged: adding the new fragments to it"
    update=(--update-existing)
fi
antsibull-changelog release --version "$VERSION" "${update[@]}"
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml

# 4. The tarball.
step "build"
mkdir -p .build/release
ansible-galaxy collection build --force --output-path .build/release .
TARBALL=.build/release/gangplank-platform-$VERSION.tar.gz
[[ -f $TARBALL ]]

# 5. What is left to do.
step "publish"
PUBLISH_CMD="ansible-galaxy collection publish $TARBALL --api-key \"\$GALAXY_API_KEY\""
[[ -n ${GALAXY_SERVER:-} ]] && PUBLISH_CMD+=" --server $GALAXY_SERVER"
cat <<EOF
release.sh: $TARBALL is built. Review and commit the release (galaxy.yml, CHANGELOG.md, changelogs/), then tag it:
    git diff --stat
    git commit -am "Release $VERSION" && git tag -a v$VERSION -m "gangplank.platform $VERSION"
Publish it to Galaxy (or run this script again with --publish):
    $PUBLISH_CMD
EOF
if ((PUBLISH)); then
    if [[ -z ${GALAXY_API_KEY:-} ]]; then
        echo "release.sh: --publish needs GALAXY_API_KEY (a Galaxy API token) in the environment" >&2
        exit 1
    fi
    args=(collection publish "$TARBALL" --api-key "$GALAXY_API_KEY")
    [[ -n ${GALAXY_SERVER:-} ]] && args+=(--server "$GALAXY_SERVER")
    ansible-galaxy "${args[@]}"
fi
