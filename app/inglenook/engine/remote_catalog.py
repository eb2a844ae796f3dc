"""The models of every remote engine the user added, for the model picker and the connection
test. Slow or unreachable servers are asked in parallel, each with its own timeout, and say why
they could not be listed instead of holding up the others."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx2

from inglenook.engine.providers import Provider, ProviderStore
from inglenook.engine.remote_api import (
    LIST_TIMEOUT,
    Endpoint,
    ModelListing,
    RemoteError,
    list_models,
)
from inglenook.engine.remote_dialects import dialect
from inglenook.engine.remote_keys import KeyStoreError

PICKER_TIMEOUT = httpx2.Timeout(5.0, connect=3.0)  # the picker must not wait long on a server
MAX_PARALLEL = 8


@dataclass(frozen=True)
class ProviderListing:
    provider: Provider
    listing: ModelListing | None = None
    error: str = ""  # why there is no listing

    @property
    def refs(self) -> list[tuple[str, str]]:
        """(model reference, model id) of each model it offers."""
        models = self.listing.models if self.listing else ()
        return [(self.provider.ref(m.id), m.id) for m in models]

    def sees(self, model: str) -> bool:
        """Whether the model reads images as far as the picker can tell without asking the
        server again: its listing says so, or the user marked it (remote_vision.py)."""
        listed = next((m.vision for m in self.listing.models if m.id == model), None) \
            if self.listing else None
        return listed if listed is not None else model in self.provider.vision_models


def list_provider(store: ProviderStore, provider: Provider,
                  timeout: httpx2.Timeout = LIST_TIMEOUT) -> ProviderListing:
    try:
        endpoint = store.endpoint(provider)
        return ProviderListing(provider, list_models(endpoint, timeout))
    except (RemoteError, KeyStoreError) as exc:
        return ProviderListing(provider, error=str(exc))


def list_all(store: ProviderStore,
             timeout: httpx2.Timeout = PICKER_TIMEOUT) -> list[ProviderListing]:
    """Every provider's models (or why not), in the order the providers were added."""
    providers = store.providers()
    if not providers:
        return []
    with ThreadPoolExecutor(min(MAX_PARALLEL, len(providers)),
                            thread_name_prefix="remote-list") as pool:
        return list(pool.map(lambda p: list_provider(store, p, timeout), providers))


def describe(listing: ModelListing, endpoint: Endpoint) -> str:
    """A connection test's result in one line: latency, server, models."""
    names = [m.id for m in listing.models]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    models = f"{len(names)} model{'s' if len(names) != 1 else ''}: {shown}" if names \
        else "no models listed"
    warning = (" The API key is sent unencrypted (http:// to another machine): prefer https."
               if endpoint.key_in_clear else "")
    return (f"Connected in {listing.latency_s * 1000:.0f} ms · "
            f"{dialect(listing.server).label} · {models}.{warning}")
