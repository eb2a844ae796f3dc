"""The conversation store: one SQLite database of conversations, message trees, presets.

Qt-free. See store.Store for the API and schema.py for the design of the tables.
"""

from inglenook.store.errors import StoreError
from inglenook.store.export import ARCHIVE_FORMAT, CONVERSATION_FORMAT, FORMAT_VERSION
from inglenook.store.presets import BUILTIN_PRESETS
from inglenook.store.records import (
    STATUSES,
    ConversationSummary,
    Preset,
    SearchHit,
    StoredMessage,
)
from inglenook.store.schema import LATEST_VERSION
from inglenook.store.store import Store

__all__ = [
    "ARCHIVE_FORMAT",
    "BUILTIN_PRESETS",
    "CONVERSATION_FORMAT",
    "FORMAT_VERSION",
    "LATEST_VERSION",
    "STATUSES",
    "ConversationSummary",
    "Preset",
    "SearchHit",
    "Store",
    "StoreError",
    "StoredMessage",
]
