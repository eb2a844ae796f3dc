"""Decoding requests' images off the pool that every request's parse needs.

A parse reads only each image's header (server/images.py); decoding the pixels is the costly
part (a 40-megapixel PNG: ~160 MB and about a second of CPU), so it runs here, once the request
is let through: on DECODE_THREADS threads for the whole process, and one request of a client at
a time (a client is its token's principal, or its address on a server without tokens), in
turn with the others. A client that sends many image-heavy requests at once waits for its
own, holding no thread; a plain request's parse never waits behind them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor

from inglenook.server.images import RequestImages

DECODE_THREADS = 2  # images decoded at once, every client together


@functools.cache
def _decode_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="image-decode")


class ImageDecoding:
    """Each client's turn to decode (made on the server's event loop, used only there)."""

    def __init__(self) -> None:
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # client -> its lock, its users

    async def finish(self, client: str, images: RequestImages) -> None:
        """Decode, check and write the request's images (ApiError for one that fails)."""
        if not images.pending:
            return
        lock = self._enter(client)
        try:
            async with lock:
                context = contextvars.copy_context()
                await asyncio.get_running_loop().run_in_executor(
                    _decode_pool(), context.run, images.finish)
        finally:
            self._leave(client)

    def waiting(self) -> int:
        """Clients with a request decoding or waiting to."""
        return len(self._turns)

    def _enter(self, client: str) -> asyncio.Lock:
        lock, users = self._turns.get(client) or (asyncio.Lock(), 0)
        self._turns[client] = (lock, users + 1)
        return lock

    def _leave(self, client: str) -> None:
        lock, users = self._turns[client]
        if users <= 1:
            del self._turns[client]  # a client that is done leaves nothing behind
        else:
            self._turns[client] = (lock, users - 1)
