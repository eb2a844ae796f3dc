"""The engine process, one per loaded model: the ONLY package that imports llama_cpp, and in it
only `llama/` (the adapter) touches llama-cpp-python's low-level API.

Run as `python -m inglenook.engine.host` (a frozen bundle: `inglenook --engine-host`). Requests
arrive on stdin and events leave on the process's original stdout (engine/protocol.py).

    process.py     the process and protocol loop: requests in, events out, stops at once
    batch.py       the decode loop: one llama.cpp batch a step over every active sequence
    sequences.py   one reply being written: its sampler, stop strings, text and figures
    slots.py       the sequences' KV memory: which slot a reply gets, what it reuses
    tokenizing.py  prompts to tokens (only template markup makes control tokens), tokens to text
    loading.py     a model loaded: the memory check first, then llama.cpp, template, draft
    jobs.py        tuning threads and batch size, quantizing
    llama/         the adapter: model, context, batch, sampler chains, KV memory calls

Importing this package does not import llama_cpp: the benchmarks and the client read the cores.
"""

from __future__ import annotations

from inglenook.engine.host.machine import logical_cores, physical_cores

__all__ = ["logical_cores", "main", "physical_cores"]


def main() -> int:
    from inglenook.engine.host.process import main as run

    return run()
