"""API keys of remote engines in the platform's keyring (the `keyring` package).

Keys are never written in plain text unless the user agreed to it (providers.py keeps that
choice). Where no keyring backend exists (a headless Linux without Secret Service, say) callers
are told so with NoKeyring, and ask the user: plain text, or only for this session.
Any failure of a backend (locked, D-Bus gone) becomes a KeyStoreError with a sentence.
"""

from __future__ import annotations

import threading

import keyring
import keyring.errors
from keyring.backends import chainer, fail, null

SERVICE = "Inglenook remote engines"

_session: dict[str, str] = {}  # keys the user chose not to store anywhere
_session_lock = threading.Lock()


class KeyStoreError(Exception):
    """The keyring could not store or read a key; the message is for the user."""


class NoKeyring(KeyStoreError):
    """No keyring backend is available on this system."""


def backend() -> tuple[bool, str]:
    """Whether a usable keyring backend exists, and its name (for the user)."""
    try:
        ring = keyring.get_keyring()
    except Exception as exc:  # a backend that fails to initialise: treat as none
        return False, f"none ({exc})"
    name = getattr(ring, "name", type(ring).__name__)
    unusable = isinstance(ring, fail.Keyring | null.Keyring) or (
        isinstance(ring, chainer.ChainerBackend) and not ring.backends)
    return not unusable, str(name)


def no_keyring_message() -> str:
    _, name = backend()
    return (f"No system keyring is available on this computer (keyring backend: {name}), so "
            "the API key cannot be stored safely. It can be kept in plain text in Inglenook's "
            "providers.json (readable by your user account only), or kept for this session "
            "only and asked again next time.")


def store(account: str, key: str) -> None:
    usable, _ = backend()
    if not usable:
        raise NoKeyring(no_keyring_message())
    try:
        keyring.set_password(SERVICE, account, key)
    except Exception as exc:  # backends raise their own errors (D-Bus, locked, denied)
        raise KeyStoreError(f"The system keyring did not store the key ({_why(exc)}).") from exc


def read(account: str) -> str:
    """The stored key, or "" when there is none."""
    try:
        return keyring.get_password(SERVICE, account) or ""
    except Exception as exc:
        raise KeyStoreError(f"The system keyring did not give the key ({_why(exc)}).") from exc


def delete(account: str) -> None:
    forget_for_session(account)
    try:
        keyring.delete_password(SERVICE, account)
    except keyring.errors.PasswordDeleteError:
        pass  # there was none
    except Exception as exc:
        raise KeyStoreError(f"The system keyring did not delete the key ({_why(exc)}).") \
            from exc


def keep_for_session(account: str, key: str) -> None:
    with _session_lock:
        _session[account] = key


def session_key(account: str) -> str:
    with _session_lock:
        return _session.get(account, "")


def forget_for_session(account: str) -> None:
    with _session_lock:
        _session.pop(account, None)


def _why(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
