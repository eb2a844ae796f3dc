"""The GUI thread while a 12-megapixel photo is attached and sent (issue 20: < 50 ms): the
longest gap of a 5 ms QTimer probe from the moment the file is attached until the reply has
ended, in the real window on the fake engine host (tests/helpers/fake_host.py, a model that
"sees": the engine's work is not what is measured here, the window's is). One JSON line; run by
bench/run.py in its own process (offscreen unless told otherwise). `--quick`: a smaller photo.

  vision_gui_max_stall_ms   the longest GUI-thread gap, attach → thumbnail → send → reply
  vision_attach_ms          attach → the chip with its thumbnail shown
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from PySide6.QtCore import QCoreApplication, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

PROBE_MS = 5


def photo(path: Path, width: int, height: int) -> Path:
    """Noise over gradients, so the JPEG is photo-sized (megabytes), not a flat few KB."""
    rng = np.random.default_rng(1)
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    pixels = rng.integers(0, 64, (height, width, 3)).astype(np.float32) + ramp * 0.7
    out = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    path.write_bytes(out.getvalue())
    return path


def main() -> int:
    quick = "--quick" in sys.argv
    home = Path(tempfile.mkdtemp(prefix="vision-stall-"))
    os.environ["INGLENOOK_HOME"] = str(home)
    app = QApplication(sys.argv[:1])
    from tests.gui.conftest import Script, fake_worker, greedy_settings

    from inglenook.ui.app import configure
    from inglenook.ui.main_window import MainWindow

    configure(app)
    script = Script(home / "fake.json")
    script.write(default={"text": "Saw {images} image.", "token_ms": 2}, vision=576)
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
    window.close()
    print(json.dumps({"vision_gui_max_stall_ms": round(max(gaps) * 1000 - PROBE_MS, 1),
                      "vision_attach_ms": round(attached * 1000, 1),
                      "vision_photo_bytes": big.stat().st_size}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
