"""A PNG of decode speed and time to first token for the four ways a reply is made: raw
llama-cpp-python, Inglenook's engine (the window's path), Inglenook's API server and
llama-cpp-python's own server (the peer). `bench/run.py` writes it next to results.json;
`python bench/chart.py results.json out.png` redraws it from saved figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display, no Qt: a file only
import matplotlib.pyplot as plt

# (label, decode tok/s key, TTFT of turn 12 key)
PATHS = [
    ("raw llama-cpp-python", "raw_decode_tok_s", "raw_ttft_turn12_ms"),
    ("Inglenook window", "engine_decode_tok_s", "ttft_turn12_ms"),
    ("Inglenook API", "api_decode_tok_s", "api_ttft_turn12_ms"),
    ("llama_cpp.server", "peer_decode_tok_s", "peer_ttft_turn12_ms"),
]
COLOURS = ["#8a8f98", "#c2663a", "#e0a04a", "#4a79b5"]


def draw(results: dict[str, Any], out: Path) -> Path:
    """Two bar charts side by side; a path whose figure is missing gets no bar."""
    fig, (speed, ttft) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for axes, column, title, unit in ((speed, 1, "Decode speed (higher is better)", "tok/s"),
                                      (ttft, 2, "TTFT, turn 12 of a resent chat "
                                       "(lower is better)", "ms")):
        labels, values, colours = [], [], []
        for row, colour in zip(PATHS, COLOURS, strict=True):
            value = results.get(row[column])
            if isinstance(value, (int, float)):
                labels.append(row[0])
                values.append(float(value))
                colours.append(colour)
        bars = axes.barh(labels, values, color=colours)
        axes.bar_label(bars, labels=[f"{v:.0f} {unit}" for v in values], padding=3)
        axes.invert_yaxis()
        axes.set_title(title, fontsize=10)
        axes.set_xlim(0, max(values, default=1) * 1.3)
        axes.spines[["top", "right"]].set_visible(False)
        axes.tick_params(axis="x", labelsize=8)
    model = results.get("model", "?")
    fig.suptitle(f"{model}, {results.get('threads', '?')} threads, greedy"
                 f"{' (quick run: figures mean nothing)' if results.get('quick') else ''}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python bench/chart.py RESULTS.json OUT.png", file=sys.stderr)
        return 2
    draw(json.loads(Path(argv[0]).read_text()), Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
