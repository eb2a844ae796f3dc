"""The conversation store: full-text search, JSON and Markdown export, JSON import."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import pytest

from inglenook.core.sampling import SamplingParams
from inglenook.store import CONVERSATION_FORMAT, Preset, Store
from inglenook.store.search import fts_query


@pytest.fixture
def store() -> Iterator[Store]:
    with Store() as s:
        yield s


def chat(store: Store, title: str, *turns: str) -> tuple[int, list[int]]:
    conv, parent, ids = store.create_conversation(title), None, []
    for n, text in enumerate(turns):
        parent = store.add_message(conv, "user" if n % 2 == 0 else "assistant", text, parent)
        ids.append(parent)
    return conv, ids


# -- search ---------------------------------------------------------------------------------

def test_search_finds_words_anywhere_and_highlights_them(store: Store) -> None:
    conv, (q, a) = chat(store, "Cooking", "How long do I boil an egg?",
                        "Boil the egg for 7 minutes, then cool the eggs in cold water.")
    other, _ = chat(store, "Travel", "Trains in Japan")
    hits = store.search("egg boil")
    assert [(h.conversation_id, h.message_id, h.title) for h in hits] == [
        (conv, a, "Cooking"), (conv, q, "Cooking")]
    # Only the last word is a prefix: "egg" does not find "eggs", "boil" would find "boiled".
    assert hits[0].snippet == ("<b>Boil</b> the <b>egg</b> for 7 minutes, then cool the "
                               "eggs in cold water.")
    assert store.search("boil egg")[0].snippet.endswith("cool the <b>eggs</b> in cold water.")
    assert [h.message_id for h in store.search("EGGS")] == [a]
    assert [h.message_id for h in store.search("trai")] == [store.active_path(other)[0].id]
    assert [h.message_id for h in store.search("egg", limit=1)] == [a]


def test_the_last_word_matches_as_a_prefix_while_typing(store: Store) -> None:
    _, (msg,) = chat(store, "t", "quantization of weights")
    assert [h.message_id for h in store.search("quant")] == [msg]
    assert [h.message_id for h in store.search("weights quant")] == [msg]
    assert store.search("quant weigh x") == []  # every word must match
    assert [h.message_id for h in store.search("of quant")] == [msg]


def test_titles_are_searched_and_come_first(store: Store) -> None:
    conv, (root, _) = chat(store, "Holiday plans for Norway", "fjords?", "Norway has many.")
    empty = store.create_conversation("Norway notes")
    hits = store.search("norway")
    assert {(h.conversation_id, h.message_id) for h in hits[:2]} == {(empty, 0), (conv, root)}
    assert {h.snippet for h in hits[:2]} == {"Holiday plans for <b>Norway</b>",
                                             "<b>Norway</b> notes"}
    assert hits[2].snippet == "<b>Norway</b> has many."
    store.rename(conv, "Bergen")
    assert [h.conversation_id for h in store.search("bergen")] == [conv]
    assert all(h.conversation_id != conv for h in store.search("holiday"))


@pytest.mark.parametrize("query", [
    '"foo', "AND (", "foo AND", "NOT", "*", "a OR b", "(", ")", "NEAR(a b)", "col:foo", "^foo",
    "foo*bar", "'", '"""', "-", "+", "{a b}", "\\", "\x00", "a" * 1000, "..."])
def test_hostile_queries_never_raise(store: Store, query: str) -> None:
    chat(store, "t", "foo bar AND baz NOT qux")
    hits = store.search(query)
    assert isinstance(hits, list)


def test_queries_with_operators_are_plain_words(store: Store) -> None:
    _, (msg,) = chat(store, "t", "this AND that OR NOT those")
    assert [h.message_id for h in store.search("AND that OR")] == [msg]
    assert [h.message_id for h in store.search('"that')] == [msg]
    assert store.search("") == [] and store.search("  ( * ) ") == []
    assert fts_query('say "hi"') == '"say" """hi"""*'


def test_snippets_escape_html(store: Store) -> None:
    _, (msg,) = chat(store, "<i>t</i>", "<script>alert('x')</script> & find me")
    (hit,) = store.search("find")
    assert hit.message_id == msg and hit.title == "<i>t</i>"
    assert hit.snippet == ("&lt;script&gt;alert('x')&lt;/script&gt; &amp; <b>find</b> me")


def test_non_ascii_search_ignores_case_and_accents(store: Store) -> None:
    _, ids = chat(store, "Ünïcode", "Ein Café in Zürich", "Привет, МИР", "naïve résumé",
                  "東京 に 行きます")
    assert [h.message_id for h in store.search("cafe zurich")] == [ids[0]]
    assert store.search("café")[0].snippet == "Ein <b>Café</b> in Zürich"
    assert [h.message_id for h in store.search("мир")] == [ids[1]]
    assert store.search("мир")[0].snippet == "Привет, <b>МИР</b>"
    assert [h.message_id for h in store.search("NAIVE Resume")] == [ids[2]]
    assert [h.message_id for h in store.search("東京")] == [ids[3]]
    assert store.search("unicode")[0].snippet == "<b>Ünïcode</b>"


def test_long_messages_give_a_short_snippet(store: Store) -> None:
    chat(store, "t", "word " * 500 + "needle " + "word " * 500)
    (hit,) = store.search("needle")
    assert "<b>needle</b>" in hit.snippet and len(hit.snippet) < 200
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")


# -- export and import ----------------------------------------------------------------------

def branched(store: Store) -> int:
    conv = store.create_conversation("Branches ☕", preset="Code")
    system = store.add_message(conv, "system", "Be brief.", None)
    q = store.add_message(conv, "user", "Q", system)
    a1 = store.add_message(conv, "assistant", "A1", q, provenance={
        "model": "m.gguf", "model_sha256": "ab" * 32, "quant": "Q4_K_M", "n_ctx": 4096,
        "sampling": SamplingParams(temperature=0.0).to_dict(), "seed": 42,
        "template": "gguf", "timings": {"tokens": 3, "tokens_per_s": 50.5}})
    store.add_message(conv, "user", "more", a1)
    store.add_message(conv, "assistant", "A2", q, status="interrupted",
                      provenance={"model": "m.gguf"})
    store.select_sibling(a1)
    store.add_message(conv, "user", "other root", None)
    store.select_sibling(system)
    store.set_pinned(conv, True)
    return conv


def test_export_json_holds_the_whole_tree(store: Store) -> None:
    conv = branched(store)
    data = store.export_json(conv)
    assert (data["format"], data["version"]) == (CONVERSATION_FORMAT, 1)
    assert (data["title"], data["pinned"], data["preset"]) == ("Branches ☕", True, "Code")
    summary = store.conversation(conv)
    assert (data["created_at"], data["updated_at"]) == (summary.created_at, summary.updated_at)
    brief = [(m["id"], m["parent"], m["content"], m["active"], m["status"])
             for m in data["messages"]]
    assert brief == [(1, None, "Be brief.", True, "complete"), (2, 1, "Q", True, "complete"),
                     (3, 2, "A1", True, "complete"), (4, 3, "more", True, "complete"),
                     (5, 2, "A2", False, "interrupted"), (6, None, "other root", False,
                                                          "complete")]
    assert data["messages"][2]["provenance"]["timings"] == {"tokens": 3, "tokens_per_s": 50.5}
    assert json.loads(json.dumps(data)) == data  # plain JSON


def test_import_then_export_is_exact(store: Store) -> None:
    original = store.export_json(branched(store))
    imported = store.import_json(copy.deepcopy(original))
    assert store.export_json(imported) == original
    assert [m.content for m in store.active_path(imported)] == ["Be brief.", "Q", "A1", "more"]
    again = store.import_json(store.export_json(imported))
    assert store.export_json(again) == original
    assert store.conversation(again).pinned


def test_import_rejects_what_is_not_an_export(store: Store) -> None:
    good = store.export_json(branched(store))
    before = len(store.conversations())
    bad_cases = [
        {}, [], {"format": "other"}, {**good, "version": 99}, {**good, "version": "1"},
        {**good, "messages": "nope"},
        {**good, "messages": [{"id": 1, "parent": 7, "role": "user", "content": "x"}]},
        {**good, "messages": [{"id": 1, "role": "user", "content": 3}]},
        {**good, "messages": [{"id": 1, "role": "user", "content": "x", "status": "?"}]},
        {**good, "messages": [{"id": [1], "role": "user", "content": "x"}]},
        {**good, "messages": [{"id": 1, "role": "user", "content": "x"},
                              {"id": 1, "role": "user", "content": "y"}]},
    ]
    for bad in bad_cases:
        with pytest.raises(ValueError):
            store.import_json(bad)  # type: ignore[arg-type]
    assert len(store.conversations()) == before  # nothing half-imported


def test_a_minimal_hand_written_export_imports(store: Store) -> None:
    conv = store.import_json({"format": CONVERSATION_FORMAT, "version": 1, "messages": [
        {"id": "a", "role": "user", "content": "hi"},
        {"id": "b", "parent": "a", "role": "assistant", "content": "hello"}]})
    assert [m.content for m in store.active_path(conv)] == ["hi", "hello"]
    assert store.conversation(conv).title == "Imported chat"


def test_export_all_and_import_all(store: Store) -> None:
    first = branched(store)
    second = store.create_conversation("second")
    store.add_message(second, "user", "hello", None)
    gone = store.create_conversation("in the bin")
    store.delete(gone)
    store.save_preset(Preset("Mine", "x", SamplingParams(top_k=3)))
    archive = store.export_all()
    assert archive["format"] == "inglenook.archive" and archive["version"] == 1
    assert archive["exported_at"] > 0
    assert archive["conversations"] == [store.export_json(first), store.export_json(second)]
    assert [p["name"] for p in archive["presets"]][-1] == "Mine"
    json.dumps(archive)

    with Store(store.path.with_name("other.db")) as fresh:
        ids = fresh.import_all(archive)
        assert [fresh.export_json(i) for i in ids] == archive["conversations"]
        assert [p for p in fresh.presets() if p.name == "Mine"] == [
            Preset("Mine", "x", SamplingParams(top_k=3))]
        fresh.import_all(archive)  # presets are not duplicated, conversations are added
        assert len(fresh.presets()) == 5 and len(fresh.conversations()) == 4
        with pytest.raises(ValueError):
            fresh.import_all(archive["conversations"][0])


def test_markdown_export_shows_the_branch_on_screen(store: Store) -> None:
    conv = branched(store)
    assert store.export_markdown(conv) == (
        "# Branches ☕\n\n## System\n\nBe brief.\n\n## You\n\nQ\n\n"
        "## Assistant · m.gguf\n\nA1\n\n## You\n\nmore\n")
    (a2,) = store.search("A2")
    store.select_sibling(a2.message_id)
    assert store.export_markdown(conv).endswith(
        "## Assistant · m.gguf\n\nA2\n\n*(interrupted)*\n")


def test_a_chats_own_settings_are_exported_and_restored(store: Store) -> None:
    conv = branched(store)
    assert "settings" not in store.export_json(conv)  # none of its own: the file is as before
    values = {"system_prompt": "Answer in French.",
              "sampling": SamplingParams(temperature=0.2, seed=5, stop=("###",)).to_dict()}
    store.set_chat_settings(conv, None, values)
    exported = store.export_json(conv)
    assert exported["settings"] == values and exported["preset"] is None
    again = store.import_json(copy.deepcopy(exported))
    assert store.chat_settings(again) == (None, values)
    assert store.export_json(again) == exported
    with Store(store.path.with_name("other.db")) as fresh:
        (copied,) = fresh.import_all(store.export_some([again]))
        assert fresh.chat_settings(copied) == (None, values)


def test_imported_settings_are_clamped_and_checked(store: Store) -> None:
    data = store.export_json(branched(store))
    wild = {"system_prompt": "x", "sampling": {"temperature": 50, "top_k": -3, "bogus": 1},
            "overflow": "truncate", "nested": {"dropped": True}}
    conv = store.import_json({**data, "settings": wild})
    assert store.chat_settings(conv)[1] == {
        "system_prompt": "x", "overflow": "truncate",
        "sampling": SamplingParams(temperature=2.0, top_k=0).to_dict()}
    before = len(store.conversations())
    for bad in ({"sampling": {}}, {"system_prompt": "x"}, {"system_prompt": "x", "sampling": 1},
                "text", [1]):
        with pytest.raises(ValueError, match="settings must be an object"):
            store.import_json({**data, "settings": bad})
    assert len(store.conversations()) == before


def test_export_some_names_the_presets_its_chats_use(store: Store) -> None:
    store.save_preset(Preset("Mine", "x", SamplingParams(top_k=3)))
    store.save_preset(Preset("Unused", "y", SamplingParams()))
    first = store.create_conversation("first", preset="mine")
    second = store.create_conversation("second")
    archive = store.export_some([second, first])
    assert [c["title"] for c in archive["conversations"]] == ["second", "first"]
    assert [p["name"] for p in archive["presets"]] == ["Mine"]
    with pytest.raises(KeyError):
        store.export_some([first, 999])


def test_markdown_export_names_the_sources_a_reply_was_given(store: Store) -> None:
    conv, (question,) = chat(store, "Owls", "Where does the barn owl nest?")
    given = {"knowledge": {"collections": ["Notes"], "text": "…", "tokens": 30, "sources": [
        {"number": 1, "collection": "Notes", "path": "/n/owl.md", "location": "line 3",
         "chunk_id": 4},
        {"number": 2, "collection": "Notes", "path": "/n/mill.pdf",
         "location": "page 2, lines 1–4", "chunk_id": 9}]}}
    store.add_message(conv, "assistant", "In the old mill [1].", question, provenance=given)
    assert store.export_markdown(conv).endswith(
        "In the old mill [1].\n\n"
        "*Sources: [1] /n/owl.md, line 3; [2] /n/mill.pdf, page 2, lines 1–4*\n")
    assert store.export_json(conv)["messages"][-1]["provenance"] == given
