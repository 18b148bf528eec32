# -*- coding: utf-8 -*-
"""The guides and READMEs ship with the collection, which leaves the source tree's tests, benchmarks, scripts and
test-bed inventories out (galaxy.yml build_ignore). A path there that a shipped document names must say that it is
the source repository's: a link to it in the repository, or a mention under a heading about the source tree. And
every such path exists."""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHIPPED = sorted(os.path.relpath(path, ROOT) for pattern in ("docs/*.md", "README.md", "roles/*/README.md")
                 for path in glob.glob(os.path.join(ROOT, pattern)))
SOURCE_ONLY = r"(?:tests|benchmarks|scripts|inventories)/[A-Za-z0-9_./<>{},*-]*[A-Za-z0-9_/]"
SHIPPED_SCRIPTS = {"scripts/engine-bundle.sh"}


def _repository():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["repository"].rstrip("/")


def _tracked():
    listed = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
    files = set(listed.split())
    folders = {os.path.dirname(name) for name in files}
    for name in list(folders):
        while name:
            folders.add(name)
            name = os.path.dirname(name)
    return files | folders


def unmarked_paths(text, repository, tracked=None):
    """(line number, path) for each source-tree path not linked into the repository and not under a heading that
    names the source tree. A path is the source tree's when its first two parts are (``inventories/customer/...`` in
    an example is the user's own; with ``tracked`` None, every path counts)."""
    found = []
    fenced = False
    source_section = False
    # HTML comments are not shown (the generated role READMEs say in one which script writes them).
    text = re.sub(r"<!--.*?-->", lambda comment: "\n" * comment.group(0).count("\n"), text, flags=re.S)
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"\s*```", line):
            fenced = not fenced
            continue
        heading = not fenced and re.match(r"(#+)\s+(.*)", line)
        if heading:
            source_section = "source" in heading.group(2).lower()
            continue
        if source_section:
            continue
        # A link into the repository marks its path; the link's own text and address are then left out.
        links = re.compile(r"\[([^\]]*)\]\(%s/(?:blob|tree)/[^/)]+/([^)]*)\)" % re.escape(repository))
        rest = links.sub(" ", line)
        for path in re.findall(r"(?<![\w/.-])" + SOURCE_ONLY, rest):
            ours = tracked is None or "/".join(path.split("/")[:2]).rstrip("/") in tracked
            if ours and path.rstrip("/") not in SHIPPED_SCRIPTS:
                found.append((number, path))
    return found


@pytest.mark.parametrize("name", SHIPPED)
def test_a_source_tree_path_is_marked_as_one(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        text = handle.read()
    assert unmarked_paths(text, _repository(), _tracked()) == [], (
        "%s names source-tree paths a collection user does not have: link them into the repository or put them "
        "under a heading about the source tree" % name)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_repository_link_leads_to_a_tracked_path(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        text = handle.read()
    tracked = _tracked()
    targets = re.findall(r"\(%s/(?:blob|tree)/[^/)]+/([^)#]*)" % re.escape(_repository()), text)
    assert [target for target in targets if target.rstrip("/") not in tracked] == [], name


def test_the_check_sees_an_unmarked_path_and_takes_a_marked_one():
    repository = "https://github.com/gangplank/platform"
    text = ("Run tests/e2e/test_site.py.\n"
            "See [`tests/e2e/bed.py`](%s/blob/main/tests/e2e/bed.py).\n"
            "Make a bundle with scripts/engine-bundle.sh.\n"
            "## From a source clone\n"
            "scripts/test.sh runs everything.\n" % repository)
    assert unmarked_paths(text, repository) == [(1, "tests/e2e/test_site.py")]
