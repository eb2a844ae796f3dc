"""Images in prompts: what stands for them in a token list, and their embeddings.

A prompt is a list of token ids; an image's run of positions holds negative ids derived from
the image's sha256 and the position in the image (`placeholders`). Everything that compares
prompts (the KV states of conversations, prefix reuse, a copy from a slot reading the same
prompt) compares token lists, so with these ids in the lists a state holding one image can
never be taken for a state holding another: the ids are the image's hash.

The image's file is read and preprocessed when the prompt is tokenized (its number of positions
depends on it); it is encoded only when the batch loop reaches it, and only if its positions are
not restored from a state already.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inglenook.core.images import ImageRefused, read_image
from inglenook.core.messages import ImageRef
from inglenook.engine.host.mtmd import ImageChunk, Projector

_KEPT_IMAGES = 8  # preprocessed images kept (a conversation's recent ones)
_KEPT_EMBEDDINGS = 4  # encoded images kept: a regenerate does not encode again


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


@dataclass(frozen=True)
class ImageSpan:
    """Where an image sits in a prompt: positions start..start+n."""

    start: int
    n: int
    sha256: str


def spans_of(tokens: Sequence[int], images: Sequence[ImageRef], sizes: Sequence[int]
             ) -> tuple[ImageSpan, ...]:
    """The spans of `images` (with `sizes` positions each) in `tokens`, in order."""
    out, pos = [], 0
    for ref, n in zip(images, sizes, strict=True):
        first = placeholders(ref.sha256, 1)[0]
        while tokens[pos] != first:
            pos += 1
        out.append(ImageSpan(pos, n, ref.sha256))
        pos += n
    return tuple(out)


class Vision:
    """The loaded projector and the images it has read."""

    def __init__(self, projector: Projector) -> None:
        self.projector = projector
        self._chunks: OrderedDict[str, ImageChunk] = OrderedDict()
        self._embeddings: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def n_embd(self) -> int:
        return self.projector.n_embd

    def probe_positions(self, side: int = 512) -> int:
        """Positions a grey side × side image takes: preprocessed only, never encoded (a few
        milliseconds), so the window can show an image's cost before it is sent."""
        try:
            chunk = self.projector.image(bytes(side * side * 3), side, side, "probe")
        except ValueError:  # ProjectorError too (Gemma 3's non-causal images)
            return 0
        try:
            return int(chunk.n_tokens)
        finally:
            chunk.close()

    def positions(self, ref: ImageRef) -> int:
        return self._chunk(ref).n_tokens

    def _chunk(self, ref: ImageRef) -> ImageChunk:
        chunk = self._chunks.get(ref.sha256)
        if chunk is not None:
            self._chunks.move_to_end(ref.sha256)
            return chunk
        try:
            image = read_image(Path(ref.path))
        except ImageRefused as exc:
            raise ImageError(str(exc)) from None
        if image.sha256 != ref.sha256:
            raise ImageError(f"{Path(ref.path).name} is not the image the message holds "
                             "(its contents changed).")
        chunk = self.projector.image(image.rgb, image.width, image.height, ref.sha256)
        if chunk.n_pos != chunk.n_tokens:
            chunk.close()
            raise ImageError("This projector's images take positions other than their "
                             "tokens, which Inglenook does not support yet.")
        self._chunks[ref.sha256] = chunk
        while len(self._chunks) > _KEPT_IMAGES:
            _, old = self._chunks.popitem(last=False)
            old.close()
        return chunk

    def embeddings(self, sha256: str, should_stop: Callable[[], bool]) -> np.ndarray | None:
        """The image's embeddings, (n, n_embd); None when stopped while encoding. The image
        must have been tokenized (positions) in this prompt."""
        rows = self._embeddings.get(sha256)
        if rows is not None:
            self._embeddings.move_to_end(sha256)
            return rows
        chunk = self._chunks.get(sha256)
        if chunk is None:
            raise ImageError("An image of this prompt is no longer at hand.")
        rows = chunk.encode(should_stop)
        if rows is None:
            return None
        self._embeddings[sha256] = rows
        while len(self._embeddings) > _KEPT_EMBEDDINGS:
            self._embeddings.popitem(last=False)
        return rows

    def close(self) -> None:
        for chunk in self._chunks.values():
            chunk.close()
        self._chunks.clear()
        self._embeddings.clear()
        self.projector.close()
