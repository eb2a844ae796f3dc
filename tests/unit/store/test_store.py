"""The conversation store: conversations, the message tree and its branches, presets."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.core.provenance import Provenance
from inglenook.core.sampling import SamplingParams
from inglenook.store import BUILTIN_PRESETS, Preset, Store, StoredMessage, StoreError
from inglenook.store.conversations import SIDEBAR_QUERY


@pytest.fixture
def store() -> Iterator[Store]:
    with Store() as s:
        yield s


def contents(path: list[StoredMessage]) -> list[str]:
    return [m.content for m in path]


def raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


# -- conversations --------------------------------------------------------------------------

def test_the_database_lives_in_the_data_dir(store: Store) -> None:
    assert store.path == paths.database_file() == paths.data_dir() / "inglenook.db"
    assert store.path.is_file()
    assert store.recovered_from is None and not store.read_only


def test_create_and_read_a_conversation(store: Store) -> None:
    conv = store.create_conversation()
    summary = store.conversation(conv)
    assert (summary.id, summary.title, summary.pinned, summary.preset) == (conv, "New chat",
                                                                          False, None)
    assert summary.message_count == 0
    assert summary.created_at == summary.updated_at > 0
    other = store.create_conversation("Plans", preset="Code")
    assert store.conversation(other).preset == "Code"
    with pytest.raises(KeyError):
        store.conversation(9999)


def test_newest_first_pinned_on_top(store: Store) -> None:
    a, b, c = (store.create_conversation(t) for t in "abc")
    assert [s.title for s in store.conversations()] == ["c", "b", "a"]
    store.add_message(a, "user", "hi", None)  # activity moves a conversation up
    assert [s.title for s in store.conversations()] == ["a", "c", "b"]
    store.set_pinned(b, True)
    assert [(s.title, s.pinned) for s in store.conversations()] == [
        ("b", True), ("a", False), ("c", False)]
    store.rename(c, "renamed")  # metadata changes do not reorder
    store.set_preset(c, "Precise")
    store.set_pinned(b, False)
    summaries = store.conversations()
    assert [s.title for s in summaries] == ["a", "renamed", "b"]
    assert summaries[1].preset == "Precise"
    assert summaries[0].message_count == 1
    with pytest.raises(KeyError):
        store.rename(42, "x")


def test_soft_delete_undo_and_purge(store: Store) -> None:
    keep, gone = store.create_conversation("keep"), store.create_conversation("gone")
    msg = store.add_message(gone, "user", "remember the zeppelin", None)
    store.delete(gone)
    assert [s.id for s in store.conversations()] == [keep]
    assert {s.id for s in store.conversations(include_deleted=True)} == {keep, gone}
    assert store.conversation(gone).title == "gone"
    assert store.search("zeppelin") == []
    store.undelete(gone)
    assert [s.id for s in store.conversations()] == [gone, keep]
    assert [h.message_id for h in store.search("zeppelin")] == [msg]

    store.delete(gone)
    assert store.purge_deleted(older_than_s=3600) == 0  # deleted just now: kept for undo
    assert store.purge_deleted() == 1
    assert {s.id for s in store.conversations(include_deleted=True)} == {keep}
    with pytest.raises(KeyError):
        store.active_path(gone)
    conn = raw(store.path)
    try:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_ten_thousand_conversations_list_in_one_indexed_query(store: Store) -> None:
    store.close()
    conn = raw(store.path)
    try:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO conversations (id, title, pinned, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(i, f"chat {i}", int(i % 1000 == 0), i, i) for i in range(1, 10_001)])
        conn.executemany(
            "INSERT INTO messages (conversation_id, role, content, created_at) "
            "VALUES (?, 'user', 'hello', 0)", [(i,) for i in range(1, 10_001, 3)])
        conn.execute("COMMIT")
        plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + SIDEBAR_QUERY))
    finally:
        conn.close()
    assert "conversations_sidebar" in plan and "TEMP B-TREE" not in plan
    assert "messages_tree" in plan  # the message count comes from an index, not a scan
    with Store() as reopened:
        summaries = reopened.conversations()
    assert len(summaries) == 10_000
    assert [s.id for s in summaries[:11]] == [10_000, *range(9000, 0, -1000), 9999]
    assert summaries[-1].id == 1
    assert sum(s.message_count for s in summaries) == 3334


# -- the message tree -----------------------------------------------------------------------

def test_a_linear_chat(store: Store) -> None:
    conv = store.create_conversation()
    system = store.add_message(conv, "system", "Be brief.", None)
    user = store.add_message(conv, "user", "Hi", system)
    reply = store.add_message(conv, "assistant", "Hello!", user, provenance={"seed": 7})
    path = store.active_path(conv)
    assert [m.id for m in path] == [system, user, reply]
    assert [m.parent_id for m in path] == [None, system, user]
    assert [m.role for m in path] == ["system", "user", "assistant"]
    assert all((m.sibling_index, m.sibling_count, m.status) == (1, 1, "complete") for m in path)
    assert path[2].provenance.seed == 7 and path[0].provenance == Provenance()
    assert path[2].conversation_id == conv and path[2].created_at >= path[1].created_at
    assert store.active_path(store.create_conversation()) == []


def test_streaming_updates_then_completion(store: Store) -> None:
    conv = store.create_conversation()
    user = store.add_message(conv, "user", "Count", None)
    reply = store.add_message(conv, "assistant", "", user, status="streaming")
    store.update_message(reply, "one two")
    assert store.active_path(conv)[-1].status == "streaming"
    assert store.search("two") == []  # indexed once it stops streaming
    store.update_message(reply, "one two three", status="complete",
                         provenance={"model": "m.gguf", "sampling": SamplingParams(seed=3),
                                     "stop": ("a", "b"), "file": Path("/m.gguf")})
    last = store.active_path(conv)[-1]
    assert (last.content, last.status) == ("one two three", "complete")
    assert last.provenance.sampling.seed == 3 and last.provenance.extra["stop"] == ["a", "b"]
    assert last.provenance.extra["file"] == "/m.gguf"
    assert [h.message_id for h in store.search("three")] == [reply]
    store.update_message(reply, "edited")  # status and provenance stay
    last = store.active_path(conv)[-1]
    assert (last.content, last.status, last.provenance.model_name) == ("edited", "complete",
                                                                       "m.gguf")
    with pytest.raises(ValueError):
        store.update_message(reply, "x", status="done")
    with pytest.raises(KeyError):
        store.update_message(9999, "x")


def test_branches_siblings_and_selection(store: Store) -> None:
    conv = store.create_conversation()
    q1 = store.add_message(conv, "user", "Q", None)
    a1 = store.add_message(conv, "assistant", "A1", q1)
    q2 = store.add_message(conv, "user", "Q2", a1)
    a2 = store.add_message(conv, "assistant", "A2", q1)  # regenerate: a sibling of A1
    path = store.active_path(conv)
    assert contents(path) == ["Q", "A2"]
    assert (path[1].sibling_index, path[1].sibling_count) == (2, 2)
    a3 = store.add_message(conv, "assistant", "A3", q1)
    assert [(m.content, m.sibling_index, m.sibling_count) for m in store.active_path(conv)] == [
        ("Q", 1, 1), ("A3", 3, 3)]

    siblings = store.siblings(a2)
    assert [(m.id, m.sibling_index, m.sibling_count) for m in siblings] == [
        (a1, 1, 3), (a2, 2, 3), (a3, 3, 3)]
    assert store.siblings(a1) == siblings and store.siblings(q1)[0].id == q1
    assert siblings[0].content == "A1" and siblings[0].parent_id == q1
    path = store.select_sibling(a1)  # ‹ 1/3 ›: back to the first reply and what followed it
    assert contents(path) == ["Q", "A1", "Q2"]
    assert (path[1].sibling_index, path[1].sibling_count) == (1, 3)
    assert store.active_path(conv) == path

    # Editing the first prompt: a second root; its own branch remembers its choices.
    q1b = store.add_message(conv, "user", "Q edited", None)
    store.add_message(conv, "assistant", "B", q1b)
    assert [(m.content, m.sibling_index, m.sibling_count) for m in store.active_path(conv)] == [
        ("Q edited", 2, 2), ("B", 1, 1)]
    assert contents(store.select_sibling(q1)) == ["Q", "A1", "Q2"]
    assert contents(store.select_sibling(a2)) == ["Q", "A2"]
    assert store.conversation(conv).message_count == 7
    assert [m.id for m in store.select_sibling(q2)] == [q1, a1, q2]
    assert [m.id for m in store.select_sibling(a3)] == [q1, a3]
    assert [m.id for m in store.siblings(q1b)] == [q1, q1b]  # the roots
    with pytest.raises(KeyError):
        store.select_sibling(9999)
    with pytest.raises(KeyError):
        store.siblings(9999)


def test_selecting_a_message_deep_in_a_hidden_branch_shows_its_whole_branch(
        store: Store) -> None:
    conv = store.create_conversation()
    q = store.add_message(conv, "user", "Q", None)
    a1 = store.add_message(conv, "assistant", "A1", q)
    deep = store.add_message(conv, "user", "deep", a1)
    a2 = store.add_message(conv, "assistant", "A2", q)
    assert contents(store.active_path(conv)) == ["Q", "A2"]
    assert contents(store.select_sibling(deep)) == ["Q", "A1", "deep"]
    # Adding under a hidden message shows its branch too (the UI never does, but it is safe).
    assert contents(store.select_sibling(a2)) == ["Q", "A2"]
    store.add_message(conv, "assistant", "reply to deep", deep)
    assert contents(store.active_path(conv)) == ["Q", "A1", "deep", "reply to deep"]


def test_delete_from_falls_back_to_the_most_recently_active_sibling(store: Store) -> None:
    conv = store.create_conversation()
    q = store.add_message(conv, "user", "Q", None)
    a1 = store.add_message(conv, "assistant", "A1", q)
    store.add_message(conv, "user", "follow-up", a1)
    a2 = store.add_message(conv, "assistant", "A2", q)
    a3 = store.add_message(conv, "assistant", "A3", q)
    store.select_sibling(a1)
    store.select_sibling(a3)
    store.delete_from(a3)
    assert contents(store.active_path(conv)) == ["Q", "A1", "follow-up"]
    store.delete_from(a1)  # with its descendants
    path = store.active_path(conv)
    assert contents(path) == ["Q", "A2"] and (path[1].sibling_index, path[1].sibling_count) == (
        1, 1)
    assert store.conversation(conv).message_count == 2
    store.delete_from(q)
    assert store.active_path(conv) == [] and store.conversation(conv).message_count == 0
    assert store.search("A2") == [] and a2 not in [m.id for m in store.active_path(conv)]
    with pytest.raises(KeyError):
        store.delete_from(q)


def test_delete_from_a_long_chain_in_one_step(store: Store) -> None:
    conv = store.create_conversation()
    parent = None
    conn = raw(store.path)
    try:
        conn.execute("BEGIN")
        for i in range(2000):  # deeper than SQLite's trigger recursion limit of 1000
            parent = conn.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, created_at) "
                "VALUES (?, ?, 'user', ?, 0)", (conv, parent, f"m{i}")).lastrowid
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert len(store.active_path(conv)) == 2000
    store.delete_from(store.active_path(conv)[1].id)
    assert contents(store.active_path(conv)) == ["m0"]


def test_add_message_checks_its_arguments(store: Store) -> None:
    conv, other = store.create_conversation(), store.create_conversation()
    msg = store.add_message(conv, "user", "hi", None)
    with pytest.raises(KeyError):
        store.add_message(9999, "user", "x", None)
    with pytest.raises(KeyError):
        store.add_message(conv, "user", "x", 9999)
    with pytest.raises(ValueError):
        store.add_message(other, "user", "x", msg)
    with pytest.raises(ValueError):
        store.add_message(conv, "user", "x", msg, status="bogus")
    assert store.conversation(conv).message_count == 1


def test_one_bad_row_hides_nothing_else(store: Store) -> None:
    convs = [store.create_conversation(f"chat {i}") for i in range(3)]
    ids = [store.add_message(c, "user", f"hello {i}", None) for i, c in enumerate(convs)]
    replies = [store.add_message(c, "assistant", "fine", m, provenance={"seed": 1})
               for c, m in zip(convs, ids, strict=True)]
    conn = raw(store.path)
    try:  # what a buggy build or a hand edit might leave
        conn.execute("UPDATE messages SET provenance = '{not json' WHERE id = ?", (replies[0],))
        conn.execute("UPDATE messages SET provenance = '[1, 2]' WHERE id = ?", (replies[1],))
        conn.execute("UPDATE messages SET content = CAST(X'fffe41' AS TEXT) WHERE id = ?",
                     (ids[2],))
        conn.execute("UPDATE conversations SET title = 12345, created_at = 'soon' WHERE id = ?",
                     (convs[1],))
    finally:
        conn.close()
    summaries = store.conversations()
    assert len(summaries) == 3
    assert store.conversation(convs[1]).title == "12345"
    assert store.conversation(convs[1]).created_at == 0.0
    assert store.active_path(convs[0])[1].provenance.extra == {"unreadable": "{not json"}
    assert store.active_path(convs[1])[1].provenance.extra == {"unreadable": [1, 2]}
    assert store.active_path(convs[2])[0].content == "\ufffd\ufffdA"
    assert store.active_path(convs[2])[1].provenance.seed == 1
    assert len(store.export_all()["conversations"]) == 3
    assert [h.conversation_id for h in store.search("hello")] == [convs[1], convs[0]]


# -- presets --------------------------------------------------------------------------------

def test_builtin_presets_are_shipped(store: Store) -> None:
    found = store.presets()
    assert [p.name for p in found] == ["Balanced", "Precise", "Creative", "Code"]
    assert found == list(BUILTIN_PRESETS) and all(p.builtin for p in found)
    assert found[0].sampling == SamplingParams()
    assert found[3].sampling.repeat_penalty == 1.0


def test_user_presets_save_update_delete(store: Store) -> None:
    mine = Preset("Terse", "One sentence.", SamplingParams(temperature=0.1, stop=("\n",)))
    store.save_preset(mine)
    store.save_preset(Preset("alpha", "a", SamplingParams(), builtin=True))  # flag ignored
    names = [(p.name, p.builtin) for p in store.presets()]
    assert names == [("Balanced", True), ("Precise", True), ("Creative", True), ("Code", True),
                     ("alpha", False), ("Terse", False)]
    assert store.presets()[-1] == mine
    store.save_preset(Preset("terse", "Two sentences.", SamplingParams()))  # same name
    assert [p.system_prompt for p in store.presets() if p.name == "Terse"] == ["Two sentences."]

    conv = store.create_conversation(preset="Terse")
    store.delete_preset("Terse")
    assert "Terse" not in [p.name for p in store.presets()]
    assert store.conversation(conv).preset is None
    store.delete_preset("no such preset")  # nothing to do
    with pytest.raises(ValueError):
        store.save_preset(Preset("  ", "x", SamplingParams()))


def test_builtins_are_edited_in_place_and_cannot_be_deleted(store: Store) -> None:
    store.save_preset(Preset("code", "Only Rust.", SamplingParams(temperature=0.0)))
    code = [p for p in store.presets() if p.name == "Code"]
    assert code == [Preset("Code", "Only Rust.", SamplingParams(temperature=0.0), True)]
    with pytest.raises(StoreError) as info:
        store.delete_preset("Code")
    assert info.value.reason == "builtin" and "built-in" in str(info.value)
    store.save_preset(BUILTIN_PRESETS[3])  # restoring the shipped values
    assert store.presets() == list(BUILTIN_PRESETS)


def test_a_preset_with_unreadable_sampling_falls_back_to_defaults(store: Store) -> None:
    store.save_preset(Preset("Odd", "x", SamplingParams(top_k=5)))
    conn = raw(store.path)
    try:
        conn.execute("UPDATE presets SET sampling = 'nope' WHERE name = 'Odd'")
    finally:
        conn.close()
    assert [p.sampling for p in store.presets() if p.name == "Odd"] == [SamplingParams()]
