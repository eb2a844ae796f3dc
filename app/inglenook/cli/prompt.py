"""`inglenook prompt`: the exact prompt the model would see for a message, without generating.

The engine renders the chat template, fits the context (history that would be left out is left
out) and tokenizes, as for a reply; this prints the result. With --json: {"prompt": str,
"tokens": [{"id": int, "piece": str, "special": bool}, ...]} and the context figures. With
--conversation ID the message is appended to that conversation's active branch, with its own
system prompt.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from inglenook.cli.chat import add_model_arguments, add_prompt_arguments, load_params, read_prompt
from inglenook.cli.common import UsageError, engine_session, fail
from inglenook.cli.options import spec_number
from inglenook.core.messages import GenerationRequest, Message, build_messages
from inglenook.core.sampling import SamplingParams


def add_parser(commands: argparse._SubParsersAction) -> None:
    prompt = commands.add_parser(
        "prompt", help="print the exact prompt the model would see for a message")
    add_prompt_arguments(prompt, required=False)
    add_model_arguments(prompt)
    prompt.add_argument("--system", default=None,
                        help="system prompt (default: the conversation's, or the app's)")
    prompt.add_argument("--conversation", metavar="ID", type=int,
                        help="append the message to this stored conversation")
    prompt.add_argument("--max-tokens", default="-1",
                        help="reply length to keep room for, as in chat (default: no limit)")
    prompt.add_argument("--json", action="store_true",
                        help="print the prompt and its tokens as JSON")


def conversation_messages(conv_id: int, system: str | None) -> list[Message]:
    """A stored conversation's active branch as a reply in the window would send it (its own
    system prompt, else its preset's, else the app's; `system` overrides)."""
    from inglenook.chat.session import ChatSession, ChatSettings
    from inglenook.core.settings import load_settings
    from inglenook.store import Store, StoreError

    try:  # read-only: the window may be writing a reply to this very conversation
        store = Store(read_only=True)
    except StoreError as exc:
        raise UsageError(f"cannot open the conversations: {exc}") from None
    try:
        fallback = ChatSettings(load_settings().system_prompt)
        session = ChatSession.open(store, conv_id, store.presets(), fallback)
        if system is None:
            return list(session.messages())
        return list(build_messages(system, session.turns()))
    except KeyError:
        raise UsageError(f"there is no conversation {conv_id}.") from None
    except StoreError as exc:
        raise UsageError(f"cannot read conversation {conv_id}: {exc}") from None
    finally:
        store.close()


def view_as_json(view: Any) -> dict[str, Any]:
    """A PromptView as the --json object."""
    return {"prompt": view.prompt,
            "tokens": [{"id": t.id, "piece": t.piece, "special": t.special} for t in view.tokens],
            "n_ctx": view.n_ctx, "dropped_messages": view.dropped_messages,
            "defused": view.defused}


def run(args: argparse.Namespace) -> int:
    from inglenook.engine.client import EngineClient

    try:
        load = load_params(args)
        max_tokens = int(spec_number("--max-tokens", args.max_tokens, "max_tokens"))
        text = read_prompt(args)
        if args.conversation is not None:
            messages = conversation_messages(args.conversation, args.system)
        elif text is None:
            raise UsageError("no message: give it as an argument, - for standard input, "
                             "--file PATH, or --conversation ID.")
        else:
            messages = list(build_messages(args.system or "", []))
        if text is not None:
            messages.append(Message("user", text))
        elif not messages or messages[-1].role != "user":
            raise UsageError(f"conversation {args.conversation} does not end with a question: "
                             "give the next message.")
    except UsageError as exc:
        fail(str(exc))
        return 2
    request = GenerationRequest(1, tuple(messages), SamplingParams(max_tokens=max_tokens))
    client = EngineClient()
    with engine_session(client) as end:
        client.load(load)
        view = client.inspect(request)
    if end.code:
        return end.code
    if args.json:
        json.dump(view_as_json(view), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(view.prompt)
        left_out = (f", {view.dropped_messages} earlier messages left out"
                    if view.dropped_messages else "")
        print(f"[{len(view.tokens):,} tokens of {view.n_ctx:,}{left_out}]", file=sys.stderr)
    return 0
