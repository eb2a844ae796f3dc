"""The one exception the UI has to handle from the store."""

from __future__ import annotations


class StoreError(Exception):
    """A problem the user has to know about, with a message fit to show them.

    `reason` is one of "read-only", "full", "busy", "io", "corrupt", "newer", "builtin",
    "needs-upgrade" (read-only and written by an older version), "other".
    """

    def __init__(self, message: str, reason: str = "other") -> None:
        super().__init__(message)
        self.reason = reason
