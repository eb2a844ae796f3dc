"""A chat's reply format: a schema checked as typed, kept with the chat and its replies, and a
JSON reply shown pretty-printed and checked against it."""

from __future__ import annotations

import json

import pytest

from inglenook.chat.chat_settings import ChatSettings
from inglenook.core.messages import JSON_OBJECT
from inglenook.core.provenance import Provenance
from inglenook.core.reply_format import schema_problem, shown_reply

SCHEMA = json.dumps({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}})


@pytest.mark.parametrize(("text", "says"), [
    ("{x", "not JSON"),
    ("[1]", "is an object"),
    ('{"type": "integr"}', "not a valid JSON Schema"),
    ('{"type": "integer", "minimum": 1}', "cannot be held to minimum"),
])
def test_a_schema_that_cannot_hold_replies_says_why(text: str, says: str) -> None:
    assert says in schema_problem(text)


def test_a_json_reply_is_pretty_printed_and_checked_against_its_schema() -> None:
    shown, copied, problem = shown_reply('{"n": 1}', SCHEMA)
    assert (shown, copied, problem) == ('```json\n{\n  "n": 1\n}\n```', '{\n  "n": 1\n}', "")
    assert "at n: 'x' is not of type 'integer'" in shown_reply('{"n": "x"}', SCHEMA)[2]
    assert shown_reply("{oops", JSON_OBJECT) == ("```json\n{oops\n```", "{oops",
                                                  "This reply is not valid JSON.")
    fenced = shown_reply('{"a": "```"}', JSON_OBJECT)[0]
    assert fenced.startswith("````json\n") and fenced.endswith("\n````")


def test_reply_as_json_is_kept_with_the_chat_and_its_replies() -> None:
    settings = ChatSettings(reply_json=True, reply_schema=SCHEMA)
    assert settings.reply_format == SCHEMA
    assert ChatSettings(reply_json=True, reply_schema="  ").reply_format == JSON_OBJECT
    assert ChatSettings(reply_schema=SCHEMA).reply_format == ""  # off: the text is kept
    back = ChatSettings.stored(None, settings.to_dict(), [], ChatSettings())
    assert (back.reply_json, back.reply_schema) == (True, SCHEMA)
    odd = ChatSettings.stored(None, {"reply_json": "yes", "reply_schema": 5}, [],
                              ChatSettings())
    assert (odd.reply_json, odd.reply_schema) == (False, "")
    record = Provenance(reply_format=SCHEMA)
    assert Provenance.from_dict(record.to_dict()).reply_format == SCHEMA
    assert ("Reply format", "JSON") in Provenance(reply_format=JSON_OBJECT).describe()
