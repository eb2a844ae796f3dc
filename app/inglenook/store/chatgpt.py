"""Reading ChatGPT's data export (`conversations.json`) into a checked ImportBatch.

The file is a list of conversations, each a tree: `mapping` holds nodes {id, parent, children,
message}, siblings are alternatives (an edited prompt, a regenerated reply) and `current_node`
is the leaf of the branch the user last saw. Inglenook's store keeps the same tree, so every
branch comes along and the one on screen stays on screen.

Not everything in a ChatGPT tree is conversation: the root has no message, system messages and
custom instructions are usually hidden, and images, audio and other non-text content cannot be
shown here. Those nodes are left out (their children move up to the nearest message that is
kept) and counted for the summary. A user or assistant turn that was only an image becomes
"[1 image not imported]", so that turns still alternate.

A reasoning model's thinking comes as nodes of their own before its answer: "thoughts" (a list
of {summary, content}) and a "reasoning_recap" ("Thought for 38s", with the seconds in its
metadata's finished_duration_sec). Their text becomes the reasoning of the next assistant
message below them, and the duration its reasoning time, ending when that message began.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from inglenook.core.units import count
from inglenook.store.checks import (
    InvalidImport,
    Repairs,
    clean,
    is_number,
    one_line,
    role,
    shown,
    string,
)
from inglenook.store.imports import ImportBatch, ImportedConversation, ImportedMessage
from inglenook.store.records import split_reply

DEFAULT_TITLE = "Imported chat"
# Content types whose text is in one field rather than in `parts`.
_TEXT_FIELD = {"code": "text", "execution_output": "text", "tether_quote": "text",
               "system_error": "text", "tether_browsing_display": "result"}
_ATTACHMENT = {"image_asset_pointer": "image", "audio_asset_pointer": "audio clip",
               "real_time_user_audio_video_asset_pointer": "audio clip",
               "video_container_asset_pointer": "video"}
_UNFINISHED = {"in_progress", "finished_partial_completion"}
_REASONING = ("thoughts", "reasoning_recap")
_MAX_THINKING_S = 86_400.0  # a day: a longer "thought for" is a broken value


@dataclass(frozen=True)
class _Thinking:
    """Reasoning read from the nodes above a message, waiting for the reply it belongs to."""

    text: str = ""
    seconds: float | None = None  # from a reasoning_recap

    def then(self, later: _Thinking) -> _Thinking:
        text = "\n\n".join(t for t in (self.text, later.text) if t)
        return _Thinking(text, self.seconds if later.seconds is None else later.seconds)

    def __bool__(self) -> bool:
        return bool(self.text) or self.seconds is not None


def looks_like_chatgpt(data: object) -> bool:
    return isinstance(data, list) and (not data or (isinstance(data[0], dict)
                                                    and "mapping" in data[0]))


def read_chatgpt(data: list) -> ImportBatch:
    repairs, left = Repairs(), Counter[str]()
    batch = ImportBatch("a ChatGPT export")
    for n, conv in enumerate(data, start=1):
        batch.conversations.append(_conversation(conv, n, repairs, left))
    if left:
        items = [count(n, noun) for noun, n in left.most_common()]
        batch.notes.append("left out " + (", ".join(items[:-1]) + " and " + items[-1]
                                          if len(items) > 1 else items[0]))
    batch.notes += repairs.sentences()
    return batch


def _conversation(conv: object, n: int, repairs: Repairs,
                  left: Counter[str]) -> ImportedConversation:
    if not isinstance(conv, dict):
        raise InvalidImport(f"conversation {n} is not an object")
    title = conv.get("title")
    where = f"conversation {n}" + (f" (“{one_line(title)}”)" if isinstance(title, str) else "")
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise InvalidImport(f"{where} has no “mapping” of messages")
    created = repairs.timestamp(conv.get("create_time"), time.time())
    kids = _children(mapping, where)
    active: set[str] = set()  # current_node and its ancestors
    node_id = conv.get("current_node")
    while isinstance(node_id, str) and node_id in mapping and node_id not in active:
        active.add(node_id)
        node_id = mapping[node_id].get("parent")

    # Depth first, parents before children, without recursion: a chat may be thousands deep.
    messages: list[ImportedMessage] = []
    none = _Thinking()
    stack: list[tuple[str, int | None, float, _Thinking]] = [
        (k, None, created, none) for k in reversed(kids.get(None, []))]
    reached = 0
    while stack:
        key, parent, parent_time, thinking = stack.pop()
        reached += 1
        message = _message(mapping[key].get("message"), f"{where}, message {shown(key)}",
                           parent_time, repairs, left)
        if isinstance(message, _Thinking):
            thinking = thinking.then(message)
        elif message is not None:
            if message["role"] == "assistant" and thinking:
                _add_thinking(message, thinking)
            elif thinking:
                left["unanswered reasoning block"] += 1
            thinking = none
            messages.append(ImportedMessage(parent=parent, active=key in active, **message))
            parent, parent_time = len(messages) - 1, message["created_at"]
        children = kids.get(key, [])
        if thinking and not children:  # a reply stopped while it was thinking
            left["unanswered reasoning block"] += 1
        stack.extend((child, parent, parent_time, thinking) for child in reversed(children))
    if reached < len(mapping):  # nodes whose parents form a loop
        left["unreachable message"] += len(mapping) - reached
    return ImportedConversation(
        title=string(title, f"{where}: the title", default=DEFAULT_TITLE) or DEFAULT_TITLE,
        pinned=False, preset=None, created_at=created,
        updated_at=repairs.timestamp(conv.get("update_time"), created),
        settings=None, messages=tuple(messages))


def _children(mapping: dict, where: str) -> dict[str | None, list[str]]:
    """Each node's children, in the order its `children` list gives (creation order), then any
    it does not list; None → the roots (no parent, or a parent that is not in the file)."""
    kids: dict[str | None, list[str]] = {}
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise InvalidImport(f"{where}, message {shown(key)} is not an object")
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise InvalidImport(f"{where}, message {shown(key)}: its parent must be an id, not "
                                f"{shown(parent)}")
        kids.setdefault(parent if parent in mapping else None, []).append(key)
    for parent, found in kids.items():
        listed = mapping[parent].get("children") if parent is not None else None
        if isinstance(listed, list):
            order: dict[object, int] = {}
            for i, child in enumerate(listed):
                if isinstance(child, str):
                    order.setdefault(child, i)
            found.sort(key=lambda child: order.get(child, len(listed)))  # stable: rest last
    return kids


def _add_thinking(message: dict, thinking: _Thinking) -> None:
    """Give a reply the reasoning of the nodes above it, and its reasoning time."""
    message["reasoning"] = "\n\n".join(t for t in (thinking.text, message["reasoning"]) if t)
    if thinking.seconds is not None:
        # The recap's own create_time is unreliable (exports have it after the answer's).
        ended = message["created_at"]
        message["provenance"] = {**message["provenance"],
                                 "reasoning_started_at": ended - thinking.seconds,
                                 "reasoning_ended_at": ended}


def _thinking(raw: dict, content: dict) -> _Thinking:
    """A thoughts or reasoning_recap node. Lenient: what is not text is skipped, for a format
    that changes without notice should not cost the user the whole file."""
    if content["content_type"] == "reasoning_recap":
        metadata = raw.get("metadata")
        seconds = metadata.get("finished_duration_sec") if isinstance(metadata, dict) else None
        if is_number(seconds) and 0 <= seconds <= _MAX_THINKING_S:
            return _Thinking("", float(seconds))
        return _Thinking()  # the recap's words ("Thought for 38s") say nothing more
    texts = []
    thoughts = content.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else []:
        if not isinstance(thought, dict):
            continue
        summary, body = thought.get("summary"), thought.get("content")
        summary = clean(summary).strip() if isinstance(summary, str) else ""
        body = clean(body).strip() if isinstance(body, str) else ""
        if summary and body and not body.startswith(summary):
            texts.append(f"**{summary}**\n\n{body}")
        elif body or summary:
            texts.append(body or summary)
    return _Thinking("\n\n".join(texts))


def _message(raw: object, what: str, default_time: float, repairs: Repairs,
             left: Counter[str]) -> dict | _Thinking | None:
    """The fields of an ImportedMessage, the reasoning a node holds for the reply below it,
    or None for a node that is left out."""
    if raw is None:
        return None  # the tree's root, or a placeholder node
    if not isinstance(raw, dict):
        raise InvalidImport(f"{what} is not an object")
    author = raw.get("author")
    who = role(author.get("role") if isinstance(author, dict) else None, what)
    metadata = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    if metadata.get("is_visually_hidden_from_conversation") is True:
        left["hidden message"] += 1
        return None
    content = raw.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("content_type"), str):
        raise InvalidImport(f"{what} has no content type")
    if content["content_type"] in _REASONING:
        return _thinking(raw, content)
    texts, attachments = _content(content, what)
    if texts is None:
        left["non-text message"] += 1
        return None
    left.update(attachments)
    text = "\n\n".join(clean(t) for t in texts if t.strip())
    if not text:
        if not attachments or who not in ("user", "assistant"):
            left["empty message"] += 1
            return None
        text = "[" + ", ".join(count(n, noun) for noun, n in Counter(attachments).items()) \
            + " not imported]"
    provenance = {}
    slug = metadata.get("model_slug")
    if who == "assistant" and isinstance(slug, str) and slug.strip():
        provenance = {"model": {"name": clean(slug[:200])}}
    reasoning, text = split_reply(who, text)
    return {"role": who, "content": text, "reasoning": reasoning,
            "status": "interrupted" if raw.get("status") in _UNFINISHED else "complete",
            "created_at": repairs.timestamp(raw.get("create_time"), default_time),
            "provenance": provenance}


def _content(content: dict, what: str) -> tuple[list[str] | None, list[str]]:
    """(the texts, the kinds of parts left out); texts None: a kind of content not read."""
    kind = content["content_type"]
    if kind in _TEXT_FIELD:
        value = content.get(_TEXT_FIELD[kind])
        text = "" if value is None else string(value, f"{what}: its {kind}")
        if kind == "code" and text.strip():
            language = content.get("language")
            tag = language if isinstance(language, str) and language.isalnum() \
                and language != "unknown" else ""
            text = f"```{tag}\n{text}\n```"
        return [text], []
    if kind not in ("text", "multimodal_text"):
        return None, []
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        raise InvalidImport(f"{what}: its parts must be a list")
    texts, attachments = [], []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("content_type") == "audio_transcription" \
                and isinstance(part.get("text"), str):
            texts.append(part["text"])  # voice mode: what was said
        else:
            kind = part.get("content_type") if isinstance(part, dict) else None
            attachments.append(_ATTACHMENT.get(kind, "attachment") if isinstance(kind, str)
                               else "attachment")
    return texts, attachments
