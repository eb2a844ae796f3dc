"""The conversation database file: schema versions and migrations from fixtures of every earlier
version, a corrupt file moved aside, replies cut short by a crash, read-only and full disks."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.store import LATEST_VERSION, Store, StoreError, schema
from inglenook.store.db import open_database
from inglenook.store.opening import open_store
from tests.fixtures.store import make_fixtures
from tests.helpers.tmpfs import fill, set_read_only, tmpfs

FIXTURES = sorted(make_fixtures.HERE.glob("v*.sql"), key=lambda p: int(p.stem[1:]))


@pytest.fixture
def db() -> Path:
    return paths.database_file()


def query(path: Path, sql: str, *params: object) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def user_version(path: Path) -> int:
    return query(path, "PRAGMA user_version")[0][0]


def fts_is_sound(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        for table in ("messages_fts", "conversations_fts"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
    finally:
        conn.close()


# -- schema versions and migrations ---------------------------------------------------------

def test_a_new_database(db: Path) -> None:
    with Store() as store:
        conn = store._conn
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert user_version(db) == LATEST_VERSION
    assert sorted(p.name for p in db.parent.iterdir() if "inglenook.db" in p.name) == [
        "inglenook.db", "inglenook.db.live-lock", "inglenook.db.open-lock"
    ]  # no backup of nothing, no side files but the locks (store/instances.py) after close


def test_an_empty_v0_file_is_migrated(db: Path) -> None:
    db.write_bytes(b"")
    with Store() as store:
        assert len(store.presets()) == 4 and store.conversations() == []
        assert store.recovered_from is None
    assert user_version(db) == LATEST_VERSION
    assert not db.with_name("inglenook.db.bak-v0").exists()


def test_a_v0_file_with_tables_is_backed_up_first(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    with Store() as store:
        store.create_conversation()
    backup = db.with_name("inglenook.db.bak-v0")
    assert query(backup, "SELECT text FROM notes") == [("keep me",)]
    assert user_version(backup) == 0
    assert query(db, "SELECT text FROM notes") == [("keep me",)]


def test_there_is_a_fixture_for_every_version() -> None:
    assert [int(p.stem[1:]) for p in FIXTURES] == list(range(1, LATEST_VERSION + 1))


def test_the_latest_fixture_is_what_the_code_writes(tmp_path: Path) -> None:
    """If this fails after a schema change: add a migration and a new fixture
    (make_fixtures.py), never rewrite an old one."""
    made = tmp_path / "made.db"
    make_fixtures.build(made)
    expected = make_fixtures.fixture_path(LATEST_VERSION).read_text(encoding="utf-8")
    assert make_fixtures.dump(made) == expected


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_every_earlier_version_opens_with_everything_kept(fixture: Path, db: Path) -> None:
    make_fixtures.load(fixture.read_text(encoding="utf-8"), db)
    version = int(fixture.stem[1:])
    reasoning = version >= 3  # the history gained replies with reasoning in v3
    attached = version >= 4  # and questions with files in v4
    tools = version >= 5  # and replies that called tools in v5
    with Store() as store:
        assert store.recovered_from is None
        sidebar = [(c.title, c.pinned, c.preset, c.message_count) for c in store.conversations()]
        assert sidebar == [("Trip to Zürich ☕", True, "Precise", 7),
                           *([("Using tools", False, None, 3)] if tools else []),
                           *([("Quarterly numbers", False, None, 3)] if attached else []),
                           *([("Thinking it over", False, None, 3)] if reasoning else []),
                           ("Empty — новый чат", False, None, 0),
                           ('Code review: <script> & "quotes"', False, "Rust helper", 3)]
        everything = store.conversations(include_deleted=True)
        assert len(everything) == 4 + reasoning + attached + tools
        by_title = {c.title: c.id for c in everything}
        for expected in make_fixtures.CONVERSATIONS + (
                make_fixtures.V3_CONVERSATIONS if reasoning else []) + (
                make_fixtures.V4_CONVERSATIONS if attached else []) + (
                make_fixtures.V5_CONVERSATIONS if tools else []):
            if version >= 2 and expected["title"] == "Empty — новый чат":  # v2: own settings
                expected = {**expected, "settings": make_fixtures.CUSTOM_SETTINGS}
            assert store.export_json(by_title[expected["title"]]) == expected
        trip = by_title["Trip to Zürich ☕"]
        assert [m.content for m in store.active_path(trip)][-1] == "Walk along the Limmat for"
        assert {h.conversation_id for h in store.search("zurich")} == {trip}
        assert [h.snippet for h in store.search("cafe")] == ["And then to the <b>café</b>?"]
        assert store.search("delete me") == []  # in the bin
        if reasoning:
            thinking = by_title["Thinking it over"]
            reply = store.active_path(thinking)[-1]
            assert (reply.content, reply.reasoning.splitlines()[0]) == (
                "There are three.", "Spell it: s-t-r-a-w-b-e-r-r-y.")
            assert reply.provenance.thinking_s == 12.5
            assert [(h.message_id, h.in_reasoning, h.snippet) for h in store.search("spell")] == [
                (reply.id, True,
                 "<i>Reasoning:</i> <b>Spell</b> it: s-t-r-a-w-b-e-r-r-y.\nOne r after the…")]
        assert all(not m.reasoning for c in everything for m in store.active_path(c.id)
                   if c.title != "Thinking it over")
        if attached:
            question, _, files = store.active_path(by_title["Quarterly numbers"])
            assert [(a.name, a.kind, a.size) for a in question.attachments] == [
                ("sales.csv", "csv", 36), ("Q1 report.pdf", "pdf", 18_342)]
            assert question.attachments[0].text.endswith("Mär,7")
            assert [(a.kind, a.mime, a.data) for a in files.attachments] == [
                ("code", "", b""), ("image", "image/png", make_fixtures.PNG)]
        assert all(not m.attachments for c in everything for m in store.active_path(c.id)
                   if c.title != "Quarterly numbers")
        if tools:
            _, called, answer = store.active_path(by_title["Using tools"])
            assert [(c.call.name, c.decision, c.result and c.result.status)
                    for c in called.tool_cards] == [("add", "once", "ok"), ("now", "deny",
                                                                              "denied")]
            assert answer.parent_id == called.id
        assert all(not m.tool_cards for c in everything for m in store.active_path(c.id)
                   if c.title != "Using tools")
        presets = {p.name: p for p in store.presets()}
        assert presets["Rust helper"] == make_fixtures.USER_PRESET
        assert presets["Code"].system_prompt == make_fixtures.EDITED_CODE.system_prompt
        assert presets["Code"].builtin
        empty = by_title["Empty — новый чат"]
        expected_settings = make_fixtures.CUSTOM_SETTINGS if version >= 2 else None
        assert store.chat_settings(empty) == (None, expected_settings)
        assert store.chat_settings(trip) == ("Precise", None)
        # v7: the unread mark (every chat read before it).
        review = by_title['Code review: <script> & "quotes"']
        assert store.unread_ids() == ([review] if version >= 7 else [])
        store.add_message(trip, "user", "still writable", None)
    assert user_version(db) == LATEST_VERSION
    assert db.with_name(f"inglenook.db.bak-v{version}").exists() == (version < LATEST_VERSION)
    fts_is_sound(db)
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


V2_REPLIES = [  # (role, content, status) as a v2 database held them
    ("user", "<think>a prompt, not a reply</think> hi", "complete"),
    ("assistant", "<think>\nThe user greets me; answer warmly.\n</think>\n\nHello there!",
     "complete"),
    ("assistant", "<think>\n\n</think>\n\nJust the answer.", "complete"),
    ("assistant", "<think>cut short while thinking", "interrupted"),
    ("assistant", "A plain answer that mentions <think> later.", "complete"),
    ("assistant", "<think>left streaming</think>by a crash", "streaming"),
]


def v2_database(path: Path) -> list[int]:
    """A database as v2 wrote it (only the first two migrations run), one chat of V2_REPLIES."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for step in schema.MIGRATIONS[:2]:
            step(conn)
        conn.execute("PRAGMA user_version = 2")
        conn.execute("INSERT INTO conversations (id, title, created_at, updated_at) "
                     "VALUES (1, 'old', 0, 0)")
        return [conn.execute("INSERT INTO messages (conversation_id, parent_id, role, content, "
                             "status, created_at) VALUES (1, ?, ?, ?, ?, 0)",
                             (n or None, role, content, status)).lastrowid
                for n, (role, content, status) in enumerate(V2_REPLIES)]
    finally:
        conn.close()


def test_v3_splits_stored_replies_that_open_with_a_think_block(db: Path) -> None:
    ids = v2_database(db)
    conn, _, _ = open_database(db)  # migrated, before the Store's crash recovery
    try:
        assert conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?",
                            ("streaming OR crash",)).fetchall() == []  # still streaming
        assert conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?",
                            ("warmly",)).fetchall() == [(ids[1],)]
    finally:
        conn.close()
    with Store() as store:
        stored = [(m.role, m.reasoning, m.content, m.status) for m in store.active_path(1)]
        assert stored == [
            ("user", "", "<think>a prompt, not a reply</think> hi", "complete"),
            ("assistant", "The user greets me; answer warmly.", "Hello there!", "complete"),
            ("assistant", "", "Just the answer.", "complete"),
            ("assistant", "", "<think>cut short while thinking", "interrupted"),
            ("assistant", "", "A plain answer that mentions <think> later.", "complete"),
            ("assistant", "left streaming", "by a crash", "interrupted"),
        ]
        hits = [(h.message_id, h.in_reasoning) for h in store.search("warmly")]
        assert hits == [(ids[1], True)]
        assert [(h.message_id, h.in_reasoning) for h in store.search("hello")] == [
            (ids[1], False)]
        # Indexed once the crash recovery marked it interrupted.
        assert [h.message_id for h in store.search("streaming")] == [ids[5]]
        assert store.export_json(1)["messages"][1]["reasoning"] == (
            "The user greets me; answer warmly.")
    assert query(db.with_name("inglenook.db.bak-v2"), "SELECT content FROM messages "
                 "WHERE id = ?", ids[1]) == [(V2_REPLIES[1][1],)]
    fts_is_sound(db)


def test_a_failing_migration_leaves_the_file_as_it_was(db: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    make_fixtures.load(make_fixtures.fixture_path(LATEST_VERSION).read_text("utf-8"), db)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE conversations ADD COLUMN colour TEXT")
        conn.execute("SELECT * FROM no_such_table")

    shipped = schema.MIGRATIONS
    monkeypatch.setattr(schema, "MIGRATIONS", [*shipped, broken])
    with pytest.raises(StoreError, match="no_such_table"):
        Store(db)
    assert user_version(db) == LATEST_VERSION
    assert "colour" not in [r[1] for r in query(db, "PRAGMA table_info(conversations)")]
    assert user_version(db.with_name(f"inglenook.db.bak-v{LATEST_VERSION}")) == LATEST_VERSION
    monkeypatch.setattr(schema, "MIGRATIONS", shipped)  # not undo(): that drops INGLENOOK_HOME
    with Store(db) as store:
        assert len(store.conversations()) == 3 + len(make_fixtures.V3_CONVERSATIONS) + len(
            make_fixtures.V4_CONVERSATIONS) + len(make_fixtures.V5_CONVERSATIONS)


def test_a_database_from_a_newer_version_is_refused_untouched(db: Path) -> None:
    with Store() as store:
        store.create_conversation("from the future")
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match="newer version") as info:
        Store()
    assert info.value.reason == "newer"
    assert db.read_bytes() == before
    assert [p.name for p in db.parent.iterdir() if "corrupt" in p.name] == []


# -- damage and crashes ---------------------------------------------------------------------

def test_a_garbage_file_is_moved_aside_and_a_fresh_one_made(db: Path) -> None:
    garbage = os.urandom(8192)
    db.write_bytes(garbage)
    db.with_name("inglenook.db-wal").write_bytes(b"stale wal")
    with Store() as store:
        moved = store.recovered_from
        assert moved is not None and moved.read_bytes() == garbage
        assert re.fullmatch(r"inglenook\.db\.corrupt-\d{8}-\d{6}", moved.name)
        assert moved.with_name(moved.name + "-wal").read_bytes() == b"stale wal"
        assert store.conversations() == [] and len(store.presets()) == 4
        store.create_conversation("a fresh start")
    with Store() as again:
        assert again.recovered_from is None
        assert [c.title for c in again.conversations()] == ["a fresh start"]


def test_damaged_pages_are_found_on_open(db: Path) -> None:
    with Store() as store:
        for i in range(40):
            store.add_message(store.create_conversation(f"c{i}"), "user", "x" * 3000, None)
    data = bytearray(db.read_bytes())
    for page in (6, 12, 24):
        data[page * 4096:(page + 1) * 4096] = b"\x5a" * 4096
    db.write_bytes(bytes(data))
    with Store() as store:
        assert store.recovered_from is not None and store.recovered_from.exists()
        assert store.conversations() == []


# Opens the database, waiting after it read the schema version (at the backup before migrating)
# until the other process has read it too: for at most a few seconds, since with the lock the
# other one never can. Prints the sidebar.
MIGRATING = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from inglenook.store import Store, db
    marks, me = Path(sys.argv[1]), sys.argv[2]
    backup = db.backup
    def waiting(conn, target):
        (marks / me).touch()
        deadline = time.monotonic() + 3  # widens the race; not a synchronisation
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        backup(conn, target)
    db.backup = waiting
    with Store() as store:
        print(json.dumps([c.title for c in store.conversations()]))
""")


def test_two_instances_opening_an_old_database_migrate_it_once(db: Path, tmp_path: Path) -> None:
    make_fixtures.load(FIXTURES[0].read_text(encoding="utf-8"), db)  # v1
    marks = tmp_path / "marks"
    marks.mkdir()
    runs = [subprocess.Popen([sys.executable, "-c", MIGRATING, str(marks), name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name in ("first", "second")]
    done = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _, err in done]
    sidebars = [json.loads(out) for out, _ in done]
    assert sidebars[0] == sidebars[1] and "Trip to Zürich ☕" in sidebars[0]
    assert len(list(marks.iterdir())) == 1  # one of them migrated; the other found it done
    assert user_version(db) == LATEST_VERSION
    assert [p.name for p in db.parent.glob("*.bak-v*")] == [f"{db.name}.bak-v1"]


def test_replies_left_streaming_are_marked_interrupted_on_open(db: Path) -> None:
    with Store() as store:
        conv = store.create_conversation()
        user = store.add_message(conv, "user", "Tell me a story", None)
        reply = store.add_message(conv, "assistant", "", user, status="streaming")
        store.update_message(reply, "Once upon a time")
        # The app is killed here: the reply is never completed.
    with Store() as store:
        last = store.active_path(conv)[-1]
        assert (last.id, last.content, last.status) == (reply, "Once upon a time", "interrupted")
        assert [h.message_id for h in store.search("upon")] == [reply]


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_database_and_its_folders_are_the_users_alone(db: Path) -> None:
    with Store() as store:
        store.create_conversation("private")
        wal, shm = db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")
        assert wal.exists() and shm.exists()
        assert [mode(p) for p in (db, wal, shm)] == [0o600] * 3
    assert mode(paths.data_dir()) == mode(paths.cache_dir()) == mode(paths.config_dir()) == 0o700
    assert mode(paths.kv_state_dir()) == 0o700


def test_a_database_left_readable_by_others_is_tightened(db: Path) -> None:
    with Store() as store:
        store.create_conversation("private")
    os.chmod(db.parent, 0o755)  # as an older version left them
    os.chmod(db, 0o644)
    with Store() as store:
        assert store.conversations()[0].title == "private"
        assert mode(db) == 0o600 and mode(db.with_name(db.name + "-wal")) == 0o600
    assert mode(paths.data_dir()) == 0o700
    old = db.with_name("old.db")
    make_fixtures.load(FIXTURES[0].read_text(encoding="utf-8"), old)  # migrated: backed up
    with Store(old):
        pass
    assert mode(old) == mode(old.with_name("old.db.bak-v1")) == 0o600


OPEN_AND_READ = textwrap.dedent("""
    import sys
    from inglenook.store import Store
    with Store() as store:  # writable, as `inglenook conversations import` opens it
        print(store.active_path(int(sys.argv[1]))[-1].status)
""")


def test_another_process_opening_the_database_leaves_a_streaming_reply_alone(db: Path) -> None:
    with Store() as window:
        conv = window.create_conversation()
        user = window.add_message(conv, "user", "Tell me a story", None)
        reply = window.add_message(conv, "assistant", "Once", user, status="streaming")
        other = subprocess.run([sys.executable, "-c", OPEN_AND_READ, str(conv)],
                               capture_output=True, text=True, timeout=60)
        assert other.returncode == 0, other.stderr[-2000:]
        assert other.stdout.strip() == "streaming"
        with Store() as same_process:  # a second Store of the window's own (a worker thread)
            assert same_process.active_path(conv)[-1].status == "streaming"
        window.update_message(reply, "Once upon a time")  # still streaming, still saved
        assert window.active_path(conv)[-1].status == "streaming"


def test_a_reply_left_streaming_by_a_killed_process_is_marked_at_the_next_start(
        db: Path) -> None:
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os
        from inglenook.store import Store
        store = Store()
        conv = store.create_conversation()
        user = store.add_message(conv, "user", "Tell me a story", None)
        store.add_message(conv, "assistant", "Once", user, status="streaming")
        print(conv, flush=True)
        os._exit(9)  # killed mid-reply: no close, the kernel drops its locks
    """)], capture_output=True, text=True, timeout=60)
    assert killed.returncode == 9, killed.stderr[-2000:]
    with Store() as store:
        assert store.active_path(int(killed.stdout))[-1].status == "interrupted"


# -- read-only and full disks ---------------------------------------------------------------

@pytest.fixture
def saved(db: Path) -> Iterator[tuple[int, int]]:
    """A conversation with one message, saved and closed."""
    with Store() as store:
        conv = store.create_conversation("saved before")
        msg = store.add_message(conv, "user", "precious words", None)
    yield conv, msg
    assert query(db, "SELECT content FROM messages WHERE id = ?", msg) == [("precious words",)]
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


def test_a_read_only_database_can_be_read_but_not_changed(saved: tuple[int, int]) -> None:
    conv, msg = saved
    with Store(read_only=True) as store:
        assert store.read_only
        assert [m.id for m in store.active_path(conv)] == [msg]
        assert store.search("precious")[0].message_id == msg
        with pytest.raises(StoreError, match="read-only") as info:
            store.add_message(conv, "assistant", "lost?", msg)
        assert info.value.reason == "read-only"
        with pytest.raises(StoreError, match="read-only"):
            store.rename(conv, "x")
        assert store.conversation(conv).title == "saved before"


def test_a_database_that_turns_read_only_while_open(saved: tuple[int, int]) -> None:
    conv, msg = saved
    with Store() as store:
        store._conn.execute("PRAGMA query_only = ON")  # what SQLite reports for a read-only file
        with pytest.raises(StoreError, match="read-only"):
            store.add_message(conv, "assistant", "reply", msg)
        with pytest.raises(StoreError, match="read-only"):
            store.update_message(msg, "overwritten")
        store._conn.execute("PRAGMA query_only = OFF")
        assert [m.content for m in store.active_path(conv)] == ["precious words"]
        store.add_message(conv, "assistant", "reply", msg)
        store.delete_from(store.active_path(conv)[-1].id)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_a_file_without_write_permission(db: Path, saved: tuple[int, int]) -> None:
    conv, _ = saved
    db.chmod(0o444)
    try:
        with Store() as store:
            assert store.read_only
            assert store.conversation(conv).title == "saved before"
            with pytest.raises(StoreError, match="read-only"):
                store.create_conversation()
    finally:
        db.chmod(0o644)


class FullDisk:
    """A connection whose writes fail as SQLite's do when the disk is full."""

    def __init__(self, conn: sqlite3.Connection, failing: str) -> None:
        self._conn, self._failing = conn, failing

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.lstrip().upper().startswith(self._failing):
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


@pytest.mark.parametrize("failing", ["INSERT", "UPDATE CONVERSATIONS", "COMMIT"])
def test_a_full_disk_gives_a_clear_message_and_loses_nothing(
        saved: tuple[int, int], failing: str) -> None:
    conv, msg = saved
    with Store() as store:
        before = store.conversation(conv)
        real = store._conn
        store._conn = FullDisk(real, failing)  # type: ignore[assignment]
        try:
            with pytest.raises(StoreError, match="disk is full") as info:
                store.add_message(conv, "assistant", "a reply", msg)
        finally:
            store._conn = real
        assert info.value.reason == "full" and "safe" in str(info.value)
        assert not real.in_transaction
        assert store.conversation(conv) == before  # the half-done change was rolled back
        assert [m.content for m in store.active_path(conv)] == ["precious words"]
        store.add_message(conv, "assistant", "written once there is room", msg)


def test_a_real_sqlite_full_error(saved: tuple[int, int]) -> None:
    conv, msg = saved
    with Store() as store:
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreError, match="disk is full"):
            store.add_message(conv, "assistant", "x" * 200_000, msg)
        assert [m.content for m in store.active_path(conv)] == ["precious words"]
        store._conn.execute("PRAGMA max_page_count = 1073741823")
        store.add_message(conv, "assistant", "x" * 200_000, msg)


def test_a_database_held_by_another_process(saved: tuple[int, int], db: Path) -> None:
    conv, _ = saved
    other = sqlite3.connect(db, isolation_level=None)
    try:
        with Store() as store:
            other.execute("BEGIN IMMEDIATE")
            store._conn.execute("PRAGMA busy_timeout = 0")  # no need to wait 5 s in a test
            with pytest.raises(StoreError, match="in use") as info:
                store.rename(conv, "mine")
            assert info.value.reason == "busy"
            other.execute("ROLLBACK")
            store.rename(conv, "mine")
    finally:
        other.close()


# -- a read-only folder or a full disk, for real: a small tmpfs (even root cannot write to
#    a read-only mount; skipped where mounting is not permitted) -------------------------------

def history(path: Path) -> tuple[int, int]:
    """A closed database at `path` with one conversation and one message."""
    with Store(path) as store:
        conv = store.create_conversation("kept history")
        msg = store.add_message(conv, "user", "precious words", None)
    return conv, msg


def test_a_read_only_folder_shows_the_history(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro") as disk:
        path = disk / "inglenook.db"
        conv, msg = history(path)
        before = sorted(p.name for p in disk.iterdir())  # the database and its lock files
        set_read_only(disk, True)
        store, message = open_store(path)
        try:
            assert store.path == path and store.read_only
            assert message is not None and "read-only" in message
            assert "will not be saved" in message and "folder" in message
            assert [m.content for m in store.active_path(conv)] == ["precious words"]
            assert [h.message_id for h in store.search("precious")] == [msg]
            with pytest.raises(StoreError, match="read-only") as info:
                store.add_message(conv, "assistant", "lost?", msg)
            assert info.value.reason == "read-only"
        finally:
            store.close()
        assert sorted(p.name for p in disk.iterdir()) == before


def test_a_read_only_folder_with_unmerged_changes_shows_them(tmp_path: Path) -> None:
    """A -wal file left beside the database holds its latest changes: they are read too."""
    live = tmp_path / "live" / "inglenook.db"
    conv, _ = history(live)
    with tmpfs(tmp_path / "ro") as disk, Store(live) as writer:
        writer.add_message(conv, "assistant", "only in the wal", None)
        for suffix in ("", "-wal", "-shm"):  # as a crash leaves them
            shutil.copyfile(f"{live}{suffix}", disk / f"inglenook.db{suffix}")
        set_read_only(disk, True)
        main_file_alone = sqlite3.connect(f"{(disk / 'inglenook.db').as_uri()}?immutable=1",
                                          uri=True)
        try:
            assert main_file_alone.execute("SELECT count(*) FROM messages WHERE "
                                           "content = 'only in the wal'").fetchone() == (0,)
        finally:
            main_file_alone.close()
        store, message = open_store(disk / "inglenook.db")
        try:
            assert store.read_only and message is not None and "read-only" in message
            assert "only in the wal" in [m.content for m in store.active_path(conv)]
        finally:
            store.close()


def test_a_read_only_folder_without_a_database_uses_a_temporary_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with tmpfs(tmp_path / "ro") as disk:
        set_read_only(disk, True)
        for path in (disk / "inglenook.db", None):
            monkeypatch.setenv("INGLENOOK_HOME", str(disk / "home"))  # data/ cannot be made
            store, message = open_store(path)
            try:
                assert disk not in store.path.parents and not store.read_only
                assert message is not None and "will not be kept" in message
                store.create_conversation("this session only")
            finally:
                store.close()
                shutil.rmtree(store.path.parent)


def test_a_read_only_database_from_an_older_version_is_shown_upgraded(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro") as disk:
        path = disk / "inglenook.db"
        make_fixtures.load(make_fixtures.fixture_path(1).read_text("utf-8"), path)
        set_read_only(disk, True)
        store, message = open_store(path)
        try:
            assert message is not None and "older" in message and "not be kept" in message
            assert disk not in store.path.parents
            assert len(store.conversations()) == 3
            store.create_conversation("this session only")
        finally:
            store.close()
            shutil.rmtree(store.path.parent)
        assert user_version(path) == 1


def test_a_really_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "2m") as disk:
        path = disk / "inglenook.db"
        conv, msg = history(path)
        with Store(path) as store:
            filler = fill(disk)
            with pytest.raises(StoreError, match="The disk is full") as info:
                store.add_message(conv, "assistant", "x" * 500_000, msg)
            assert info.value.reason == "full"
            assert [m.content for m in store.active_path(conv)] == ["precious words"]
        store, message = open_store(path)  # a restart while the disk is still full
        try:
            assert message is None
            assert [m.content for m in store.active_path(conv)] == ["precious words"]
            filler.unlink()
            store.add_message(conv, "assistant", "x" * 500_000, msg)
        finally:
            store.close()
        assert query(path, "PRAGMA integrity_check") == [("ok",)]
