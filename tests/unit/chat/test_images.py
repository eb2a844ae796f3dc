"""A message's images as the engine is given them: content-addressed files written from the
stored bytes, named in the text for a model that cannot see, counted before sending, and the
cache pruned of files no stored message holds."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from inglenook import paths
from inglenook.chat import images
from inglenook.chat.history import user_turn
from inglenook.core.attachments import IMAGE_TOKENS, Attachment, message_tokens, tokens_of
from inglenook.store import Store
from tests.unit.core.test_images import png_bytes


def image(name: str, color: tuple[int, int, int]) -> Attachment:
    data = png_bytes((4, 4), "RGB", color)
    return Attachment(name, "image", len(data), mime="image/png", data=data)


NOTES = Attachment("notes.md", "markdown", 9, "# Plan\n- a")


def test_an_image_becomes_a_file_named_by_its_hash_written_once() -> None:
    photo = image("photo.png", (1, 2, 3))
    ref = images.image_ref(photo)
    assert ref.sha256 == hashlib.sha256(photo.data).hexdigest()
    path = Path(ref.path)
    assert path == paths.image_cache_dir() / f"{ref.sha256}.png"
    assert path.read_bytes() == photo.data
    stamp = path.stat().st_mtime_ns
    assert images.image_ref(photo) == ref and path.stat().st_mtime_ns == stamp  # not again
    path.unlink()  # removed by hand: written again from the stored bytes
    assert Path(images.image_ref(photo).path).read_bytes() == photo.data
    images._checked.clear()  # the next run, with the file changed there meanwhile
    path.write_bytes(bytes(len(photo.data)))
    assert Path(images.image_ref(photo).path).read_bytes() == photo.data


def test_a_model_that_sees_gets_images_one_that_does_not_their_names() -> None:
    photo = image("photo.png", (1, 2, 3))
    seeing = user_turn("What is it?", [NOTES, photo], vision=True)
    assert len(seeing.images) == 1
    assert seeing.images[0].sha256 == images.remembered_sha256(photo.data)
    assert "[Image" not in seeing.content and "File: notes.md" in seeing.content
    blind = user_turn("What is it?", [NOTES, photo], vision=False)
    assert blind.images == () and "[Image: photo.png]" in blind.content


def test_images_are_counted_as_the_model_counts_them_or_estimated() -> None:
    photo = image("photo.png", (1, 2, 3))
    assert tokens_of(photo) == IMAGE_TOKENS and tokens_of(photo, 16) == 16
    assert message_tokens("abcd" * 10, [photo, photo], 16) == 10 + 32
    assert message_tokens("abcd" * 10, [photo]) == 10 + IMAGE_TOKENS


def test_the_cache_keeps_stored_and_new_images_and_loses_the_rest(tmp_path: Path) -> None:
    kept, gone = image("kept.png", (1, 1, 1)), image("gone.png", (2, 2, 2))
    with Store() as store:
        conv = store.create_conversation()
        store.add_message(conv, "user", "look", None, attachments=[kept])
        database = store.path
    kept_path = Path(images.image_ref(kept).path)
    gone_path = Path(images.image_ref(gone).path)
    new_path = Path(images.image_ref(image("new.png", (3, 3, 3))).path)  # an API request's, now
    old = time.time() - 2 * images.MIN_AGE_S
    for path in (kept_path, gone_path):
        os.utime(path, (old, old))
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"mine")
    (paths.image_cache_dir() / "link.png").symlink_to(outside)
    assert images.prune_cache(database) == 1
    assert kept_path.exists() and new_path.exists() and not gone_path.exists()
    assert outside.read_bytes() == b"mine"  # a link is never followed out


def test_api_request_images_go_by_age_and_a_reused_one_is_young_again() -> None:
    old_data, new_data = png_bytes((4, 4), "RGB", (5, 5, 5)), png_bytes((4, 4), "RGB", (6, 6, 6))
    old_sha, new_sha = (hashlib.sha256(d).hexdigest() for d in (old_data, new_data))
    old_path = images.store_request_image(old_data, old_sha, "png")
    new_path = images.store_request_image(new_data, new_sha, "png")
    assert old_path.parent == paths.request_image_dir() != paths.image_cache_dir()
    long_ago = time.time() - 2 * images.MIN_AGE_S
    for path in (old_path, new_path):
        os.utime(path, (long_ago, long_ago))
    assert images.store_request_image(new_data, new_sha, "png") == new_path  # sent again now
    with Store() as store:
        database = store.path
    assert images.prune_cache(database) == 1
    assert not old_path.exists() and new_path.read_bytes() == new_data
    assert images.store_request_image(old_data, old_sha, "png").read_bytes() == old_data
