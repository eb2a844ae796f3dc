"""Presets: a named system prompt plus sampling settings, chosen per conversation.

Four are shipped (BUILTIN_PRESETS). A built-in preset can be edited: saving one under its name
updates it in place and it stays built-in; it cannot be deleted (StoreError). To restore a
built-in's shipped values, save the matching entry of BUILTIN_PRESETS. Names are unique
regardless of case ("code" is the built-in "Code").
"""

from __future__ import annotations

import json
import sqlite3

from inglenook.core.sampling import SamplingParams
from inglenook.store.errors import StoreError
from inglenook.store.records import Preset, load_dict, text

BUILTIN_PRESETS: tuple[Preset, ...] = (
    Preset("Balanced", "You are a helpful assistant.", SamplingParams(), builtin=True),
    Preset("Precise",
           "You are a careful, factual assistant. Answer accurately and concisely, and say so "
           "when you are not sure.",
           SamplingParams(temperature=0.2, top_k=40, top_p=0.9, min_p=0.05, repeat_penalty=1.1),
           builtin=True),
    Preset("Creative",
           "You are an imaginative writer. Be vivid, original and playful, and vary your "
           "sentences.",
           SamplingParams(temperature=1.0, top_k=100, top_p=0.98, min_p=0.02,
                          repeat_penalty=1.15, presence_penalty=0.3),
           builtin=True),
    Preset("Code",
           "You are an expert programmer. Write correct, idiomatic code in fenced blocks with the "
           "language named, and explain briefly.",
           # Penalising repeats hurts code, which repeats names and brackets by nature.
           SamplingParams(temperature=0.2, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0),
           builtin=True),
)
_BUILTIN_ORDER = {p.name.casefold(): i for i, p in enumerate(BUILTIN_PRESETS)}


def insert(conn: sqlite3.Connection, preset: Preset, builtin: bool = False) -> None:
    conn.execute("INSERT INTO presets (name, system_prompt, sampling, builtin) "
                 "VALUES (?, ?, ?, ?)",
                 (preset.name, preset.system_prompt, _sampling_json(preset.sampling), builtin))


def _sampling_json(sampling: SamplingParams) -> str:
    return json.dumps(sampling.to_dict(), sort_keys=True)


def _from_row(row: tuple) -> Preset:
    name, system_prompt, sampling, builtin = row
    return Preset(text(name), text(system_prompt),
                  SamplingParams.from_dict(load_dict(sampling, "preset sampling")), bool(builtin))


def list_presets(conn: sqlite3.Connection) -> list[Preset]:
    """The built-ins in shipped order, then the user's presets by name."""
    rows = conn.execute("SELECT name, system_prompt, sampling, builtin FROM presets").fetchall()
    found = [_from_row(r) for r in rows]
    return sorted(found, key=lambda p: (not p.builtin,
                                        _BUILTIN_ORDER.get(p.name.casefold(), len(_BUILTIN_ORDER)),
                                        p.name.casefold(), p.name))


def save(conn: sqlite3.Connection, preset: Preset) -> None:
    """Create or update by name; `preset.builtin` is ignored (the stored row decides)."""
    name = preset.name.strip()
    if not name:
        raise ValueError("A preset needs a name.")
    conn.execute(
        "INSERT INTO presets (name, system_prompt, sampling, builtin) VALUES (?, ?, ?, 0) "
        "ON CONFLICT (name) DO UPDATE SET system_prompt = excluded.system_prompt, "
        "sampling = excluded.sampling",
        (name, preset.system_prompt, _sampling_json(preset.sampling)))


def delete(conn: sqlite3.Connection, name: str) -> bool:
    """Delete a user preset; conversations that used it go back to no preset.
    Returns False if there was none by that name; raises StoreError for a built-in."""
    row = conn.execute("SELECT name, builtin FROM presets WHERE name = ?", (name,)).fetchone()
    if row is None:
        return False
    if row[1]:
        raise StoreError(f"“{row[0]}” is a built-in preset and cannot be deleted.", "builtin")
    conn.execute("DELETE FROM presets WHERE name = ?", (name,))
    conn.execute("UPDATE conversations SET preset = NULL WHERE preset = ? COLLATE NOCASE",
                 (row[0],))
    return True


def exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM presets WHERE name = ?", (name,)).fetchone() is not None
