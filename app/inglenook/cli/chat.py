"""`inglenook chat`: answer one prompt on the command line."""

from __future__ import annotations

import argparse
import sys

from inglenook import paths
from inglenook.cli.common import fail
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    chat = commands.add_parser("chat", help="answer one prompt on the command line")
    chat.add_argument("prompt", help="what to ask")
    chat.add_argument("--model", help="a .gguf file (default: the bundled model)")
    chat.add_argument("--ctx", type=int, default=0,
                      help="context length (default: the model's, at most 8192)")
    chat.add_argument("--temperature", type=float, default=SamplingParams.temperature)
    chat.add_argument("--seed", type=int, default=-1, help="fixed seed (default: random)")
    chat.add_argument("--max-tokens", type=int, default=-1,
                      help="longest reply in tokens (default: no limit)")
    chat.add_argument("--threads", type=int, default=0,
                      help="CPU threads (default: all physical cores)")
    chat.add_argument("--system", default="", help="system prompt")
    chat.add_argument("--stats", action="store_true", help="print speed figures to stderr")


def run(args: argparse.Namespace) -> int:
    from inglenook.engine import protocol as p
    from inglenook.engine.client import EngineClient, EngineError

    model = args.model or paths.bundled_model_path()
    if model is None:
        return fail("no model given and the bundled model is not installed (make setup).")
    load = LoadParams(str(model), n_ctx=args.ctx, n_threads=args.threads)
    sampling = SamplingParams(temperature=args.temperature, seed=args.seed,
                              max_tokens=args.max_tokens)
    messages = ((Message("system", args.system),) if args.system else ()) + (
        Message("user", args.prompt),)
    client = EngineClient()
    try:
        client.load(load)
        finish = None
        for event in client.generate(GenerationRequest(1, messages, sampling)):
            if isinstance(event, p.Delta):
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, p.ReplyStats) and args.stats:
                s = event.stats
                print(f"\n[{s.generated_tokens} tokens, {s.decode_tok_s:.1f} tok/s, "
                      f"TTFT {s.ttft_s * 1000:.0f} ms]", file=sys.stderr)
            elif isinstance(event, p.Finished):
                finish = event.finish
        sys.stdout.write("\n")
        if finish is not None and finish.reason == "error":
            return fail(finish.message)
        return 0
    except EngineError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()


