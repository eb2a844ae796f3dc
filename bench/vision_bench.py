"""Images (issue 20), printed as one JSON line. QUALITY IS NOT JUDGED: no real vision model is
available offline here, so the bundled SmolLM2-135M is loaded with the tiny random-weight LLaVA
projector of tests/mmproj_tools.py (one CLIP block, 64 × 64 pixels, 16 positions an image). Its
replies are nonsense; what is timed is every real step: libmtmd's preprocessing and encoding,
the image's positions in the batch, the first token. A real projector (a 336-pixel ViT-L of 24
blocks, 576 positions) costs far more: these figures are the floor of the machinery.

  vision_encode_512_ms   one 512 × 512 image preprocessed and encoded by libmtmd (the engine
                         host's adapter, in this process), median of runs, each a new image
  vision_ttft_ms         a question with one new 512 × 512 image: request sent → first token at
                         the client (the engine host in its own process, as the window has it)
  vision_text_ttft_ms    the same question without the image, for the difference
  vision_image_tokens    positions one image takes (ModelInfo.image_tokens)

`--quick`: one run each; its figures mean nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from common import bundled_model, log

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mmproj_tools import model_n_embd, write_mmproj  # noqa: E402

from inglenook.core.load import LoadParams  # noqa: E402
from inglenook.core.messages import GenerationRequest, ImageRef, Message  # noqa: E402
from inglenook.core.sampling import SamplingParams  # noqa: E402
from inglenook.engine import protocol as p  # noqa: E402
from inglenook.engine.client import EngineClient  # noqa: E402
from inglenook.engine.host import physical_cores  # noqa: E402

QUESTION = "What is in this picture? Answer in one word."
FIRST = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.0, max_tokens=1)
SIDE = 512


def picture(n: int) -> bytes:
    """A 512 × 512 PNG of its own for each run (no run finds another's embeddings)."""
    image = Image.new("RGB", (SIDE, SIDE), (n * 37 % 256, n * 91 % 256, 128))
    image.putpixel((n % SIDE, 0), (255, 255, 255))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def encode_ms(model_path: Path, mmproj: Path, runs: int, threads: int) -> float:
    from inglenook.core.images import decode_image
    from inglenook.engine.host.llama import Model
    from inglenook.engine.host.mtmd import Projector

    model = Model(str(model_path), 0, True, False)
    projector = Projector(str(mmproj), model, threads, use_gpu=False)
    times = []
    try:
        for n in range(runs):
            data = picture(1000 + n)
            image = decode_image(data)
            started = time.perf_counter()
            run = projector.image(image.rgb, image.width, image.height, image.sha256)
            rows = [chunk.encode(lambda: False) for chunk in run.chunks]
            times.append(time.perf_counter() - started)
            run.close()
            assert all(r is not None for r in rows)
    finally:
        projector.close()
    return statistics.median(times) * 1000


def first_token_s(client: EngineClient, rid: int, message: Message) -> float:
    sent, first = time.perf_counter(), 0.0
    for event in client.generate(GenerationRequest(rid, (message,), FIRST)):
        if isinstance(event, p.Delta) and not first:
            first = time.perf_counter()
    return (first or time.perf_counter()) - sent


def main() -> int:
    quick = "--quick" in sys.argv
    model = bundled_model()
    if model is None:
        return 1
    runs = 1 if quick else 7
    threads = 1 if quick else physical_cores()  # quick: no spinning threads to wait on
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        mmproj = write_mmproj(folder / "mmproj-tiny.gguf", model_n_embd(model))
        log(f"Encoding a {SIDE} × {SIDE} image with the tiny projector ({runs} runs; quality "
            "is not judged)…")
        encode = encode_ms(model, mmproj, runs, threads)
        client = EngineClient(log_path=folder / "engine.log")
        try:
            info = client.load(LoadParams(str(model), n_ctx=2048, n_threads=threads,
                                          n_threads_batch=threads, mmproj_path=str(mmproj)))
            log(f"First token of a question with one new image, and without ({runs} runs)…")
            first_token_s(client, 1, Message("user", "Hello."))  # warm: the first request
            seen, text = [], []
            for n in range(runs):
                data = picture(n)
                path = folder / f"picture-{n}.png"
                path.write_bytes(data)
                ref = ImageRef(hashlib.sha256(data).hexdigest(), str(path))
                # A text of its own each time: no run reads another's prompt from the cache.
                seen.append(first_token_s(client, 10 + 2 * n, Message(
                    "user", f"Picture {n}. {QUESTION}", images=(ref,))))
                text.append(first_token_s(client, 11 + 2 * n,
                                          Message("user", f"Question {n}. {QUESTION}")))
        finally:
            client.close()
    print(json.dumps({"vision_encode_512_ms": round(encode, 2),
                      "vision_ttft_ms": round(statistics.median(seen) * 1000, 1),
                      "vision_text_ttft_ms": round(statistics.median(text) * 1000, 1),
                      "vision_image_tokens": info.image_tokens,
                      "vision_quality_judged": False}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
