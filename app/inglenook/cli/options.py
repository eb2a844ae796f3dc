"""The command line's load and sampling options, built from LOAD_SPECS (core/load.py) and the
sampling SPECS: every option the window's side panel has, with the same ranges and the same
spelling of "automatic". Values are read as text and checked here, so a bad one gets one line
saying what is wrong (exit 2), not a usage screen or NaN reaching the engine."""

from __future__ import annotations

import argparse
import math

from inglenook.cli.common import UsageError
from inglenook.core.load import LOAD_SPECS, LoadParams, LoadParamsError, LoadSpec
from inglenook.core.sampling import SPECS, ParamSpec, SamplingParams
from inglenook.models.projector import with_projector

LOAD_DEST = "load_"  # argparse destinations: load_n_ctx, …
SAMPLING_DEST = "sampling_"
_SAMPLING_DEFAULTS = SamplingParams()


def number(option: str, raw: str, kind: type[int] | type[float], minimum: float,
           maximum: float | None = None) -> int | float:
    """`raw` as a finite number of `kind` within [minimum, maximum], or UsageError."""
    bounds = (f"from {_shown(minimum, kind)} to {_shown(maximum, kind)}" if maximum is not None
              else f"≥ {_shown(minimum, kind)}")
    what = "a whole number" if kind is int else "a number"
    try:
        value = kind(raw)
    except ValueError:
        raise UsageError(f"{option} must be {what} {bounds}, not {raw!r}.") from None
    if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
        raise UsageError(f"{option} must be {what} {bounds}, not {raw!r}.")
    return value


def _shown(value: float, kind: type[int] | type[float]) -> str:
    return str(int(value)) if kind is int else f"{value:g}"


# ---- loading ---------------------------------------------------------------------------------


def _load_help(spec: LoadSpec) -> str:
    if spec.kind == "int":
        return (f"{spec.help}, {_shown(spec.minimum, int)} to {_shown(spec.maximum, int)} "
                f"(default: {spec.describe_default()})")
    return f"{spec.help} (default: {spec.describe_default()})"


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag for every load option; one not given keeps LoadParams' default."""
    group = parser.add_argument_group("model loading")
    for spec in LOAD_SPECS.values():
        dest = LOAD_DEST + spec.name
        if spec.kind == "bool":  # --flash-attn / --no-flash-attn
            group.add_argument(spec.flag, dest=dest, action=argparse.BooleanOptionalAction,
                               default=None, help=_load_help(spec))
        elif spec.kind == "choice":
            group.add_argument(spec.flag, dest=dest, choices=spec.choices, default=None,
                               help=_load_help(spec))
        else:
            group.add_argument(spec.flag, dest=dest, default=None,
                               metavar="PATH" if spec.kind == "path" else "N",
                               help=_load_help(spec))


def load_options(args: argparse.Namespace) -> dict[str, object]:
    """The load options given on the command line, checked, by LoadParams name."""
    options: dict[str, object] = {}
    for spec in LOAD_SPECS.values():
        raw = getattr(args, LOAD_DEST + spec.name, None)
        if raw is None:
            continue
        if spec.kind == "int":
            options[spec.name] = int(number(spec.flag, raw, int, spec.minimum, spec.maximum))
        else:
            options[spec.name] = raw
    return options


def read_load_params(args: argparse.Namespace, model_path: str) -> LoadParams:
    """LoadParams for this model with the options given; UsageError when they cannot work
    (a quantized KV cache without --flash-attn, say)."""
    params = with_projector(LoadParams(model_path).replace(**load_options(args)))
    try:
        params.validate()
    except LoadParamsError as exc:
        raise UsageError(str(exc)) from None
    return params


# ---- sampling --------------------------------------------------------------------------------


def _kind(spec: ParamSpec) -> type[int] | type[float]:
    return int if isinstance(getattr(_SAMPLING_DEFAULTS, spec.name), int) else float


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag for every sampling setting of the side panel, and --stop."""
    group = parser.add_argument_group("sampling")
    for spec in SPECS.values():
        kind = _kind(spec)
        default = getattr(_SAMPLING_DEFAULTS, spec.name)
        shown = spec.special_value_text.lower() if (
            spec.special_value_text and default == spec.minimum) else _shown(default, kind)
        first = spec.tooltip.split(". ")[0].rstrip(".")
        first = first[:1].lower() + first[1:]
        group.add_argument(spec.flag, dest=SAMPLING_DEST + spec.name, default=None,
                           metavar="N" if kind is int else "X",
                           help=f"{first}; {_shown(spec.minimum, kind)} to "
                                f"{_shown(spec.maximum, kind)} (default: {shown})")
    group.add_argument("--stop", action="append", default=None, metavar="TEXT",
                       help="end the reply where this text appears (repeat for more)")


def read_sampling(args: argparse.Namespace) -> SamplingParams:
    """SamplingParams with the settings given; UsageError for a bad number."""
    values: dict[str, object] = {}
    for spec in SPECS.values():
        raw = getattr(args, SAMPLING_DEST + spec.name, None)
        if raw is not None:
            values[spec.name] = number(spec.flag, raw, _kind(spec), spec.minimum, spec.maximum)
    if args.stop:
        values["stop"] = list(args.stop)
    sampling, problems = SamplingParams.parse(values)
    if problems:  # only the stop strings can be wrong here
        raise UsageError(problems[0].replace("sampling.stop", "--stop") + ".")
    return sampling


def spec_number(option: str, raw: str, name: str) -> int | float:
    """One sampling setting given by its own flag (`inglenook prompt --max-tokens`)."""
    spec = SPECS[name]
    return number(option, raw, _kind(spec), spec.minimum, spec.maximum)
