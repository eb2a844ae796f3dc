"""HTTP basics for OpenAI-compatible servers: the endpoint, its model list, readable errors.

Qt-free and retry-free: a request that fails says why, once; the user (or the caller) decides
whether to try again. Every request has a timeout. Proxies come from the environment.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from inglenook import __version__
from inglenook.core.jsonload import JsonLoadError, loads
from inglenook.engine.client import EngineError
from inglenook.engine.endpoint import (
    Endpoint as Endpoint,  # re-exported: its callers import it here
)
from inglenook.engine.endpoint import is_loopback as is_loopback
from inglenook.engine.remote_dialects import detect_server
from inglenook.engine.remote_vision import listed_vision
from inglenook.models.transfer import SMALL_ANSWER_HEADERS, BodyRefused, read_bounded

# Listing models and testing a connection: a server that needs longer is not answering.
LIST_TIMEOUT = httpx2.Timeout(15.0, connect=5.0)
# A reply: the first token may take long (a big prompt on a busy server); the Stop button
# does not wait for the timeout (remote.py shuts the socket down).
REPLY_TIMEOUT = httpx2.Timeout(30.0, connect=10.0, read=600.0)
MAX_ERROR_BODY = 4000
MAX_LISTING = 16 * 1024 * 1024  # a model list (LM Studio's and OpenRouter's are long)


class RemoteError(EngineError):
    """A remote server could not be used; the message is for the user."""


def normalize_base_url(raw: str) -> str:
    """The base URL as requests need it: "http://host:8000" gets "/v1" (where every known
    server keeps the API); a URL with a path of its own ("…/openai/v1") is kept as given.
    Raises ValueError with a sentence for the user."""
    text = raw.strip()
    if not text:
        raise ValueError("Enter the server's address, e.g. http://192.168.1.20:8000/v1.")
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"The address must start with http:// or https://, not {parts.scheme}://.")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise ValueError(f"{raw.strip()!r} has a port that is not a number from 1 to 65535.") \
            from None
    if not parts.hostname:
        raise ValueError(f"{raw.strip()!r} has no host name.")
    if parts.query or parts.fragment:
        raise ValueError("The address must not contain ? or #.")
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):  # pasted a full endpoint: keep its base
        path = path.removesuffix("/chat/completions")
    return urlunsplit((parts.scheme, parts.netloc, path or "/v1", "", ""))


def http_client(endpoint: Endpoint, timeout: httpx2.Timeout) -> httpx2.Client:
    """A client for one endpoint (its key, if any, as a bearer token). Close it."""
    headers = {"user-agent": f"inglenook/{__version__}"}
    if endpoint.api_key:
        headers["authorization"] = f"Bearer {endpoint.api_key}"
    # No redirects: a redirect to another origin would carry the key there.
    return httpx2.Client(headers=headers, timeout=timeout, trust_env=True,
                         follow_redirects=False)


# -- errors ---------------------------------------------------------------------------------
def network_error(exc: BaseException, endpoint: Endpoint, during: str = "") -> RemoteError:
    """A readable RemoteError for a failed connection (during: "during the reply", say)."""
    host = endpoint.who
    where = f" {during}" if during else ""
    if isinstance(exc, httpx2.ConnectTimeout):
        return RemoteError(f"{host} did not accept the connection in time.")
    if isinstance(exc, httpx2.TimeoutException):
        return RemoteError(f"{host} stopped answering{where} (timed out).")
    if isinstance(exc, httpx2.ConnectError):
        return RemoteError(f"Cannot connect to {host} ({reason(exc)}). Is the server running, "
                           "and is the address right?")
    if isinstance(exc, httpx2.UnsupportedProtocol | httpx2.InvalidURL):
        return RemoteError(f"{endpoint.base_url} is not an address Inglenook can use "
                           f"({reason(exc)}).")
    return RemoteError(f"The connection to {host} broke{where} ({reason(exc)}).")


def reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def status_error(response: httpx2.Response, endpoint: Endpoint, what: str) -> RemoteError:
    """A readable RemoteError for an HTTP error answer, with the server's own message."""
    code = response.status_code
    detail = server_message(response)
    said = f" It said: {detail}" if detail else ""
    if code in (401, 403):
        hint = ("Check the API key." if endpoint.api_key
                else "The server wants an API key: add one to this endpoint.")
        return RemoteError(f"{endpoint.who} refused {what} (HTTP {code}). {hint}{said}")
    if code == 404:
        return RemoteError(f"{endpoint.who} has no {what} at {response.request.url.path} "
                           f"(HTTP 404): is the address the API's base, usually ending in "
                           f"/v1?{said}")
    if 300 <= code < 400:
        target = response.headers.get("location", "?")
        return RemoteError(f"{endpoint.who} redirects {what} to {target} (HTTP {code}); "
                           "use that address instead.")
    if code == 429:
        return RemoteError(f"{endpoint.who} is limiting requests (HTTP 429); try again "
                           f"shortly.{said}")
    return RemoteError(f"{endpoint.who} answered HTTP {code} to {what}.{said}")


def server_message(response: httpx2.Response) -> str:
    """The message in an error body: OpenAI's {"error": {"message"}}, FastAPI's {"detail"},
    or the start of the text."""
    try:
        raw = read_bounded(response, MAX_ERROR_BODY, seconds=5.0, truncate=True)
    except (httpx2.HTTPError, BodyRefused):
        return ""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = loads(text)
    except JsonLoadError:
        return text[:300]
    return error_text(data) or text[:300]


def error_text(data: Any) -> str:
    """The message of an error object as servers send it (also inside a stream)."""
    if not isinstance(data, dict):
        return ""
    error = data.get("error", data.get("detail"))
    if isinstance(error, dict):
        error = error.get("message") or error.get("msg") or json.dumps(error)[:300]
    if isinstance(error, list) and error:  # FastAPI validation errors
        first = error[0]
        error = first.get("msg", str(first)) if isinstance(first, dict) else str(first)
    return str(error)[:300] if error else ""


# -- the model list -------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteModel:
    id: str
    owned_by: str = ""
    n_ctx: int = 0  # when the server says (vLLM's max_model_len, llama-server's meta)
    vision: bool | None = None  # whether it reads images, when the listing says (remote_vision)


@dataclass(frozen=True)
class ModelListing:
    models: tuple[RemoteModel, ...]
    latency_s: float  # the request's round trip, as the user's connection test shows it
    server: str  # the kind of server (see dialects.py), from the listing


def list_models(endpoint: Endpoint, timeout: httpx2.Timeout = LIST_TIMEOUT,
                client: httpx2.Client | None = None) -> ModelListing:
    """GET /models. Raises RemoteError with a sentence for the user."""
    own = client is None
    c = client or http_client(endpoint, timeout)
    try:
        started = time.monotonic()
        try:
            with c.stream("GET", endpoint.url("models"), timeout=timeout,
                          headers=SMALL_ANSWER_HEADERS) as response:
                latency = time.monotonic() - started
                if response.status_code >= 300:
                    raise status_error(response, endpoint, "the model list")
                raw = read_bounded(response, MAX_LISTING, seconds=timeout.read)
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise network_error(exc, endpoint) from None
        except BodyRefused as exc:
            raise RemoteError(f"{endpoint.who}'s model list {exc}; it was not read "
                              "further.") from None
        try:
            data = loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, JsonLoadError):
            raise RemoteError(f"{endpoint.who}'s model list is not JSON: is "
                              f"{endpoint.base_url} an OpenAI-compatible API?") from None
    finally:
        if own:
            c.close()
    models = parse_models(data)
    if models is None:
        raise RemoteError(f"{endpoint.who}'s answer to /models is not a model list: is "
                          f"{endpoint.base_url} an OpenAI-compatible API?")
    return ModelListing(models, latency, detect_server((m.owned_by for m in models),
                                                       response.headers.get("server", "")))


def parse_models(data: Any) -> tuple[RemoteModel, ...] | None:
    """The models of a /models answer; None when it is not one."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    models = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        owned = item.get("owned_by")
        models.append(RemoteModel(item["id"], owned if isinstance(owned, str) else "",
                                  _context_length(item), listed_vision(item)))
    return tuple(models)


def _context_length(item: dict[str, Any]) -> int:
    meta = item.get("meta")
    for value in (item.get("max_model_len"), item.get("context_length"),
                  meta.get("n_ctx_train") if isinstance(meta, dict) else None):
        if type(value) is int and value > 0:
            return value
    return 0
