# -*- coding: utf-8 -*-
"""Makes the collection importable as ansible_collections.gangplank.platform for the benchmark
scripts, without PYTHONPATH: puts <repo>/.build/collections first on sys.path, creating the
collection shim symlink (.build/collections/ansible_collections/gangplank/platform -> repo) if it
is missing. Imported for its effect, before any collection import."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def collection_path():
    """<repo>/.build/collections, with the collection shim symlink created if it is missing."""
    root = os.path.join(REPO, ".build", "collections")
    link = os.path.join(root, "ansible_collections", "gangplank", "platform")
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.join("..", "..", "..", ".."), link)
    return root


if collection_path() not in sys.path:
    sys.path.insert(0, collection_path())
if HERE not in sys.path:
    sys.path.insert(0, HERE)
