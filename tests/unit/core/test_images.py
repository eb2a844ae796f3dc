"""core/images.py: hostile image files are refused with a reason, read with bounds."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from inglenook.core import images
from inglenook.core.images import ImageRefused, decode_image, read_bounded, read_image


def png_bytes(size: tuple[int, int], mode: str = "RGB", color: object = (10, 20, 30)) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, color).save(out, "PNG")  # type: ignore[arg-type]
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that announces width × height and holds a few compressed bytes of it."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\0" * 4096)) + chunk(b"IEND", b""))


def test_a_plain_image_becomes_rgb_with_the_hash_of_its_bytes(tmp_path: Path) -> None:
    data = png_bytes((5, 3))
    (tmp_path / "a.png").write_bytes(data)
    image = read_image(tmp_path / "a.png")
    assert (image.width, image.height, image.format) == (5, 3, "PNG")
    assert image.rgb == bytes((10, 20, 30)) * 15
    assert image.sha256 == hashlib.sha256(data).hexdigest()


def test_transparency_is_flattened_onto_white() -> None:
    image = decode_image(png_bytes((2, 2), "RGBA", (0, 0, 0, 0)))
    assert image.rgb == b"\xff" * 12


def test_30000_by_30000_pixels_are_refused_before_decoding() -> None:
    with pytest.raises(ImageRefused, match="pixels than the 40,000,000"):
        decode_image(png_header_only(30_000, 30_000))


def test_a_decompression_bomb_is_refused() -> None:
    # 200 bytes that announce 12,000 × 12,000 pixels (432 MB of RGB).
    bomb = png_header_only(12_000, 12_000)
    assert len(bomb) < 300
    with pytest.raises(ImageRefused, match="pixels"):
        decode_image(bomb)


def test_a_truncated_file_is_refused() -> None:
    data = png_bytes((64, 64), color=(1, 2, 3))
    with pytest.raises(ImageRefused, match="damaged or truncated"):
        decode_image(data[: len(data) // 2])


def test_a_text_file_named_png_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.png").write_text("not a picture at all")
    with pytest.raises(ImageRefused, match="not an image"):
        read_image(tmp_path / "notes.png")


def test_a_jpeg_named_png_is_read_as_what_it_is(tmp_path: Path) -> None:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 0, 0)).save(out, "JPEG")
    (tmp_path / "photo.png").write_bytes(out.getvalue())
    assert read_image(tmp_path / "photo.png").format == "JPEG"


def test_an_animated_gif_of_5000_frames_gives_its_first_frame() -> None:
    frames = [Image.new("P", (2, 2), i % 200) for i in range(5000)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    image = decode_image(out.getvalue())
    assert (image.width, image.height) == (2, 2)
    assert image.rgb == decode_image(_gif(frames[0])).rgb


def _gif(frame: Image.Image) -> bytes:
    out = io.BytesIO()
    frame.save(out, "GIF")
    return out.getvalue()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_png_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(ImageRefused, match="not a regular file"):
        read_image(tmp_path / "pipe.png")


def test_a_file_over_the_limit_is_refused_unread(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.png").write_bytes(png_bytes((4, 4)))
    with pytest.raises(ImageRefused, match="bytes; images up to 10 bytes"):
        read_bounded(tmp_path / "big.png", limit=10)


def test_a_large_image_is_scaled_down_to_the_side_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images, "MAX_SIDE", 16)
    image = decode_image(png_bytes((64, 32)))
    assert (image.width, image.height) == (16, 8)
    assert len(image.rgb) == 16 * 8 * 3


def test_a_large_image_is_kept_at_the_size_it_is_read_and_a_small_one_whole() -> None:
    noise = Image.effect_noise((4000, 3000), 60).convert("RGB")
    out = io.BytesIO()
    noise.save(out, "JPEG", quality=95)
    photo = decode_image(out.getvalue())
    kept = images.as_read(photo)
    assert kept is not None and kept[1] == "image/jpeg"
    again = decode_image(kept[0])
    assert (again.width, again.height) == (photo.width, photo.height)
    assert max(again.width, again.height) <= images.MAX_SIDE < photo.source_side
    assert len(kept[0]) < len(out.getvalue()) // 2
    wide_png = decode_image(png_bytes((3000, 100)))
    assert images.as_read(wide_png) is not None and images.as_read(wide_png)[1] == "image/png"
    assert images.as_read(decode_image(png_bytes((640, 480)))) is None


def sideways_jpeg(size: tuple[int, int] = (40, 20), orientation: int = 6) -> bytes:
    """A JPEG stored as a phone stores a portrait photo: its pixels sideways (red on the
    left, blue on the right), and EXIF saying to turn it a quarter clockwise to show it."""
    picture = Image.new("RGB", size, (255, 0, 0))
    picture.paste((0, 0, 255), (size[0] // 2, 0, size[0], size[1]))
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    picture.save(out, "JPEG", exif=exif, quality=95)
    return out.getvalue()


def pixel(image: images.DecodedImage, x: int, y: int) -> tuple[int, ...]:
    at = (y * image.width + x) * 3
    return tuple(image.rgb[at:at + 3])


def test_a_photo_is_turned_upright_as_its_exif_orientation_says() -> None:
    image = decode_image(sideways_jpeg())
    assert (image.width, image.height) == (20, 40)  # portrait, as the phone showed it
    top, bottom = pixel(image, 10, 3), pixel(image, 10, 36)
    assert top[0] > 200 and top[2] < 50  # the left (red) half is the top after the turn
    assert bottom[2] > 200 and bottom[0] < 50
    assert image.turned
    thumbnail = Image.open(io.BytesIO(images.thumbnail_png(image, 8)))
    assert thumbnail.size == (4, 8)


def test_a_turned_photo_is_kept_upright_without_its_exif(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = images.as_read(decode_image(sideways_jpeg()))  # small, but sideways on file
    assert kept is not None and kept[1] == "image/jpeg"
    again = Image.open(io.BytesIO(kept[0]))
    assert again.size == (20, 40) and again.getexif().get(0x0112) is None
    assert not decode_image(kept[0]).turned
    monkeypatch.setattr(images, "MAX_SIDE", 16)  # shrunk as well: still upright
    small = images.as_read(decode_image(sideways_jpeg((64, 32))))
    assert small is not None and Image.open(io.BytesIO(small[0])).size == (8, 16)
    assert images.as_read(decode_image(sideways_jpeg((8, 4), orientation=1))) is None
