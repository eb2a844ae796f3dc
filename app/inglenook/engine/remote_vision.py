"""Whether a remote model reads images: what its server says, else what the user marked.

The OpenAI API's model list says nothing of it, so each server is asked in its own way where it
has one, for the one model chosen (a request when the model is chosen, not one per listed model):
- a listing item with OpenRouter's `architecture.input_modalities` (OpenRouter, LiteLLM and
  others copy it): "image" in it or not; a `capabilities` list (Ollama's words) with "vision";
- LM Studio: GET /api/v0/models (beside /v1), whose items have "type": "vlm" or "llm";
- Ollama: POST /api/show {"model": …}, whose "capabilities" list has "vision" or not.
vLLM, llama.cpp's llama-server, Jan and most others say nothing a client can read. There the
user marks the models that read images in Remote engines… (Provider.vision_models), as Jan and
Open WebUI let their users tick "Vision" per model: a model not marked is treated as text-only,
so the composer says at once that it cannot see, and a chat's earlier images are named in the
text instead of being sent to a server that would refuse the whole conversation. Marked wrongly,
the server's own refusal is shown as it said it.

Answers are outside data: read with a timeout and a size cap, and only the one field is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2

from inglenook.core.jsonload import loads
from inglenook.models.transfer import SMALL_ANSWER_HEADERS, BodyRefused, read_bounded

if TYPE_CHECKING:
    from inglenook.engine.endpoint import Endpoint

ASK_TIMEOUT = httpx2.Timeout(5.0, connect=3.0)  # at the choice of a model: not long
MAX_ANSWER = 4 * 1024 * 1024  # LM Studio lists every downloaded model with its details
MAX_LISTED = 64  # entries of a modality list looked at


def listed_vision(item: dict[str, Any]) -> bool | None:
    """What a /models item says itself (None: nothing)."""
    architecture = item.get("architecture")
    modalities = architecture.get("input_modalities") if isinstance(architecture, dict) else None
    if isinstance(modalities, list):
        return "image" in [m for m in modalities[:MAX_LISTED] if isinstance(m, str)]
    capabilities = item.get("capabilities")
    if isinstance(capabilities, list) and "vision" in capabilities[:MAX_LISTED]:
        return True
    return None


def server_vision(client: httpx2.Client, endpoint: Endpoint, server: str,
                  model: str) -> bool | None:
    """Ask an LM Studio or Ollama server whether `model` reads images (None: it cannot say,
    it did not answer, or it is another kind of server)."""
    root = endpoint.base_url.removesuffix("/v1")
    if root == endpoint.base_url or not model:  # an API under a path of its own
        return None
    try:
        if server == "lm-studio":
            data = _answer(client, "GET", f"{root}/api/v0/models", None)
            items = data.get("data") if isinstance(data, dict) else None
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("id") == model:
                    kind = item.get("type")
                    return True if kind == "vlm" else False if kind == "llm" else None
            return None
        if server == "ollama":
            data = _answer(client, "POST", f"{root}/api/show", {"model": model})
            capabilities = data.get("capabilities") if isinstance(data, dict) else None
            if isinstance(capabilities, list):
                return "vision" in capabilities[:MAX_LISTED]
    except (httpx2.HTTPError, httpx2.InvalidURL, OSError, ValueError):
        return None
    return None


def _answer(client: httpx2.Client, method: str, url: str, body: Any) -> Any:
    """A JSON answer of at most MAX_ANSWER bytes; ValueError for anything else."""
    with client.stream(method, url, json=body, timeout=ASK_TIMEOUT,
                       headers=SMALL_ANSWER_HEADERS) as response:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        try:
            raw = read_bounded(response, MAX_ANSWER, seconds=ASK_TIMEOUT.read)
        except BodyRefused as exc:
            raise ValueError(str(exc)) from None
    return loads(raw.decode("utf-8"))  # UnicodeDecodeError and JsonLoadError are ValueErrors
