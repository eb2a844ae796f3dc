"""Attachments in the store (schema v4): kept with their message, in order, on every branch;
deleted with it; carried by exports and imports only when a message has them; and a session
inlines them into what the model reads while the transcript keeps the typed text apart."""

from __future__ import annotations

import base64
import dataclasses
import io
import sqlite3
from collections.abc import Iterator

import pytest
from PIL import Image

from inglenook.chat.session import ChatSession
from inglenook.core.attachments import Attachment, inline
from inglenook.store import Store
from inglenook.store.checks import InvalidImport

CSV = Attachment("sales.csv", "csv", 31, "month,units\nJan,12\nFeb,30")
PDF = Attachment("Q1 report.pdf", "pdf", 18_342, "Units rose in February.")


def png(size: tuple[int, int] = (2, 2)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


IMAGE = Attachment("logo.png", "image", 12, mime="image/png", data=png())


@pytest.fixture
def store() -> Iterator[Store]:
    with Store() as s:
        yield s


def attachment_rows(store: Store) -> int:
    return store._conn.execute("SELECT count(*) FROM attachments").fetchone()[0]


def test_attachments_are_kept_in_order_with_their_message(store: Store) -> None:
    conv = store.create_conversation()
    q = store.add_message(conv, "user", "Which month?", None, attachments=[CSV, PDF, IMAGE])
    store.add_message(conv, "assistant", "February.", q)
    question, reply = store.active_path(conv)
    assert question.content == "Which month?"  # the typed text alone
    assert question.attachments == (CSV, PDF, IMAGE)
    assert reply.attachments == ()
    assert store.siblings(q)[0].attachments == (CSV, PDF, IMAGE)


def test_deleting_a_message_or_its_chat_deletes_its_attachments(store: Store) -> None:
    conv = store.create_conversation()
    first = store.add_message(conv, "user", "one", None, attachments=[CSV])
    store.add_message(conv, "user", "two", first, attachments=[PDF, IMAGE])
    assert attachment_rows(store) == 3
    store.delete_from(store.active_path(conv)[1].id)
    assert attachment_rows(store) == 1
    store.delete(conv)
    store.purge_deleted()
    assert attachment_rows(store) == 0


def test_a_failed_write_leaves_no_message_without_its_files(store: Store) -> None:
    conv = store.create_conversation()
    broken = Attachment("bad.txt", "text", 1, "x")
    store._conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON attachments "
                        "WHEN new.name = 'bad.txt' BEGIN SELECT RAISE(ABORT, 'no'); END")
    with pytest.raises(sqlite3.IntegrityError):
        store.add_message(conv, "user", "hello", None, attachments=[CSV, broken])
    assert store.active_path(conv) == []
    assert attachment_rows(store) == 0


def test_export_carries_attachments_only_when_a_message_has_them(store: Store) -> None:
    conv = store.create_conversation("Numbers")
    q = store.add_message(conv, "user", "Which month?", None, attachments=[CSV, IMAGE])
    store.add_message(conv, "assistant", "February.", q)
    data = store.export_json(conv)
    question, reply = data["messages"]
    assert question["attachments"] == [
        {"name": "sales.csv", "kind": "csv", "size": 31, "text": CSV.text},
        {"name": "logo.png", "kind": "image", "size": 12, "text": "", "mime": "image/png",
         "data": base64.b64encode(IMAGE.data).decode("ascii")}]
    assert "attachments" not in reply
    copy = store.import_json(data)
    assert store.active_path(copy)[0].attachments == (CSV, IMAGE)
    again = store.export_json(copy)
    assert again["messages"] == data["messages"]
    archive = store.export_all()
    assert [c["messages"][0].get("attachments") for c in archive["conversations"]] == [
        data["messages"][0]["attachments"]] * 2
    assert [len(store.active_path(i)[0].attachments) for i in store.import_all(archive)] == [2, 2]


def test_markdown_export_names_the_files(store: Store) -> None:
    conv = store.create_conversation("Numbers")
    store.add_message(conv, "user", "", None, attachments=[CSV, PDF])
    assert store.export_markdown(conv) == (
        "# Numbers\n\n## You\n\n*Attached: sales.csv · CSV · 31 B*\n"
        "*Attached: Q1 report.pdf · PDF · 18 KB*\n")


@pytest.mark.parametrize(("attachments", "error"), [
    ("a file", "“attachments” must be a list of objects"),
    ([{"name": "x", "kind": "spreadsheet"}], "attachment 1 has an unknown kind 'spreadsheet'"),
    ([{"name": 7, "kind": "text"}], "attachment 1: its name must be text"),
    ([{"name": "x.png", "kind": "image", "data": "not base64!"}], "its data is not base64"),
])
def test_an_import_with_bad_attachments_is_refused(store: Store, attachments: object,
                                                   error: str) -> None:
    conv = store.create_conversation()
    store.add_message(conv, "user", "hi", None)
    data = store.export_json(conv)
    data["messages"][0]["attachments"] = attachments
    with pytest.raises(InvalidImport, match=error):
        store.import_json(data)


def test_an_imported_image_that_does_not_decode_is_left_out_and_named(store: Store) -> None:
    from inglenook.store.native import read_conversation_export

    conv = store.create_conversation("Pictures")
    question = store.add_message(conv, "user", "And these?", None, attachments=[IMAGE, CSV])
    store.add_message(conv, "user", "", question, attachments=[IMAGE])
    data = store.export_json(conv)
    first, second = data["messages"]
    truncated = base64.b64encode(png((64, 64))[:60]).decode("ascii")
    first["attachments"][0].update(name="cut.png", data=truncated)
    bomb = io.BytesIO()  # a 4 KB PNG announcing 12,000 × 12,000 pixels
    Image.new("1", (12_000, 12_000)).save(bomb, "PNG")
    second["attachments"][0].update(name="bomb.png", mime="image/jpeg",
                                    data=base64.b64encode(bomb.getvalue()).decode("ascii"))
    batch = read_conversation_export(data)
    assert "left out 2 images that could not be read: “cut.png” (message 1: it is damaged" \
        in batch.summary()
    assert "“bomb.png” (message 2: it announces far more pixels" in batch.summary()
    copy = store.import_json(data)
    kept = store.active_path(copy)
    assert kept[0].attachments == (CSV,)  # nothing of the bad image is stored
    assert (kept[1].content, kept[1].attachments) == ("[1 image not imported]", ())
    assert store._conn.execute("SELECT count(*) FROM attachments WHERE kind = 'image'"
                               ).fetchone()[0] == 2  # the original's two


def test_an_imported_image_takes_the_type_its_bytes_say(store: Store) -> None:
    conv = store.create_conversation()
    store.add_message(conv, "user", "hi", None, attachments=[IMAGE])
    data = store.export_json(conv)
    data["messages"][0]["attachments"][0]["mime"] = "text/html"
    copy = store.import_json(data)
    assert store.active_path(copy)[0].attachments[0].mime == "image/png"


def test_an_imported_size_that_is_wrong_is_repaired(store: Store) -> None:
    conv = store.create_conversation()
    store.add_message(conv, "user", "hi", None)
    data = store.export_json(conv)
    data["messages"][0]["attachments"] = [{"name": "a.txt", "kind": "text", "size": -1,
                                           "text": "héllo"}]
    copy = store.import_json(data)
    assert store.active_path(copy)[0].attachments == (Attachment("a.txt", "text", 6, "héllo"),)


def test_a_session_sends_the_files_inlined_and_keeps_the_text_apart(store: Store) -> None:
    session = ChatSession(store)
    message = session.add_user("Which month?", [CSV, PDF])
    assert (message.content, message.attachments) == ("Which month?", (CSV, PDF))
    assert [(m.role, m.content) for m in session.turns()] == [
        ("user", inline("Which month?", [CSV, PDF]))]
    assert session.turns()[0].content.startswith("File: sales.csv\n```csv\nmonth,units")
    reopened = ChatSession.open(store, session.conv_id, [], session.settings)  # type: ignore[arg-type]
    assert reopened.turns() == session.turns()


def test_an_edited_question_keeps_its_files(store: Store) -> None:
    session = ChatSession(store)
    first = session.add_user("Which month?", [CSV])
    edited = session.edit_user(first.id, "Which month sold least?")
    assert (edited.content, edited.attachments) == ("Which month sold least?", (CSV,))


def test_a_chat_started_with_only_a_file_is_named_after_it(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("", [PDF])
    assert session.title == "Q1 report.pdf"
    used, exact = session.context_used()
    assert used >= PDF.tokens and not exact  # the meter counts the file


def test_an_images_counted_cost_is_kept_and_estimates_the_history(store: Store) -> None:
    big = dataclasses.replace(IMAGE, image_tokens=3_000, counted_by="/models/mmproj.gguf")
    session = ChatSession(store)
    session.add_user("What is this?", [big, dataclasses.replace(IMAGE, name="other.png")])
    (stored,) = store.active_path(session.conv_id)  # type: ignore[arg-type]
    assert [a.image_tokens for a in stored.attachments] == [3_000, 0]  # 0: never counted
    assert stored.attachments[0].counted_by == ""  # the projector loaded when it was sent
    outline = session.path.outline
    assert outline.attached[0] == len("logo.png") + 3_000 * 4 + len("other.png") + 768 * 4
    used, exact = session.context_used()
    assert not exact and used >= 3_000 + 768
