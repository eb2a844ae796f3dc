"""Kill a process that is streaming replies into the store, 20 times at random moments (50 in
`make bench`, which runs the `long` tests).

The writer (tests/fixtures/store/crash_writer.py) reports each commit on stdout right after it
returns; its stdout is a file, so what was written before the SIGKILL is all there. Each run
reopens the database the previous run was killed in (recovery, marking replies interrupted,
and in the first run the migration itself are killed too). At the end the file must be sound
and hold everything reported.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from inglenook.store import Store

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

WRITER = Path(__file__).resolve().parents[1] / "fixtures" / "store" / "crash_writer.py"
# Of make test's 20 kills (the same seed's first 20 delays), six come within 0.15 s of the
# spawn (while the store opens); the long form's 50 add more of the same, for ~10 s more.
RUNS, LONG_RUNS = 20, 50
SEED = 20240509
MIN_DELAY_S, MAX_DELAY_S = 0.05, 0.6  # from spawn: some kills land while the store opens


def run_and_kill(db: Path, log: Path, seed: int, delay: float) -> str:
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(WRITER), str(db), str(seed)],
                                stdout=out, stderr=subprocess.PIPE)
        try:
            time.sleep(delay)
            exited = proc.poll()
            proc.send_signal(signal.SIGKILL)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert exited is None, f"the writer stopped by itself: {stderr.decode(errors='replace')}"
    return log.read_text()


def committed_lines(output: str) -> list[list[str]]:
    """Whole lines only: a line cut by the kill was not reported."""
    return [line.split() for line in output.splitlines(keepends=True) if line.endswith("\n")]


@dataclass
class Tally:
    """What the writers reported as committed, over all runs."""

    added: set[int] = field(default_factory=set)
    saved_length: dict[int, int] = field(default_factory=dict)  # reply id → characters saved
    completed: set[int] = field(default_factory=set)
    runs: int = RUNS

    def figures(self) -> str:
        return (f"{self.runs} kills, {len(self.added)} committed messages, "
                f"{len(self.saved_length)} streamed replies, {len(self.completed)} completed")


def kill_repeatedly(db: Path, logs: Path, runs: int) -> Tally:
    rng = random.Random(SEED)
    tally = Tally(runs=runs)
    for run in range(runs):
        output = run_and_kill(db, logs / f"run{run}.log", run,
                              rng.uniform(MIN_DELAY_S, MAX_DELAY_S))
        for kind, msg_id, *rest in committed_lines(output):
            if kind == "m":
                tally.added.add(int(msg_id))
            else:
                tally.saved_length[int(msg_id)] = int(rest[0])
                if kind == "c":
                    tally.completed.add(int(msg_id))
    return tally


@pytest.mark.parametrize("runs", [RUNS, pytest.param(LONG_RUNS, marks=pytest.mark.long)])
def test_kills_at_random_moments_lose_nothing_committed(tmp_path: Path, runs: int) -> None:
    db = tmp_path / "inglenook.db"
    tally = kill_repeatedly(db, tmp_path, runs)
    added, saved_length, completed = tally.added, tally.saved_length, tally.completed
    figures = tally.figures()
    assert len(added) > runs, f"the writer hardly wrote anything: {figures}"

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], figures
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
        conn.execute("INSERT INTO conversations_fts (conversations_fts) "
                     "VALUES ('integrity-check')")
        rows = {r[0]: (len(r[1]), r[2]) for r in
                conn.execute("SELECT id, content, status FROM messages")}
    finally:
        conn.close()
    missing = sorted(added - rows.keys())
    assert not missing, f"committed messages lost: {missing[:20]} ({figures})"
    shorter = [i for i, n in saved_length.items() if rows[i][0] < n]
    assert not shorter, f"saved text lost from replies {shorter[:20]} ({figures})"
    not_complete = [i for i in completed if rows[i][1] != "complete"]
    assert not not_complete, f"completed replies not complete: {not_complete[:20]} ({figures})"

    with Store(db) as store:  # what the app sees on its next start
        assert store.recovered_from is None, figures
        statuses = {m.status for c in store.conversations() for m in store.active_path(c.id)}
        assert "streaming" not in statuses, figures
    assert not list(tmp_path.glob("*.corrupt-*")), figures
    assert os.path.getsize(db) > 0
