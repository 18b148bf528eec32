# -*- coding: utf-8 -*-
"""scripts/docs_links.py on small sites: each kind of broken link is found, and a sound site passes."""

from __future__ import annotations

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_SPEC = importlib.util.spec_from_file_location("docs_links", os.path.join(ROOT, "scripts", "docs_links.py"))
docs_links = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(docs_links)
REPOSITORY = "https://github.com/gangplank/platform"


def site(tmp_path, pages):
    for name, body in pages.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("<html><body>%s</body></html>" % body, encoding="utf-8")
    return str(tmp_path)


def test_a_sound_site_has_no_broken_link(tmp_path):
    root = site(tmp_path, {
        "index.html": '<a href="docsite/deploy.html#rank">x</a><a href="%s/blob/main/docs/deploy.md">e</a>'
                      '<a href="%s/tree/main/roles">r</a><a href="https://example.org/a">o</a>'
                      % (REPOSITORY, REPOSITORY),
        "docsite/deploy.html": '<h2 id="rank">Rank</h2><a href="../index.html">up</a><a href="#rank">here</a>',
    })
    assert docs_links.check(root) == []


def test_each_kind_of_broken_link_is_found(tmp_path):
    root = site(tmp_path, {
        "index.html": '<a href="https://github.com///blob/index.rst">edit</a>'
                      '<a href="missing.html">gone</a>'
                      '<a href="other.html#nowhere">anchor</a>'
                      '<a href="%s/blob/main/docs/no-such-guide.md">source</a>' % REPOSITORY,
        "other.html": '<p id="somewhere">x</p>',
    })
    assert [reason for _page, _link, reason in docs_links.check(root)] == [
        "an empty part in the address", "no such file in the site", "no element with that id",
        "not a file or folder of the repository"]
