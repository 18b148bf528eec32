# -*- coding: utf-8 -*-
"""Checks every link of the built docs site (scripts/docs.sh writes it to .build/docs/html):

- a link inside the site leads to a page that exists and, where it names an anchor, to an element with that id;
- a link into this project's repository (galaxy.yml `repository`, `/blob/<branch>/`, `/edit/<branch>/` or
  `/tree/<branch>/`) names a file or folder that git tracks here;
- an outside link has no empty part (`https://github.com///blob/...`, a template with its values missing);
  it is listed with --verbose, not fetched (the site is built and checked offline).

    python scripts/docs_links.py [SITE_DIR] [--verbose]

Exit status 0 when every link resolves, 1 with one line per broken link (page, link, why)."""

from __future__ import annotations

import html.parser
import os
import re
import subprocess
import sys
import urllib.parse

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Page(html.parser.HTMLParser):
    """The links (href, src) and element ids of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name == "name" and tag == "a" and value:
                self.ids.add(value)
            elif name in ("href", "src") and value is not None:
                # A stylesheet or font the theme loads from outside is no link of the site's.
                if not (tag == "link" and value.startswith("http")):
                    self.links.append(value)


def _parse(path):
    page = _Page()
    with open(path, encoding="utf-8", errors="replace") as handle:
        page.feed(handle.read())
    return page


def _tracked_paths():
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    files = {name for name in listed.decode("utf-8").split("\0") if name}
    folders = set()
    for name in files:
        folder = os.path.dirname(name)
        while folder and folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
    return files, folders


def check(site, verbose=False):
    """The broken links of the site in `site`, as (page, link, reason), in page order."""
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        repository = yaml.safe_load(handle)["repository"].rstrip("/")
    in_repository = re.compile(re.escape(repository) + r"/(?:blob|edit|tree)/[^/]+/([^?#]*)")
    files, folders = _tracked_paths()
    pages = {}
    for folder, _dirs, names in os.walk(site):
        for name in names:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[os.path.relpath(path, site)] = _parse(path)
    broken = []
    for page_name in sorted(pages):
        for link in pages[page_name].links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme in ("http", "https"):
                if "//" in parts.path or not parts.netloc:
                    broken.append((page_name, link, "an empty part in the address"))
                    continue
                found = in_repository.match(link)
                if found:
                    target = urllib.parse.unquote(found.group(1)).rstrip("/")
                    if target not in files and target not in folders:
                        broken.append((page_name, link, "not a file or folder of the repository"))
                elif verbose:
                    print("outside link (not fetched): %s: %s" % (page_name, link))
                continue
            if parts.scheme or link.startswith("//"):
                continue  # mailto:, data: and the like
            target = os.path.normpath(os.path.join(os.path.dirname(page_name), urllib.parse.unquote(parts.path)))
            if parts.path and not os.path.exists(os.path.join(site, target)):
                broken.append((page_name, link, "no such file in the site"))
                continue
            if parts.fragment:
                anchored = pages.get(target if parts.path else page_name)
                if anchored is not None and parts.fragment not in anchored.ids:
                    broken.append((page_name, link, "no element with that id"))
    return broken


def main(argv):
    verbose = "--verbose" in argv
    args = [arg for arg in argv if arg != "--verbose"]
    site = args[0] if args else os.path.join(ROOT, ".build", "docs", "html")
    if not os.path.isdir(site):
        print("docs_links.py: %s is not a folder: build the site first (scripts/docs.sh)" % site, file=sys.stderr)
        return 2
    broken = check(site, verbose)
    for page, link, reason in broken:
        print("docs_links.py: %s: %s: %s" % (page, link, reason))
    print("docs_links.py: %d broken link(s)" % len(broken))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
