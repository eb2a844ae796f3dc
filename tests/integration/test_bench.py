"""`make bench` must keep running: the whole benchmark in its quick mode (tiny counts), every
figure docs/performance.md quotes present. The figures themselves are not checked: speed lives
in bench/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.bench_report import load_report

ROOT = Path(__file__).resolve().parents[2]
DOC_KEYS = [key for row in load_report().table_keys(
    (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")) for key in row]


def test_the_benchmark_runs_to_the_end(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick",
                           "--output", str(output)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(output.read_text())
    missing = [key for key in DOC_KEYS if key not in results]
    assert not missing, f"bench no longer reports {missing}"
    assert all(isinstance(results[key], (int, float)) for key in DOC_KEYS)
    assert results["quick"] is True
    assert output.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
