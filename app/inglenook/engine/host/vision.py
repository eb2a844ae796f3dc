"""Images in prompts: what stands for them in a token list, and their embeddings.

A prompt is a list of token ids; an image's run of positions holds negative ids derived from
the image's sha256 and the position in the image (`placeholders`). Everything that compares
prompts (the KV states of conversations, prefix reuse, a copy from a slot reading the same
prompt) compares token lists, so with these ids in the lists a state holding one image can
never be taken for a state holding another: the ids are the image's hash.

An image may become text tokens the projector sets around it and several image chunks (slices):
each chunk has its own ids, from the image's hash and the chunk's number (`chunk_key`).

The image's file is read and preprocessed when the prompt is tokenized (its number of positions
depends on it); it is encoded only when the batch loop reaches it, and only if its positions are
not restored from a state already. What an image will cost is known before it is sent
(`count`): its positions depend on its size alone (a projector that tiles or keeps the aspect,
Qwen-VL, LLaVA-UHD, Pixtral, takes more for a larger image), so a blank image of that size is
preprocessed, never encoded.

With a model placing images with M-RoPE (Qwen-VL), a chunk's n placeholders still stand for its
n embeddings (KV cells), but the chunk takes `n_pos` positions: a token's index in the prompt is
its cell, not its position (llama/context.py SeqMemory keeps both).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from inglenook.core.images import MAX_SIDE, ImageRefused, read_image
from inglenook.core.messages import ImageRef
from inglenook.engine.host.mtmd import ImageChunk, ImageRun, Projector

_KEPT_IMAGES = 8  # preprocessed images kept (a conversation's recent ones)
_KEPT_EMBEDDINGS = 4  # encoded images kept: a regenerate does not encode again
_KEPT_COUNTS = 256  # image sizes counted (each a few milliseconds to preprocess)


class ImageError(ValueError):
    """An image cannot be shown to the model; the message says why."""


def placeholders(sha256: str, n: int) -> list[int]:
    """The ids of an image's n positions: negative (no token has one), one per position."""
    out = []
    for i in range(n):
        h = hashlib.blake2b(f"{sha256}:{i}".encode(), digest_size=4).digest()
        out.append(-1 - (int.from_bytes(h, "little") & 0x7FFFFFFE))
    return out


def is_placeholder(token: int) -> bool:
    return token < 0


def chunk_key(sha256: str, k: int) -> str:
    """What the ids of an image's k-th chunk come from (the first: the image's hash alone, as
    states saved before images had several chunks hold)."""
    return sha256 if k == 0 else f"{sha256}#{k}"


@dataclass(frozen=True)
class ImageSpan:
    """Where an image chunk sits in a prompt: positions start..start+n."""

    start: int
    n: int
    key: str  # chunk_key
    non_causal: bool = False
    n_pos: int = 0  # positions it takes with M-RoPE (0: none, one per embedding)


def spans_of(tokens: Sequence[int], chunks: Sequence[ImageSpan]) -> tuple[ImageSpan, ...]:
    """`chunks` (their start not known yet) where they sit in `tokens`, in order."""
    out, pos = [], 0
    for chunk in chunks:
        first = placeholders(chunk.key, 1)[0]
        while tokens[pos] != first:
            pos += 1
        out.append(replace(chunk, start=pos))
        pos += chunk.n
    return tuple(out)


class Vision:
    """The loaded projector and the images it has read."""

    def __init__(self, projector: Projector) -> None:
        self.projector = projector
        self._runs: OrderedDict[str, ImageRun] = OrderedDict()
        self._embeddings: OrderedDict[str, np.ndarray] = OrderedDict()
        self._counts: OrderedDict[tuple[int, int], int] = OrderedDict()

    @property
    def n_embd(self) -> int:
        return self.projector.n_embd

    def probe_positions(self, side: int = 512) -> int:
        """Positions a side × side image takes (ModelInfo.image_tokens: the cost shown until
        an image's own size is counted)."""
        try:
            return self.count(side, side)
        except ImageError:
            return 0

    def count(self, width: int, height: int) -> int:
        """Positions an image of width × height pixels (as core/images reads it: at most
        MAX_SIDE a side) takes in a prompt, text the projector puts around it included: a blank
        image of that size preprocessed, never encoded (milliseconds to tens of them for the
        largest). ImageError for a size no image is read at."""
        if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
            raise ImageError(f"No image is read at {width} × {height} pixels.")
        key = (width, height)
        found = self._counts.get(key)
        if found is not None:
            self._counts.move_to_end(key)
            return found
        try:
            run = self.projector.image(bytes(width * height * 3), width, height, "count")
        except ValueError as exc:
            raise ImageError(str(exc)) from None
        try:
            found = self._counts[key] = run.n_tokens
        finally:
            run.close()
        while len(self._counts) > _KEPT_COUNTS:
            self._counts.popitem(last=False)
        return found

    def positions(self, ref: ImageRef) -> int:
        return self._run(ref).n_tokens

    def tokens(self, ref: ImageRef) -> list[int]:
        """The image in a prompt: the projector's text tokens and each chunk's ids."""
        out: list[int] = []
        k = 0
        for part in self._run(ref).parts:
            if isinstance(part, list):
                out += part
            else:
                out += placeholders(chunk_key(ref.sha256, k), part.n_tokens)
                k += 1
        return out

    def spans(self, tokens: Sequence[int], images: Sequence[ImageRef]) -> tuple[ImageSpan, ...]:
        """Where the chunks of `images` (tokenized in this prompt) sit in `tokens`, in order."""
        mrope = self.projector.mrope
        return spans_of(tokens, [ImageSpan(0, chunk.n_tokens, chunk_key(ref.sha256, k),
                                           chunk.non_causal, chunk.n_pos if mrope else 0)
                                 for ref in images
                                 for k, chunk in enumerate(self._run(ref).chunks)])

    def labels(self, images: Sequence[ImageRef]) -> dict[int, str]:
        """Each chunk's first id: what the prompt inspector calls it ("image 2", or "image 2,
        part 3" when an image has several)."""
        out = {}
        for i, ref in enumerate(images, 1):
            chunks = self._run(ref).chunks
            for k in range(len(chunks)):
                first = placeholders(chunk_key(ref.sha256, k), 1)[0]
                out[first] = f"image {i}" if len(chunks) == 1 else f"image {i}, part {k + 1}"
        return out

    def _run(self, ref: ImageRef) -> ImageRun:
        run = self._runs.get(ref.sha256)
        if run is not None:
            self._runs.move_to_end(ref.sha256)
            return run
        try:
            image = read_image(Path(ref.path))
        except ImageRefused as exc:
            raise ImageError(str(exc)) from None
        if image.sha256 != ref.sha256:
            raise ImageError(f"{Path(ref.path).name} is not the image the message holds "
                             "(its contents changed).")
        run = self.projector.image(image.rgb, image.width, image.height, ref.sha256)
        if not self.projector.mrope and any(c.n_pos != c.n_tokens for c in run.chunks):
            run.close()
            raise ImageError("This projector's images take positions other than their "
                             "tokens, which Inglenook does not support yet.")
        self._runs[ref.sha256] = run
        while len(self._runs) > _KEPT_IMAGES:
            _, old = self._runs.popitem(last=False)
            old.close()
        return run

    def positions_at(self, key: str, pos_0: int) -> np.ndarray:
        """A chunk's M-RoPE positions (4, n) when it starts at position `pos_0`; its image
        must have been tokenized in this prompt."""
        return self._chunk(key).positions(pos_0)

    def _chunk(self, key: str) -> ImageChunk:
        sha256, _, k = key.partition("#")
        run = self._runs.get(sha256)
        if run is None:
            raise ImageError("An image of this prompt is no longer at hand.")
        return run.chunks[int(k or 0)]

    def embeddings(self, key: str, should_stop: Callable[[], bool]) -> np.ndarray | None:
        """A chunk's embeddings, (n, n_embd); None when stopped while encoding. Its image must
        have been tokenized (positions) in this prompt."""
        rows = self._embeddings.get(key)
        if rows is not None:
            self._embeddings.move_to_end(key)
            return rows
        rows = self._chunk(key).encode(should_stop)
        if rows is None:
            return None
        self._embeddings[key] = rows
        while len(self._embeddings) > _KEPT_EMBEDDINGS:
            self._embeddings.popitem(last=False)
        return rows

    def close(self) -> None:
        for run in self._runs.values():
            run.close()
        self._runs.clear()
        self._embeddings.clear()
        self.projector.close()
