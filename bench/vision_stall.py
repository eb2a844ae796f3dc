"""The GUI thread while a 12-megapixel photo is attached and sent (issue 20: < 50 ms): the
longest gap of a 5 ms QTimer probe from the moment the file is attached until the reply has
ended, in the real window on the fake engine host (tests/helpers/fake_host.py, a model that
"sees": the engine's work is not what is measured here, the window's is). Then a 12 MP
screenshot pasted (the PNG bytes a screenshot tool puts on the clipboard), and the first send in
a chat with 20 large photos in its history, as after a restart (nothing of them hashed or
checked in this process yet). One JSON line; run by bench/run.py in its own process (offscreen
unless told otherwise). `--quick`: smaller images, fewer of them.

  vision_gui_max_stall_ms     the longest GUI-thread gap, attach → thumbnail → send → reply
  vision_attach_ms            attach → the chip with its thumbnail shown
  vision_paste_max_stall_ms   the longest gap, paste → the chip with its thumbnail shown
  vision_history_send_max_stall_ms  the longest gap, Enter → the reply's end, in the chat with
                              20 photos (each about 1.7 MB, 2,048 × 1,536) in its history
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from PySide6.QtCore import QByteArray, QCoreApplication, QMimeData, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

PROBE_MS = 5


def photo(path: Path, width: int, height: int, seed: int = 1) -> Path:
    """Noise over gradients, so the JPEG is photo-sized (megabytes), not a flat few KB."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    pixels = rng.integers(0, 64, (height, width, 3)).astype(np.float32) + ramp * 0.7
    out = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    path.write_bytes(out.getvalue())
    return path


def screenshot(width: int, height: int) -> bytes:
    """A screenshot-like PNG: flat panels and specks of text on a light background (a 12 MP
    one is about 2.4 MB, as real ones are)."""
    rng = np.random.default_rng(2)
    pixels = np.empty((height, width, 3), np.uint8)
    pixels[:] = np.linspace(235, 250, width).astype(np.uint8)[None, :, None]
    for _ in range(60):
        x, y = rng.integers(0, width - width // 10), rng.integers(0, height - height // 10)
        pixels[y:y + height // 10, x:x + width // 10] = rng.integers(0, 255, 3)
    pixels[rng.random((height, width)) < 0.08] = 30
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


def history_chat(home: Path, photos: int, quick: bool) -> int:
    """A chat whose history holds `photos` large photos, stored as an earlier run left it: the
    images in the store, their files in the image cache; then this process forgets that it
    hashed or checked them, as a restart would. Its id."""
    from inglenook.chat import images
    from inglenook.core.attachments import Attachment
    from inglenook.store.opening import open_store

    store, problem = open_store()
    if problem:
        raise SystemExit(f"vision_stall: {problem}")
    conv = store.create_conversation("Holiday photos")
    parent = None
    for n in range(photos):
        data = photo(home / f"history-{n}.jpg", *((1024, 768) if quick else (2048, 1536)),
                     seed=n).read_bytes()
        attachment = Attachment(f"photo {n}.jpg", "image", len(data), mime="image/jpeg",
                                data=data)
        images.image_ref(attachment)  # its file, as the run that sent it wrote it
        parent = store.add_message(conv, "user", f"What is in photo {n}?", parent,
                                   attachments=[attachment])
        parent = store.add_message(conv, "assistant", f"Photo {n} shows a gradient.", parent)
    store.close()
    images._hashes.clear()  # a restart: nothing hashed or checked in this process
    images._checked.clear()
    return conv


def main() -> int:
    quick = "--quick" in sys.argv
    home = Path(tempfile.mkdtemp(prefix="vision-stall-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)  # its photos: 9 MB a run
    os.environ["INGLENOOK_HOME"] = str(home)
    app = QApplication(sys.argv[:1])
    from tests.gui.conftest import Script, fake_worker, greedy_settings

    from inglenook.ui.app import configure
    from inglenook.ui.main_window import MainWindow

    configure(app)
    photos = 5 if quick else 20
    history = history_chat(home, photos, quick)
    script = Script(home / "fake.json")
    # 576 positions a 512 × 512 tile: the 12 MP photo, read at 2,048 × 1,536, takes 12 tiles.
    script.write(default={"text": "Saw {images} image.", "token_ms": 2}, vision=576,
                 n_ctx=131_072)
    window = MainWindow(worker=fake_worker(script, home / "engine.log"),
                        settings=greedy_settings())
    window.resize(1280, 820)
    window.show()
    deadline = time.monotonic() + 60
    while window.models.model is None and time.monotonic() < deadline:
        QCoreApplication.processEvents()
        time.sleep(0.01)
    if window.models.model is None:
        raise SystemExit("vision_stall: the fake engine's model did not load in 60 s")
    window.chats.new_chat()  # not the chat with photos the window may have opened
    big = photo(home / "photo.jpg", *((1600, 1200) if quick else (4000, 3000)))
    gaps: list[float] = []
    last = [time.perf_counter()]

    def probe() -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)
    composer = window.composer
    timer.start()
    last[0] = started = time.perf_counter()
    composer.attach_files([str(big)])
    attached = 0.0
    end = time.monotonic() + 120
    while time.monotonic() < end:
        QCoreApplication.processEvents()
        chips = composer.strip.chips
        if not attached and composer.attachments and chips and chips[0].thumbnail is not None \
                and not chips[0].thumbnail.pixmap().isNull():
            attached = time.perf_counter() - started
            composer.edit.setPlainText("What is in this photo?")
            composer._submit()  # as Enter does
        if attached and window.chats.session.reply is None and len(window.chat.bubbles) == 2:
            break
        time.sleep(0.001)
    else:
        raise SystemExit("vision_stall: the reply with the photo did not finish in 120 s")
    timer.stop()
    send_stall = max(gaps)

    # A 12 MP screenshot pasted: the clipboard's PNG bytes.
    clip = QMimeData()
    shot = screenshot(*((1600, 1200) if quick else (4000, 3000)))
    clip.setData("image/png", QByteArray(shot))
    gaps.clear()
    timer.start()
    last[0] = time.perf_counter()
    composer.edit.insertFromMimeData(clip)  # what Ctrl+V ends in
    if not wait(lambda: bool(composer.attachments) and composer.strip.chips[0].thumbnail
                is not None and not composer.strip.chips[0].thumbnail.pixmap().isNull()):
        raise SystemExit(f"vision_stall: the pasted image was not attached: "
                         f"{composer.notice.text()}")
    timer.stop()
    paste_stall = max(gaps)
    composer.remove_attachment(0)

    # The first send in a chat with photos in its history, after a restart.
    window.chats.open(history)
    wait(lambda: False, 1.0)  # its bubbles and their thumbnails settle
    composer.edit.setPlainText("And which was the brightest?")
    gaps.clear()
    timer.start()
    last[0] = time.perf_counter()
    composer._submit()  # as Enter does
    if not wait(lambda: window.chats.session.reply is None
                and window.chats.last_request is not None
                and "brightest" in window.chats.last_request.messages[-1].content):
        raise SystemExit("vision_stall: the reply in the chat with photos did not finish")
    timer.stop()
    sent_images = sum(len(m.images) for m in window.chats.last_request.messages)
    if sent_images != photos:
        raise SystemExit(f"vision_stall: {sent_images} of the chat's {photos} photos were sent")
    history_stall = max(gaps)
    window.close()
    print(json.dumps({"vision_gui_max_stall_ms": round(send_stall * 1000 - PROBE_MS, 1),
                      "vision_attach_ms": round(attached * 1000, 1),
                      "vision_photo_bytes": big.stat().st_size,
                      "vision_paste_max_stall_ms": round(paste_stall * 1000 - PROBE_MS, 1),
                      "vision_pasted_bytes": len(shot),
                      "vision_history_send_max_stall_ms": round(history_stall * 1000 - PROBE_MS,
                                                                1),
                      "vision_history_photos": photos}))
    return 0


def wait(done: Callable[[], bool], seconds: float = 120.0) -> bool:
    """Run the event loop until `done()` (True) or `seconds` have passed (False)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QCoreApplication.processEvents()
        if done():
            return True
        time.sleep(0.001)
    return False


if __name__ == "__main__":
    raise SystemExit(main())
