"""The adapter's vision half: the only module that touches libmtmd (llama_cpp.mtmd_cpp), as
llama/ is the only one that touches libllama.

    Projector   an mmproj GGUF loaded beside the text model (mtmd_init_from_file)
    ImageRun    one image, preprocessed: text tokens and image chunks, in order
    ImageChunk  positions of an image: how many, then their embeddings
    EmbeddingBatch  a run of those embeddings into a sequence's KV cells (llama_decode of an
                embedding batch), so an image is read in pieces like a long prompt

Images come in as RGB bytes that core/images.py decoded with its limits; libmtmd's own decoder
(stb_image, mtmd_helper_bitmap_init_from_buf) never sees a file. An image may come as several
chunks: text the projector puts around it (Gemma 3's <start_of_image>, Pixtral's [IMG_END]) and
one or more image chunks (slices). Image chunks read with non-causal attention (Gemma 3) are
marked so. With a model that places images with M-RoPE (Qwen-VL: `Projector.mrope`), an
image chunk's embeddings are decoded at positions of four sections (`ImageChunk.positions`:
time, row, column, unused) and take `n_pos` positions, max(rows, cols), not one each: the text
after it continues there (llama/context.py SeqMemory holds the positions).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llama_cpp
import numpy as np
from llama_cpp import mtmd_cpp as mtmd

from inglenook.engine.host.llama import Context, Model

CHUNK_TEXT, CHUNK_IMAGE = 0, 1  # mtmd_input_chunk_type (AUDIO=2)
_STOP_EVERY = 16  # graph nodes between two checks for a stop while an image is encoded


class ProjectorError(ValueError):
    """The projector cannot be used with this model (the message says why)."""


class Projector:
    def __init__(self, path: str, model: Model, n_threads: int, use_gpu: bool) -> None:
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = False  # a warm-up encode costs a full image at load time
        # A stop during encoding: ggml's scheduler asks this callback, node by node, whether
        # to hand it a computed node; saying yes every _STOP_EVERY nodes splits the graph
        # there, and answering "stop" after such a node ends the compute (its output is then
        # thrown away). Saying no would compute the whole graph before any check.
        self._should_stop: Callable[[], bool] = lambda: False
        self._nodes = 0
        self._eval = llama_cpp.ggml_backend_sched_eval_callback(self._on_node)
        params.cb_eval = self._eval
        self.model, self.path = model, path
        self.ptr = mtmd.mtmd_init_from_file(path.encode("utf-8"), model.ptr, params)
        if not self.ptr:
            raise ProjectorError(f"libmtmd could not load the projector {path} "
                                 "(the engine log has its reason).")
        if not mtmd.mtmd_support_vision(self.ptr):
            self.close()
            raise ProjectorError("This projector reads no images (an audio projector?).")
        self.mrope = bool(mtmd.mtmd_decode_use_mrope(self.ptr))
        # What the model reads per embedding: n_embd, more with Qwen3-VL's deepstack.
        self.n_embd = int(llama_cpp.llama_model_n_embd_inp(model.ptr))

    def _on_node(self, _tensor: object, ask: bool, _data: object) -> bool:
        if ask:
            self._nodes += 1
            return self._nodes % _STOP_EVERY == 0
        return not self._should_stop()

    def image(self, rgb: bytes, width: int, height: int, image_id: str) -> ImageRun:
        """One image as libmtmd will encode it (resized, tiled): not encoded yet."""
        if len(rgb) != width * height * 3:
            raise ValueError(f"{len(rgb)} bytes are not a {width}×{height} RGB image.")
        data = (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb)
        bitmap = mtmd.mtmd_bitmap_init(width, height, data)
        if not bitmap:
            raise ValueError("libmtmd refused the image.")
        chunks = mtmd.mtmd_input_chunks_init()
        parts: list[list[int] | ImageChunk] = []
        try:
            mtmd.mtmd_bitmap_set_id(bitmap, image_id.encode("ascii"))
            part = mtmd.mtmd_input_part()
            part.bitmap = bitmap
            ptrs = (ctypes.POINTER(mtmd.mtmd_input_part) * 1)(ctypes.pointer(part))
            # From parts, not from text with a marker: a message cannot spell an image.
            status = mtmd.mtmd_tokenize_from_parts(self.ptr, chunks, ptrs, 1, False)
            if status != 0:
                raise ValueError(f"libmtmd could not preprocess the image (status {status}).")
            for i in range(mtmd.mtmd_input_chunks_size(chunks)):
                parts.append(self._part(mtmd.mtmd_input_chunks_get(chunks, i)))
        except BaseException:
            ImageRun(parts).close()
            raise
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bitmap)
        run = ImageRun(parts)
        if not run.chunks:
            raise ValueError("libmtmd did not make an image chunk of the image.")
        return run

    def _part(self, chunk: int) -> list[int] | ImageChunk:
        kind = mtmd.mtmd_input_chunk_get_type(chunk)
        if kind == CHUNK_TEXT:
            n = ctypes.c_size_t(0)
            tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            return [int(tokens[i]) for i in range(n.value)]
        if kind != CHUNK_IMAGE:
            raise ValueError("libmtmd made a chunk that is not an image of the image.")
        copy = mtmd.mtmd_input_chunk_copy(chunk)
        return ImageChunk(self, copy, bool(mtmd.mtmd_decode_use_non_causal(self.ptr, copy)))

    def close(self) -> None:
        if self.ptr:
            mtmd.mtmd_free(self.ptr)
            self.ptr = None


class ImageRun:
    """What one image becomes in a prompt, in order: runs of text tokens and image chunks."""

    def __init__(self, parts: list[list[int] | ImageChunk]) -> None:
        self.parts = parts
        self.chunks = [p for p in parts if isinstance(p, ImageChunk)]
        self.n_tokens = sum(p.n_tokens if isinstance(p, ImageChunk) else len(p) for p in parts)

    def close(self) -> None:
        for chunk in self.chunks:
            chunk.close()


class ImageChunk:
    """Positions of an image read as embeddings. `non_causal`: its positions see each other
    both ways (the context's attention is switched for their decode)."""

    def __init__(self, projector: Projector, ptr: int, non_causal: bool = False) -> None:
        self.projector, self.ptr, self.non_causal = projector, ptr, non_causal
        self.n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(ptr))
        self.n_pos = int(mtmd.mtmd_input_chunk_get_n_pos(ptr))

    def positions(self, pos_0: int) -> np.ndarray:
        """Its embeddings' M-RoPE positions when the image starts at `pos_0`: (4, n_tokens)
        int32, section by section (time, row, column, unused), as llama.cpp's mtmd helper
        lays them out for an embedding batch."""
        image = mtmd.mtmd_input_chunk_get_tokens_image(self.ptr)
        out = np.empty((4, self.n_tokens), dtype=np.int32)
        for i in range(self.n_tokens):
            at = mtmd.mtmd_image_tokens_get_decoder_pos(image, pos_0, i)
            out[:, i] = (at.t, at.y, at.x, at.z)
        return out

    def encode(self, should_stop: Callable[[], bool]) -> np.ndarray | None:
        """The image's embeddings, (n_tokens, n_embd) float32 (a copy: libmtmd reuses its
        buffer); None when `should_stop` said stop while it ran."""
        projector = self.projector
        projector._should_stop = should_stop
        try:
            status = mtmd.mtmd_encode_chunk(projector.ptr, self.ptr)
        finally:
            projector._should_stop = lambda: False
        if should_stop():
            return None
        if status != 0:
            raise ValueError(f"libmtmd could not encode the image (status {status}).")
        out = mtmd.mtmd_get_output_embd(projector.ptr)
        return np.ctypeslib.as_array(out, shape=(self.n_tokens, projector.n_embd)).copy()

    def close(self) -> None:
        if self.ptr:
            mtmd.mtmd_input_chunk_free(self.ptr)
            self.ptr = 0


class EmbeddingBatch:
    """Rows of embeddings for one llama_decode (llama.cpp's batches hold tokens or embeddings,
    never both: an image's run is a step of its own)."""

    def __init__(self, capacity: int, n_embd: int) -> None:
        self.ptr = llama_cpp.llama_batch_init(capacity, n_embd, 1)
        self.capacity, self.n_embd = capacity, n_embd
        # llama_batch_free frees this one (a copy of the pointer: the field's own object
        # would follow the field when it is set).
        self._pos = ctypes.cast(self.ptr.pos, ctypes.POINTER(llama_cpp.llama_pos))
        self._sections = (llama_cpp.llama_pos * (4 * capacity))()  # M-RoPE's, section-major

    def decode(self, ctx: Context, rows: np.ndarray, pos: int | np.ndarray, seq: int,
               logits_last: bool) -> int:
        """Decode `rows` (n, n_embd) of `seq` at positions pos.., or at M-RoPE positions
        (4, n) (ImageChunk.positions): llama_decode's status."""
        n = len(rows)
        if n > self.capacity or rows.shape[1] != self.n_embd:
            raise ValueError(f"{rows.shape} rows do not fit a batch of {self.capacity}.")
        b = self.ptr
        ctypes.memmove(b.embd, np.ascontiguousarray(rows, dtype=np.float32).ctypes.data,
                       rows.size * 4)
        if isinstance(pos, np.ndarray):
            if pos.shape != (4, n):
                raise ValueError(f"{pos.shape} positions are not 4 sections of {n}.")
            # llama.cpp reads an embedding batch's positions as pos[section * n + i].
            flat = np.ascontiguousarray(pos, dtype=np.int32)
            ctypes.memmove(self._sections, flat.ctypes.data, flat.nbytes)
            b.pos = self._sections
        else:
            b.pos = self._pos
            for i in range(n):
                b.pos[i] = pos + i
        for i in range(n):
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = logits_last and i == n - 1
        b.n_tokens = n
        try:
            return int(llama_cpp.llama_decode(ctx.ptr, b))
        finally:
            b.pos = self._pos

    def close(self) -> None:
        if self.ptr is not None:
            self.ptr.pos = self._pos
            llama_cpp.llama_batch_free(self.ptr)
            self.ptr = None
