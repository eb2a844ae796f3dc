"""How a loaded model keeps its memory, and so what the engine can do with it: the typed
capability the engine host declares at load (ModelInfo.family) and every layer above reads,
never probes. docs/families.md says the same for people.

llama.cpp keeps three kinds of memory. A dense model (llama, qwen, and most mixtures of
experts) has a KV cache of every token: cells can be cut back to any prefix, shifted, and
saved and restored. A sliding-window model (Gemma 2/3, gpt-oss, Cohere 2) attends to its last
`n_swa` tokens in most layers; llama.cpp keeps all the cells of those layers only with several
streams (n_seq_max > 1, kv_unified off: "full-size SWA cache") or swa_full, and otherwise just
the window (the engine's shared KV pool, as llama-server), so a cache that no longer holds the
window before a cut cannot be cut back there. A recurrent
model (Mamba, RWKV) keeps one state per sequence that only moves forward, and a hybrid one
(Qwen3-Next, LFM2, Granite 4 H, Falcon-H1, Nemotron-H) keeps such a state beside its KV
cache: a state is used whole, at the length it was saved, or not at all.
Qt-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MemoryKind = Literal["dense", "sliding-window", "recurrent", "hybrid"]


@dataclass(frozen=True)
class MemoryFamily:
    kind: MemoryKind = "dense"
    n_swa: int = 0  # the sliding window, in tokens (0: none)
    swa_full: bool = False  # every token's cells kept in the sliding-window layers too
    n_experts: int = 0  # experts of a mixture (0: dense feed-forward)
    n_experts_used: int = 0  # experts each token goes through

    @property
    def trims_anywhere(self) -> bool:
        """Cells can be cut back to any prefix (prefix reuse of a shorter match, rejected
        guesses dropped, a regenerated reply): dense memory, or a full sliding-window cache.
        A window-only cache can be cut back only while its cells cover the window before the
        cut (SlotStates asks the slot's memory), recurrent state never."""
        if self.kind == "sliding-window":
            return self.swa_full
        return self.kind == "dense"

    @property
    def states_whole(self) -> bool:
        """A saved state is used only at its full length (recurrent state cannot be cut back);
        a window-only cache's is cut back when, restored, its cells cover the window."""
        return self.kind in ("recurrent", "hybrid")

    @property
    def restored_whole(self) -> bool:
        """A saved state, once restored, is only extended, never cut back: recurrent state,
        and a window-only sliding cache (llama.cpp saves only the window's cells of those
        layers). The engine then also keeps a state where each prompt ended (llama-server's
        context checkpoints): a chat's next turn extends it even where the last reply renders
        otherwise than it was written (a template trims it, its text tokenizes otherwise)."""
        return self.states_whole or (self.kind == "sliding-window" and not self.swa_full)

    @property
    def can_speculate(self) -> bool:
        """Guessed tokens can be checked and the rejected ones dropped from the cells."""
        return self.trims_anywhere

    @property
    def can_shift(self) -> bool:
        """A context shift (the rolling and middle overflow policies) can remove a block of
        cells and move the later ones down, instead of reading the kept part again."""
        return self.trims_anywhere

    def summary(self) -> str:
        """One line for the model's details, e.g. 'Sliding window of 512 tokens (cells of the
        whole context kept) · mixture of 8 experts, 2 per token'."""
        if self.kind == "sliding-window":
            kept = ("cells of the whole context kept" if self.swa_full
                    else "only the window kept: no trimming before it, no speculation")
            text = f"Sliding window of {self.n_swa} tokens ({kept})"
        elif self.kind == "recurrent":
            text = ("Recurrent state: saved and restored whole; no trimming, "
                    "context shift or speculation")
        elif self.kind == "hybrid":
            text = ("Hybrid (attention + recurrent state): states used whole; no trimming, "
                    "context shift or speculation")
        else:
            text = "Full attention"
        if self.n_experts:
            text += f" · mixture of {self.n_experts} experts, {self.n_experts_used} per token"
        return text
