"""Full-text search over message contents and conversation titles (FTS5).

The user's text is never parsed as FTS5 syntax: each word becomes a quoted phrase (all must
match, in any order), and the last word also matches as a prefix, so results appear while the
user is still typing. Matching ignores case and accents ("cafe" finds "café"). Scripts written
without spaces (Chinese, Japanese) are indexed by runs of characters: a word inside a run is not
found on its own.

Title matches come first (a title says what a conversation is about; best BM25 rank first),
then messages, newest first: chat search is mostly "where did we talk about X lately", and
walking the index backwards by rowid stops after `limit` hits, where ranking by BM25 must score
every match (100k matches: ~3 ms against ~100 ms). Messages still streaming and conversations in
the bin are not searched.

A reply's reasoning is searched with its answer. The snippet comes from the answer when the
answer matches, otherwise from the reasoning, marked "Reasoning:" (and SearchHit.in_reasoning).
"""

from __future__ import annotations

import html
import sqlite3

from inglenook.store.records import SearchHit, text

_START, _END = "\x02", "\x03"  # markers unlikely in chat text, turned into <b> after escaping
SNIPPET_TOKENS = 16
REASONING_MARK = "<i>Reasoning:</i> "

_TITLE_HITS = f"""
SELECT c.id,
       (SELECT m.id FROM messages m WHERE m.conversation_id = c.id AND m.parent_id IS NULL
        ORDER BY m.active_seq DESC, m.id DESC LIMIT 1),
       c.title,
       highlight(conversations_fts, 0, '{_START}', '{_END}')
FROM conversations_fts JOIN conversations c ON c.id = conversations_fts.rowid
WHERE conversations_fts MATCH :query AND c.deleted_at IS NULL
ORDER BY rank, c.updated_at DESC
LIMIT :limit
"""

_MESSAGE_HITS = f"""
SELECT m.conversation_id, m.id, c.title,
       snippet(messages_fts, 0, '{_START}', '{_END}', '…', {SNIPPET_TOKENS}),
       snippet(messages_fts, 1, '{_START}', '{_END}', '…', {SNIPPET_TOKENS})
FROM messages_fts
JOIN messages m ON m.id = messages_fts.rowid
JOIN conversations c ON c.id = m.conversation_id
WHERE messages_fts MATCH :query AND c.deleted_at IS NULL
ORDER BY messages_fts.rowid DESC
LIMIT :limit
"""


def fts_query(user_text: str) -> str | None:
    """The FTS5 query for what the user typed, or None if it holds nothing searchable."""
    words = [w for w in user_text.split() if any(ch.isalnum() for ch in w)]
    if not words:
        return None
    phrases = ['"' + w.replace('"', '""') + '"' for w in words]
    phrases[-1] += "*"
    return " ".join(phrases)


def highlight_html(marked: str) -> str:
    escaped = html.escape(marked, quote=False)
    return escaped.replace(_START, "<b>").replace(_END, "</b>")


def search(conn: sqlite3.Connection, user_text: str, limit: int) -> list[SearchHit]:
    query = fts_query(user_text)
    if query is None or limit <= 0:
        return []
    hits: list[SearchHit] = []
    for conv_id, root_id, title, marked in conn.execute(
            _TITLE_HITS, {"query": query, "limit": limit}):
        hits.append(SearchHit(int(conv_id), int(root_id or 0), text(title),
                              highlight_html(text(marked)), in_title=True))
    remaining = limit - len(hits)
    if remaining > 0:
        for conv_id, msg_id, title, in_answer, in_reasoning in conn.execute(
                _MESSAGE_HITS, {"query": query, "limit": remaining}):
            # A column without a match still gives a snippet (its start), without markers.
            marked, reasoning = text(in_answer), False
            if _START not in marked and _START in text(in_reasoning):
                marked, reasoning = text(in_reasoning), True
            snippet = (REASONING_MARK if reasoning else "") + highlight_html(marked)
            hits.append(SearchHit(int(conv_id), int(msg_id), text(title), snippet, reasoning))
    return hits


_IN_CONVERSATION = """
SELECT m.id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
WHERE messages_fts MATCH :query AND m.conversation_id = :conv
"""


def in_conversation(conn: sqlite3.Connection, conv_id: int, user_text: str) -> list[int]:
    """The messages of one conversation whose answer (or question) holds every word typed,
    the last one as a prefix, any branch: Find in this chat (Ctrl+F). Reasoning is not
    searched: what is found must be what the bubble shows."""
    query = fts_query(user_text)
    if query is None:
        return []
    return [int(row[0]) for row in conn.execute(
        _IN_CONVERSATION, {"query": f"content : ({query})", "conv": conv_id})]
