"""What to paste into another app so that it talks to this server: "Connect an app…" in the
window and `inglenook connect` print the same guides, filled in with the server's address, the
model's name as /v1/models lists it, and the token (or a placeholder when there is none)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection
from dataclasses import dataclass, replace

OPENAI, ANTHROPIC, RESPONSES, OLLAMA = "openai", "anthropic", "responses", "ollama"
DIALECT_NAMES = {OPENAI: "OpenAI chat completions (/v1/chat/completions)",
                 ANTHROPIC: "Anthropic Messages (/v1/messages)",
                 RESPONSES: "OpenAI Responses (/v1/responses)",
                 OLLAMA: "Ollama's API (/api/chat)"}
SERVED = (OPENAI, ANTHROPIC, RESPONSES)  # and OLLAMA where it is turned on
NO_TOKEN = "none"  # what a client sends as its key when the server asks for no token
OLLAMA_APPS = "Ollama clients (the ollama library, Goose, n8n, Raycast, Copilot Chat…)"
# What works with each app, as the tests measure it (through its official SDK, or its exact
# request shapes): docs/api.md's table of clients × features says the same, and a test holds them
# together (tests/unit/server/test_connect.py).
WORKS = {
    "OpenAI client (Python)": "chat and completions, streamed or whole; tools (a forced call "
    "too; cut by `max_tokens`: `length`); `response_format`, `responses.parse()`; reasoning "
    "and `reasoning_tokens`; images; seeded `n`; Responses kept, with retrieve, delete and "
    "`input_items`; embeddings",
    "Anthropic client (Python)": "messages, streamed or whole; tools; `output_config`, "
    "`messages.parse()`; thinking (refused where the model cannot); `stop_sequences` with "
    "`stop_sequence`; a prefilled reply continued; `count_tokens`",
    OLLAMA_APPS: "`/api/chat`, `/api/generate` (`raw` too), `/api/embed`, `show` for every "
    "model, tags, the root check, the load, unload and preload idioms, `num_ctx`; `pull` "
    "from the Hugging Face Hub (`hf.co/owner/repo:QUANT`) with progress, where the user "
    "allows downloads",
    "Claude Code": "its requests: streaming, tools, thinking, `max_tokens: 32000` a cap, not "
    "a reservation (a model that calls tools and a long context make it useful)",
    "Codex": "Responses: streamed events in order, `previous_response_id` (kept in the "
    "profile, per token), function tools, `text.format`",
    "Continue": "OpenAI chat; or its Ollama provider: chat with `num_ctx`, autocomplete with "
    "`raw` and `suffix`",
    "Open WebUI": "OpenAI chat and models; or Ollama's API, with its `:latest` names",
    "Zed": "OpenAI-compatible chat; or its Ollama provider: `num_ctx`, `show` for every "
    "model, `keep_alive`",
}


@dataclass(frozen=True)
class Guide:
    app: str
    dialect: str  # the API it speaks (one of DIALECT_NAMES)
    where: str  # where the text goes
    text: str
    note: str = ""
    served: bool = True  # whether this server speaks its dialect

    @property
    def works(self) -> str:
        """What works with this app, as the tests measure it ("" : not measured)."""
        found = WORKS.get(self.app, "").replace("`", "")  # plain text in the window
        return f"Works here: {found}." if found else ""

    @property
    def unserved(self) -> str:
        """Why it cannot connect yet, or ""."""
        if self.served:
            return ""
        return (f"{self.app} speaks {DIALECT_NAMES[self.dialect]}, which this server does "
                "not serve yet.")


def guides(url: str, model: str, token: str, context: int = 8192,
           dialects: Collection[str] = SERVED, ollama_url: str = "") -> list[Guide]:
    """One guide an app: `url` is the server's root (http://127.0.0.1:8080), `token` the first
    of its tokens ("" for none), `context` the loaded model's context length."""
    key = token or NO_TOKEN
    v1 = f"{url}/v1"
    model = model or "default"
    # A model's name is its file's: quoted for the shell, and as JSON strings in TOML and YAML.
    sh_model, sh_key, q_model = shlex.quote(model), shlex.quote(key), json.dumps(model)
    env = "INGLENOOK_API_KEY"  # Zed derives it from the provider's name
    docker = url.replace("127.0.0.1", "host.docker.internal").replace("localhost",
                                                                      "host.docker.internal")
    hello = {"model": model, "messages": [{"role": "user", "content": "Hello"}]}
    zed = {"language_models": {"openai_compatible": {"Inglenook": {
        "api_url": v1, "available_models": [{"name": model, "max_tokens": context}]}}}}
    found = [
        Guide("OpenAI client (Python)", OPENAI, "a Python script", (
            "from openai import OpenAI\n\n"
            f"client = OpenAI(base_url={v1!r}, api_key={key!r})\n"
            "reply = client.chat.completions.create(\n"
            f"    model={model!r}, messages=[{{\"role\": \"user\", \"content\": \"Hello\"}}])\n"
            "print(reply.choices[0].message.content)\n")),
        Guide("Anthropic client (Python)", ANTHROPIC, "a Python script", (
            "from anthropic import Anthropic\n\n"
            f"client = Anthropic(base_url={url!r}, api_key={key!r})\n"
            "reply = client.messages.create(\n"
            f"    model={model!r}, max_tokens=1024,\n"
            "    messages=[{\"role\": \"user\", \"content\": \"Hello\"}])\n"
            "print(reply.content[0].text)\n")),
        Guide("curl", OPENAI, "a terminal", (
            f"curl {v1}/chat/completions \\\n"
            + (f"  -H {shlex.quote('Authorization: Bearer ' + token)} \\\n" if token else "")
            + "  -H 'Content-Type: application/json' \\\n"
            f"  -d {shlex.quote(json.dumps(hello))}\n")),
        Guide("Claude Code", ANTHROPIC, "a terminal, before starting claude", (
            f"export ANTHROPIC_BASE_URL={url}\n"
            f"export ANTHROPIC_AUTH_TOKEN={sh_key}\n"
            f"export ANTHROPIC_MODEL={sh_model}\n"
            f"export ANTHROPIC_DEFAULT_HAIKU_MODEL={sh_model}\n"
            "claude\n"),
            "Claude Code needs a model that calls tools and a long context (32k or more)."),
        Guide("Codex", RESPONSES, "~/.codex/config.toml, then the terminal", (
            f"model = {q_model}\n"
            'model_provider = "inglenook"\n\n'
            "[model_providers.inglenook]\n"
            'name = "Inglenook"\n'
            f'base_url = "{v1}"\n'
            'wire_api = "responses"\n'
            f'env_key = "{env}"\n\n'
            f"# in the terminal:\nexport {env}={sh_key}\ncodex\n")),
        Guide("Continue", OPENAI, "~/.continue/config.yaml, under models:", (
            "models:\n"
            "  - name: Inglenook\n"
            "    provider: openai\n"
            f"    model: {q_model}\n"
            f"    apiBase: {v1}\n"
            f"    apiKey: {key}\n")),
        Guide("Aider", OPENAI, "a terminal", (
            f"aider --model {shlex.quote('openai/' + model)} --openai-api-base {v1} "
            f"--openai-api-key {sh_key}\n")),
        Guide("Open WebUI", OPENAI, "Admin Settings → Connections → OpenAI API → Add", (
            f"URL: {v1}\nKey: {key}\n"),
            f"Open WebUI in Docker reaches this computer as {docker}/v1: the server must then "
            "listen on other addresses too (with a token), and accept that host name."),
        Guide("Zed", OPENAI, "settings.json (zed: open settings), merged in; then the key", (
            json.dumps(zed, indent=2) + "\n\n"
            "# the key: Agent settings → LLM Providers → Inglenook, or before starting zed:\n"
            f"export {env}={sh_key}\n")),
    ]
    if ollama_url:
        dialects = {*dialects, OLLAMA}
        found.append(Guide(OLLAMA_APPS, OLLAMA,
                           "the app's Ollama setting", f"Ollama URL: {ollama_url}\n"
                           f"Model: {model}\n"))
    return [g if g.dialect in dialects else replace(g, served=False) for g in found]
