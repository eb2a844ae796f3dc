"""The fit planner: KV cache arithmetic checked by hand, labels at their thresholds, the GPU layer
split, and the quantization it recommends."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.models import fit
from inglenook.models.fit import Memory, ModelShape, kv_cache_bytes, plan, recommend
from inglenook.models.gguf import ArrayInfo, GGUFError, GGUFHeader, read_header

GB = 10**9
MiB = 2**20

# A Llama-2-7B-like shape without grouped-query attention, and a Mistral-7B-like one with it.
LLAMA2_7B = ModelShape(n_layers=32, n_embd=4096, n_head=32, n_head_kv=32, n_ctx_train=4096,
                       weights_bytes=3_800_000_000, architecture="llama")
MISTRAL_7B = dataclasses.replace(LLAMA2_7B, n_head_kv=8, n_ctx_train=32768)
# Qwen2.5-7B-Instruct: 28 layers, 28 heads, 4 KV heads of 128; Q4_K_M is about 4.68 GB.
QWEN_7B = ModelShape(n_layers=28, n_embd=3584, n_head=28, n_head_kv=4, n_ctx_train=32768,
                     weights_bytes=4_680_000_000, architecture="qwen2")
QWEN_7B_FILES = [("Q2_K", 3_020_000_000), ("Q4_K_M", 4_680_000_000), ("Q5_K_M", 5_440_000_000),
                 ("Q6_K", 6_250_000_000), ("Q8_0", 8_100_000_000), ("F16", 15_240_000_000)]


@pytest.fixture(scope="module")
def smollm2_header(bundled_model: Path) -> GGUFHeader:
    return read_header(bundled_model)


@pytest.fixture(autouse=True)
def no_vram_probe() -> Iterator[None]:
    yield
    fit.set_vram_probe(None)


def ram(free: int, total: int | None = None) -> Memory:
    return Memory(ram_free=free, ram_total=total or free * 2)


# -- shape ---------------------------------------------------------------------------------------
def test_shape_from_the_bundled_model(smollm2_header: GGUFHeader) -> None:
    shape = fit.shape_from_header(smollm2_header)
    assert shape == ModelShape(n_layers=30, n_embd=576, n_head=9, n_head_kv=3, n_ctx_train=8192,
                               weights_bytes=smollm2_header.tensor_bytes, architecture="llama",
                               n_ff=1536, n_vocab=49152)  # the vocabulary: its tokens' array
    assert shape.weights_bytes == 96_576_768  # the tensor data: the file less its 1.8 MB header


def test_shape_uses_explicit_head_lengths_and_defaults_kv_heads(
        smollm2_header: GGUFHeader) -> None:
    meta = {**smollm2_header.metadata, "llama.attention.key_length": 192,
            "llama.attention.value_length": 128}
    del meta["llama.attention.head_count_kv"]
    shape = fit.shape_from_header(dataclasses.replace(smollm2_header, metadata=meta))
    assert (shape.key_length, shape.value_length, shape.n_head_kv) == (192, 128, 9)


def test_shape_refuses_a_header_without_layers(smollm2_header: GGUFHeader) -> None:
    meta = {k: v for k, v in smollm2_header.metadata.items() if k != "llama.block_count"}
    with pytest.raises(GGUFError, match="layer count"):
        fit.shape_from_header(dataclasses.replace(smollm2_header, metadata=meta))
    with pytest.raises(GGUFError, match="architecture"):
        fit.shape_from_header(dataclasses.replace(smollm2_header, metadata={}))


# -- KV cache ------------------------------------------------------------------------------------
def test_kv_cache_of_smollm2_by_hand(smollm2_header: GGUFHeader) -> None:
    shape = fit.shape_from_header(smollm2_header)
    # 2 (K and V) × 30 layers × 8192 positions × 3 KV heads × 64 (576 / 9) × 2 bytes
    assert kv_cache_bytes(shape, 8192, "f16") == 2 * 30 * 8192 * 3 * 64 * 2 == 188_743_680
    assert kv_cache_bytes(shape, 8192, "q8_0") == 2 * 30 * 8192 * 3 * 64 * 34 // 32 == 100_270_080
    assert kv_cache_bytes(shape, 8192, "q4_0") == 2 * 30 * 8192 * 3 * 64 * 18 // 32 == 53_084_160
    assert kv_cache_bytes(shape, 4096, "f16") == 188_743_680 // 2
    assert kv_cache_bytes(shape, 0, "f16") == 0


def test_kv_cache_of_7b_shapes_by_hand() -> None:
    # The well-known figures: Llama 2 7B holds 2 GiB of f16 KV at 4096, Mistral 7B 1 GiB at 8192.
    assert kv_cache_bytes(LLAMA2_7B, 4096, "f16") == 2 * 32 * 4096 * 32 * 128 * 2 == 2 * 2**30
    assert kv_cache_bytes(MISTRAL_7B, 8192, "f16") == 2 * 32 * 8192 * 8 * 128 * 2 == 2**30
    assert kv_cache_bytes(MISTRAL_7B, 8192, "q8_0") == 2**30 * 17 // 32
    assert kv_cache_bytes(QWEN_7B, 8192, "f16") == 2 * 28 * 8192 * 4 * 128 * 2 == 469_762_048


def test_kv_cache_with_different_key_and_value_lengths() -> None:
    shape = dataclasses.replace(MISTRAL_7B, key_length=192, value_length=128)
    assert kv_cache_bytes(shape, 1000, "f16") == 32 * 1000 * 8 * (192 + 128) * 2
    only_key = dataclasses.replace(MISTRAL_7B, key_length=256)  # V as long as K (Gemma 2)
    assert kv_cache_bytes(only_key, 1000, "f16") == 32 * 1000 * 8 * 512 * 2


def test_no_attention_heads_means_no_kv_cache() -> None:
    mamba = dataclasses.replace(MISTRAL_7B, n_head=0, n_head_kv=0)
    assert kv_cache_bytes(mamba, 8192, "f16") == 0


def _header(smollm2_header: GGUFHeader, arch: str, **keys: object) -> GGUFHeader:
    meta = {"general.architecture": arch, f"{arch}.block_count": 16,
            f"{arch}.embedding_length": 2048, f"{arch}.attention.head_count": 32,
            **{f"{arch}.{key.replace('__', '.')}": value for key, value in keys.items()}}
    return dataclasses.replace(smollm2_header, metadata=meta)


def test_a_hybrid_counts_kv_in_its_attention_layers_and_a_state_per_slot(
        smollm2_header: GGUFHeader) -> None:
    """LFM2-1.2B: 6 of 16 layers attend (8 KV heads of 64; the others' count is 0) and 10 keep
    the last 2 of their inputs. It was counted as 16 layers of 32 KV heads: 10.7 × its KV."""
    layers = (0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0)
    lfm2 = fit.shape_from_header(_header(
        smollm2_header, "lfm2", attention__head_count_kv=ArrayInfo("int32", 16, layers),
        shortconv__l_cache=3))
    assert (lfm2.n_head_kv, lfm2.kv_layers) == (8, 6)
    assert kv_cache_bytes(lfm2, 8192, "f16") == 2 * 6 * 8192 * 8 * 64 * 2
    assert lfm2.recurrent_elements == 10 * 2048 * 2
    assert fit.recurrent_bytes(lfm2, 4) == 4 * 10 * 2048 * 2 * 4
    assert plan(lfm2, 8192, "f16", ram(64 * GB), slots=4, pool=8192).kv_bytes == (
        kv_cache_bytes(lfm2, 8192, "f16") + fit.recurrent_bytes(lfm2, 4))


def test_a_hybrid_with_an_attention_interval_and_ssm_state(smollm2_header: GGUFHeader) -> None:
    """Qwen3-Next-like: one layer in 4 attends (llama.cpp's default interval); the others keep
    a gated delta net's convolution window and state (ssm.* keys)."""
    qwen = fit.shape_from_header(_header(
        smollm2_header, "qwen3next", attention__head_count_kv=2, ssm__inner_size=4096,
        ssm__state_size=128, ssm__conv_kernel=4, ssm__group_count=16))
    assert (qwen.kv_layers, qwen.n_head_kv) == (4, 2)
    assert qwen.recurrent_elements == 12 * (3 * (4096 + 2 * 16 * 128) + 128 * 4096)
    every_2 = fit.shape_from_header(_header(
        smollm2_header, "qwen3next", attention__head_count_kv=2, ssm__inner_size=4096,
        full_attention_interval=2))
    assert every_2.kv_layers == 8
    mamba = fit.shape_from_header(_header(  # no attention at all: state in every layer
        smollm2_header, "mamba", attention__head_count=0, ssm__inner_size=4096,
        ssm__state_size=16, ssm__conv_kernel=4))
    assert kv_cache_bytes(mamba, 8192, "f16") == 0
    assert mamba.recurrent_elements == 16 * (3 * 4096 + 16 * 4096)
    falcon = fit.shape_from_header(_header(  # attention and state side by side in each layer
        smollm2_header, "falcon-h1", attention__head_count_kv=2, ssm__inner_size=4096,
        ssm__state_size=16, ssm__conv_kernel=4))
    assert (falcon.kv_layers, falcon.recurrent_elements) == (16, 16 * (3 * 4096 + 16 * 4096))


def test_unknown_kv_type_is_refused() -> None:
    with pytest.raises(ValueError, match="q5_1"):
        kv_cache_bytes(MISTRAL_7B, 8192, "q5_1")


# -- labels --------------------------------------------------------------------------------------
def shape_needing(total: int, n_ctx: int = 4096) -> ModelShape:
    """MISTRAL_7B with weights chosen so that the whole plan needs exactly `total` bytes."""
    rest = kv_cache_bytes(MISTRAL_7B, n_ctx, "f16") + fit.overhead_bytes(MISTRAL_7B, n_ctx)
    return dataclasses.replace(MISTRAL_7B, weights_bytes=total - rest)


@pytest.mark.parametrize(("total", "label"), [
    (6 * GB, "fits"),  # exactly 75% of 8 GB
    (6 * GB + 1, "tight"),
    (8 * GB, "tight"),  # exactly all of it
    (8 * GB + 1, "won't fit"),
])
def test_labels_at_the_thresholds(total: int, label: str) -> None:
    p = plan(shape_needing(total), 4096, "f16", ram(8 * GB))
    assert p.total_bytes == total
    assert p.total_bytes == p.weights_bytes + p.kv_bytes + p.overhead_bytes
    assert p.label == label
    assert p.gpu_layers == 0
    assert p.note.endswith(".") and p.note.count(". ") == 0  # one sentence


def test_notes_say_what_is_needed() -> None:
    assert plan(shape_needing(5_100_000_000), 4096, "f16", ram(7_800_000_000)).note == \
        "Needs 5.1 GB of 7.8 GB free."
    tight = plan(shape_needing(7 * GB), 4096, "f16", ram(7_800_000_000)).note
    assert tight.startswith("Needs 7.0 GB of 7.8 GB free;") and "smaller" in tight
    assert plan(shape_needing(30 * GB), 4096, "f16", ram(7_800_000_000)).note == \
        "Needs 30.0 GB but only 7.8 GB is free."


def test_no_free_memory_fits_nothing() -> None:
    assert plan(MISTRAL_7B, 512, "f16", ram(0, 8 * GB)).label == "won't fit"


def test_longer_context_and_smaller_kv_types() -> None:
    memory = ram(16 * GB)
    short, long = plan(MISTRAL_7B, 4096, "f16", memory), plan(MISTRAL_7B, 32768, "f16", memory)
    assert long.kv_bytes == 8 * short.kv_bytes and long.overhead_bytes > short.overhead_bytes
    assert plan(MISTRAL_7B, 32768, "q4_0", memory).kv_bytes == long.kv_bytes * 9 // 32


def test_overhead_is_a_few_hundred_megabytes() -> None:
    # llama.cpp logs ~500 MiB of compute buffer for a 32-head 7B at 8192 without flash attention.
    overhead = fit.overhead_bytes(MISTRAL_7B, 8192)
    assert 500 * MiB < overhead < 1000 * MiB
    assert fit.overhead_bytes(MISTRAL_7B, 512) < 300 * MiB


# -- GPU split ------------------------------------------------------------------------------------
def test_gpu_split_puts_as_many_layers_as_fit_in_90_percent_of_vram() -> None:
    kv = kv_cache_bytes(MISTRAL_7B, 4096, "f16")
    per_layer = 125_000_000
    shape = dataclasses.replace(MISTRAL_7B, weights_bytes=32 * per_layer - kv)
    memory = Memory(ram_free=16 * GB, ram_total=32 * GB, vram_free=int(20.5 * per_layer / 0.9),
                    gpu_offload=True)
    p = plan(shape, 4096, "f16", memory)
    assert p.gpu_layers == 20
    assert "20 of 32 layers on the GPU" in p.note and "free RAM" in p.note
    assert p.note.count(". ") == 0
    # RAM holds the other 12 layers and the compute buffers.
    assert f"Needs {(p.total_bytes - 20 * per_layer) / GB:.1f} GB" in p.note

    everything = dataclasses.replace(memory, vram_free=40 * GB)
    p_all = plan(shape, 4096, "f16", everything)
    assert p_all.gpu_layers == -1 and "all 32 layers on the GPU" in p_all.note
    none = dataclasses.replace(memory, vram_free=per_layer)  # less than one layer in 90%
    assert plan(shape, 4096, "f16", none).gpu_layers == 0


def test_the_gpu_makes_a_big_model_fit() -> None:
    cpu = Memory(ram_free=5 * GB, ram_total=16 * GB)
    gpu = Memory(ram_free=5 * GB, ram_total=16 * GB, vram_free=12 * GB, gpu_offload=True)
    assert plan(QWEN_7B, 8192, "f16", cpu).label == "won't fit"
    offloaded = plan(QWEN_7B, 8192, "f16", gpu)
    assert offloaded.label == "fits" and offloaded.gpu_layers == -1


def test_gpu_offload_with_unknown_vram_is_judged_against_ram() -> None:
    p = plan(QWEN_7B, 8192, "f16", Memory(ram_free=16 * GB, ram_total=32 * GB, gpu_offload=True))
    assert p.gpu_layers == -1 and "GPU memory unknown" in p.note
    assert plan(QWEN_7B, 8192, "f16", ram(16 * GB)).gpu_layers == 0  # CPU-only build


# -- recommend ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("free", "expected"), [
    (48 * GB, "Q8_0"),  # Q8_0 needs ~9.3 GB: under a quarter of free memory; F16 never is
    (32 * GB, "Q6_K"),  # Q8_0 would be over a quarter; Q6_K (~7.4 GB) is not
    (20 * GB, "Q4_K_M"),  # a 7B on a 20 GB machine stays at the fast Q4_K_M
    (11 * GB, "Q4_K_M"),  # it fits, nothing larger fits comfortably
    (7 * GB, "Q2_K"),  # Q4_K_M (~5.8 GB) is over 75%: a smaller one
    (3 * GB, None),
])
def test_recommend(free: int, expected: str | None) -> None:
    assert recommend(QWEN_7B_FILES, QWEN_7B, 8192, "f16", ram(free)) == expected


def test_recommend_takes_file_names_and_floats_only_as_a_last_resort() -> None:
    files = [(f"Qwen2.5-7B-Instruct-{q}.gguf", size) for q, size in QWEN_7B_FILES]
    assert recommend(files, QWEN_7B, 8192, "f16", ram(11 * GB)) == "Qwen2.5-7B-Instruct-Q4_K_M.gguf"
    only_f16 = [("F16", 1_000_000_000), ("BF16", 1_000_000_001)]
    assert recommend(only_f16, QWEN_7B, 8192, "f16", ram(32 * GB)) == "BF16"
    assert recommend([], QWEN_7B, 8192, "f16", ram(32 * GB)) is None


def test_recommend_without_q4_k_m() -> None:
    files = [(q, s) for q, s in QWEN_7B_FILES if q != "Q4_K_M"]
    # Then the largest that fits: Q6_K needs ~7.4 GB, 68% of 11 GB.
    assert recommend(files, QWEN_7B, 8192, "f16", ram(20 * GB)) == "Q8_0"
    assert recommend(files, QWEN_7B, 8192, "f16", ram(11 * GB)) == "Q6_K"


def test_recommend_does_not_push_layers_off_the_gpu() -> None:
    # Plenty of RAM, but only Q4_K_M fits entirely on this 6 GB GPU: stay there.
    memory = Memory(ram_free=64 * GB, ram_total=64 * GB, vram_free=6 * GB, gpu_offload=True)
    assert plan(QWEN_7B, 8192, "f16", memory).gpu_layers == -1
    assert recommend(QWEN_7B_FILES, QWEN_7B, 8192, "f16", memory) == "Q4_K_M"
    bigger_gpu = dataclasses.replace(memory, vram_free=8 * GB)  # Q6_K fits on it whole
    assert recommend(QWEN_7B_FILES, QWEN_7B, 8192, "f16", bigger_gpu) == "Q6_K"


def test_the_kv_type_can_make_the_difference() -> None:
    files = [("Q4_K_M", 4_680_000_000)]
    # At 32768 tokens: ~8.7 GB with an f16 cache (tight in 10 GB), ~7.3 GB with q4_0.
    assert recommend(files, QWEN_7B, 32768, "f16", ram(10 * GB)) is None
    assert recommend(files, QWEN_7B, 32768, "q4_0", ram(10 * GB)) == "Q4_K_M"


# -- this machine ---------------------------------------------------------------------------------
def test_system_memory() -> None:
    m = fit.system_memory()
    assert 0 < m.ram_free <= m.ram_total and m.vram_free == 0 and not m.gpu_offload
    fit.set_vram_probe(lambda: 6 * GB)
    assert fit.system_memory().vram_free == 0  # no offloading build: VRAM is irrelevant
    assert fit.system_memory(gpu_offload=True).vram_free == 6 * GB

    def broken() -> int:
        raise RuntimeError("no driver")

    fit.set_vram_probe(broken)
    assert fit.system_memory(gpu_offload=True).vram_free == 0


def test_offload_is_considered_only_once_the_engine_reports_a_gpu_build() -> None:
    from inglenook.models import fit as fit_module

    fit_module.set_vram_probe(None)
    assert not fit_module.offload_available()
    assert fit_module.system_memory(gpu_offload=fit_module.offload_available()).vram_free == 0
    fit_module.set_vram_probe(lambda: 6 * GB)
    try:
        memory = fit_module.system_memory(gpu_offload=fit_module.offload_available())
        assert memory.gpu_offload and memory.vram_free == 6 * GB
    finally:
        fit_module.set_vram_probe(None)


# -- before loading -------------------------------------------------------------------------------
def test_largest_context_is_the_last_step_that_fits() -> None:
    memory = ram(8 * GB)
    largest = fit.largest_context(MISTRAL_7B, "f16", memory, 10**9)
    assert largest > 0 and largest % fit.CONTEXT_STEP == 0
    assert plan(MISTRAL_7B, largest, "f16", memory).label != "won't fit"
    assert plan(MISTRAL_7B, largest + fit.CONTEXT_STEP, "f16", memory).label == "won't fit"
    assert fit.largest_context(MISTRAL_7B, "f16", memory, 1000) == 768  # capped, whole steps
    assert fit.largest_context(MISTRAL_7B, "f16", ram(1 * GB), 10**9) == 0  # weights alone


def test_a_context_that_cannot_fit_is_refused_naming_the_largest_that_does() -> None:
    memory = ram(8 * GB)
    message = fit.load_refusal(MISTRAL_7B, 10**9, "f16", memory, allow_beyond_trained=True)
    assert message is not None
    largest = fit.largest_context(MISTRAL_7B, "f16", memory, 10**9)
    assert f"The largest context that fits is {largest:,} tokens." in message
    assert "1,000,000,000 tokens needs about" in message and "8.0 GB is free" in message
    assert fit.load_refusal(MISTRAL_7B, largest, "f16", memory,
                            allow_beyond_trained=True) is None


def test_a_context_beyond_the_trained_length_needs_an_explicit_choice() -> None:
    memory = ram(64 * GB)
    message = fit.load_refusal(LLAMA2_7B, 8192, "f16", memory)
    assert message is not None and "trained on a context of 4,096 tokens" in message
    assert "explicitly" in message
    assert fit.load_refusal(LLAMA2_7B, 8192, "f16", memory, allow_beyond_trained=True) is None
    assert fit.load_refusal(LLAMA2_7B, 4096, "f16", memory) is None
    # Unknown trained length: nothing to be beyond.
    unknown = dataclasses.replace(LLAMA2_7B, n_ctx_train=0)
    assert fit.load_refusal(unknown, 8192, "f16", memory) is None


def test_beyond_trained_and_too_big_offers_at_most_the_trained_length() -> None:
    message = fit.load_refusal(MISTRAL_7B, 10**9, "f16", ram(64 * GB))
    assert message is not None
    assert "The largest context that fits is 32,768 tokens (this model was trained on" in message


def test_a_model_too_big_at_any_context_says_so() -> None:
    message = fit.load_refusal(QWEN_7B, 4096, "f16", ram(2 * GB))
    assert message is not None and "Not even a context of 256 tokens fits" in message


def test_vram_takes_layers_off_ram_in_the_refusal() -> None:
    ram_only = Memory(ram_free=4 * GB, ram_total=16 * GB)
    with_gpu = Memory(ram_free=4 * GB, ram_total=16 * GB, vram_free=24 * GB, gpu_offload=True)
    assert fit.load_refusal(QWEN_7B, 8192, "f16", ram_only) is not None
    assert fit.load_refusal(QWEN_7B, 8192, "f16", with_gpu) is None


def test_replies_at_once_share_one_kv_pool() -> None:
    """Four replies at once in a pool of the context length cost the KV of one context, not
    four (without a pool each slot reserves a whole context)."""
    memory = Memory(ram_free=64 * GB, ram_total=64 * GB)
    one = plan(MISTRAL_7B, 8192, "f16", memory, slots=1)
    streams = plan(MISTRAL_7B, 8192, "f16", memory, slots=4)
    assert streams.kv_bytes == 4 * one.kv_bytes
    pooled = plan(MISTRAL_7B, 8192, "f16", memory, slots=4, pool=8192)
    assert pooled.kv_bytes == one.kv_bytes == kv_cache_bytes(MISTRAL_7B, 8192, "f16")
    bigger = plan(MISTRAL_7B, 8192, "f16", memory, slots=4, pool=16384)
    assert bigger.kv_bytes == 2 * one.kv_bytes
    tight = Memory(ram_free=20 * GB, ram_total=32 * GB)
    assert fit.default_slots(MISTRAL_7B, 32768, "f16", tight) < 4
    assert fit.default_slots(MISTRAL_7B, 32768, "f16", tight, pool=32768) == 4


def test_a_pool_that_cannot_fit_names_the_largest_that_does() -> None:
    memory = Memory(ram_free=8 * GB, ram_total=16 * GB)
    assert fit.refusal(MISTRAL_7B, 8192, "f16", memory, slots=4, pool=8192) is None
    refused = fit.refusal(MISTRAL_7B, 8192, "f16", memory, slots=4, pool=1 << 20)
    assert refused is not None
    assert "4 replies at once in a pool of 1,048,576 tokens" in refused.message
    largest = int(refused.message.split("largest KV pool that fits is ")[1].split(" ")[0]
                  .replace(",", ""))
    assert 8192 < largest < 1 << 20 and largest % fit.CONTEXT_STEP == 0
    assert fit.refusal(MISTRAL_7B, 8192, "f16", memory, slots=4, pool=largest) is None
    # The default pool is the context: too long a context says so, and names the longest.
    default = fit.refusal(MISTRAL_7B, 1 << 20, "f16", memory, slots=4, pool=1 << 20,
                          allow_beyond_trained=True)
    assert default is not None and "pool" not in default.message
    assert "1,048,576 tokens, shared by 4 replies at once, needs" in default.message
    assert 0 < default.largest_context < 1 << 20 and default.largest_slots == 0


def test_a_pool_keeps_only_the_window_of_sliding_window_layers(gemma_model: Path) -> None:
    # Gemma 3 270M: 18 layers, every 6th global; window 512. In a pool of 8,192 shared by 4,
    # 15 layers keep 4 × 512 + a batch of 512 cells, the other 3 all 8,192.
    shape = fit.shape_from_header(read_header(gemma_model))
    assert (shape.n_swa, shape.swa_every, shape.n_vocab) == (512, 6, 262_144)
    full = kv_cache_bytes(shape, 8192, "f16")
    pooled = plan(shape, 8192, "f16", ram(16 * GB), slots=4, pool=8192).kv_bytes
    assert pooled == full * (3 * 8192 + 15 * 2560) // (18 * 8192)
    assert plan(shape, 8192, "f16", ram(16 * GB), slots=4).kv_bytes == 4 * full  # streams
