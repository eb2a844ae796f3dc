"""Opening the database: pragmas, recovery from a corrupt file, migrations, error messages.

Durability: WAL with synchronous=NORMAL. A committed transaction survives the app being killed
at any moment (the WAL is in the OS's hands once COMMIT returns); only a power cut can lose the
last few commits, never corrupt the file. tests/integration/test_store_crash.py checks the first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from inglenook.paths import private
from inglenook.store import schema
from inglenook.store.errors import StoreError

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
# SQLite's primary result codes (the low byte of an extended code).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_corruption(exc: sqlite3.Error) -> bool:
    code = _code(exc)
    if code is not None:
        return code in (_CORRUPT, _NOTADB)
    message = str(exc).lower()
    return "not a database" in message or "malformed" in message


def translate(exc: sqlite3.Error, path: Path) -> StoreError:
    """The user-facing StoreError for a failed database call."""
    code, message = _code(exc), str(exc).lower()
    if code == _FULL or "disk is full" in message:
        return StoreError(f"The disk is full: the last change could not be saved to {path}. "
                          "Everything saved before is safe; free some space and try again.",
                          "full")
    if code == _READONLY or "readonly" in message or "read-only" in message:
        return StoreError(f"The conversation database {path} is read-only: changes cannot be "
                          "saved. Check the permissions of the file and its folder.",
                          "read-only")
    if code in (_BUSY, _LOCKED) or "locked" in message:
        return StoreError(f"The conversation database {path} is in use by another program "
                          "(is Inglenook open twice?). Try again in a moment.", "busy")
    if code in (_IOERR, _CANTOPEN):
        return StoreError(f"Could not read or write the conversation database {path}: {exc}.",
                          "io")
    if is_corruption(exc):
        return StoreError(f"The conversation database {path} is damaged ({exc}). Restart "
                          "Inglenook to move it aside and start a fresh one.", "corrupt")
    return StoreError(f"Database error in {path}: {exc}.")


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error (SQLite may already have rolled back
    by itself, e.g. on SQLITE_FULL)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            # Any driver's error: knowledge/vectors.py may open the file with another sqlite3.
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
        raise


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The rowid an INSERT just made (sqlite3 types it as optional: it is set after one)."""
    rowid = cursor.lastrowid
    assert rowid is not None
    return rowid


def _lenient_text(raw: bytes) -> str:
    # A row holding invalid UTF-8 must not make a whole query fail.
    return raw.decode("utf-8", "replace")


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection that works even in a read-only folder. `mode=ro` reads the -wal
    too, but needs to create the -shm file when it is missing; when that fails, `immutable=1`
    reads the main file alone (SQLite then assumes nothing else changes it, which holds when
    nothing can write to the folder)."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.Error as exc:
        conn.close()
        if _code(exc) != _CANTOPEN or not os.access(path, os.R_OK):
            raise
    if path.with_name(path.name + "-wal").exists():
        log.warning("Opening %s without its -wal file: the latest changes may not show", path)
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)


def make_private(path: Path) -> None:
    """The database holds the user's chats: the file is made 0600 before SQLite opens it, and
    SQLite gives its -wal and -shm files the same mode. Files left 0644 by an older version are
    tightened; a file that cannot be made (a read-only folder) is left to SQLite to refuse."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for suffix in ("", "-wal", "-shm", "-journal"):
        private(path.with_name(path.name + suffix), 0o600)


def connect(path: Path, read_only: bool = False, driver: Any = sqlite3) -> sqlite3.Connection:
    """A connection with our pragmas. Autocommit mode: transactions are explicit. `driver`:
    another DB-API module of SQLite (knowledge/vectors.py: one that loads extensions)."""
    if read_only:
        conn = _open_read_only(path)
    else:
        make_private(path)
        conn = driver.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.text_factory = _lenient_text
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        if not read_only:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA journal_size_limit = 16777216")  # keep the WAL from staying huge
    except BaseException:
        conn.close()
        raise
    return conn


def _check(conn: sqlite3.Connection) -> None:
    """Raise sqlite3.DatabaseError if the file is not a sound SQLite database."""
    result = conn.execute("PRAGMA quick_check").fetchall()
    if result != [("ok",)]:
        problems = "; ".join(str(r[0]) for r in result[:3])
        raise sqlite3.DatabaseError(f"database disk image is malformed: {problems}")


def _unique(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


def move_aside(path: Path) -> Path:
    """Rename a damaged database (and its -wal/-shm companions) to <name>.corrupt-<timestamp>."""
    target = _unique(path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"))
    os.replace(path, target)
    for suffix in ("-wal", "-shm", "-journal"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, target.with_name(target.name + suffix))
    return target


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0


def backup(conn: sqlite3.Connection, target: Path, driver: Any = sqlite3) -> None:
    make_private(target)
    dest = driver.connect(str(target))
    try:
        conn.backup(dest)
    finally:
        dest.close()


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the schema to the latest version, one migration per transaction, after a backup
    of the file as it was (<name>.bak-v<old>; skipped for a file without tables)."""
    latest = len(schema.MIGRATIONS)  # looked up now: tests add failing steps
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > latest:
        raise StoreError(f"The conversation database {path} was written by a newer version of "
                         f"Inglenook (schema v{version}); update Inglenook to open it.", "newer")
    if version == latest:
        return
    if _has_tables(conn):
        target = path.with_name(f"{path.name}.bak-v{version}")
        log.info("Backing up %s to %s before migrating to v%d", path, target, latest)
        backup(conn, target)
    for target_version in range(version + 1, latest + 1):
        with transaction(conn):
            schema.MIGRATIONS[target_version - 1](conn)
            conn.execute(f"PRAGMA user_version = {target_version}")


def _writable(conn: sqlite3.Connection) -> bool:
    """Whether writes can succeed (the file, its folder or the connection may be read-only):
    a header write that is always rolled back."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"PRAGMA user_version = {int(version)}")
        return True
    except sqlite3.OperationalError as exc:
        if _code(exc) == _READONLY or "readonly" in str(exc):
            return False
        raise
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _damage(path: Path) -> sqlite3.DatabaseError | None:
    """Check an existing file through a read-only connection: unlike a read-write one, closing
    it never deletes or checkpoints the -wal file, so a damaged database is moved aside with
    everything that belonged to it."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        conn = _open_read_only(path)
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            return exc
        raise translate(exc, path) from exc
    try:
        _check(conn)
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            return exc
        raise translate(exc, path) from exc
    finally:
        conn.close()
    return None


def _open_writable(path: Path) -> sqlite3.Connection | None:
    """A read-write connection, or None when the file exists but only reading it can work
    (a read-only folder: SQLite cannot create the -wal and -shm files beside it)."""
    conn: sqlite3.Connection | None = None
    try:
        conn = connect(path)
        if _writable(conn):
            return conn
    except sqlite3.OperationalError as exc:
        if _code(exc) not in (_CANTOPEN, _READONLY, _IOERR) or not path.is_file() or (
                path.stat().st_size == 0):
            if conn is not None:
                conn.close()
            raise
        log.warning("Cannot write %s (%s); opening it read-only", path, exc)
    if conn is not None:
        conn.close()
    return None


def open_database(path: Path, read_only: bool = False
                  ) -> tuple[sqlite3.Connection, Path | None, bool]:
    """(connection, where a damaged file was moved to or None, whether it is read-only).

    A database that cannot be written (its file or its folder is read-only) is opened
    read-only rather than refused, so the user still sees their history."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"Could not create the folder {path.parent} for the conversation "
                         f"database: {exc.strerror or exc}.", "io") from exc
    recovered_from: Path | None = None
    damage = _damage(path)
    if damage is not None:
        if read_only:
            raise translate(damage, path) from damage
        log.error("The database %s is damaged (%s); moving it aside", path, damage)
        try:
            recovered_from = move_aside(path)
        except OSError as exc:
            raise StoreError(f"The conversation database {path} is damaged and could not be "
                             f"moved aside: {exc}.", "corrupt") from exc
    conn: sqlite3.Connection | None = None
    try:
        conn = None if read_only else _open_writable(path)
        writable = conn is not None
        if conn is None:
            conn = connect(path, read_only=True)
        if writable:
            migrate(conn, path)
        elif conn.execute("PRAGMA user_version").fetchone()[0] != len(schema.MIGRATIONS):
            raise StoreError(f"The conversation database {path} is read-only and needs an "
                             "upgrade: it cannot be opened until it is writable.",
                             "needs-upgrade")
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
            raise translate(exc, path) from exc
        raise
    return conn, recovered_from, not writable
