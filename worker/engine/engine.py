"""The engine loop: requests in, one scheduled forward pass per `step()`, events out.

    engine = Engine.from_pretrained("worker/models/course-lm")
    engine.add_request("What is a KV cache?", SamplingParams(max_tokens=32), chat=True)
    while engine.has_unfinished():
        for event in engine.step(): ...

Each step: the scheduler picks sequences and token counts, the model runner computes them in
one packed batch, the sampler picks next tokens, and the step reports what happened as small
JSON-serialisable dicts.
"""

import itertools
import logging
import time
from pathlib import Path

import torch

from worker.engine.block_manager import BlockManager
from worker.engine.config import ModelConfig, model_config_load
from worker.engine.detokenizer import detokenizer_init, text_flush, text_piece_next
from worker.engine.kv_transfer import KVHandoff, kv_check, kv_read, kv_write
from worker.engine.layers.sampler import tokens_sample
from worker.engine.model_runner import BatchEntry, ModelRunner, model_load
from worker.engine.outputs import RequestOutput
from worker.engine.sampling_params import SamplingParams
from worker.engine.scheduler import Scheduler, SchedulerOutput
from worker.engine.sequence import Sequence
from worker.engine.speculative import SpeculativeDecoder

logger = logging.getLogger(__name__)

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
_DEFAULT_CPU_KV_BYTES = 256 * 2**20
_DEFAULT_CUDA_KV_FRACTION = 0.5  # of the memory free after loading the weights

Prompt = str | list[int] | list[dict]


class Engine:
    def __init__(
        self,
        *,
        config: ModelConfig,
        runner: ModelRunner,
        tokenizer,  # noqa: ANN001 (a transformers tokenizer or None)
        block_manager: BlockManager,
        scheduler: Scheduler,
        max_model_len: int,
        kv_block_bytes: int,
        speculative: SpeculativeDecoder | None = None,
    ) -> None:
        self.config = config
        self.runner = runner
        self.tokenizer = tokenizer
        self.block_manager = block_manager
        self.scheduler = scheduler
        self.max_model_len = max_model_len
        self.kv_block_bytes = kv_block_bytes
        self.speculative = speculative
        self.eos_token_ids = set(config.eos_token_ids)
        if tokenizer is not None and tokenizer.eos_token_id is not None:
            self.eos_token_ids.add(tokenizer.eos_token_id)
        self._requests: dict[str, Sequence] = {}
        self._pending_events: list[dict] = []
        self._outputs: dict[str, RequestOutput] = {}
        self._collect: set[str] = set()
        self._kv_exports: dict[str, KVHandoff] = {}
        self._ids = itertools.count()

    # Loading ------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        block_size: int = 16,
        num_kv_blocks: int | None = None,
        kv_cache_memory_bytes: int | None = None,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 512,
        max_model_len: int | None = None,
        enable_prefix_caching: bool = True,
        scheduling: str = "continuous",
        speculative_model: str | Path | None = None,
        num_speculative_tokens: int = 4,
        policy: str = "fcfs",
    ) -> "Engine":
        """Load a local Hugging Face directory (llama, qwen2 or mistral) and size the KV pool.

        Without `num_kv_blocks`, the pool gets `kv_cache_memory_bytes` (default: 256 MiB on
        CPU, half the free memory on CUDA). Without `max_model_len`, it is the model's context
        capped at what the pool holds.
        """
        _engine_args_check(
            block_size=block_size, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, scheduling=scheduling, policy=policy,
            num_speculative_tokens=num_speculative_tokens, num_kv_blocks=num_kv_blocks,
            kv_cache_memory_bytes=kv_cache_memory_bytes, max_model_len=max_model_len,
        )
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"model directory {path} does not exist")
        config = model_config_load(path)
        draft_config = model_config_load(speculative_model) if speculative_model else None
        if draft_config is not None and draft_config.vocab_size != config.vocab_size:
            raise ValueError("the draft model must share the target's vocabulary")

        context = config.max_position_embeddings
        if config.sliding_window:
            context = min(context, config.sliding_window)  # see models/mistral.py
        if max_model_len is not None and max_model_len > context:
            raise ValueError(f"max_model_len {max_model_len} exceeds the model's context {context}")

        block_bytes = ModelRunner.kv_block_bytes(config, block_size=block_size, dtype=dtype)
        pool_block_bytes = block_bytes
        if draft_config is not None:
            pool_block_bytes += ModelRunner.kv_block_bytes(
                draft_config, block_size=block_size, dtype=dtype)

        max_positions = max_model_len or context
        model = model_load(path, config, max_positions=max_positions, device=device, dtype=dtype)
        draft = None
        if draft_config is not None:
            draft = model_load(speculative_model, draft_config, max_positions=max_positions,
                               device=device, dtype=dtype)

        if num_kv_blocks is None:
            budget = kv_cache_memory_bytes or _default_kv_budget(device)
            # No more than max_num_seqs sequences of full length could ever use.
            most_useful = max_num_seqs * -(-(max_model_len or context) // block_size)
            num_kv_blocks = min(budget // pool_block_bytes, most_useful)
            logger.info("KV cache: %d blocks of %d tokens (%d bytes each) from a %d-byte budget",
                        num_kv_blocks, block_size, pool_block_bytes, budget)
        capacity = num_kv_blocks * block_size
        if num_kv_blocks < 1:
            raise ValueError(
                f"KV cache budget holds no block: one block needs {pool_block_bytes} bytes")
        if max_model_len is None:
            max_model_len = min(context, capacity)
        elif max_model_len > capacity:
            raise ValueError(
                f"KV cache of {num_kv_blocks} blocks x {block_size} tokens = {capacity} tokens "
                f"is too small for one sequence of max_model_len={max_model_len}")

        runner = ModelRunner(model, config, num_blocks=num_kv_blocks, block_size=block_size,
                             device=device, dtype=dtype)
        speculative = None
        if draft is not None:
            draft_runner = ModelRunner(draft, draft_config, num_blocks=num_kv_blocks,
                                       block_size=block_size, device=device, dtype=dtype)
            speculative = SpeculativeDecoder(
                draft_runner=draft_runner, num_speculative_tokens=num_speculative_tokens)
        block_manager = BlockManager(num_blocks=num_kv_blocks, block_size=block_size,
                                     enable_prefix_caching=enable_prefix_caching)
        scheduler = Scheduler(
            block_manager=block_manager, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
            scheduling=scheduling, policy=policy,
            num_lookahead_tokens=num_speculative_tokens if speculative else 0,
        )
        tokenizer = None
        if any((path / name).is_file() for name in _TOKENIZER_FILES):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path))
        return cls(config=config, runner=runner, tokenizer=tokenizer, block_manager=block_manager,
                   scheduler=scheduler, max_model_len=max_model_len, kv_block_bytes=block_bytes,
                   speculative=speculative)

    # Text in and out ----------------------------------------------------------------------------

    def encode_prompt(self, prompt: Prompt, chat: bool = False) -> list[int]:
        """Token ids for a prompt: a string (with the chat template when `chat`), a list of
        chat messages, or token ids passed through."""
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            if chat:
                raise ValueError("chat=True needs a string or messages, not token ids")
            return list(prompt)
        if self.tokenizer is None:
            raise ValueError("this model directory has no tokenizer: pass prompts as token ids")
        if isinstance(prompt, list):
            messages, chat = prompt, True
        elif isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
        else:
            raise ValueError(f"a prompt is a string or a list of token ids, not {type(prompt)}")
        if chat:
            text = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False)
            return self.tokenizer.encode(text, add_special_tokens=False)
        return self.tokenizer.encode(prompt)

    def decode(self, token_ids: list[int]) -> str:
        if self.tokenizer is None:
            return ""
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    # Requests -----------------------------------------------------------------------------------

    def _prompt_check(self, token_ids: list[int]) -> None:
        if not token_ids:
            raise ValueError("the prompt is empty")
        if len(token_ids) >= self.max_model_len:
            raise ValueError(
                f"the prompt has {len(token_ids)} tokens; max_model_len is {self.max_model_len} "
                "and at least one token must be left for the output")
        if min(token_ids) < 0 or max(token_ids) >= self.config.vocab_size:
            raise ValueError(f"prompt token ids must lie in [0, {self.config.vocab_size})")

    def add_request(
        self,
        prompt: Prompt,
        params: SamplingParams | None = None,
        request_id: str | None = None,
        tenant: str | None = None,
        chat: bool = False,
        *,
        export_kv: bool = False,
        kv: KVHandoff | None = None,
    ) -> str:
        """Queue a request; returns its id. The next step() reports it as `queued`.

        Disaggregated serving: with `export_kv`, the request's K/V is kept when it finishes,
        for `kv_take`. With `kv` (a handoff from another engine running the same model), the
        prompt is `kv.token_ids` and its K/V is copied in instead of computed.
        """
        params = params or SamplingParams()
        if not isinstance(params, SamplingParams):
            raise ValueError("params must be a SamplingParams")
        if kv is not None:
            kv_check(self.runner, kv)
            prompt = kv.token_ids
        token_ids = self.encode_prompt(prompt, chat=chat)
        self._prompt_check(token_ids)
        request_id = str(request_id) if request_id is not None else f"req-{next(self._ids)}"
        if request_id in self._requests:
            raise ValueError(f"request_id {request_id!r} is already running")
        seq = Sequence(request_id, token_ids, params, tenant=tenant)
        seq.kv_import, seq.export_kv = kv, export_kv
        detokenizer_init(seq)
        self._requests[request_id] = seq
        self.scheduler.add(seq)
        self._pending_events.append({
            "type": "queued", "request_id": request_id, "prompt_tokens": len(token_ids),
            "tenant": tenant,
        })
        return request_id

    def abort(self, request_id: str) -> bool:
        """Stop a request now and free its KV blocks; False if it is not running or queued."""
        seq = self._requests.pop(request_id, None)
        if seq is None:
            return False
        freed = self.scheduler.finish(seq)
        seq.finish_reason = "abort"
        seq.metrics.finished_time = time.perf_counter()
        self._pending_events.append(
            {"type": "aborted", "request_id": request_id, "blocks_freed": freed})
        self._output_store(seq)
        return True

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def kv_take(self, request_id: str) -> KVHandoff:
        """The K/V a finished `export_kv` request left behind (taken once)."""
        try:
            return self._kv_exports.pop(request_id)
        except KeyError:
            raise ValueError(f"no exported KV for request {request_id!r}") from None

    def block_tables(self) -> dict[str, list[int]]:
        """Physical KV block ids held by each running request, in logical order."""
        return {s.request_id: list(s.block_table) for s in self.scheduler.running}

    def generate(
        self,
        prompts: Prompt | list[Prompt],
        params: SamplingParams | list[SamplingParams] | None = None,
        chat: bool = False,
    ) -> list[RequestOutput]:
        """Run prompts to completion; outputs in prompt order."""
        if isinstance(prompts, str) or (
            isinstance(prompts, list) and prompts and isinstance(prompts[0], int)
        ):
            prompts = [prompts]
        if not prompts:
            return []
        params = params or SamplingParams()
        params_list = params if isinstance(params, list) else [params] * len(prompts)
        if len(params_list) != len(prompts):
            raise ValueError(f"{len(params_list)} SamplingParams for {len(prompts)} prompts")
        # Check every prompt before queueing any, so bad input allocates nothing.
        encoded = [self.encode_prompt(p, chat=chat) for p in prompts]
        for ids, p in zip(encoded, params_list, strict=True):
            self._prompt_check(ids)
            if not isinstance(p, SamplingParams):
                raise ValueError("params must be SamplingParams")
        ids = [self.add_request(tokens, p) for tokens, p in zip(encoded, params_list, strict=True)]
        self._collect.update(ids)
        while any(i not in self._outputs for i in ids):
            self.step()
        return [self._outputs.pop(i) for i in ids]

    # The step -----------------------------------------------------------------------------------

    def step(self) -> list[dict]:
        """Schedule, compute and sample once; returns the events of this step."""
        t0 = time.perf_counter()
        self.runner.seconds = 0.0
        if self.speculative is not None:
            self.speculative.draft_runner.seconds = 0.0
        events, self._pending_events = self._pending_events, []
        plan = self.scheduler.schedule()
        for seq in plan.admitted:
            if seq.kv_import is not None:
                kv_write(self.runner, seq.kv_import, seq.block_table)
                self.block_manager.register_full_blocks(
                    seq, 0 if self.speculative else seq.num_computed_tokens)
                seq.kv_import = None
            if seq.metrics.first_scheduled_time is None:
                seq.metrics.first_scheduled_time = t0
            events.append({
                "type": "admitted", "request_id": seq.request_id,
                "blocks": len(seq.block_table), "prompt_tokens": seq.num_prompt_tokens,
                "cached_tokens": seq.num_cached_tokens,
            })
        for seq in plan.preempted:
            events.append({"type": "preempted", "request_id": seq.request_id,
                           "num_tokens": seq.num_tokens})
        num_decode = sum(1 + s.num_lookahead_tokens for s in plan.scheduled if _is_decode(s))
        num_total = sum(s.num_scheduled_tokens + s.num_lookahead_tokens for s in plan.scheduled)
        if plan.scheduled:
            self._execute(plan, events)
        elif self.scheduler.waiting and not self.scheduler.running:
            raise RuntimeError("no request fits in the KV cache")  # unreachable by construction
        events.append({
            "type": "step",
            "num_prefill_tokens": num_total - num_decode,
            "num_decode_tokens": num_decode,
            "num_seqs": len(plan.scheduled),
            "blocks_free": self.block_manager.num_free_blocks,
            "blocks_total": self.block_manager.num_blocks,
            "seconds": time.perf_counter() - t0,
            # Forward passes only; the rest of `seconds` is host work (scheduling, sampling).
            "model_seconds": self.runner.seconds + (
                self.speculative.draft_runner.seconds if self.speculative else 0.0),
        })
        return events

    def _execute(self, plan: SchedulerOutput, events: list[dict]) -> None:
        scheduled = plan.scheduled
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            if not _is_decode(seq):
                events.append({
                    "type": "prefill_chunk", "request_id": seq.request_id, "tokens": n,
                    "start": start, "end": start + n, "done": start + n == seq.num_tokens,
                })
        if self.speculative is not None:
            new_tokens = self.speculative.step(self, scheduled)
        else:
            new_tokens = self._forward_and_sample(scheduled)
        now = time.perf_counter()
        for seq in scheduled:
            self.scheduler.account(seq, seq.num_scheduled_tokens)
        for seq in scheduled:
            if seq in new_tokens:
                self._tokens_append(seq, new_tokens[seq], now, events)

    def _forward_and_sample(self, scheduled: list[Sequence]) -> dict[Sequence, list[int]]:
        entries, sampling = [], []
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            completes = start + n == seq.num_tokens
            entries.append(BatchEntry(seq.token_ids[start : start + n], start, seq.block_table,
                                      1 if completes else 0))
            if completes:
                sampling.append(seq)
        logits = self.runner.execute(entries)
        for seq in scheduled:
            seq.num_computed_tokens += seq.num_scheduled_tokens
            self.block_manager.register_full_blocks(seq, seq.num_computed_tokens)
        if not sampling:
            return {}
        tokens = tokens_sample(logits, [s.params for s in sampling],
                               [s.generator for s in sampling])
        return {seq: [tok] for seq, tok in zip(sampling, tokens, strict=True)}

    def _tokens_append(self, seq: Sequence, tokens: list[int], now: float,
                       events: list[dict]) -> None:
        """Append sampled tokens one by one, stopping at the first stop condition."""
        params = seq.params
        for token in tokens:
            seq.token_ids.append(token)
            m = seq.metrics
            if m.first_token_time is None:
                m.first_token_time = now
            else:
                m.itl.append(now - m.last_token_time)
            m.last_token_time = now
            text_before = len(seq.text)
            if self.tokenizer is not None:
                seq.text += text_piece_next(self.tokenizer, seq)
            reason = None
            if token in self.eos_token_ids and not params.ignore_eos:
                reason = "stop"
            elif token in params.stop_token_ids:
                reason = "stop"
            elif params.stop and _stop_string_cut(seq, text_before):
                reason = "stop_string"
            elif seq.num_output_tokens >= params.max_tokens or seq.num_tokens >= self.max_model_len:
                reason = "length"
            if reason in ("stop", "length") and self.tokenizer is not None:
                # Keep the tail even if it ends mid-character; a stop string cut it already.
                seq.text += text_flush(self.tokenizer, seq)
                if params.stop and _stop_string_cut(seq, text_before):
                    reason = "stop_string"
            if reason == "stop_string":
                reason = "stop"
            # Hold back text that could be the start of a stop string until it is decided.
            hold = 0 if reason or not params.stop else max(len(s) for s in params.stop) - 1
            emit_to = max(seq.emitted_text_len, len(seq.text) - hold)
            piece = seq.text[seq.emitted_text_len : emit_to]
            seq.emitted_text_len = emit_to
            events.append({"type": "token", "request_id": seq.request_id, "token_id": token,
                           "text": piece, "index": seq.num_output_tokens - 1})
            if reason:
                self._finish(seq, reason, now, events)
                return

    def _finish(self, seq: Sequence, reason: str, now: float, events: list[dict]) -> None:
        if seq.export_kv:
            self._kv_exports[seq.request_id] = kv_read(
                self.runner, token_ids=seq.token_ids, block_table=seq.block_table,
                num_tokens=seq.num_computed_tokens)
        self.scheduler.finish(seq)
        self._requests.pop(seq.request_id, None)
        seq.finish_reason = reason
        seq.metrics.finished_time = now
        events.append({
            "type": "finished", "request_id": seq.request_id, "finish_reason": reason,
            "num_output_tokens": seq.num_output_tokens, "metrics": _metrics_summary(seq),
        })
        self._output_store(seq)

    def _output_store(self, seq: Sequence) -> None:
        if seq.request_id in self._collect:
            self._collect.discard(seq.request_id)
            self._outputs[seq.request_id] = RequestOutput(
                request_id=seq.request_id, prompt_token_ids=seq.prompt_token_ids,
                token_ids=seq.output_token_ids, text=seq.text, finish_reason=seq.finish_reason,
                metrics=seq.metrics.as_dict())

    # Metrics ------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Counters named after vLLM's metrics where they overlap; token counts, block counts."""
        bm, sched = self.block_manager, self.scheduler
        spec = self.speculative
        return {
            "kv_blocks_total": bm.num_blocks,
            "kv_blocks_free": bm.num_free_blocks,
            "kv_block_bytes": self.kv_block_bytes,
            "kv_cache_usage_perc": 1 - bm.num_free_blocks / bm.num_blocks,  # a fraction, as vLLM
            "block_size": bm.block_size,
            "prefix_cache_queries": bm.prefix_cache_queries,
            "prefix_cache_hits": bm.prefix_cache_hits,
            "num_requests_running": len(sched.running),
            "num_requests_waiting": len(sched.waiting),
            "num_preemptions": sched.num_preemptions,
            "spec_decode_num_draft_tokens": spec.num_draft_tokens if spec else 0,
            "spec_decode_num_accepted_tokens": spec.num_accepted_tokens if spec else 0,
            "max_model_len": self.max_model_len,
        }


def _is_decode(seq: Sequence) -> bool:
    """A decode computes only the newest output token; anything else is (re)filling a prompt."""
    return seq.num_output_tokens > 0 and seq.num_computed_tokens == seq.num_tokens - 1


def _stop_string_cut(seq: Sequence, text_before: int) -> bool:
    """Cut the text at the first stop string that the newest piece completed."""
    longest = max(len(s) for s in seq.params.stop)
    search_from = max(0, text_before - longest + 1)
    hits = [i for s in seq.params.stop if (i := seq.text.find(s, search_from)) != -1]
    if not hits:
        return False
    seq.text = seq.text[: min(hits)]
    seq.emitted_text_len = min(seq.emitted_text_len, len(seq.text))
    return True


def _metrics_summary(seq: Sequence) -> dict:
    d = seq.metrics.as_dict()
    return {k: d[k] for k in ("ttft", "itl", "queue_time", "prefill_time", "e2e")}


def _default_kv_budget(device: str) -> int:
    if str(device).startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free * _DEFAULT_CUDA_KV_FRACTION)
    return _DEFAULT_CPU_KV_BYTES


def _engine_args_check(**kw) -> None:  # noqa: ANN003
    if kw["block_size"] < 1:
        raise ValueError("block_size must be >= 1")
    if kw["max_num_seqs"] < 1:
        raise ValueError("max_num_seqs must be >= 1")
    if kw["max_num_batched_tokens"] < 1:
        raise ValueError("max_num_batched_tokens must be >= 1")
    if kw["scheduling"] not in ("continuous", "static"):
        raise ValueError("scheduling must be 'continuous' or 'static'")
    if kw["policy"] not in ("fcfs", "fair"):
        raise ValueError("policy must be 'fcfs' or 'fair'")
    if kw["num_speculative_tokens"] < 1:
        raise ValueError("num_speculative_tokens must be >= 1")
    if kw["num_kv_blocks"] is not None and kw["num_kv_blocks"] < 1:
        raise ValueError("num_kv_blocks must be >= 1")
    if kw["kv_cache_memory_bytes"] is not None and kw["kv_cache_memory_bytes"] < 1:
        raise ValueError("kv_cache_memory_bytes must be >= 1")
    if kw["max_model_len"] is not None and kw["max_model_len"] < 2:
        raise ValueError("max_model_len must be >= 2")
