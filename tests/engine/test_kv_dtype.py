"""kv_cache_dtype: the pool stores K/V in its own format and attention converts on read.

FP32, BF16 and FP16 pools beside an FP32 model, and FP8 E4M3 as vLLM's --kv-cache-dtype fp8.
The pool's bytes follow the format; the outputs stay within a stated tolerance of the FP32
cache: the prompt's logits within the rounding the format allows, and greedy tokens mostly
identical.
"""

from pathlib import Path

import pytest
import torch

from worker.engine import Engine, SamplingParams
from worker.engine.layers.kv_dtype import (
    FP8_E4M3_MAX,
    kv_cache_dtype_resolve,
    kv_round,
    kv_store,
)
from worker.engine.model_runner import BatchEntry

# Relative step of each format (2^-mantissa bits): the largest relative rounding error of one
# stored value is half of it.
RELATIVE_STEP = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10,
                 "float8_e4m3fn": 2.0**-3}
# Tolerance on the prompt's logits, as their largest error over their spread (standard
# deviation): at most 12 relative steps of the format. Measured on this tiny random model the
# error is 6 to 8 steps in every format (0.0078 for FP16, 0.050 for BF16, 0.78 for FP8): the
# error of each stored K/V value, under half a step, carried through two layers whose large
# random weights (initializer_range 0.3) amplify it.
STEPS_ALLOWED = 12
LOGIT_TOLERANCE = {name: STEPS_ALLOWED * step for name, step in RELATIVE_STEP.items()}


def prompt(n: int, seed: int) -> list[int]:
    return torch.randint(3, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def prompt_logits(engine: Engine, ids: list[int]) -> torch.Tensor:
    """Logits at every prompt position from one prefill through the paged pool."""
    table = list(range(engine.block_manager.blocks_for(len(ids))))
    return engine.runner.execute([BatchEntry(ids, 0, table, len(ids))])


def test_names_resolve_and_bad_names_are_refused() -> None:
    assert kv_cache_dtype_resolve(None, model_dtype=torch.float32) is torch.float32
    assert kv_cache_dtype_resolve("auto", model_dtype=torch.bfloat16) is torch.bfloat16
    assert kv_cache_dtype_resolve("fp8", model_dtype=torch.float32) is torch.float8_e4m3fn
    assert kv_cache_dtype_resolve("bfloat16", model_dtype=torch.float32) is torch.bfloat16
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        kv_cache_dtype_resolve("int3", model_dtype=torch.float32)


def test_fp8_saturates_instead_of_overflowing() -> None:
    x = torch.tensor([1000.0, -1000.0, 1.0, 0.3])
    back = kv_round(x, torch.float8_e4m3fn)
    assert back.tolist()[:3] == [FP8_E4M3_MAX, -FP8_E4M3_MAX, 1.0]
    assert abs(back[3].item() - 0.3) <= 0.3 * RELATIVE_STEP["float8_e4m3fn"] / 2
    assert kv_store(x, torch.float8_e4m3fn).dtype is torch.float8_e4m3fn


@pytest.mark.parametrize("name,itemsize", [("float32", 4), ("bfloat16", 2), ("float16", 2),
                                           ("float8_e4m3fn", 1)])
def test_pool_bytes_follow_the_format(tiny_models, name, itemsize) -> None:
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16, kv_cache_dtype=name)
    k, v = engine.runner.kv_caches[0]
    assert k.dtype == v.dtype == kv_cache_dtype_resolve(name, model_dtype=torch.float32)
    # 2 (K, V) x 2 layers x 16 tokens x 2 KV heads x 16 head_dim x bytes per element.
    assert engine.kv_block_bytes == 2 * 2 * 16 * 2 * 16 * itemsize
    held = sum(t.numel() * t.element_size() for pair in engine.runner.kv_caches for t in pair)
    assert held == engine.kv_block_bytes * 16
    assert engine.stats()["kv_cache_dtype"] == name


def test_logits_stay_within_each_formats_tolerance_and_grow_as_it_narrows(tiny_models):
    reference = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16)
    ids = prompt(40, 3)
    want = prompt_logits(reference, ids)
    errors = {}
    for name in LOGIT_TOLERANCE:
        narrow = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16,
                                        kv_cache_dtype=name)
        errors[name] = (prompt_logits(narrow, ids) - want).abs().max().item() / want.std().item()
        assert errors[name] <= LOGIT_TOLERANCE[name], (name, errors[name])
    # FP32 stores exactly; each narrower format really rounds, and more so with fewer bits.
    assert errors["float32"] == 0
    assert 0 < errors["float16"] < errors["bfloat16"] < errors["float8_e4m3fn"]


def test_fp8_decodes_read_the_same_rounded_kv_as_a_prefill(tiny_models) -> None:
    """Greedy decoding through an FP8 pool (decode slots included) picks, at every step, the
    token a single prefill over prompt + outputs through an FP8 pool ranks first: every path
    reads K/V as the pool stores them."""
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    prompts = [prompt(10 + 7 * i, 30 + i) for i in range(4)]
    fp8 = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, kv_cache_dtype="fp8")
    outputs = fp8.generate(prompts, params)
    assert fp8.stats()["kv_blocks_free"] == 64
    for ids, out in zip(prompts, outputs, strict=True):
        fresh = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16,
                                       kv_cache_dtype="fp8")
        logits = prompt_logits(fresh, ids + out.token_ids[:-1])
        assert logits[len(ids) - 1:].argmax(-1).tolist() == out.token_ids


SHIPPED = Path(__file__).resolve().parents[2] / "worker" / "models" / "course-lm"
# Stated tolerance on the trained model: top-1 agreement with the FP32 cache over held-out
# text. Measured on 8 documents (785 positions): FP16 100%, BF16 99.6%, FP8 96.3%.
AGREEMENT_MIN = {torch.float16: 0.99, torch.bfloat16: 0.98, torch.float8_e4m3fn: 0.9}


@pytest.mark.skipif(not (SHIPPED / "model.safetensors").is_file(), reason="no shipped model")
def test_shipped_model_next_tokens_agree_within_the_stated_tolerance() -> None:
    from worker.evaluation import TeacherForced, documents_encode, heldout_texts

    engine = Engine.from_pretrained(SHIPPED, num_kv_blocks=16)
    ids = [d.token_ids for d in documents_encode(engine.tokenizer, heldout_texts(limit=8))]
    n = sum(len(i) for i in ids)
    room = n + 16 * len(ids)
    ref = TeacherForced(engine.runner.model, engine.config, tokens_max=room).logits(ids)
    for dtype, least in AGREEMENT_MIN.items():
        got = TeacherForced(engine.runner.model, engine.config, tokens_max=room,
                            kv_cache_dtype=dtype).logits(ids)
        agree = sum((a.argmax(-1) == b.argmax(-1)).sum().item()
                    for a, b in zip(ref, got, strict=True)) / n
        assert agree >= least, (dtype, agree)


def test_bf16_cache_keeps_greedy_output_of_the_fp32_model(tiny_models) -> None:
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    prompts = [prompt(12, 20), prompt(30, 21)]
    full = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32)
    half = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32,
                                  kv_cache_dtype="bfloat16")
    assert ([o.token_ids for o in full.generate(prompts, params)]
            == [o.token_ids for o in half.generate(prompts, params)])
