"""Keyring backends for tests: one that keeps passwords in a dict, and none at all (keyring's
own fail backend, as on a headless Linux without Secret Service). Import the fixtures into a
test module under their names (`memory_keyring = keyrings.memory_keyring`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import PasswordDeleteError

from inglenook.engine import remote_keys


class MemoryKeyring(KeyringBackend):
    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def delete_password(self, service: str, username: str) -> None:
        if self.passwords.pop((service, username), None) is None:
            raise PasswordDeleteError("no such password")


class BrokenKeyring(MemoryKeyring):
    """A keyring that exists but refuses (locked, D-Bus gone)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError("the collection is locked")


@contextmanager
def using(ring: KeyringBackend) -> Iterator[None]:
    """This keyring for the block; session-only keys are forgotten after it."""
    previous = keyring.get_keyring()
    keyring.set_keyring(ring)
    try:
        yield
    finally:
        keyring.set_keyring(previous)
        with remote_keys._session_lock:
            remote_keys._session.clear()


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    ring = MemoryKeyring()
    with using(ring):
        yield ring


@pytest.fixture
def no_keyring() -> Iterator[None]:
    with using(fail.Keyring()):
        yield


@pytest.fixture
def broken_keyring() -> Iterator[BrokenKeyring]:
    ring = BrokenKeyring()
    with using(ring):
        yield ring
