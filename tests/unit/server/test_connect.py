"""The guides of Connect an app…: each text is valid in the language of where it goes, and an
odd model name (it is a file's name) stays one value."""

from __future__ import annotations

import ast
import json
import shlex
from pathlib import Path

import pytest

from inglenook.server.connect import ANTHROPIC, NO_TOKEN, OPENAI, RESPONSES, guides

URL = "http://127.0.0.1:8080"
ODD = "it's a \"model\" $(rm -rf ~) name"


def guide(app: str, model: str = "m", token: str = "", **kw: object):  # type: ignore[no-untyped-def]
    (found,) = [g for g in guides(URL, model, token, **kw) if g.app == app]  # type: ignore[arg-type]
    return found


def exports(text: str) -> dict[str, str]:
    """What a shell's `export A=B` lines set."""
    words = [shlex.split(line)[1] for line in text.splitlines() if line.startswith("export ")]
    return dict(w.split("=", 1) for w in words)


def test_the_python_guide_compiles_and_names_the_server_model_and_token() -> None:
    tree = ast.parse(guide("OpenAI client (Python)", ODD, "tok").text)
    given = {k.arg: ast.literal_eval(k.value) for node in ast.walk(tree)
             if isinstance(node, ast.Call) for k in node.keywords if k.arg != "messages"}
    assert given == {"base_url": f"{URL}/v1", "api_key": "tok", "model": ODD}


@pytest.mark.parametrize("model", ["m", ODD])
def test_shell_guides_keep_the_model_one_word(model: str) -> None:
    claude = exports(guide("Claude Code", model).text)
    assert claude == {"ANTHROPIC_BASE_URL": URL, "ANTHROPIC_AUTH_TOKEN": NO_TOKEN,
                      "ANTHROPIC_MODEL": model, "ANTHROPIC_DEFAULT_HAIKU_MODEL": model}
    aider = shlex.split(guide("Aider", model, "tok").text)
    assert aider[aider.index("--model") + 1] == f"openai/{model}"
    assert aider[aider.index("--openai-api-key") + 1] == "tok"
    curl = shlex.split(guide("curl", model, "tok").text.replace("\\\n", " "))
    assert json.loads(curl[curl.index("-d") + 1])["model"] == model
    assert "Authorization: Bearer tok" in curl


def test_config_file_guides_parse() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    codex = guide("Codex", ODD, "tok").text
    config = tomllib.loads(codex.split("# in the terminal:")[0])
    provider = config["model_providers"][config["model_provider"]]
    assert config["model"] == ODD and provider["base_url"] == f"{URL}/v1"
    assert provider["wire_api"] == "responses"
    assert exports(codex)[provider["env_key"]] == "tok"
    zed = json.loads(guide("Zed", ODD, context=4096).text.split("\n\n#")[0])
    (entry,) = zed["language_models"]["openai_compatible"].values()
    assert entry["available_models"] == [{"name": ODD, "max_tokens": 4096}]


def test_an_app_whose_dialect_is_not_served_says_so() -> None:
    served = {g.app: g.unserved for g in guides(URL, "m", "", dialects=(OPENAI,))}
    assert "Anthropic Messages" in served["Claude Code"] and "Responses" in served["Codex"]
    assert served["Aider"] == "" and served["Zed"] == ""
    every = guides(URL, "m", "", dialects=(OPENAI, ANTHROPIC, RESPONSES))
    assert all(g.served for g in every)


def test_each_app_says_what_works_there_as_the_manuals_table() -> None:
    """docs/api.md's clients × features table and Connect an app say the same, line for line."""
    from inglenook.server.connect import OLLAMA_APPS, WORKS

    readme = (Path(__file__).parents[3] / "docs" / "api.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[-1].rstrip(" |") for line in readme.splitlines()
            if line.startswith("| ") and line.count(" | ") == 1}
    assert set(WORKS.values()) <= rows
    shown = {g.app: g.works for g in guides(URL, "m", "", ollama_url="http://127.0.0.1:11434")}
    for app in ("OpenAI client (Python)", "Anthropic client (Python)", OLLAMA_APPS, "Zed",
                "Continue", "Open WebUI", "Claude Code", "Codex"):
        assert shown[app] == f"Works here: {WORKS[app].replace('`', '')}."
    assert shown["curl"] == ""  # not measured: nothing claimed
    ast.parse(guide("Anthropic client (Python)", ODD, "tok").text)  # a script that runs
