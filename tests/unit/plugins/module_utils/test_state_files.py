# -*- coding: utf-8 -*-
"""Crash-safe state files: atomic replace, exclusive create, strict JSON reads, directory locks."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils import state_files
from ansible_collections.gangplank.platform.plugins.module_utils.state_files import (
    atomic_write,
    create_exclusive,
    ensure_directory,
    locked_directory,
    read_json,
    remove_file,
)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def wide_umask():
    """A umask that would spoil the modes if they were left to it."""
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_atomic_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "placement.json"
    atomic_write(str(target), b'{"revision": 1}\n', 0o600)
    atomic_write(str(target), b'{"revision": 2}\n', 0o600)
    assert os.listdir(tmp_path) == ["placement.json"]
    assert read_json(str(target)) == {"revision": 2}


@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_atomic_write_honours_the_mode(tmp_path, mode, wide_umask):
    target = tmp_path / "state.json"
    atomic_write(str(target), "{}", mode)
    assert mode_of(target) == mode
    assert os.stat(target).st_uid == os.getuid()


def test_atomic_write_replaces_the_mode_of_an_existing_file(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("{}")
    target.chmod(0o666)
    atomic_write(str(target), "{}", 0o600)
    assert mode_of(target) == 0o600


def test_atomic_write_creates_missing_directories_0755(tmp_path, wide_umask):
    target = tmp_path / "etc" / "ansible" / "facts.d" / "gangplank.fact"
    atomic_write(str(target), b'{"a": 1}', 0o644)
    assert read_json(str(target)) == {"a": 1}
    for directory in (tmp_path / "etc", tmp_path / "etc" / "ansible", tmp_path / "etc" / "ansible" / "facts.d"):
        assert mode_of(directory) == 0o755


def test_ensure_directory_leaves_an_existing_one_alone(tmp_path):
    (tmp_path / "mine").mkdir(mode=0o700)
    assert ensure_directory(str(tmp_path / "mine")) == []
    assert mode_of(tmp_path / "mine") == 0o700


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "placement.json"
    atomic_write(str(target), b'{"revision": 1}', 0o600)

    def broken_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(state_files.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic_write(str(target), b'{"revision": 2}', 0o600)
    assert os.listdir(tmp_path) == ["placement.json"]
    assert target.read_bytes() == b'{"revision": 1}'


def test_atomic_write_takes_only_bytes_or_text(tmp_path):
    with pytest.raises(TypeError):
        atomic_write(str(tmp_path / "x"), {"a": 1}, 0o600)


def test_read_json_of_a_missing_file_is_none(tmp_path):
    assert read_json(str(tmp_path / "nothing.json")) is None


@pytest.mark.parametrize("content, says", [
    (b'{"revision": 1,', "is not valid JSON"),
    (b"", "is empty"),
    (b"\xff\xfe{}", "is not valid JSON"),
    (b"[1, 2]", "does not hold a JSON object but a JSON array"),
])
def test_read_json_of_a_corrupt_file_raises_naming_it(tmp_path, content, says):
    target = tmp_path / "placement.json"
    target.write_bytes(content)
    with pytest.raises(ValueError) as raised:
        read_json(str(target))
    assert str(target) in str(raised.value)
    assert says in str(raised.value)


def test_create_exclusive_creates_once(tmp_path, wide_umask):
    target = tmp_path / "lock.json"
    assert create_exclusive(str(target), b'{"job_id": "a"}', 0o640) is True
    assert create_exclusive(str(target), b'{"job_id": "b"}', 0o640) is False
    assert read_json(str(target)) == {"job_id": "a"}
    assert mode_of(target) == 0o640


def test_remove_file(tmp_path):
    target = tmp_path / "lock.json"
    target.write_text("{}")
    assert remove_file(str(target)) is True
    assert remove_file(str(target)) is False
    assert not target.exists()


def test_locked_directory_excludes_another_holder(tmp_path):
    import fcntl

    with locked_directory(str(tmp_path)):
        other = os.open(str(tmp_path), os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(str(tmp_path), os.O_RDONLY)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
