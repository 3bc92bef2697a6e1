"""The Llama decoder: embedding, N x (RMSNorm, attention, RMSNorm, SwiGLU MLP), RMSNorm, LM head.

Weights load from Hugging Face names. q/k/v are packed into one matrix and gate/up into
another, so each layer runs two matmuls fewer per step (per-step overhead matters on CPU). The
forward passes call `F.linear` and `.forward` directly: nn.Module's call machinery (hooks)
costs a few microseconds a call, and a decode step makes about seventy of them.
"""

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from worker.engine.config import ModelConfig
from worker.engine.kernels.cpu import CpuKernels, PackedLinear, _check, _need, cpu_kernels
from worker.engine.layers.attention import AttentionMetadata, PagedAttention
from worker.engine.layers.norm import RMSNorm
from worker.engine.layers.rotary import RotaryEmbedding, rope_apply
from worker.engine.profiling import nvtx_enabled, phase


class LlamaAttention(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int = 0) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads = config.num_heads, config.num_kv_heads
        self.head_dim = config.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.qkv_proj = nn.Linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.attention_bias
        )
        self.o_proj = nn.Linear(self.q_size, config.hidden_size, bias=False)
        self.attn = PagedAttention(
            num_heads=self.num_heads, num_kv_heads=self.num_kv_heads, head_dim=self.head_dim,
            layer_index=layer_index,
        )

    def forward(
        self,
        rope: tuple[torch.Tensor, torch.Tensor],
        x: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        qkv = F.linear(x, self.qkv_proj.weight, self.qkv_proj.bias)
        # q and k are adjacent columns: rotate them together, one op each instead of two.
        qk = qkv[:, : self.q_size + self.kv_size].view(-1, self.num_heads + self.num_kv_heads,
                                                        self.head_dim)
        qk = rope_apply(qk, *rope)
        q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]
        v = qkv[:, self.q_size + self.kv_size :].view(-1, self.num_kv_heads, self.head_dim)
        with phase("attention"):  # writing K/V into the pool, then attending
            out = self.attn.forward(q, k, v, k_cache, v_cache, meta)
        return F.linear(out, self.o_proj.weight)


class LlamaMLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(x, self.gate_up_proj.weight).split(self.intermediate_size, dim=-1)
        return F.linear(F.silu(gate) * up, self.down_proj.weight)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int = 0) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config, layer_index)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, rope, delta, residual, k_cache, v_cache, meta):  # noqa: ANN001 (hot path)
        """One layer on the residual stream kept apart from the last block's output: returns this
        layer's MLP output (`delta`) and the stream before it is added. Each norm adds the
        pending delta itself (RMSNorm.forward with a residual: one fused kernel on CUDA), so no
        separate add runs; the first layer has no stream yet and takes the embedding as it."""
        if residual is None:
            residual = delta
            h = self.input_layernorm.forward(delta)
        else:
            h, residual = self.input_layernorm.forward(delta, residual)
        delta = self.self_attn.forward(rope, h, k_cache, v_cache, meta)
        h, residual = self.post_attention_layernorm.forward(delta, residual)
        return self.mlp.forward(h), residual


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: ModelConfig, *, max_positions: int) -> None:
        super().__init__()
        self.config = config
        self.rotary = RotaryEmbedding(
            head_dim=config.head_dim, max_positions=max_positions, rope=config.rope
        )
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.lm_head_weight: torch.Tensor | None = None  # see column_major_weights
        # The fused CPU kernels (kernels/cpu.py) and this model's weights packed for them, set
        # up on the first forward pass; None when this model runs PyTorch's ops (CUDA,
        # fp16/bf16, no compiler, ENGINE_CPU_KERNELS=0).
        self.cpu_kernels: CpuKernels | None | bool = False  # False: not decided yet
        self.packed: list[dict[str, PackedLinear]] = []
        self.head_packed: PackedLinear | None = None
        self.fused_layers: list[FusedLayer] = []  # the packed weights' raw arguments, per layer
        self._layer_table: tuple | None = None  # decode_layers' addresses (_decode_layer_table)
        self._fused_step: FusedStep | None = None  # the last step's buffers (forward_fused)
        # A step whose tokens all decode runs its layer loop in C (decode_layers); False keeps
        # it in Python, call by call (the tests hold the two to the same bits).
        self.decode_layers_in_c = True
        # True while the linear weights (and the LM head, with the embedding it is tied to)
        # live only in their packed copy: the parameters are then shape-only (meta) tensors.
        self.originals_freed = False
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the embedding matrix with the LM head when the checkpoint ties them."""
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def column_major_weights(self) -> None:
        """Store each linear layer's weight column-major (the same values, transposed memory).

        On CPU, MKL multiplies a few rows by W^T about 1.7x faster when W is column-major
        (measured at 16 rows on the demo model's shapes; no change at 1 or 64 rows), and
        F.linear takes either layout. A tied LM head gets a column-major copy of its own (the
        embedding lookup needs rows), kept as a buffer so the parameter count is unchanged.
        """
        head = self.lm_head.weight
        for module in self.modules():
            if isinstance(module, nn.Linear) and module.weight is not self.embed_tokens.weight:
                module.weight.data = module.weight.data.t().contiguous().t()
        if head is self.embed_tokens.weight:
            self.lm_head_weight = head.detach().t().contiguous().t()

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
        logits_indices: torch.Tensor,
    ) -> torch.Tensor:
        """Logits [len(logits_indices), vocab] for the packed tokens at `logits_indices`."""
        if self.cpu_kernels is False:
            self.cpu_kernels = self._cpu_kernels_setup()
        # A narrower KV cache rounds on write, which PyTorch's ops do (layers/kv_dtype.py); the
        # same model may serve runners with different pools, so this is checked every call.
        if self.cpu_kernels is not None and kv_caches[0][0].dtype == torch.float32:
            return self.forward_fused(self.cpu_kernels, input_ids, positions, kv_caches, meta,
                                      logits_indices)
        if self.originals_freed:
            self.weights_unpack()
        delta = self.embed_tokens(input_ids)
        rope = self.rotary.tables(positions, delta.dtype)
        residual = None
        for layer, (k_cache, v_cache) in zip(self.layers, kv_caches, strict=True):
            delta, residual = layer.forward(rope, delta, residual, k_cache, v_cache, meta)
        # Only the rows that sample a token need the last add, the norm and the (wide) LM head.
        head = self.lm_head_weight if self.lm_head_weight is not None else self.lm_head.weight
        if residual is None:  # a model with no layers
            h = self.norm.forward(delta[logits_indices])
        else:
            h, _ = self.norm.forward(delta[logits_indices], residual[logits_indices])
        return F.linear(h, head).float()

    def _cpu_kernels_setup(self) -> CpuKernels | None:
        """The fused kernels for this model, with its linear weights packed for them and the
        originals freed (`originals_free`), or None where PyTorch's ops run instead."""
        weight = self.embed_tokens.weight
        if weight.device.type != "cpu" or weight.dtype != torch.float32:
            return None
        kern = cpu_kernels()
        if kern is None:
            return None
        with torch.no_grad():
            self.packed = [
                {"qkv": kern.pack(layer.self_attn.qkv_proj.weight, layer.self_attn.qkv_proj.bias),
                 "o": kern.pack(layer.self_attn.o_proj.weight),
                 "gate_up": kern.pack(layer.mlp.gate_up_proj.weight),
                 "down": kern.pack(layer.mlp.down_proj.weight)}
                for layer in self.layers]
            self.head_packed = kern.pack(self.lm_head.weight)
        self.fused_layers = [FusedLayer.bind(kern, layer, packed)
                             for layer, packed in zip(self.layers, self.packed, strict=True)]
        self._layer_table = None
        self._fused_step = None
        self.originals_free()
        return kern

    def _packed_modules(self) -> list[tuple[nn.Linear, PackedLinear]]:
        """Each linear layer beside its packed copy, the LM head last."""
        found = []
        for layer, packed in zip(self.layers, self.packed, strict=True):
            found += [(layer.self_attn.qkv_proj, packed["qkv"]),
                      (layer.self_attn.o_proj, packed["o"]),
                      (layer.mlp.gate_up_proj, packed["gate_up"]),
                      (layer.mlp.down_proj, packed["down"])]
        return [*found, (self.lm_head, self.head_packed)]

    def originals_free(self) -> None:
        """Drop the weights the packed copy duplicates, which held the model's memory at 2×:
        each packed linear layer's weight, and the LM head's (with a tied head, that is the
        embedding too: the fused pass looks token rows up in the packed head). Each becomes a
        meta tensor of the same shape and dtype, so counting the parameters (model_facts, the
        demos, the benchmark's floor) still gives the model's size, and reading one's values
        fails loudly instead of reading zeros. `weights_unpack` brings them back; a copy and
        PyTorch's ops call it themselves."""
        tied = self.lm_head.weight is self.embed_tokens.weight
        for module, _ in self._packed_modules():
            module.weight = _shape_only(module.weight)
        if tied:
            self.embed_tokens.weight = self.lm_head.weight
        self.lm_head_weight = None  # the column-major copy of a tied head (PyTorch's ops only)
        self.originals_freed = True

    def weights_unpack(self) -> None:
        """The freed weights rebuilt from the packed copy (bit for bit: packing only moves
        values), and the packed copy dropped, so the model again holds one copy of its weights,
        as loaded; the next fused pass packs again. PyTorch's ops call this (a model that ran
        the fused pass may then serve a pool in another dtype)."""
        if not self.originals_freed:
            return
        tied = self.lm_head.weight is self.embed_tokens.weight
        with torch.no_grad():
            for module, packed in self._packed_modules():
                weight = packed.weight.transpose(1, 2).reshape(-1, packed.in_features)
                module.weight = nn.Parameter(weight[: packed.out_features].clone(),
                                             requires_grad=module.weight.requires_grad)
        if tied:
            self.embed_tokens.weight = self.lm_head.weight
        self.cpu_kernels, self.packed, self.head_packed, self.fused_layers = False, [], None, []
        self._layer_table = None
        self._fused_step = None
        self.originals_freed = False
        self.column_major_weights()

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The token rows the fused pass starts from: from the embedding, or, once a tied
        embedding is freed, from the packed head (row n is column n % panel of panel
        n // panel)."""
        if not self.embed_tokens.weight.is_meta:
            return F.embedding(input_ids, self.embed_tokens.weight)
        return self.cpu_kernels.embed_packed(self.head_packed, input_ids)

    def __getstate__(self) -> dict:
        """A copy (copy.deepcopy, pickle) packs its own weights again on its first forward
        pass: quantization copies a model and then changes the copy's weights. While the
        originals are freed, the copy takes the packed weights to rebuild them from
        (__setstate__)."""
        state = super().__getstate__()
        if self.originals_freed:
            return {**state, "cpu_kernels": False, "fused_layers": [], "_layer_table": None,
                    "_fused_step": None}
        return {**state, "cpu_kernels": False, "packed": [], "head_packed": None,
                "fused_layers": [], "_layer_table": None, "_fused_step": None}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.weights_unpack()

    def forward_fused(self, kern: CpuKernels, input_ids: torch.Tensor, positions: torch.Tensor,
                      kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
                      meta: AttentionMetadata, logits_indices: torch.Tensor) -> torch.Tensor:
        """`forward` with the fused CPU kernels: the same maths in four packed matrix
        multiplies, four other kernel calls and one attention call per group of sequences a
        layer. Each block's output (`delta`) is added to the residual stream `x` by the next
        RMSNorm, in place.

        The step's arguments are prepared once: its buffers allocated and every tensor checked
        here, the weights' when they were packed; the layers then call the compiled functions
        with those raw arguments. At batch 1 a step is some fifty calls of a few microseconds
        each, and the wrappers' per-call work (checks, allocation, pointer look-ups) was a
        third of it. While a profiler records, the wrappers run instead, so each call shows
        by name."""
        if torch.autograd._profiler_enabled():
            return self._forward_fused_calls(kern, input_ids, positions, kv_caches, meta,
                                             logits_indices)
        c = self.config
        eps, threads = c.rms_norm_eps, torch.get_num_threads()
        nh, nkv, dim = c.num_heads, c.num_kv_heads, c.head_dim
        _need("embed_packed", "input_ids", input_ids, torch.int64, (None,))
        tokens, hidden = input_ids.shape[0], c.hidden_size
        # The step's buffers, kept for the next step of as many tokens (every step of a steady
        # decode; nothing this returns is one of them). Taken out while in use, so a second
        # thread running this model at the same time makes its own.
        state = self.__dict__.pop("_fused_step", None)
        if state is None or state.tokens != tokens:
            state = FusedStep(self.fused_layers[0], tokens, hidden)
        state.bind(positions, meta.slot_mapping, self.rotary)
        lib = kern._lib
        x = state.x
        if self.embed_tokens.weight.is_meta:  # the tied table's rows, from the packed head
            head = self.head_packed
            _check(lib.embed_packed(head.weight.data_ptr(), hidden, kern.panel,
                                    head.out_features, input_ids.data_ptr(), tokens,
                                    state.x_p), "embed_packed")
        else:
            torch.index_select(self.embed_tokens.weight, 0, input_ids, out=x)
        decode = meta.decode
        if decode is not None:
            d_rows, d_pos = _need_index(decode.slots), _need_index(decode.positions)
            d_tokens = decode.token_end - decode.token_start
            if d_rows.shape[0] != d_tokens or d_pos.shape[0] != d_tokens:
                raise ValueError("decode_attention: one slot row and position per decode token")
            d_qkv = state.qkv_p + decode.token_start * state.qkv_width * 4
            d_out = state.attn_p + decode.token_start * nh * dim * 4
        x_p, h_p, delta_p = x.data_ptr(), state.h_p, None
        if (self.decode_layers_in_c and decode is not None and not meta.groups
                and decode.join_slots is None
                and decode.token_start == 0 and d_tokens == tokens and not nvtx_enabled()):
            # Every token decodes from its slot row: the whole layer loop in one C call.
            table, pool_len, n_rows, capacity = self._decode_layer_table(kv_caches, meta.slots,
                                                                         nkv, dim)
            _check(lib.decode_layers(
                len(self.layers), table.data_ptr(), x_p, h_p, state.qkv_p, state.attn_p,
                state.delta_p, state.gate_up_p, state.act_p, tokens, hidden, state.inter, nh,
                nkv, dim, eps, state.cos_p, state.sin_p, state.table_len, state.positions_p,
                state.slots_p, pool_len, n_rows, capacity, d_rows.data_ptr(), d_pos.data_ptr(),
                self.layers[0].self_attn.attn.scale, threads), "decode_layers")
            return self._fused_head(lib, state, logits_indices, eps, threads)
        for layer, bound, (k_cache, v_cache) in zip(self.layers, self.fused_layers, kv_caches,
                                                    strict=True):
            pool_len = _need_pool(k_cache, v_cache, nkv, dim)
            _check(lib.add_rmsnorm(x_p, delta_p, bound.input_norm, h_p, tokens, hidden, eps,
                                   None, tokens), "add_rmsnorm")
            lib.gemm_packed(h_p, tokens, *bound.qkv, state.qkv_p, bound.qkv[3], threads)
            _check(lib.rope_store(state.qkv_p, tokens, state.qkv_width, nh, nkv, dim,
                                  state.cos_p, state.sin_p, state.table_len, state.positions_p,
                                  k_cache.data_ptr(), v_cache.data_ptr(), pool_len,
                                  state.slots_p), "rope_store")
            attn = layer.self_attn.attn
            with phase("attention"):
                if decode is not None:
                    keys = meta.slots.keys[attn.layer_index]
                    values = meta.slots.values[attn.layer_index]
                    if decode.join_slots is not None:
                        attn._join(keys, values, k_cache, v_cache, decode)
                    _need_slots(keys, values, nkv, dim)
                    _check(lib.decode_attention(
                        d_qkv, d_tokens, state.qkv_width, nh, nkv, dim, keys.data_ptr(),
                        values.data_ptr(), values.shape[0], values.shape[2], d_rows.data_ptr(),
                        d_pos.data_ptr(), attn.scale, d_out, threads), "decode_attention")
                for g in meta.groups:
                    state.attn[g.token_start : g.token_end] = kern.paged_attention(
                        state.qkv[g.token_start : g.token_end], num_heads=nh, num_kv_heads=nkv,
                        head_dim=dim, pool_k=k_cache, pool_v=v_cache,
                        block_tables=g.block_ids.view(g.num_seqs, -1), offsets=g.offsets,
                        query_lens=g.query_lens, starts=g.starts, scale=attn.scale,
                        threads=threads)
            lib.gemm_packed(state.attn_p, tokens, *bound.o, state.delta_p, bound.o[3], threads)
            delta_p = state.delta_p
            _check(lib.add_rmsnorm(x_p, delta_p, bound.post_norm, h_p, tokens, hidden, eps,
                                   None, tokens), "add_rmsnorm")
            lib.gemm_packed(h_p, tokens, *bound.gate_up, state.gate_up_p, bound.gate_up[3],
                            threads)
            lib.silu_mul(state.gate_up_p, tokens, state.inter, state.act_p)
            lib.gemm_packed(state.act_p, tokens, *bound.down, delta_p, bound.down[3], threads)
        return self._fused_head(lib, state, logits_indices, eps, threads)

    def _fused_head(self, lib, state: "FusedStep", logits_indices: torch.Tensor,  # noqa: ANN001
                    eps: float, threads: int) -> torch.Tensor:
        """The last residual add, the final norm of the rows that sample, and the LM head:
        logits [len(logits_indices), vocab], a new tensor."""
        _need("add_rmsnorm", "select", logits_indices, torch.int64, (None,))
        n, head = logits_indices.shape[0], self.head_packed
        if n > state.tokens:
            raise ValueError("add_rmsnorm: more logits rows than tokens")
        norm = self.norm.weight
        _need("add_rmsnorm", "weight", norm, torch.float32, (state.hidden,))
        _check(lib.add_rmsnorm(state.x_p, state.delta_p, norm.data_ptr(), state.h_p,
                               state.tokens, state.hidden, eps, logits_indices.data_ptr(), n),
               "add_rmsnorm")
        logits = torch.empty(n, head.out_features)
        lib.gemm_packed(state.h_p, n, state.hidden, state.hidden, head.weight.data_ptr(),
                        head.out_features, None if head.bias is None else head.bias.data_ptr(),
                        logits.data_ptr(), head.out_features, threads)
        self._fused_step = state  # for the next step
        return logits

    def _decode_layer_table(self, kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
                            slots, nkv: int, dim: int) -> tuple:  # noqa: ANN001
        """decode_layers' per-layer addresses [layers, kern.layer_args] (weights, pools, slot
        rows) with the pool length, slot rows and capacity, checked and built again only when
        the pools or the slot tensors change. The runner keeps one list of pools for its
        life, and DecodeSlots replaces its lists of tensors whenever it grows, so the lists'
        identity says whether anything moved (the cache holds them, so no id is reused)."""
        cached = self._layer_table
        if (cached is not None and cached[0] is kv_caches and cached[1] is slots.keys
                and cached[2] is slots.values):
            return cached[3:]
        rows = []
        for bound, (k_cache, v_cache), keys, values in zip(
                self.fused_layers, kv_caches, slots.keys, slots.values, strict=True):
            pool_len = _need_pool(k_cache, v_cache, nkv, dim)
            _need_slots(keys, values, nkv, dim)
            rows.append([bound.input_norm, bound.post_norm,
                         *(p or 0 for name in ("qkv", "o", "gate_up", "down")
                           for p in (getattr(bound, name)[2], getattr(bound, name)[4])),
                         k_cache.data_ptr(), v_cache.data_ptr(), keys.data_ptr(),
                         values.data_ptr()])
        table = torch.tensor(rows, dtype=torch.int64)
        if table.shape[1] != self.cpu_kernels.layer_args:
            raise RuntimeError("decode_layers: the build's per-layer arguments do not match")
        self._layer_table = (kv_caches, slots.keys, slots.values, table, pool_len,
                             values.shape[0], values.shape[2])
        return self._layer_table[3:]

    def _forward_fused_calls(self, kern: CpuKernels, input_ids: torch.Tensor,
                             positions: torch.Tensor,
                             kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
                             meta: AttentionMetadata, logits_indices: torch.Tensor
                             ) -> torch.Tensor:
        """`forward_fused` through the wrappers, one checked call at a time (named in a
        profile)."""
        c = self.config
        eps, threads = c.rms_norm_eps, torch.get_num_threads()
        x = self._embed(input_ids)
        delta = None
        for layer, packed, (k_cache, v_cache) in zip(self.layers, self.packed, kv_caches,
                                                      strict=True):
            h = kern.add_rmsnorm(x, delta, layer.input_layernorm.weight, eps)
            qkv = kern.linear(h, packed["qkv"], threads)
            kern.rope_store(qkv, num_heads=c.num_heads, num_kv_heads=c.num_kv_heads,
                            head_dim=c.head_dim, cos=self.rotary.cos, sin=self.rotary.sin,
                            positions=positions, pool_k=k_cache, pool_v=v_cache,
                            slots=meta.slot_mapping)
            with phase("attention"):
                out = layer.self_attn.attn.forward_fused(kern, qkv, k_cache, v_cache, meta,
                                                         threads)
            delta = kern.linear(out, packed["o"], threads)
            h = kern.add_rmsnorm(x, delta, layer.post_attention_layernorm.weight, eps)
            gate_up = kern.linear(h, packed["gate_up"], threads)
            delta = kern.linear(kern.silu_mul(gate_up), packed["down"], threads)
        h = kern.add_rmsnorm(x, delta, self.norm.weight, eps, select=logits_indices)
        return kern.linear(h, self.head_packed, threads)

    # Weight loading ---------------------------------------------------------------------------

    _PACKED = {
        "q_proj": ("qkv_proj", 0),
        "k_proj": ("qkv_proj", 1),
        "v_proj": ("qkv_proj", 2),
        "gate_proj": ("gate_up_proj", 0),
        "up_proj": ("gate_up_proj", 1),
    }

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy Hugging Face tensors in, packing q/k/v and gate/up; fail on anything missing."""
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for hf_name, tensor in weights:
            name = hf_name.removeprefix("model.")
            if "rotary_emb" in name:
                continue
            if name == "lm_head.weight" and self.config.tie_word_embeddings:
                continue
            packed_name, shard = name, None
            for short, (pack, index) in self._PACKED.items():
                if f".{short}." in name:
                    packed_name, shard = name.replace(short, pack), index
                    break
            if packed_name not in params:
                raise ValueError(f"unexpected weight {hf_name!r}")
            param = params[packed_name]
            with torch.no_grad():
                self._shard_of(param, packed_name, shard).copy_(tensor)
            loaded.add(f"{packed_name}:{shard}")
        expected = set()
        for name in params:
            pack = name.split(".")[-2]
            shards = {"qkv_proj": 3, "gate_up_proj": 2}.get(pack)
            expected |= {f"{name}:{i}" for i in range(shards)} if shards else {f"{name}:None"}
        missing = expected - loaded
        if missing:
            raise ValueError(f"checkpoint lacks weights: {sorted(missing)[:5]}")

    def _shard_of(self, param: torch.Tensor, name: str, shard: int | None) -> torch.Tensor:
        if shard is None:
            return param
        c = self.config
        if "qkv_proj" in name:
            q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
            sizes = [q, kv, kv]
        else:
            sizes = [c.intermediate_size, c.intermediate_size]
        return param.narrow(0, sum(sizes[:shard]), sizes[shard])


def _shape_only(weight: nn.Parameter) -> nn.Parameter:
    """A parameter of `weight`'s shape and dtype that holds no values (on the meta device)."""
    return nn.Parameter(torch.empty_like(weight, device="meta"),
                        requires_grad=weight.requires_grad)


# The fused path's raw arguments ----------------------------------------------------------------


def _linear_args(kern: CpuKernels, w: PackedLinear) -> tuple[int, int, int, int, int | None]:
    """gemm_packed's arguments after x and m (k_len, ldx, packed, n, bias), checked once."""
    panels = -(-w.out_features // kern.panel)
    _need("linear", "weight", w.weight, torch.float32, (panels, w.in_features, kern.panel))
    if w.bias is not None:
        _need("linear", "bias", w.bias, torch.float32, (panels * kern.panel,))
    return (w.in_features, w.in_features, w.weight.data_ptr(), w.out_features,
            None if w.bias is None else w.bias.data_ptr())


class FusedLayer:
    """One layer's packed weights and norm weights as the compiled functions take them."""

    __slots__ = ("input_norm", "post_norm", "qkv", "o", "gate_up", "down", "_keep")

    @classmethod
    def bind(cls, kern: CpuKernels, layer: "LlamaDecoderLayer",
             packed: dict[str, PackedLinear]) -> "FusedLayer":
        bound = cls()
        hidden = packed["o"].out_features
        for name, norm in (("input_norm", layer.input_layernorm.weight),
                           ("post_norm", layer.post_attention_layernorm.weight)):
            _need("add_rmsnorm", "weight", norm, torch.float32, (hidden,))
            setattr(bound, name, norm.data_ptr())
        for name in ("qkv", "o", "gate_up", "down"):
            setattr(bound, name, _linear_args(kern, packed[name]))
        bound._keep = (packed, layer)  # what the pointers point into stays alive
        return bound


class FusedStep:
    """A forward pass's buffers for `tokens` tokens (allocated once, reused by every layer and
    by the next step of as many tokens), and the step's checked tensors as raw pointers
    (`bind`, every step)."""

    def __init__(self, first: FusedLayer, tokens: int, hidden: int) -> None:
        self.tokens, self.hidden = tokens, hidden
        self.qkv_width = first.qkv[3]
        self.inter = first.gate_up[3] // 2
        width_attn = first.o[0]
        self.x = torch.empty(tokens, hidden)  # the residual stream
        self.h = torch.empty(tokens, hidden)
        self.qkv = torch.empty(tokens, self.qkv_width)
        self.attn = torch.empty(tokens, width_attn)
        self.delta = torch.empty(tokens, hidden)
        self.gate_up = torch.empty(tokens, 2 * self.inter)
        self.act = torch.empty(tokens, self.inter)
        self.x_p, self.h_p = self.x.data_ptr(), self.h.data_ptr()
        self.qkv_p, self.attn_p = self.qkv.data_ptr(), self.attn.data_ptr()
        self.delta_p, self.gate_up_p = self.delta.data_ptr(), self.gate_up.data_ptr()
        self.act_p = self.act.data_ptr()
        self._tables = None  # the rotary tables last checked

    def bind(self, positions: torch.Tensor, slots: torch.Tensor, rotary) -> None:  # noqa: ANN001
        tokens = self.tokens
        _need("rope_store", "positions", positions, torch.int64, (tokens,))
        _need("rope_store", "slots", slots, torch.int64, (tokens,))
        self.positions_p, self.slots_p = positions.data_ptr(), slots.data_ptr()
        cos, sin = rotary.cos, rotary.sin
        if self._tables is None or self._tables[0] is not cos or self._tables[1] is not sin:
            _need("rope_store", "cos", cos, torch.float32, (None, cos.shape[1]))
            _need("rope_store", "sin", sin, torch.float32, tuple(cos.shape))
            self._tables = (cos, sin)  # held, so their addresses stay theirs
            self.cos_p, self.sin_p = cos.data_ptr(), sin.data_ptr()
            self.table_len = cos.shape[0]


def _need_index(t: torch.Tensor) -> torch.Tensor:
    _need("decode_attention", "an index", t, torch.int64, (None,))
    return t


def _need_pool(pool_k: torch.Tensor, pool_v: torch.Tensor, nkv: int, dim: int) -> int:
    """The pool's slot count, after checking both pools' layout [blocks, block_size, nkv, dim]."""
    _need("rope_store", "pool_k", pool_k, torch.float32, (None, None, nkv, dim))
    _need("rope_store", "pool_v", pool_v, torch.float32, tuple(pool_k.shape))
    return pool_k.shape[0] * pool_k.shape[1]


def _need_slots(keys: torch.Tensor, values: torch.Tensor, nkv: int, dim: int) -> None:
    _need("decode_attention", "keys", keys, torch.float32, (None, nkv, dim, None))
    _need("decode_attention", "values", values, torch.float32,
          (keys.shape[0], nkv, keys.shape[3], dim))
