"""A fake OpenAI-compatible server on loopback that says whether its models read images the way
one kind of server does, and keeps every chat request it received (to check the images sent).

Kinds: "generic" (says nothing, as vLLM and llama-server), "lm-studio" (GET /api/v0/models with
"type": "vlm" | "llm"), "ollama" (POST /api/show with "capabilities"), "ollama-deep" (the same,
whose /api/show answers 100,000 nested brackets), "openrouter" (its /models items carry
"architecture": {"input_modalities": […]})."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "I see a picture."
_OWNERS = {"lm-studio": "organization_owner", "ollama": "library", "ollama-deep": "library"}


@dataclass
class VisionPeer:
    url: str  # the API's base, ".../v1"
    kind: str
    models: dict[str, bool]  # model id -> reads images
    chats: list[dict[str, Any]] = field(default_factory=list)  # chat bodies received
    asked: list[str] = field(default_factory=list)  # "METHOD path" of every request

    def image_urls(self) -> list[str]:
        """The image_url URLs of the last chat request's messages."""
        return [part["image_url"]["url"] for message in self.chats[-1]["messages"]
                if isinstance(message["content"], list) for part in message["content"]
                if part.get("type") == "image_url"]


@contextmanager
def vision_peer(kind: str, models: dict[str, bool]) -> Iterator[VisionPeer]:
    peer = VisionPeer("", kind, models)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _json(self, data: Any, status: int = 200) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            peer.asked.append(f"GET {self.path}")
            if self.path == "/v1/models":
                items = []
                for model, sees in models.items():
                    item: dict[str, Any] = {"id": model, "object": "model",
                                            "owned_by": _OWNERS.get(kind, "someone")}
                    if kind == "openrouter":
                        item["architecture"] = {
                            "input_modalities": ["text", "image"] if sees else ["text"]}
                    items.append(item)
                self._json({"object": "list", "data": items})
            elif self.path == "/api/v0/models" and kind == "lm-studio":
                self._json({"object": "list", "data": [
                    {"id": m, "type": "vlm" if sees else "llm"} for m, sees in models.items()]})
            else:
                self._json({"error": {"message": "not here"}}, 404)

        def do_POST(self) -> None:
            peer.asked.append(f"POST {self.path}")
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if self.path == "/api/show" and kind == "ollama-deep":  # < 4 MiB, past the stack
                nested = b"[" * 100_000 + b"]" * 100_000
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(nested)))
                self.end_headers()
                self.wfile.write(nested)
                return
            if self.path == "/api/show" and kind == "ollama":
                sees = models.get(body.get("model"), False)
                self._json({"capabilities": ["completion", "vision"] if sees
                            else ["completion"]})
                return
            if self.path != "/v1/chat/completions":
                self._json({"error": {"message": "not here"}}, 404)
                return
            peer.chats.append(body)
            events = [{"choices": [{"index": 0, "delta": {"content": REPLY},
                                    "finish_reason": None}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                      {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 4,
                                                "total_tokens": 16}}]
            raw = ("".join(f"data: {json.dumps(e)}\n\n" for e in events)
                   + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="vision-peer")
    thread.start()
    peer.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield peer
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
