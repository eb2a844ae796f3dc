"""Reading Inglenook's own JSON (export.py writes it) into a checked ImportBatch."""

from __future__ import annotations

import base64
import binascii
import threading
import time

from inglenook.core.attachments import ATTACHMENT_KINDS, Attachment
from inglenook.core.images import MAX_FILE_BYTES, ImageRefused, decode_image
from inglenook.core.units import count
from inglenook.store.checks import (
    InvalidImport,
    Repairs,
    flag,
    is_number,
    one_line,
    optional_string,
    role,
    shown,
    string,
)
from inglenook.store.export import ARCHIVE_FORMAT, CONVERSATION_FORMAT, FORMAT_VERSION
from inglenook.store.imports import ImportBatch, ImportedConversation, ImportedMessage
from inglenook.store.records import STATUSES, Preset, split_reply
from inglenook.tools.cards import ToolCard

DEFAULT_TITLE = "Imported chat"


def check_format(data: object, expected: str) -> dict:
    if not isinstance(data, dict) or data.get("format") != expected:
        raise InvalidImport(f"not an Inglenook export (expected format “{expected}”)")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidImport("the export has no valid format version")
    if version > FORMAT_VERSION:
        raise InvalidImport(f"the export was made by a newer Inglenook (format v{version})")
    return data


def read_conversation_export(data: object,
                             cancelled: threading.Event | None = None) -> ImportBatch:
    """{"format": "inglenook.conversation", …}; ImportCancelled once `cancelled` is set."""
    repairs = Repairs(cancelled)
    batch = ImportBatch("an Inglenook conversation",
                        [read_conversation(data, "", repairs)])
    batch.notes += repairs.sentences()
    return batch


def read_archive(data: object, cancelled: threading.Event | None = None) -> ImportBatch:
    """{"format": "inglenook.archive", "conversations": […], "presets": […]}; ImportCancelled
    once `cancelled` is set (checked before each conversation and each image)."""
    data = check_format(data, ARCHIVE_FORMAT)
    convs, found = data.get("conversations", []), data.get("presets", [])
    if not isinstance(convs, list) or not isinstance(found, list):
        raise InvalidImport("“conversations” and “presets” must be lists")
    repairs = Repairs(cancelled)
    batch = ImportBatch("an Inglenook archive")
    for n, item in enumerate(found, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InvalidImport(f"preset {n} needs a name")
        where = f"preset {n} (“{one_line(item['name'])}”)"
        batch.presets.append(Preset(
            string(item["name"], f"{where}: its name"),
            string(item.get("system_prompt"), f"{where}: its system_prompt", default=""),
            repairs.sampling(item.get("sampling") or {}, where)))
    for n, item in enumerate(convs, start=1):
        repairs.check_cancelled()
        title = item.get("title") if isinstance(item, dict) else None
        where = f"conversation {n}" + (f" (“{one_line(title)}”)" if isinstance(title, str)
                                       else "")
        batch.conversations.append(read_conversation(item, f"{where}, ", repairs))
    batch.notes += repairs.sentences()
    return batch


def read_attachments(value: object, what: str, repairs: Repairs | None = None
                     ) -> tuple[Attachment, ...]:
    """A message's "attachments" (export.attachment_dict); missing in files from before v4.
    Each image is decoded with core/images.py's bounds, as an attached one is: one that is not
    an image read here (damaged, a bomb, another format) is left out and named in the import's
    summary (`repairs`), never stored."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(a, dict) for a in value):
        raise InvalidImport(f"{what}: “attachments” must be a list of objects")
    repairs = repairs if repairs is not None else Repairs()
    found = []
    for n, item in enumerate(value, start=1):
        where = f"{what}, attachment {n}"
        kind = item.get("kind")
        if kind not in ATTACHMENT_KINDS:
            raise InvalidImport(f"{where} has an unknown kind {shown(kind)}")
        content = string(item.get("text"), f"{where}: its text", default="")
        data = b""
        if item.get("data") is not None:
            try:
                data = base64.b64decode(string(item["data"], f"{where}: its data"),
                                        validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InvalidImport(f"{where}: its data is not base64") from exc
        size = item.get("size")  # only shown: a wrong one is repaired, not refused
        name = string(item.get("name"), f"{where}: its name")
        mime = string(item.get("mime"), f"{where}: its mime type", default="")
        if kind == "image":
            repairs.check_cancelled()  # a decode may take a second: Cancel stops before it
            mime, why = _checked_image(data)
            if why:
                repairs.images.append(f"“{one_line(name)}” ({what}: {why})")
                continue
        found.append(Attachment(
            name=name, kind=kind, text=content,
            size=size if is_number(size) and isinstance(size, int) and size >= 0
            else len(data or content.encode("utf-8")),
            mime=mime, data=data))
    return tuple(found)


def _checked_image(data: bytes) -> tuple[str, str]:
    """The image's MIME type as its bytes say (not as the file claims), and "", or "" and why
    it cannot be used, in a few words."""
    if len(data) > MAX_FILE_BYTES:
        return "", f"it is {len(data):,} bytes; images up to {MAX_FILE_BYTES:,} are read"
    try:
        image = decode_image(data, "it")
    except ImageRefused as exc:
        return "", str(exc).rstrip(".")
    return (image.mime, "") if image.mime else ("", "it is not an image read here")


def read_cards(value: object, what: str) -> tuple[ToolCard, ...]:
    """A reply's "tool_cards" (v5; missing before). A card it cannot read is refused: a call
    dropped silently would leave its result without a question."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidImport(f"{what}: “tool_cards” must be a list")
    cards = [ToolCard.from_json(item) for item in value]
    if any(card is None for card in cards):
        raise InvalidImport(f"{what}: a tool call has no function name")
    return tuple(c for c in cards if c is not None)


def read_conversation(data: object, where: str, repairs: Repairs) -> ImportedConversation:
    """One exported conversation; `where` ("conversation 3 (“Title”), ") prefixes messages."""
    data = check_format(data, CONVERSATION_FORMAT)
    items = data.get("messages", [])
    if not isinstance(items, list) or not all(isinstance(m, dict) for m in items):
        raise InvalidImport(f"{where}“messages” must be a list of objects")
    stamp = time.time()
    created = repairs.timestamp(data.get("created_at"), stamp)
    messages: list[ImportedMessage] = []
    index: dict[object, int] = {}  # the file's id → position in `messages`
    for n, item in enumerate(items, start=1):
        what = f"{where}message {n}"
        parent, local_id = item.get("parent"), item.get("id")
        if not all(isinstance(v, (int, str, type(None))) and not isinstance(v, bool)
                   for v in (parent, local_id)):
            raise InvalidImport(f"{what}: ids must be numbers or text")
        if parent is not None and parent not in index:
            raise InvalidImport(f"{what} refers to a parent that does not come before it")
        if local_id is not None and local_id in index:
            raise InvalidImport(f"{what} repeats the id {shown(local_id)}")
        if not isinstance(item.get("role"), str) or not isinstance(item.get("content"), str):
            raise InvalidImport(f"{what} needs a text role and content")
        status = item.get("status", "complete")
        if status not in STATUSES:
            raise InvalidImport(f"{what} has an unknown status {shown(status)}")
        who = role(item["role"], what)
        content = string(item["content"], f"{what}: its content")
        if item.get("reasoning") is None:  # a file from before v3, or written by hand
            reasoning, content = split_reply(who, content)
        else:
            reasoning = string(item["reasoning"], f"{what}: its reasoning")
        attachments = read_attachments(item.get("attachments"), what, repairs)
        left_out = len(item.get("attachments") or ()) - len(attachments)
        if left_out and not content.strip() and not attachments:  # turns still alternate
            content = f"[{count(left_out, 'image')} not imported]"
        messages.append(ImportedMessage(
            parent=None if parent is None else index[parent],
            role=who,
            content=content,
            reasoning=reasoning,
            attachments=attachments,
            tool_cards=read_cards(item.get("tool_cards"), what),
            # An imported reply cannot be streaming: nothing is writing it any more.
            status="interrupted" if status == "streaming" else status,
            created_at=repairs.timestamp(item.get("created_at"), stamp),
            active=flag(item.get("active"), f"{what}: active"),
            provenance=repairs.provenance(item.get("provenance") or None, what)))
        if local_id is not None:
            index[local_id] = len(messages) - 1
    return ImportedConversation(
        title=string(data.get("title"), f"{where}the title", default=DEFAULT_TITLE),
        pinned=flag(data.get("pinned"), f"{where}pinned"),
        preset=optional_string(data.get("preset"), f"{where}the preset"),
        created_at=created,
        updated_at=repairs.timestamp(data.get("updated_at"), created),
        settings=repairs.settings(data.get("settings"), f"{where}settings"),
        messages=tuple(messages))
