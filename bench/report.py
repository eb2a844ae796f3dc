"""Writes the figures of a `make bench` run into docs/performance.md's table, so the manual
shows the last run and nothing older: each row names its keys in its last cell (`a` / `b`),
and its value cell is rewritten from bench/results.json. A quick run is never written.

    python bench/report.py [results.json] [performance.md]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "performance.md"
START, END = "<!-- figures: written by bench/report.py -->", "<!-- end of figures -->"
UNITS = (("_tok_s", " tok/s"), ("_ms", " ms"), ("_mb", " MB"), ("_s", " s"))


def table_keys(text: str) -> list[list[str]]:
    """The keys of each row of the figures table, in order."""
    return [re.findall(r"`(\w+)`", row.rsplit("|", 2)[-2]) for row in _rows(text)]


def _rows(text: str) -> list[str]:
    body = text.split(START, 1)[1].split(END, 1)[0]
    return [line for line in body.splitlines() if line.startswith("| ") and "`" in line]


def shown(key: str, value: object) -> str:
    if not isinstance(value, (int, float)):
        return str(value)
    unit = next((u for suffix, u in UNITS if key.endswith(suffix)), "")
    figure = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if unit == "" \
        else f"{value:,.1f}"
    return figure + unit


def rewrite(text: str, results: dict[str, object], date: str) -> str:
    head, rest = text.split(START, 1)
    body, tail = rest.split(END, 1)
    lines = []
    for line in body.splitlines():
        if line.startswith("Figures of the run of "):
            line = f"Figures of the run of {date}."
        elif line.startswith("| ") and "`" in line:
            cells = line.split(" | ")
            keys = re.findall(r"`(\w+)`", cells[-1])
            if keys and all(k in results for k in keys):
                cells[-2] = "**" + " / ".join(shown(k, results[k]) for k in keys) + "**"
                line = " | ".join(cells)
        lines.append(line)
    return head + START + "\n".join(lines) + END + tail


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else HERE / "results.json"
    doc = Path(argv[1]) if len(argv) > 1 else DOC
    results = json.loads(source.read_text(encoding="utf-8"))
    if results.get("quick"):
        print("a quick run's figures mean nothing: docs/performance.md left as it is")
        return 0
    date = str(results.get("date", "unknown date"))
    doc.write_text(rewrite(doc.read_text(encoding="utf-8"), results, date), encoding="utf-8")
    print(f"wrote the figures of {source} into {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
