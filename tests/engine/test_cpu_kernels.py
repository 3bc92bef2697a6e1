"""The fused CPU kernels (worker/engine/kernels/cpu_fused.c) against PyTorch's ops.

Each kernel is checked against the PyTorch code it replaces, at shapes that reach its edge
cases (rows past a multiple of the micro-kernel's, columns past a packed panel, head sizes that
are not a multiple of a vector, one-token contexts); then whole engines with the kernels on and
off must give the same greedy tokens and close prompt logits.
"""

import copy
import os
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from worker.engine.kernels import cpu as cpu_mod
from worker.engine.layers.rotary import RotaryEmbedding, rope_apply

pytestmark = pytest.mark.skipif(
    not any(shutil.which(cc) for cc in ("cc", "gcc", "clang")),
    reason="no C compiler on PATH: the engine runs PyTorch's ops (tested everywhere else)")


@pytest.fixture(scope="module")
def kern() -> cpu_mod.CpuKernels:
    k = cpu_mod.cpu_kernels()
    assert k is not None, "a C compiler is on PATH, so the kernels must build"
    return k


@pytest.mark.parametrize("rows", [1, 3, 8, 9, 17, 80])
@pytest.mark.parametrize(("out_features", "in_features"), [(5, 7), (32, 64), (33, 64), (100, 40)])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_matmul_is_f_linear(kern, rows, out_features, in_features, bias) -> None:
    torch.manual_seed(rows * 1000 + out_features)
    w = torch.randn(out_features, in_features)
    b = torch.randn(out_features) if bias else None
    x = torch.randn(rows, in_features)
    got = kern.linear(x, kern.pack(w, b), threads=2)
    torch.testing.assert_close(got, F.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_packed_matmul_reads_rows_with_a_stride_and_leaves_the_weight(kern) -> None:
    torch.manual_seed(1)
    wide = torch.randn(6, 50)
    x = wide[:, 10:40]  # rows 50 floats apart
    w = torch.randn(20, 30)
    before = w.clone()
    torch.testing.assert_close(kern.linear(x, kern.pack(w), threads=1), F.linear(x, w),
                               rtol=1e-5, atol=1e-5)
    assert torch.equal(w, before)


def test_add_rmsnorm_adds_the_residual_then_normalises(kern) -> None:
    torch.manual_seed(2)
    x, delta, weight = torch.randn(7, 48), torch.randn(7, 48), torch.randn(48)
    expected_x = x + delta
    # Hugging Face's LlamaRMSNorm, in fp32.
    expected = weight * (expected_x * torch.rsqrt(expected_x.pow(2).mean(-1, keepdim=True) + 1e-5))
    got = kern.add_rmsnorm(x, delta, weight, 1e-5)
    assert torch.equal(x, expected_x)  # x is the residual stream, updated in place
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    select = torch.tensor([6, 0, 3])
    picked = kern.add_rmsnorm(x, None, weight, 1e-5, select=select)
    torch.testing.assert_close(picked, expected[select], rtol=1e-5, atol=1e-6)
    assert torch.equal(x, expected_x)  # no delta: nothing added


@pytest.mark.parametrize(("vocab", "hidden"), [(5, 7), (32, 64), (33, 48), (100, 40)])
def test_embed_packed_reads_the_rows_the_packed_matrix_holds(kern, vocab, hidden) -> None:
    """A tied embedding freed after packing is read from the LM head's packed copy: the same
    rows F.embedding reads, bit for bit, including ids in the last, partly padded panel."""
    torch.manual_seed(vocab)
    table = torch.randn(vocab, hidden)
    ids = torch.tensor([0, vocab - 1, vocab // 2, 0, min(vocab - 1, 31)])
    assert torch.equal(kern.embed_packed(kern.pack(table), ids), F.embedding(ids, table))


@pytest.mark.parametrize("head_dim", [8, 24, 32])
def test_rope_store_rotates_q_and_k_and_writes_the_pool(kern, head_dim) -> None:
    torch.manual_seed(3)
    heads, kv_heads, tokens, block_size = 4, 2, 5, 4
    rotary = RotaryEmbedding(head_dim=head_dim, max_positions=64,
                             rope={"rope_theta": 10000.0, "rope_type": "default"})
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head_dim)
    positions = torch.tensor([0, 1, 17, 40, 63])
    slots = torch.tensor([3, 0, 9, 14, 5])
    pool_k = torch.zeros(4, block_size, kv_heads, head_dim)
    pool_v = torch.zeros_like(pool_k)
    cos, sin = rotary.tables(positions, torch.float32)
    qk = rope_apply(qkv[:, : (heads + kv_heads) * head_dim].view(tokens, -1, head_dim), cos, sin)
    v = qkv[:, (heads + kv_heads) * head_dim :].view(tokens, kv_heads, head_dim).clone()
    kern.rope_store(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                    cos=rotary.cos, sin=rotary.sin, positions=positions, pool_k=pool_k,
                    pool_v=pool_v, slots=slots)
    got_qk = qkv[:, : (heads + kv_heads) * head_dim].view(tokens, -1, head_dim)
    torch.testing.assert_close(got_qk, qk, rtol=1e-5, atol=1e-6)
    flat_k, flat_v = pool_k.view(-1, kv_heads, head_dim), pool_v.view(-1, kv_heads, head_dim)
    torch.testing.assert_close(flat_k[slots], qk[:, heads:], rtol=1e-5, atol=1e-6)
    assert torch.equal(flat_v[slots], v)
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool)
    untouched[slots] = False
    assert not flat_k[untouched].any() and not flat_v[untouched].any()


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(4, 2, 32), (4, 4, 16), (8, 2, 24)])
def test_decode_attention_writes_its_slot_and_attends_over_real_context(
        kern, heads, kv_heads, head_dim) -> None:
    torch.manual_seed(4)
    capacity, rows = 96, 5
    positions = torch.tensor([0, 31, 32, 70, 95])  # one token; tile edges; the last position
    slot_rows = torch.tensor([2, 0, 4, 1, 3])
    keys = torch.randn(rows, kv_heads, head_dim, capacity)  # transposed, as decode slots keep
    values = torch.randn(rows, kv_heads, capacity, head_dim)
    qkv = torch.randn(len(positions), (heads + 2 * kv_heads) * head_dim)
    scale = head_dim**-0.5
    keys_before, values_before = keys.clone(), values.clone()
    out = kern.decode_attention(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                                keys=keys, values=values, rows=slot_rows, positions=positions,
                                scale=scale, threads=2)
    per_kv = heads // kv_heads
    for t, (row, pos) in enumerate(zip(slot_rows.tolist(), positions.tolist(), strict=True)):
        k_new = qkv[t, heads * head_dim : (heads + kv_heads) * head_dim].view(kv_heads, head_dim)
        v_new = qkv[t, (heads + kv_heads) * head_dim :].view(kv_heads, head_dim)
        assert torch.equal(keys[row, :, :, pos], k_new)
        assert torch.equal(values[row, :, pos], v_new)
        keys_before[row, :, :, pos], values_before[row, :, pos] = k_new, v_new
        q = qkv[t, : heads * head_dim].view(kv_heads, per_kv, head_dim)
        k = keys[row, :, :, : pos + 1].transpose(1, 2)  # [kv_heads, n, D]
        expected = F.scaled_dot_product_attention(q, k, values[row, :, : pos + 1], scale=scale)
        torch.testing.assert_close(out[t], expected.reshape(-1), rtol=1e-5, atol=1e-5)
    # Nothing else in the slots was written (a stray write would also change `expected`).
    assert torch.equal(keys, keys_before) and torch.equal(values, values_before)


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(4, 2, 32), (4, 4, 16), (8, 2, 24)])
def test_paged_attention_attends_causally_over_each_sequences_blocks(kern, heads, kv_heads,
                                                                     head_dim) -> None:
    torch.manual_seed(6)
    block_size, num_blocks = 4, 80
    pool_k = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    pool_v = torch.randn_like(pool_k)
    # (first position, queries): a whole prompt, a later chunk crossing 32-position tiles, one
    # query (a decode in a group), a chunk ending on a block edge.
    seqs = [(0, 9), (30, 40), (5, 1), (8, 8)]
    tables = torch.randperm(num_blocks)[: 4 * 18].view(4, 18)  # shuffled blocks, padded rows
    q_lens = torch.tensor([n for _, n in seqs])
    starts = torch.tensor([p for p, _ in seqs])
    offsets = torch.cumsum(q_lens, 0) - q_lens
    qkv = torch.randn(int(q_lens.sum()), (heads + 2 * kv_heads) * head_dim)
    scale = head_dim**-0.5
    out = kern.paged_attention(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                               pool_k=pool_k, pool_v=pool_v, block_tables=tables,
                               offsets=offsets, query_lens=q_lens, starts=starts, scale=scale,
                               threads=2)
    per_kv = heads // kv_heads
    flat_k = pool_k.view(-1, kv_heads, head_dim)
    flat_v = pool_v.view(-1, kv_heads, head_dim)
    for s, (first, count) in enumerate(seqs):
        context = first + count
        slots = (tables[s, torch.arange(context) // block_size] * block_size
                 + torch.arange(context) % block_size)
        k, v = flat_k[slots].transpose(0, 1), flat_v[slots].transpose(0, 1)  # [kv, n, D]
        for i in range(count):
            row = int(offsets[s]) + i
            q = qkv[row, : heads * head_dim].view(kv_heads, per_kv, head_dim)
            n = first + i + 1  # causal: up to the query's own position
            expected = F.scaled_dot_product_attention(q, k[:, :n], v[:, :n], scale=scale)
            torch.testing.assert_close(out[row], expected.reshape(-1), rtol=1e-5, atol=1e-5)


# Groups as ModelRunner._group builds them, as (first position, queries, blocks shared with the
# previous sequence): prefill chunks of different lengths and starts, one of them after a prefix
# cache hit; speculative checks of k + 1 = 5 queries; a one-token query beside long chunks (a
# decode that gathers: its slots were over budget); samples forked from one prompt (n > 1),
# which share its full blocks.
REAL_GROUPS = {
    "prefill_chunks": [(0, 37, 0), (48, 16, 0), (0, 9, 0), (33, 40, 0)],
    "prefix_hit": [(32, 20, 0), (32, 20, 2), (31, 1, 2)],
    "speculative_checks": [(12, 5, 0), (40, 5, 0), (3, 5, 0)],
    "decode_beside_chunks": [(0, 50, 0), (70, 1, 0), (20, 30, 0)],
    "forked_samples": [(21, 1, 0), (21, 1, 1), (21, 1, 1), (25, 4, 1)],
}


@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize("kind", REAL_GROUPS)
def test_paged_attention_equals_the_pytorch_group_path_on_real_metadata(kern, kind,
                                                                          block_size) -> None:
    """The kernel against PagedAttention._group, both reading the metadata ModelRunner._group
    builds (block tables padded to the longest context, starts, query lengths, offsets)."""
    from worker.engine.layers.attention import PagedAttention
    from worker.engine.model_runner import BatchEntry, ModelRunner

    torch.manual_seed(7)
    heads, kv_heads, head_dim, num_blocks = 8, 2, 24, 200
    pool_k = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    pool_v = torch.randn_like(pool_k)
    free = torch.randperm(num_blocks).tolist()
    entries: list[BatchEntry] = []
    for first, count, shared in REAL_GROUPS[kind]:
        table = [free.pop() for _ in range(-(-(first + count) // block_size) + 2)]
        if entries:
            table[:shared] = entries[-1].block_table[:shared]
        entries.append(BatchEntry(list(range(count)), first, table, 1))
    group, _, _ = ModelRunner._group(entries, 0, torch.device("cpu"), block_size,
                                     heads // kv_heads)
    qkv = torch.randn(group.token_end, (heads + 2 * kv_heads) * head_dim)
    attn = PagedAttention(num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim)
    expected = attn._group(qkv[:, : heads * head_dim].view(-1, heads, head_dim), pool_k,
                           pool_v, group)
    got = kern.paged_attention(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                               pool_k=pool_k, pool_v=pool_v,
                               block_tables=group.block_ids.view(group.num_seqs, -1),
                               offsets=group.offsets, query_lens=group.query_lens,
                               starts=group.starts, scale=attn.scale, threads=2)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_paged_attention_never_reads_a_later_position(kern) -> None:
    """Causality: changing the pool at a sequence's later positions leaves its earlier queries'
    outputs exactly as they were, and changes the later ones."""
    torch.manual_seed(8)
    heads, kv_heads, head_dim, block_size = 4, 2, 16, 4
    pool_k = torch.randn(12, block_size, kv_heads, head_dim)
    pool_v = torch.randn_like(pool_k)
    qkv = torch.randn(40, (heads + 2 * kv_heads) * head_dim)
    args = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                block_tables=torch.arange(10).view(1, 10), offsets=torch.tensor([0]),
                query_lens=torch.tensor([40]), starts=torch.tensor([0]), scale=0.25, threads=2)
    before = kern.paged_attention(qkv, pool_k=pool_k, pool_v=pool_v, **args)
    changed_k, changed_v = pool_k.clone(), pool_v.clone()
    changed_k.view(-1, kv_heads, head_dim)[25:] += 1.0  # positions 25 .. 39 (and beyond)
    changed_v.view(-1, kv_heads, head_dim)[25:] -= 1.0
    after = kern.paged_attention(qkv, pool_k=changed_k, pool_v=changed_v, **args)
    assert torch.equal(after[:25], before[:25])
    assert not torch.isclose(after[25:], before[25:]).all(dim=-1).any()


def test_silu_mul_is_swiglus_elementwise_half(kern) -> None:
    torch.manual_seed(5)
    gate_up = torch.randn(9, 2 * 37) * 4
    # Gates far out on both sides too: exp(-gate) overflows below about -88.
    gate_up[0, :8] = torch.tensor([-1e4, -200.0, -100.0, -89.0, -87.0, 89.0, 200.0, 1e4])
    gate, up = gate_up.split(37, dim=-1)
    torch.testing.assert_close(kern.silu_mul(gate_up), F.silu(gate) * up, rtol=1e-5, atol=1e-6)


def _run(path, monkeypatch, setting: str, prompts, **engine_args):
    from worker.engine import Engine, SamplingParams
    from worker.engine.model_runner import BatchEntry

    monkeypatch.setenv("ENGINE_CPU_KERNELS", setting)
    engine = Engine.from_pretrained(path, **engine_args)
    outputs = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=24,
                                                      ignore_eos=True))
    logits = engine.runner.execute([BatchEntry(prompts[0], 0, list(range(4)), len(prompts[0]))])
    fused = engine.runner.model.cpu_kernels is not None
    return [o.token_ids for o in outputs], logits, fused


@pytest.mark.parametrize("family", ["llama", "llama_tied", "qwen2", "mistral"])
def test_engines_with_and_without_the_kernels_agree(tiny_models, monkeypatch, kern,
                                                    family) -> None:
    prompts = [[5, 9, 11, 200, 17, 3, 44, 90, 12, 13], [7, 7, 8], list(range(20, 61))]
    # Small blocks and chunks: prefill chunks, decode slots and mixed steps all run.
    args = dict(num_kv_blocks=64, block_size=4, max_num_batched_tokens=16)
    tokens_off, logits_off, fused_off = _run(tiny_models[family], monkeypatch, "0", prompts,
                                             **args)
    tokens_on, logits_on, fused_on = _run(tiny_models[family], monkeypatch, "1", prompts,
                                          **args)
    assert (fused_off, fused_on) == (False, True)
    assert tokens_on == tokens_off
    torch.testing.assert_close(logits_on, logits_off, rtol=1e-4, atol=1e-4)


def test_engines_agree_when_decodes_gather_samples_fork_and_prompts_hit_the_cache(
        tiny_models, monkeypatch, kern) -> None:
    """Decode slots over their budget (every decode a one-token query in a paged-attention
    group), greedy samples forked from one prompt (n = 3: shared blocks, copy-on-write), and a
    second pass whose prompts start past a prefix-cache hit: the same tokens with the kernels
    and without, and the same logits for a prompt whose first two blocks are cached."""
    from worker.engine import Engine, SamplingParams
    from worker.engine.model_runner import BatchEntry

    prompts = [list(range(10, 31)), [5, 9, 11, 200, 17, 3, 44, 90, 12], list(range(40, 53))]
    results = {}
    for setting in ("0", "1"):
        monkeypatch.setenv("ENGINE_CPU_KERNELS", setting)
        engine = Engine.from_pretrained(tiny_models["qwen2"], num_kv_blocks=96, block_size=4,
                                        max_num_batched_tokens=16)
        engine.runner.decode_slots.max_bytes = 0
        greedy = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
        tokens = [[o.token_ids for o in engine.generate(prompts, greedy)] for _ in range(2)]
        forked = engine.generate([prompts[0]], SamplingParams(temperature=0, max_tokens=10,
                                                              ignore_eos=True, n=3))
        stats = engine.stats()
        assert stats["prefix_cache_hits"] > 0 and engine.runner.decode_slots.rows == 0
        assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
        runner = engine.runner
        runner.execute([BatchEntry(prompts[0][:8], 0, [0, 1, 2, 3, 4, 5], 0)])
        logits = runner.execute([BatchEntry(prompts[0][8:], 8, [0, 1, 2, 3, 4, 5], 13)])
        results[setting] = (tokens, [o.token_ids for o in forked], logits,
                            runner.model.cpu_kernels is not None)
    (tokens_off, forked_off, logits_off, fused_off), (tokens_on, forked_on, logits_on,
                                                       fused_on) = results["0"], results["1"]
    assert (fused_off, fused_on) == (False, True)
    assert tokens_on == tokens_off and tokens_on[0] == tokens_on[1]
    assert forked_on == forked_off
    torch.testing.assert_close(logits_on, logits_off, rtol=1e-4, atol=1e-4)


def test_a_copied_model_packs_its_own_weights(tiny_models, monkeypatch, kern) -> None:
    """Quantization deep-copies a model and changes the copy's weights: the copy must not run
    on the original's packed weights."""
    from worker.engine import Engine
    from worker.engine.model_runner import BatchEntry

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16, block_size=4)
    entry = [BatchEntry([5, 6, 7, 8], 0, [0], 4)]
    before = engine.runner.execute(entry)
    model = engine.runner.model
    assert model.cpu_kernels is not None and model.packed
    copied = copy.deepcopy(model)
    assert copied.cpu_kernels is False and copied.packed == []
    with torch.no_grad():
        copied.layers[0].mlp.down_proj.weight.mul_(0.5)
    engine.runner.model = copied
    after = engine.runner.execute(entry)
    assert not torch.allclose(after, before)
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")
    reference = copy.deepcopy(copied)  # decides again: PyTorch's ops this time
    engine.runner.model = reference
    torch.testing.assert_close(engine.runner.execute(entry), after, rtol=1e-4, atol=1e-4)
    assert reference.cpu_kernels is None


def _bytes_held(model) -> int:
    """Bytes of every distinct storage the model holds on the CPU: its parameters and buffers,
    the packed weights and the column-major head copy (meta tensors hold none)."""
    tensors = [*model.parameters(), *model.buffers(), model.lm_head_weight]
    for packed in [*(p for layer in model.packed for p in layer.values()), model.head_packed]:
        if packed is not None:
            tensors += [packed.weight, packed.bias]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in tensors if t is not None and not t.is_meta}
    return sum(storages.values())


@pytest.mark.parametrize("family", ["llama", "llama_tied"])
def test_packing_frees_the_original_weights(tiny_models, monkeypatch, kern, family) -> None:
    """The packed copy replaces the weights instead of sitting beside them. The tiny Llama
    (hidden 64, intermediate 128, 2 layers, vocab 320, q/k/v 64+32+32 rows) has 128×64 +
    64×64 + 256×64 + 64×128 = 36,864 linear weights a layer, 73,728 for two, and a 320×64
    head (20,480); its rows are whole 32-column panels, so packing pads nothing. Untied, it
    loads 115,008 floats (460,032 bytes, with a 320×64 embedding and 320 norm weights) and
    8,192 floats of RoPE tables: 492,800 bytes. Kept beside the packed copy, the linear
    weights and head would add 376,832 bytes (869,632); freed, it holds 492,800 again. Tied,
    it loads 94,528 floats plus the column-major copy of its head (PyTorch's ops) and the
    tables: 492,800 bytes; freed, the embedding is read from the packed head: 410,880.
    Counting the parameters (model_facts) gives the same before and after, and the tokens are
    those of PyTorch's ops."""
    from worker.demo_engine import model_facts
    from worker.engine import Engine, SamplingParams

    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    prompts = [[5, 6, 7, 8], [9, 10]]
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")
    reference = Engine.from_pretrained(tiny_models[family], num_kv_blocks=16, block_size=4)
    expected = [o.token_ids for o in reference.generate(prompts, params)]
    loaded = _bytes_held(reference.runner.model)
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    engine = Engine.from_pretrained(tiny_models[family], num_kv_blocks=16, block_size=4)
    assert [o.token_ids for o in engine.generate(prompts, params)] == expected
    model = engine.runner.model
    assert model.originals_freed and model.cpu_kernels is not None
    assert all(p.is_meta for p in model.layers[0].mlp.parameters())
    assert (loaded, _bytes_held(model)) == ((492_800, 492_800) if family == "llama"
                                            else (492_800, 410_880))
    assert model_facts(engine) == model_facts(reference)


def test_freed_weights_come_back_bit_for_bit(tiny_models, monkeypatch, kern) -> None:
    """A copy of a model whose originals are freed (quantization copies the engine's model and
    reads its weights) rebuilds them from the packed copy, equal to the loaded ones; and the
    model itself, asked to run PyTorch's ops (a pool in another dtype), unpacks them, drops
    the packed copy, and packs again on its next fused pass."""
    from worker.engine import Engine
    from worker.engine.model_runner import BatchEntry

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")
    loaded = Engine.from_pretrained(tiny_models["llama_tied"], num_kv_blocks=16, block_size=4)
    originals = {name: p.detach().clone() for name, p in loaded.runner.model.named_parameters()}
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    engine = Engine.from_pretrained(tiny_models["llama_tied"], num_kv_blocks=16, block_size=4)
    entry = [BatchEntry([5, 6, 7, 8], 0, [0], 4)]
    fused = engine.runner.execute(entry)
    model = engine.runner.model
    assert model.originals_freed
    copied = copy.deepcopy(model)
    assert not copied.originals_freed and copied.packed == [] and copied.cpu_kernels is False
    for name, p in copied.named_parameters():
        assert torch.equal(p, originals[name]), name
    assert copied.lm_head.weight is copied.embed_tokens.weight
    with torch.no_grad():
        model.weights_unpack()
    assert not model.originals_freed and model.packed == []
    for name, p in model.named_parameters():
        assert torch.equal(p, originals[name]), name
    torch.testing.assert_close(engine.runner.execute(entry), fused, rtol=0, atol=0)
    assert model.originals_freed and model.packed  # packed again, and freed again


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_the_decode_layer_loop_in_c_matches_the_python_loop(tiny_models, monkeypatch, kern,
                                                            family) -> None:
    """decode_layers makes the Python loop's calls in its order, so every step's logits are
    the same bits either way: three sequences of different lengths decoding together (a
    newcomer joining its slot row runs the Python loop for that step), Qwen2's q/k/v bias
    included. The C loop must actually run: its calls are counted."""
    from worker.engine import Engine, SamplingParams

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]
    runs = {}
    for in_c in (False, True):
        engine = Engine.from_pretrained(tiny_models[family], num_kv_blocks=32, block_size=4)
        model = engine.runner.model
        model.decode_layers_in_c = in_c
        engine.generate([[3, 4]], SamplingParams(temperature=0, max_tokens=2))
        lib, calls, logits = model.cpu_kernels._lib, [], []
        real = lib.decode_layers
        monkeypatch.setattr(lib, "decode_layers", lambda *a, real=real, calls=calls:
                            calls.append(1) or real(*a), raising=False)
        model.forward = lambda *a, forward=model.forward, logits=logits: (
            logits.append(forward(*a)) or logits[-1])
        outs = engine.generate(prompts, params)
        monkeypatch.setattr(lib, "decode_layers", real, raising=False)
        runs[in_c] = ([o.token_ids for o in outs], logits, len(calls))
    assert runs[True][0] == runs[False][0]
    assert len(runs[True][1]) == len(runs[False][1])
    for c_step, python_step in zip(runs[True][1], runs[False][1], strict=True):
        assert torch.equal(c_step, python_step)
    assert runs[False][2] == 0 and runs[True][2] >= 8


def test_a_step_keeps_its_buffers_for_the_next_and_holds_them_alone(tiny_models, monkeypatch,
                                                                    kern) -> None:
    """A decode step reuses the last step's buffers (same token count), and while a step runs
    they are taken out of the model, so another thread running the same model at that moment
    allocates its own instead of writing into them."""
    from worker.engine import Engine, SamplingParams

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    engine = Engine.from_pretrained(tiny_models["llama_tied"], num_kv_blocks=32, block_size=4)
    model = engine.runner.model
    engine.generate([[3, 4]], SamplingParams(temperature=0, max_tokens=2))
    lib, seen = model.cpu_kernels._lib, []
    real = lib.decode_layers

    def watched(*args):  # noqa: ANN002, ANN202
        seen.append((model.__dict__.get("_fused_step"), args[3]))  # args[3]: the h buffer
        return real(*args)

    monkeypatch.setattr(lib, "decode_layers", watched, raising=False)
    engine.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    monkeypatch.setattr(lib, "decode_layers", real, raising=False)
    assert len(seen) >= 4
    assert all(held is None for held, _ in seen)  # out of the model while a step runs
    assert len({h for _, h in seen}) == 1  # one batch-1 buffer, step after step
    assert model._fused_step is not None and model._fused_step.tokens == 1


def test_without_a_compiler_the_engine_runs_pytorch_ops(tiny_models, monkeypatch, caplog,
                                                        tmp_path) -> None:
    """No compiler and no build made earlier (an empty build directory)."""
    from worker.engine import Engine, SamplingParams

    def no_compiler() -> str:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")

    monkeypatch.setattr(cpu_mod, "_loaded", False)
    monkeypatch.setattr(cpu_mod, "_compiler", no_compiler)
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", tmp_path)
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "auto")
    with caplog.at_level("WARNING"):
        assert cpu_mod.cpu_kernels() is None
    assert "no C compiler" in caplog.text
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16, block_size=4)
    out = engine.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=3))[0]
    assert len(out.token_ids) == 3 and engine.runner.model.cpu_kernels is None


@pytest.fixture
def compiler_calls(monkeypatch) -> list:
    """Every command the build runs from here on (the compiler's), in order."""
    calls = []
    real_run = cpu_mod.subprocess.run

    def counting_run(args, **kwargs):  # noqa: ANN001, ANN003
        calls.append(args)
        return real_run(args, **kwargs)

    monkeypatch.setattr(cpu_mod.subprocess, "run", counting_run)
    return calls


def test_the_build_is_reused_without_asking_the_compiler(kern, compiler_calls,
                                                         monkeypatch) -> None:
    """A second build finds the library already compiled for this source, flags and CPU, and
    runs no compiler at all: a machine whose compiler has gone loads it too."""
    calls = compiler_calls
    assert cpu_mod._build() == kern.path
    assert calls == []

    def no_compiler() -> str:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")

    monkeypatch.setattr(cpu_mod, "_compiler", no_compiler)
    assert cpu_mod._build() == kern.path


def test_a_failure_that_names_no_flag_is_not_remembered(kern, monkeypatch, tmp_path,
                                                        compiler_calls, caplog) -> None:
    """A compile that failed for a passing reason (here the compiler ran out of memory) once
    left a `.refused` file, and every later process silently ran without OpenMP. Now only a
    refusal whose message names a dropped flag is remembered; the fallback build is logged."""
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", tmp_path)
    real_run = cpu_mod.subprocess.run
    failed = []

    def run(args, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if "-fopenmp" in args and "-c" in args and not failed:
            failed.append(args)
            return cpu_mod.subprocess.CompletedProcess(args, 1, "", "cc1: out of memory "
                                                       "allocating 65536 bytes")
        return real_run(args, **kwargs)

    monkeypatch.setattr(cpu_mod.subprocess, "run", run)
    with caplog.at_level("WARNING"):
        fallback = cpu_mod._load()
    assert failed and "-fopenmp" not in fallback.flags
    assert not list(tmp_path.glob("*.refused"))
    assert "fallback build without -fopenmp" in caplog.text and "single-threaded" in caplog.text
    # The next process tries OpenMP again, and gets it.
    best = cpu_mod._load()
    assert best.flags == cpu_mod.flag_sets()[0] and best.path != fallback.path


def test_a_compiler_whose_version_prints_nothing_still_builds(kern, monkeypatch,
                                                               tmp_path) -> None:
    """`cc --version` printing nothing once raised IndexError on every forward pass."""
    cc = tmp_path / "quiet-cc"
    real = next(shutil.which(c) for c in ("gcc", "cc", "clang") if shutil.which(c))
    cc.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exit 0\nexec {real} "$@"\n')
    cc.chmod(0o755)
    cache = tmp_path / "kernels"
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", cache)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setattr(cpu_mod, "FLAG_SETS", [["-O3", "--no-such-flag", "-fPIC"],
                                               ["-O2", "-fPIC"]])
    built = cpu_mod.CpuKernels(cpu_mod._build())
    assert str(cc) in next(cache.glob("*.refused")).read_text()  # its name stands in
    x, w = torch.randn(3, 30), torch.randn(20, 30)
    torch.testing.assert_close(built.linear(x, built.pack(w), 1), F.linear(x, w),
                               rtol=1e-5, atol=1e-5)


def test_builds_for_two_cpus_in_one_checkout_both_stay(kern, monkeypatch, tmp_path) -> None:
    """A checkout shared by two machines: each one's build used to delete the other's."""
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", tmp_path)
    monkeypatch.setattr(cpu_mod, "FLAG_SETS", [["-O2", "-fPIC"]])
    here = cpu_mod._build()
    monkeypatch.setattr(cpu_mod, "_cpu_signature", lambda: "model name: another CPU")
    there = cpu_mod._build()
    assert here != there and here.exists() and there.exists()


def test_the_build_without_avx512_can_be_forced_and_runs(kern, monkeypatch, tmp_path) -> None:
    """ENGINE_CPU_KERNELS_AVX512=0 builds the 8-float path that CPUs without AVX-512 run (16-
    column panels), here on any machine; it computes what PyTorch does."""
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", tmp_path)
    monkeypatch.setenv("ENGINE_CPU_KERNELS_AVX512", "0")
    plain = cpu_mod._load()
    assert plain.panel == 16 and "no AVX-512" in plain.build
    assert "-mno-avx512f" in plain.flags
    torch.manual_seed(12)
    for rows, n, k in ((1, 33, 64), (9, 100, 40)):
        x, w, b = torch.randn(rows, k), torch.randn(n, k), torch.randn(n)
        torch.testing.assert_close(plain.linear(x, plain.pack(w, b), 2), F.linear(x, w, b),
                                   rtol=1e-5, atol=1e-5)
    heads, kv_heads, dim, capacity = 4, 2, 16, 32
    qkv = torch.randn(2, (heads + 2 * kv_heads) * dim)
    keys = torch.randn(2, kv_heads, dim, capacity)
    values = torch.randn(2, kv_heads, capacity, dim)
    args = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=dim, rows=torch.tensor([0, 1]),
                positions=torch.tensor([5, 20]), scale=0.25, threads=2)
    got = plain.decode_attention(qkv, keys=keys.clone(), values=values.clone(), **args)
    torch.testing.assert_close(got, kern.decode_attention(qkv, keys=keys.clone(),
                                                          values=values.clone(), **args),
                               rtol=1e-5, atol=1e-5)


def test_the_engine_stats_name_the_loaded_build(tiny_models, kern) -> None:
    from worker.engine import Engine, SamplingParams

    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16, block_size=4)
    engine.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=2))
    assert engine.stats()["cpu_kernels"] == kern.build and kern.path.name in kern.build


def test_flags_the_compiler_refused_are_not_tried_again(kern, monkeypatch, tmp_path,
                                                        compiler_calls) -> None:
    """A compiler without OpenMP (Apple's clang) refuses the first flag set: the refusal is
    remembered beside the builds, so the next process goes straight to the next set."""
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", tmp_path)
    monkeypatch.setattr(cpu_mod, "FLAG_SETS", [["-O3", "--no-such-flag", "-fPIC"],
                                               ["-O2", "-fPIC"]])
    calls = compiler_calls
    first = cpu_mod._build()
    assert any("--no-such-flag" in args for args in calls)
    assert len(list(tmp_path.glob("*.refused"))) == 1 and first.exists()
    calls.clear()
    assert cpu_mod._build() == first
    assert not any("--no-such-flag" in args for args in calls)
    assert cpu_mod.CpuKernels(first).panel in (16, 32)


def test_env_setting_turns_the_kernels_off(monkeypatch) -> None:
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")
    assert cpu_mod.cpu_kernels() is None
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "auto")
    assert cpu_mod.cpu_kernels_wanted()


def test_loading_the_kernels_keeps_subnormal_floats() -> None:
    """Linked with -ffast-math, GCC before 13 adds a constructor that turns on flush-to-zero
    for the whole process when the library loads: PyTorch's ops would then round subnormal
    floats to zero. A fresh process, so the check sees the library's first load."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from worker.engine.kernels import cpu\n"
        "tiny = lambda: (torch.tensor([1e-38]) / 1000.0).item()\n"
        "before = tiny()\n"
        "assert cpu.cpu_kernels() is not None\n"
        "print(before > 0, tiny() == before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "ENGINE_CPU_KERNELS": "1"},
                          cwd=str(cpu_mod._CACHE_DIR.parents[1]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_an_unwritable_build_directory_falls_back_to_a_temporary_one(kern, tmp_path,
                                                                     monkeypatch) -> None:
    """var/kernels/ exists but cannot be written (a read-only checkout): the build goes to the
    temporary directory instead of leaving the engine on PyTorch's ops."""
    locked, scratch = tmp_path / "kernels", tmp_path / "tmp"
    locked.mkdir()
    scratch.mkdir()
    real_mkstemp = cpu_mod.tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):  # noqa: ANN001, ANN002, ANN003, A002
        if dir is not None and Path(dir) == locked:
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", locked)
    monkeypatch.setattr(cpu_mod.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(cpu_mod.tempfile, "tempdir", str(scratch))
    built = cpu_mod._build()
    assert built.parent == scratch / "course-engine-kernels" and built.exists()
    assert not any(locked.iterdir())


def test_a_build_deleted_before_it_loads_is_built_again(kern, tmp_path, monkeypatch) -> None:
    """Another process (another source) may delete a build as stale between this process
    finding it and loading it."""
    monkeypatch.setattr(cpu_mod, "_CACHE_DIR", tmp_path)
    built = cpu_mod._build()
    real_build = cpu_mod._build
    calls = []

    def build_then_lose_it() -> object:
        path = real_build()
        if not calls:
            path.unlink()  # the other process's cleanup, just before dlopen
        calls.append(path)
        return path

    monkeypatch.setattr(cpu_mod, "_build", build_then_lose_it)
    loaded = cpu_mod._load()
    assert loaded.path == built and len(calls) == 2 and built.exists()


def test_indices_out_of_range_raise_and_change_nothing(kern) -> None:
    """Where PyTorch's indexing raises (a position past the RoPE tables or a slot's capacity, a
    pool slot or slot row that does not exist, a selected row past the batch), the kernels
    raise too, before writing anything, instead of reading or writing past a buffer."""
    torch.manual_seed(6)
    heads, kv_heads, dim, capacity = 2, 1, 16, 32
    rotary = RotaryEmbedding(head_dim=dim, max_positions=8,
                             rope={"rope_theta": 10000.0, "rope_type": "default"})
    qkv = torch.randn(2, (heads + 2 * kv_heads) * dim)
    pool_k, pool_v = torch.zeros(2, 4, kv_heads, dim), torch.zeros(2, 4, kv_heads, dim)
    qkv_before = qkv.clone()
    for positions, slots in (([0, 8], [0, 1]), ([0, -1], [0, 1]), ([0, 1], [0, 8])):
        with pytest.raises(IndexError, match="rope_store"):
            kern.rope_store(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=dim,
                            cos=rotary.cos, sin=rotary.sin, positions=torch.tensor(positions),
                            pool_k=pool_k, pool_v=pool_v, slots=torch.tensor(slots))
    assert torch.equal(qkv, qkv_before) and not pool_k.any() and not pool_v.any()

    keys = torch.randn(2, kv_heads, dim, capacity)
    values = torch.randn(2, kv_heads, capacity, dim)
    keys_before, values_before = keys.clone(), values.clone()
    for rows, positions in (([0, 1], [3, capacity]), ([0, 2], [3, 4]), ([0, 1], [-1, 4])):
        with pytest.raises(IndexError, match="decode_attention"):
            kern.decode_attention(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=dim,
                                  keys=keys, values=values, rows=torch.tensor(rows),
                                  positions=torch.tensor(positions), scale=0.25, threads=2)
    assert torch.equal(keys, keys_before) and torch.equal(values, values_before)

    x = torch.randn(3, dim)
    with pytest.raises(IndexError, match="add_rmsnorm"):
        kern.add_rmsnorm(x, None, torch.ones(dim), 1e-5, select=torch.tensor([0, 3]))

    # A token id past the vocabulary (or negative) reads no row at all.
    packed = kern.pack(torch.randn(20, dim))
    for ids in ([0, 20], [-1, 3]):
        with pytest.raises(IndexError, match="embed_packed"):
            kern.embed_packed(packed, torch.tensor(ids))

    # Paged attention: a block id past the pool, a context past the block table, queries past
    # the rows given.
    one = torch.tensor([1])
    for table, start, count, offset in (([0, 2], 0, 5, 0), ([0, 1], 5, 4, 0),
                                        ([0, 1], 0, 2, 1)):
        with pytest.raises(IndexError, match="paged_attention"):
            kern.paged_attention(qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=dim,
                                 pool_k=pool_k, pool_v=pool_v,
                                 block_tables=torch.tensor([table]),
                                 offsets=torch.tensor([offset]), query_lens=one * count,
                                 starts=one * start, scale=0.25, threads=2)


def test_paged_attention_refuses_rows_that_overlap_or_leave_gaps(kern) -> None:
    """Two sequences given the same rows would race (two threads writing one output row), and a
    row no sequence covers would come back as whatever torch.empty held: the sequences' rows
    must follow one another and cover qkv's rows. Index tensors of another length or type than
    the kernel reads are refused before it runs."""
    torch.manual_seed(9)
    heads, kv_heads, dim = 2, 1, 16
    qkv = torch.randn(6, (heads + 2 * kv_heads) * dim)
    pool_k, pool_v = torch.randn(4, 4, kv_heads, dim), torch.randn(4, 4, kv_heads, dim)
    tables = torch.tensor([[0, 1], [2, 3]])

    def call(offsets, query_lens, starts=(0, 0), block_tables=tables):  # noqa: ANN001, ANN202
        return kern.paged_attention(
            qkv, num_heads=heads, num_kv_heads=kv_heads, head_dim=dim, pool_k=pool_k,
            pool_v=pool_v, block_tables=block_tables, offsets=torch.tensor(offsets),
            query_lens=torch.tensor(query_lens), starts=torch.tensor(starts), scale=0.25,
            threads=2)

    call([0, 3], [3, 3])  # the rows tiled: fine
    # Overlapping rows; a gap at the end; a gap in the middle; a first sequence not at row 0.
    for offsets, query_lens in (([0, 2], [3, 3]), ([0, 3], [3, 2]), ([0, 4], [3, 2]),
                                ([1, 3], [2, 3])):
        with pytest.raises(IndexError, match="paged_attention"):
            call(offsets, query_lens)
    # A start so large that start + queries would overflow int64.
    with pytest.raises(IndexError, match="paged_attention"):
        call([0, 3], [3, 3], starts=(0, 2**63 - 2))
    with pytest.raises(ValueError, match="paged_attention"):
        call([0, 3], [3, 3], block_tables=tables[:1])  # fewer tables than sequences
    with pytest.raises(ValueError, match="paged_attention"):
        call([0, 3], [3, 3], block_tables=tables.to(torch.int32))
    with pytest.raises(ValueError, match="paged_attention"):
        call([0], [3, 3])


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(4, 4, 16), (8, 2, 20)])
def test_engines_agree_at_other_gqa_ratios_and_head_sizes(tmp_path, monkeypatch, kern, heads,
                                                           kv_heads, head_dim) -> None:
    """The tiny families share one GQA ratio (2); here one query head per KV head, and four
    with a head size that is not a multiple of a vector, through prefill chunks, decode slots
    and contexts that cross several 32-position tiles."""
    from tests.engine.conftest import tiny_model_save

    path = tiny_model_save("llama_tied", tmp_path / "m", num_attention_heads=heads,
                           num_key_value_heads=kv_heads, head_dim=head_dim)
    prompts = [list(range(3, 80)), [9], [4, 5, 6, 7, 8, 30, 31]]
    args = dict(num_kv_blocks=96, block_size=4, max_num_batched_tokens=16)
    tokens_off, logits_off, _ = _run(path, monkeypatch, "0", prompts, **args)
    tokens_on, logits_on, fused_on = _run(path, monkeypatch, "1", prompts, **args)
    assert fused_on and tokens_on == tokens_off
    torch.testing.assert_close(logits_on, logits_off, rtol=1e-4, atol=1e-4)


def test_a_model_shared_by_runners_with_different_kv_dtypes(tiny_models, monkeypatch,
                                                             kern) -> None:
    """The kernels write an fp32 pool; a second runner over the same model with a bfloat16
    pool must run PyTorch's ops (which round K/V on write), and the first keep the kernels."""
    from worker.engine import Engine
    from worker.engine.model_runner import BatchEntry, ModelRunner

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    engine = Engine.from_pretrained(tiny_models["qwen2"], num_kv_blocks=16, block_size=4)
    entry = [BatchEntry([5, 6, 7, 8, 9, 10], 0, [0, 1], 6)]
    fp32_logits = engine.runner.execute(entry)
    model = engine.runner.model
    assert model.cpu_kernels is not None
    narrow = ModelRunner(model, engine.config, num_blocks=16, block_size=4, device="cpu",
                         dtype=torch.float32, kv_cache_dtype=torch.bfloat16)
    narrow_logits = narrow.execute(entry)
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")
    reference = Engine.from_pretrained(tiny_models["qwen2"], num_kv_blocks=16, block_size=4,
                                       kv_cache_dtype="bfloat16")
    assert reference.runner.model.cpu_kernels is False  # decided on its first forward
    torch.testing.assert_close(narrow_logits, reference.runner.execute(entry), rtol=1e-5,
                               atol=1e-5)
    assert reference.runner.model.cpu_kernels is None
    assert not torch.allclose(narrow_logits, fp32_logits, rtol=0, atol=1e-6)  # K/V rounded
    torch.testing.assert_close(engine.runner.execute(entry), fp32_logits, rtol=1e-5, atol=1e-5)


def _misuses(kern) -> list:  # noqa: ANN001
    """Each misuse the review found (and its neighbours), as (kernel, thunk). Unchecked, each
    read or wrote out of bounds under AddressSanitizer or gave a silently wrong answer."""
    heads, kv_heads, dim, capacity = 2, 1, 16, 32
    rotary = RotaryEmbedding(head_dim=dim, max_positions=8,
                             rope={"rope_theta": 10000.0, "rope_type": "default"})
    qkv = torch.randn(2, (heads + 2 * kv_heads) * dim)
    pool = torch.zeros(2, 4, kv_heads, dim)
    keys, values = torch.randn(2, kv_heads, dim, capacity), torch.randn(2, kv_heads, capacity, dim)
    two = torch.tensor([0, 1])
    packed = kern.pack(torch.randn(20, 30))

    def rope(**over):  # noqa: ANN003, ANN202
        args = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=dim, cos=rotary.cos,
                    sin=rotary.sin, positions=two, pool_k=pool, pool_v=pool, slots=two)
        return lambda: kern.rope_store(qkv, **{**args, **over})

    def decode(q=qkv, **over):  # noqa: ANN001, ANN003, ANN202
        args = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=dim, keys=keys,
                    values=values, rows=two, positions=two, scale=0.25, threads=1)
        return lambda: kern.decode_attention(q, **{**args, **over})

    def paged(**over):  # noqa: ANN003, ANN202
        args = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=dim, pool_k=pool,
                    pool_v=pool, block_tables=torch.tensor([[0, 1]]), offsets=torch.tensor([0]),
                    query_lens=torch.tensor([2]), starts=torch.tensor([0]), scale=0.25,
                    threads=1)
        return lambda: kern.paged_attention(qkv, **{**args, **over})

    x = torch.randn(3, 48)
    return [
        # gemm_tile read past x: rows of 25 floats where the weight wants 30.
        ("linear", lambda: kern.linear(torch.randn(4, 25), packed, 1)),
        ("linear", lambda: kern.linear(torch.randn(4, 30, dtype=torch.float64), packed, 1)),
        ("linear", lambda: kern.linear(torch.randn(4, 30, device="meta"), packed, 1)),
        # add_rmsnorm read past a shorter delta or weight.
        ("add_rmsnorm", lambda: kern.add_rmsnorm(x, torch.randn(2, 48), torch.ones(48), 1e-5)),
        ("add_rmsnorm", lambda: kern.add_rmsnorm(x, None, torch.ones(40), 1e-5)),
        ("add_rmsnorm", lambda: kern.add_rmsnorm(x.t(), None, torch.ones(3), 1e-5)),
        ("add_rmsnorm", lambda: kern.add_rmsnorm(x, None, torch.ones(48), 1e-5,
                                                 select=torch.tensor([0], dtype=torch.int32))),
        # silu_mul silently dropped a column of an odd width.
        ("silu_mul", lambda: kern.silu_mul(torch.randn(2, 7))),
        ("silu_mul", lambda: kern.silu_mul(torch.randn(2, 8)[:, ::2].contiguous().t())),
        # rope_store wrote the wrong slots of a non-contiguous pool; int32 positions.
        ("rope_store", rope(pool_k=torch.zeros(4, 2, kv_heads, dim).transpose(0, 1))),
        ("rope_store", rope(positions=two.to(torch.int32))),
        ("rope_store", rope(slots=torch.tensor([0, 1, 2]))),
        ("rope_store", rope(num_heads=3, num_kv_heads=2)),
        ("rope_store", rope(head_dim=15)),
        # decode_attention wrote past keys shaped for another head size; qkv too narrow.
        ("decode_attention", decode(keys=torch.randn(2, kv_heads, 8, capacity))),
        ("decode_attention", decode(values=torch.randn(1, kv_heads, capacity, dim))),
        ("decode_attention", decode(q=qkv[:, :40])),
        ("decode_attention", decode(rows=torch.tensor([0]))),
        ("paged_attention", paged(pool_v=torch.zeros(1, 4, kv_heads, dim))),
        ("paged_attention", paged(num_heads=3)),
        # embed_packed: ids of another dtype or shape, a weight packed for another panel.
        ("embed_packed", lambda: kern.embed_packed(packed, two.to(torch.int32))),
        ("embed_packed", lambda: kern.embed_packed(packed, torch.tensor([[0, 1]]))),
        ("embed_packed", lambda: kern.embed_packed(
            cpu_mod.PackedLinear(packed.weight[:, :, :8].contiguous(), None, 20, 30), two)),
    ]


def test_every_wrapper_refuses_arguments_the_c_would_misread(kern) -> None:
    """A ValueError naming the kernel, before any pointer reaches the C. Page 07's demos call
    these wrappers, and so will learners."""
    torch.manual_seed(11)
    for kernel, call in _misuses(kern):
        with pytest.raises(ValueError, match=kernel):
            call()


def test_the_c_refuses_heads_that_do_not_fit(kern) -> None:
    """Called straight through ctypes (no wrapper): 3 query heads over 2 KV heads, or an odd
    head size, return KERNEL_BAD_HEADS (3) before touching memory."""
    lib = kern._lib
    qkv, pool = torch.zeros(1, 112), torch.zeros(4, 2, 16)
    positions = slots = torch.zeros(1, dtype=torch.int64)
    cos = torch.zeros(8, 16)
    for nh, nkv, dim in ((3, 2, 16), (2, 1, 15), (2, 0, 16)):
        status = lib.rope_store(qkv.data_ptr(), 1, 112, nh, nkv, dim, cos.data_ptr(),
                                cos.data_ptr(), 8, positions.data_ptr(), pool.data_ptr(),
                                pool.data_ptr(), 4, slots.data_ptr())
        assert status == 3
        status = lib.decode_attention(qkv.data_ptr(), 1, 112, nh, nkv, dim, pool.data_ptr(),
                                      pool.data_ptr(), 1, 32, slots.data_ptr(),
                                      positions.data_ptr(), 0.25, qkv.data_ptr(), 1)
        assert status == 3
    assert not qkv.any() and not pool.any()
