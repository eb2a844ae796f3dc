"""Every load option is declared once (LOAD_SPECS) and reaches the settings file, LoadParams'
checks and the command line of chat, prompt and serve from there."""

from __future__ import annotations

import dataclasses

import pytest

from inglenook.cli import _parser
from inglenook.cli.chat import load_params
from inglenook.cli.common import UsageError
from inglenook.cli.options import read_load_params, read_sampling
from inglenook.core.load import LOAD_SPECS, LoadOptions, LoadParams, LoadParamsError, LoadSpec
from inglenook.core.sampling import SPECS, SamplingParams
from inglenook.core.settings import Settings


def other_value(spec: LoadSpec) -> object:
    """A value of the option that is not its default."""
    if spec.kind == "bool":
        return not spec.default
    if spec.kind == "choice":
        return next(c for c in spec.choices if c != spec.default)
    if spec.kind == "path":
        return "/models/draft.gguf"
    assert isinstance(spec.default, int)
    return spec.default + 1 if spec.default < spec.maximum else spec.default - 1


def flags(spec: LoadSpec, value: object) -> list[str]:
    if spec.kind == "bool":
        return [spec.flag if value else "--no-" + spec.flag.removeprefix("--")]
    extra = ["--flash-attn"] if spec.name == "kv_cache_type" else []  # q8_0 needs it
    return [spec.flag, str(value), *extra]


def test_every_load_option_has_a_spec_and_nothing_else_does() -> None:
    options = {f.name for f in dataclasses.fields(LoadOptions)}
    params_fields = {f.name for f in dataclasses.fields(LoadParams)}
    for name, spec in LOAD_SPECS.items():
        assert name == spec.name and name in params_fields and name in options
        assert getattr(Settings().load, name) == spec.default == getattr(LoadParams(""), name)
        assert spec.flag.startswith("--") and spec.label and spec.tooltip and spec.help
        if spec.automatic is not None:  # automatic is the minimum, spelled, never a bare number
            assert spec.automatic == spec.minimum and spec.special_value_text
    # LoadParams' other fields are the model and the engine's tuning.
    assert options == set(LOAD_SPECS) and options < params_fields


@pytest.mark.parametrize("name", list(LOAD_SPECS))
@pytest.mark.parametrize("command", ["chat", "prompt", "serve"])
def test_every_load_option_has_a_flag_whose_value_reaches_load_params(
        name: str, command: str) -> None:
    spec = LOAD_SPECS[name]
    value = other_value(spec)
    args = _parser().parse_args([command, *flags(spec, value)])
    params = read_load_params(args, "/m.gguf")
    assert getattr(params, name) == value
    assert params.replace(**{name: spec.default}) == LoadParams(
        "/m.gguf", flash_attn=name == "kv_cache_type")  # nothing else changed


def test_no_flag_keeps_every_default() -> None:
    args = _parser().parse_args(["chat", "--model", "/m.gguf", "Hi"])
    assert load_params(args) == LoadParams("/m.gguf")
    assert read_sampling(args) == SamplingParams()


@pytest.mark.parametrize("name", [n for n, s in LOAD_SPECS.items() if s.kind == "int"])
def test_out_of_range_numbers_are_one_line_with_the_range(name: str) -> None:
    spec = LOAD_SPECS[name]
    for raw in (str(int(spec.maximum) + 1), str(int(spec.minimum) - 1), "nan", "2.5", "many"):
        args = _parser().parse_args(["chat", spec.flag, raw, "Hi"])
        with pytest.raises(UsageError, match=f"^{spec.flag} must be a whole number from "
                                             f"{int(spec.minimum)} to {int(spec.maximum)}, "):
            read_load_params(args, "/m.gguf")
        with pytest.raises(LoadParamsError, match=spec.label):  # the engine checks the same
            LoadParams("/m.gguf").replace(**{name: int(spec.maximum) + 1}).validate()


def test_options_that_cannot_work_together_are_refused() -> None:
    args = _parser().parse_args(["chat", "--kv-per-reply", "--kv-cache-type", "q4_0", "Hi"])
    with pytest.raises(UsageError, match="needs flash attention"):
        read_load_params(args, "/m.gguf")
    # The shared pool (the default) turns flash attention on itself.
    pooled = _parser().parse_args(["chat", "--kv-cache-type", "q4_0", "Hi"])
    assert read_load_params(pooled, "/m.gguf").kv_cache_type == "q4_0"


def test_unknown_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["chat", "--kv-cache-type", "q3", "Hi"])
    assert "invalid choice: 'q3'" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(SPECS))
def test_every_sampling_setting_has_a_flag(name: str) -> None:
    spec = SPECS[name]
    whole = isinstance(getattr(SamplingParams(), name), int)
    value = spec.maximum
    args = _parser().parse_args(["chat", spec.flag, str(int(value)) if whole else repr(value),
                                 "Hi"])
    assert getattr(read_sampling(args), name) == value
    args = _parser().parse_args(["chat", spec.flag, str(int(spec.maximum) + 1), "Hi"])
    with pytest.raises(UsageError, match=f"^{spec.flag} must be "):
        read_sampling(args)


def test_stop_strings_from_the_command_line() -> None:
    args = _parser().parse_args(["chat", "--stop", "END", "--stop", "\n\n", "Hi"])
    assert read_sampling(args).stop == ("END", "\n\n")


@pytest.mark.parametrize("name", list(LOAD_SPECS))
def test_settings_file_values_are_checked_by_the_spec(name: str) -> None:
    spec = LOAD_SPECS[name]
    value = other_value(spec)
    together = {"flash_attn": True} if name == "kv_cache_type" else {}  # q8_0 needs it
    settings, problems = Settings.parse({"load": {name: value, **together}})
    assert problems == [] and getattr(settings.load_params("/m.gguf"), name) == value
    bad = "lots" if spec.kind != "path" else 12
    settings, problems = Settings.parse({"load": {name: bad}})
    assert getattr(settings.load, name) == spec.default
    assert len(problems) == 1 and problems[0].startswith(f"{name}: ")


def test_settings_numbers_are_clamped_to_the_specs_range() -> None:
    settings, problems = Settings.parse({"load": {"n_gpu_layers": 5000, "n_ctx": -3}})
    assert (settings.load.n_gpu_layers, settings.load.n_ctx) == (
        LOAD_SPECS["n_gpu_layers"].maximum, 0)
    assert len(problems) == 2


def test_per_model_options_round_trip_through_the_settings_file() -> None:
    from inglenook.core.load import ModelDefaults

    own = ModelDefaults({name: other_value(spec) for name, spec in LOAD_SPECS.items()
                         if spec.per_model})
    settings = Settings()
    settings.set_defaults("/m.gguf", own)
    again, problems = Settings.parse(settings.to_dict())
    assert problems == [] and again.defaults_for("/m.gguf") == own
    params = again.load_params("/m.gguf")
    assert all(getattr(params, name) == value for name, value in own.load.items())


def test_a_per_model_value_is_checked_by_the_same_spec_as_the_global_one() -> None:
    """One check for both (the settings file's per-model entries were once checked against
    LOAD_SPECS, then again by ModelDefaults.from_dict's own rules)."""
    from inglenook.core.load import ModelDefaults

    for name, spec in LOAD_SPECS.items():
        if not spec.per_model:
            continue
        bad = "lots" if spec.kind != "path" else 12
        own, problems = ModelDefaults.parse({"load": {name: bad}}, "m")
        _, global_problems = LoadOptions.parse({name: bad}, "m.")
        assert own.empty and len(problems) == len(global_problems) == 1
        assert problems[0].split(" (")[0] == global_problems[0].split(" (")[0]


def test_a_default_load_shares_one_pool_of_the_context_length() -> None:
    """The pool is the default (llama-server's -c with its slots); --kv-pool makes it bigger,
    never smaller than the context; --kv-per-reply goes back to a KV cache per reply."""
    assert LoadParams("/m.gguf").pool_tokens(8192) == 8192
    args = _parser().parse_args(["chat", "--kv-pool", "2048", "Hi"])
    assert read_load_params(args, "/m.gguf").pool_tokens(4096) == 4096
    args = _parser().parse_args(["chat", "--kv-pool", "20000", "Hi"])
    assert read_load_params(args, "/m.gguf").pool_tokens(4096) == 20000
    args = _parser().parse_args(["chat", "--kv-per-reply", "Hi"])
    assert read_load_params(args, "/m.gguf").pool_tokens(4096) == 0
