"""libllama itself: started once, its log, the devices it sees, quantizing."""

from __future__ import annotations

import contextlib
import ctypes
import re
import sys
from collections.abc import Callable, Iterator

import llama_cpp

KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0,
            "q4_0": llama_cpp.GGML_TYPE_Q4_0}
# Tokens that plain text must never produce: llama.cpp reads them only with special tokens on.
ATTR_CONTROL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
ATTR_USER_DEFINED = llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
ATTR_LSTRIP, ATTR_RSTRIP = llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP, llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP
DECODE_ABORTED = 2  # llama_decode: the abort callback stopped it
LOG_ERROR = 4  # ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
_GPU_DEVICE_TYPES = (1, 2)  # ggml_backend_dev_type: CPU=0, GPU=1, IGPU=2, ACCEL=3

llama_cpp.llama_backend_init()


# ---- the log ----------------------------------------------------------------------------------
_log_handler: Callable[[int, str], None] | None = None


# llama.cpp says what it allocates only in its log ("CPU_REPACK model buffer size = 12.66 MiB",
# "CPU KV buffer size", "RS", "compute", "output"): the sizes since take_buffers() was last
# called, by what they hold (weights, kv: KV cells and recurrent state, compute).
_BUFFER = re.compile(r"\b(model|KV|RS|compute|output) buffer size =\s*([0-9.]+) MiB")
_KINDS = {"model": "weights", "KV": "kv", "RS": "kv", "compute": "compute", "output": "compute"}
_buffers: dict[str, int] = {}


def take_buffers() -> dict[str, int]:
    """Bytes llama.cpp allocated since the last call, by kind ('weights', 'kv', 'compute')."""
    taken = dict(_buffers)
    _buffers.clear()
    return taken


@llama_cpp.llama_log_callback
def _on_log(level: int, text: bytes, _data: object) -> None:
    line = text.decode("utf-8", errors="replace")
    if "buffer size =" in line and (found := _BUFFER.search(line)):
        kind = _KINDS[found.group(1)]
        _buffers[kind] = _buffers.get(kind, 0) + int(float(found.group(2)) * 2**20)
    if _log_handler is not None:
        _log_handler(level, line)
    elif level == LOG_ERROR:  # the engine log (stderr) keeps llama.cpp's errors only
        sys.stderr.write(line)


llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))


@contextlib.contextmanager
def log_to(handler: Callable[[int, str], None]) -> Iterator[None]:
    """Route llama.cpp's log lines (level, text) to `handler` for a while."""
    global _log_handler
    _log_handler = handler
    try:
        yield
    finally:
        _log_handler = None


# ---- the machine ------------------------------------------------------------------------------
def gpu_offload_supported() -> bool:
    return bool(llama_cpp.llama_supports_gpu_offload())


def gpu_memory() -> tuple[int, int]:
    """Free and total memory of the GPUs ggml can offload to: (0, 0) on a CPU-only build.
    Read through ggml's device registry, which libllama links; any failure means unknown."""
    try:
        lib = llama_cpp.llama_cpp._lib
        lib.ggml_backend_dev_get.restype = ctypes.c_void_p
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_memory.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        free_total = [0, 0]
        for i in range(lib.ggml_backend_dev_count()):
            device = lib.ggml_backend_dev_get(i)
            if lib.ggml_backend_dev_type(device) not in _GPU_DEVICE_TYPES:
                continue
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
            free_total[0] += free.value
            free_total[1] += total.value
        return free_total[0], free_total[1]
    except (AttributeError, OSError, ValueError):
        return 0, 0


def max_sequences() -> int:
    return int(llama_cpp.llama_max_parallel_sequences())



# ---- quantizing -------------------------------------------------------------------------------
def quantize(source: str, output: str, ftype: int, threads: int, allow_requantize: bool) -> int:
    """llama_model_quantize's status (0: written)."""
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    params.allow_requantize = allow_requantize
    return int(llama_cpp.llama_model_quantize(source.encode(), output.encode(),
                                              ctypes.byref(params)))


def build_id() -> str:
    """What identifies this llama.cpp build for saved states: the binding's version, the
    library file's size and time, and the features it was built with."""
    import os

    library = getattr(llama_cpp.llama_cpp, "_lib", None)
    path = getattr(library, "_name", "") or ""
    try:
        info = os.stat(path)
        where = f"{info.st_size}:{info.st_mtime_ns}"
    except OSError:
        where = "?"
    system = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace")
    return f"llama-cpp-python {llama_cpp.__version__}|{where}|{system}"
