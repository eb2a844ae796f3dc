"""`inglenook models …`: search, download, list, remove and quantize models."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from inglenook import paths
from inglenook.cli.common import fail

if TYPE_CHECKING:
    from pathlib import Path

    from inglenook.models.compat import Compatibility
    from inglenook.models.download import RetryNotice
    from inglenook.models.hub import RepoListing
    from inglenook.models.library import ModelEntry


def add_parser(commands: argparse._SubParsersAction) -> None:
    models = commands.add_parser("models",
                                 help="search, download, list, remove and quantize models")
    sub = models.add_subparsers(dest="models_command", required=True, metavar="COMMAND")
    search = sub.add_parser("search", help="search the Hugging Face Hub for GGUF models")
    search.add_argument("query", help="words in the repository name")
    search.add_argument("--sort", choices=("downloads", "likes", "recent"), default="downloads")
    search.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    files = sub.add_parser("files", help="a Hub repository's GGUF files, by quantization")
    files.add_argument("repo", help="owner/name")
    download = sub.add_parser(
        "download", help="download a GGUF file from the Hub (resumes a partial download)")
    download.add_argument("repo", help="owner/name")
    download.add_argument("file", help="file in the repository; for a split model, any part")
    download.add_argument("--revision", default="main", help="branch, tag or commit")
    sub.add_parser("list", help="installed models, with what their GGUF headers say")
    rm = sub.add_parser("rm", help="delete a downloaded model, every part of a split one (or a "
                                   "partial download)")
    rm.add_argument("name", help="model name or file name, as `inglenook models list` shows")
    rm.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    quantize = sub.add_parser(
        "quantize", help="make a smaller copy of a local model with llama.cpp's quantizer",
        description="Writes the copy into the models folder after checking that it loads and "
                    "answers. Ctrl-C cancels and keeps nothing.")
    quantize.add_argument("source", help="a GGUF file, or a model name as `inglenook models "
                                         "list` shows")
    quantize.add_argument("type", metavar="TYPE", help="e.g. Q4_K_M, Q5_K_M, Q8_0 (one of: "
                          "F16 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 "
                          "IQ4_NL IQ4_XS Q3_K_L Q3_K_M Q3_K_S Q2_K)")
    quantize.add_argument("--allow-requantize", action="store_true",
                          help="quantize a source that is already quantized below Q8_0 "
                               "(it loses quality twice)")
    quantize.add_argument("--even-if-larger", action="store_true",
                          help="make the copy even when it would be no smaller than the source")
    quantize.add_argument("--threads", type=int, default=0, help="default: all cores")


# -- inglenook models … ---------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    from inglenook.models.download import DownloadError
    from inglenook.models.filenames import UnsafeFileName
    from inglenook.models.hub import HubError

    command = {"search": _models_search, "files": _models_files, "download": _models_download,
               "list": _models_list, "rm": _models_rm,
               "quantize": _models_quantize}[args.models_command]
    try:
        return command(args)
    except (HubError, DownloadError, UnsafeFileName) as exc:
        return fail(str(exc))


def _models_search(args: argparse.Namespace) -> int:
    from inglenook.models.hub import search_models

    results = search_models(args.query, sort=args.sort, limit=args.limit)
    if not results:
        print(f"No GGUF repositories match {args.query!r}.")
        return 0
    width = max(len(r.id) for r in results)
    print(f"{'REPOSITORY':<{width}}  {'DOWNLOADS':>10}  {'LIKES':>6}  UPDATED")
    for r in results:
        updated = r.last_modified.date().isoformat() if r.last_modified else "-"
        gated = "  (gated)" if r.gated else ""
        vision = "  (reads images)" if r.vision else ""
        print(f"{r.id:<{width}}  {r.downloads:>10,}  {r.likes:>6,}  {updated}{gated}{vision}")
    return 0


def _models_files(args: argparse.Namespace) -> int:
    from inglenook.core.units import describe_size
    from inglenook.models.advice import vision_note
    from inglenook.models.hub import list_gguf_files

    listing = list_gguf_files(args.repo)
    if not listing.models:
        print(f"{args.repo} has no GGUF files.")
        return 0
    verdict = _verdict(args.repo, listing)
    label = "  Won't load" if verdict is not None and verdict.wont_load else ""
    for quant, models in listing.by_quant().items():
        for m in models:
            parts = f"  ({len(m.parts)} of {m.parts_expected} parts)" if m.is_split else ""
            print(f"{quant or '?':<10} {describe_size(m.size):>9}  {m.parts[0].path}{parts}"
                  f"{label}")
    if label and verdict is not None:
        print(f"\n{verdict.sentence}")
    if listing.projector is not None:
        print(f"\n{vision_note(listing)}")
    print(f"\nDownload one with: inglenook models download {args.repo} FILE")
    return 0


def _verdict(repo: str, listing: RepoListing) -> Compatibility | None:
    """Whether the bundled llama.cpp can load the repository's model, from the smallest file's
    header (its first megabytes), as the window's Hub panel labels it; None when the header
    cannot be read (offline, not a GGUF header): the listing stands without it."""
    from inglenook.models import compat, hub
    from inglenook.models.advice import header_file
    from inglenook.models.gguf import GGUFError
    from inglenook.models.remote_header import remote_header

    try:
        header = remote_header(repo, header_file(listing), listing.commit or "main")
    except (hub.HubError, GGUFError, OSError):
        return None
    return compat.check(header)


class _ProgressLine:
    """One line on stderr, redrawn in place: percent, megabytes, speed, time left."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.width = 0
        self.last = 0.0
        self.started = False

    def __call__(self, done: int, total: int, speed: float, eta: float | None) -> None:
        import time

        if not self.started:
            self.started = True
            if done:
                self._line(f"Resuming {self.name} from {done / 1e6:,.1f} MB", end=True)
        now = time.monotonic()
        if done < total and now - self.last < 0.2:
            return
        self.last = now
        percent = 100 * done / total if total else 0.0
        left = "--:--" if eta is None else f"{int(eta) // 60:02d}:{int(eta) % 60:02d}"
        self._line(f"{self.name}  {percent:5.1f}%  {done / 1e6:,.1f}/{total / 1e6:,.1f} MB  "
                   f"{speed / 1e6:6.1f} MB/s  ETA {left}")

    def retry(self, notice: RetryNotice) -> None:
        self._line(f"{notice.reason} Retrying in {notice.delay_s:.1f} s.", end=True)

    def _line(self, text: str, end: bool = False) -> None:
        sys.stderr.write("\r" + text.ljust(self.width) + ("\n" if end else ""))
        sys.stderr.flush()
        self.width = 0 if end else len(text)

    def finish(self) -> None:
        if self.width:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.width = 0


def _models_download(args: argparse.Namespace) -> int:
    from inglenook.models.download import download_file
    from inglenook.models.filenames import looks_like_projector, saved_name, split_name

    split = split_name(args.file)
    files = split.all_parts if split else [args.file]
    for name in files:
        saved_name(args.repo, name)  # refuse a bad name before anything is sent
    if not looks_like_projector(args.file):
        files += _projector_of(args.repo, args.revision)
    for name in files:
        bar = _ProgressLine(saved_name(args.repo, name))
        try:
            path = download_file(args.repo, name, args.revision, progress=bar,
                                 on_retry=bar.retry)
        except KeyboardInterrupt:
            bar.finish()
            print(f"inglenook: paused; the partial download is kept. To resume, run again: "
                  f"inglenook models download {args.repo} {args.file}", file=sys.stderr)
            return 130
        finally:
            bar.finish()
        if not bar.started:
            print(f"{path.name} is already installed (its sha256 matches the Hub's).",
                  file=sys.stderr)
        print(path)
    return 0


def _projector_of(repo: str, revision: str) -> list[str]:
    """The vision projector a model of this repository needs, downloaded with it (as the
    window's Discover does); none for a text-only repository."""
    from inglenook.models.hub import list_gguf_files

    projector = list_gguf_files(repo, revision).projector
    if projector is None:
        return []
    print(f"{repo} is a vision model: its projector {projector.path} comes with it.",
          file=sys.stderr)
    return [projector.path]


def _models_list(args: argparse.Namespace) -> int:
    from pathlib import Path

    from inglenook.core.units import describe_params, describe_size
    from inglenook.models import compat
    from inglenook.models.gguf import GGUFError, read_header
    from inglenook.models.library import (
        installed_models,
        quantization,
        split_parts,
    )
    from inglenook.models.partials import find_partials

    entries = installed_models()
    if not entries:
        print("No models installed. Find one with: inglenook models search QUERY")
    for e in entries:
        try:
            h = read_header(e.path)
            verdict = compat.check(h)
            arch = h.architecture or "unknown architecture"
            facts = [f"{arch} · {compat.WONT_LOAD}" if verdict.wont_load else arch,
                     f"{describe_params(h.parameter_count)} parameters",
                     quantization(h, e.path) or "unknown quantization",
                     f"context {h.context_length:,}" if h.context_length else "context ?",
                     "chat template" if h.chat_template else "no chat template"]
            summary = " · ".join(facts)
            if verdict.wont_load:  # as the Library's details say it
                summary += f"\n    {verdict.sentence}"
        except GGUFError as exc:
            summary = f"unreadable: {exc}"
        parts = len(split_parts(Path(e.path)))
        split = f"{parts} parts, " if parts > 1 else ""
        kind = "embedding model, " if e.embedding else ""
        print(f"{e.name}  ({kind}{e.source}, {split}{describe_size(e.size_bytes)})")
        print(f"    {summary}")
        print(f"    {e.path}")
    for p in find_partials():
        percent = 100 * p.done_bytes / p.size if p.size else 0.0
        print(f"{p.final_path.name}  (partial download, {percent:.0f}% of "
              f"{describe_size(p.size)})")
        print(f"    resume: inglenook models download {p.repo} {p.filename}")
        print(f"    delete: inglenook models rm {p.final_path.name}")
    return 0


def _confirm(question: str) -> bool:
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _models_rm(args: argparse.Namespace) -> int:
    from inglenook.models.library import find_installed, installed_models
    from inglenook.models.partials import find_partials

    name = args.name
    matches = find_installed(name, installed_models())
    local = [e for e in matches if e.source == "local"]
    partials = [p.final_path for p in find_partials() if name in (p.final_path.name,
                                                                   p.final_path.stem)]
    if len(local) > 1:
        return fail(f"{name} is ambiguous: " + ", ".join(e.path for e in local))
    if local or (matches and not partials):
        return _remove_model((local or matches)[0], args.yes)
    if partials:
        return _remove_partial(partials[0], args.yes)
    return fail(f"No downloaded model is called {name} (see: inglenook models list).")


def _remove_model(entry: ModelEntry, yes: bool) -> int:
    """Every part of a split model, or only the link of a linked one: the Library page's plan."""
    import os

    from inglenook.core.units import describe_size
    from inglenook.models.library import LibraryError, plan_removal, remove

    removal = plan_removal(entry, paths.models_dir())
    if removal.refusal:
        return fail(removal.refusal)
    first = removal.files[0]
    if removal.link_only:
        question = (f"Remove the link {first}? The file it points to "
                    f"({os.path.realpath(first)}) stays.")
    elif len(removal.files) > 1:
        question = (f"Delete {first} and its {len(removal.files) - 1} other parts "
                    f"({describe_size(removal.size_bytes)})?")
    else:
        question = f"Delete {first} ({describe_size(removal.size_bytes)})?"
    if not yes and not _confirm(question):
        print("Not deleted.")
        return 1
    try:
        remove(removal)
    except LibraryError as exc:
        return fail(str(exc))
    for file in removal.files:
        print(f"Removed the link {file}" if removal.link_only else f"Deleted {file}")
    return 0


def _remove_partial(final: Path, yes: bool) -> int:
    from inglenook.core.units import describe_size
    from inglenook.models.library import is_inside
    from inglenook.models.partials import discard_partial, part_path

    target = part_path(final)
    if not is_inside(target.parent, paths.models_dir()):
        return fail(f"{target} is not in the models folder ({paths.models_dir()}); "
                    "not deleting it.")
    if not yes and not _confirm(f"Delete {target} ({describe_size(target.lstat().st_size)})?"):
        print("Not deleted.")
        return 1
    discard_partial(final)
    print(f"Deleted {target}")
    return 0


def _models_quantize(args: argparse.Namespace) -> int:
    from pathlib import Path

    from inglenook.core.units import describe_size
    from inglenook.engine.quantize import (
        Progress,
        QuantizeCancelled,
        QuantizeError,
        Quantizer,
        plan,
    )
    from inglenook.models.library import find_installed, installed_models

    source = Path(args.source)
    if not source.is_file():
        found = find_installed(args.source, installed_models())
        if not found:
            return fail(f"No file or installed model is called {args.source} "
                        "(see: inglenook models list).")
        source = Path(found[0].path)
    try:
        job = Quantizer(plan(source, args.type, allow_requantize=args.allow_requantize),
                        threads=args.threads)
    except QuantizeError as exc:
        return fail(str(exc))
    if not job.plan.smaller and not args.even_if_larger:  # said before anything is written
        return fail(f"{job.plan.not_smaller()} --even-if-larger makes it anyway.")
    bar = _ProgressLine(job.plan.output.name)
    print(f"Quantizing {source.name} to {job.plan.type} (about "
          f"{describe_size(job.plan.estimate_bytes)}; {describe_size(job.plan.free_bytes)} "
          "free)…", file=sys.stderr)

    def show(progress: Progress) -> None:
        import time

        now = time.monotonic()
        if progress.stage == "quantizing" and now - bar.last < 0.2:
            return
        bar.last = now
        if progress.stage == "quantizing":
            eta = "--:--" if progress.eta_s is None else (
                f"{int(progress.eta_s) // 60:02d}:{int(progress.eta_s) % 60:02d}")
            bar._line(f"{bar.name}  {100 * progress.fraction:5.1f}%  tensor "
                      f"{progress.tensors_done}/{progress.tensors_total}  "
                      f"{describe_size(progress.written_bytes)} written  ETA {eta}")
        elif progress.stage == "checking":
            bar._line(f"{bar.name}  written ({describe_size(progress.written_bytes)}); checking "
                      "that it loads and answers…")

    try:
        output = job.run(show)
    except KeyboardInterrupt:
        job.cancel()
        bar.finish()
        print("inglenook: cancelled; nothing was kept.", file=sys.stderr)
        return 130
    except QuantizeCancelled:
        bar.finish()
        print("inglenook: cancelled; nothing was kept.", file=sys.stderr)
        return 130
    except QuantizeError as exc:
        bar.finish()
        return fail(str(exc))
    bar.finish()
    size = output.stat().st_size
    print(f"{output.name}: {describe_size(size)} ({size / source.stat().st_size:.0%} of the "
          f"source), quantized in {job.seconds:.1f} s, checked.", file=sys.stderr)
    print(output)
    return 0
