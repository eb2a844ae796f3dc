"""The one bounded reader of local files and the one file sha256 (core/files.py)."""

from __future__ import annotations

import hashlib
import os

import pytest

from inglenook.core import files


def test_a_regular_file_is_read_whole_with_its_stat(tmp_path):
    path = tmp_path / "notes.md"
    path.write_bytes(b"hello")
    data, info = files.read_bounded(path, 10)
    assert data == b"hello" and info.st_size == 5


def test_a_file_over_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 11)
    with pytest.raises(files.ReadRefused) as caught:
        files.read_bounded(path, 10)
    assert (caught.value.why, caught.value.size, caught.value.limit) == ("too large", 11, 10)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(files.ReadRefused) as caught:
        files.read_bounded(fifo, 10, follow_links=True)
    assert caught.value.why == "not regular"


@pytest.mark.skipif(not files.NOFOLLOW, reason="no O_NOFOLLOW here")
def test_a_link_is_refused_unless_following_was_asked(tmp_path):
    target = tmp_path / "real.txt"
    target.write_bytes(b"real")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with pytest.raises(files.ReadRefused) as caught:
        files.read_bounded(link, 10)
    assert caught.value.why == "link"
    assert files.read_bounded(link, 10, follow_links=True)[0] == b"real"


def test_another_file_than_the_one_found_is_refused(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"a")
    with pytest.raises(files.ReadRefused) as caught:
        files.read_bounded(path, 10, identity=(0, 0))
    assert caught.value.why == "changed"


def test_a_missing_file_and_a_folder_say_so(tmp_path):
    with pytest.raises(files.ReadRefused) as missing:
        files.read_bounded(tmp_path / "gone", 10)
    with pytest.raises(files.ReadRefused) as folder:
        files.read_bounded(tmp_path, 10)
    assert missing.value.why == "missing" and folder.value.why in ("not regular", "unreadable")


def test_sha256_file_matches_hashlib_across_blocks(tmp_path):
    path = tmp_path / "blob"
    data = os.urandom(10_000)
    path.write_bytes(data)
    assert files.sha256_file(path, block=4096) == hashlib.sha256(data).hexdigest()
