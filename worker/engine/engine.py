"""The engine loop: requests in, one scheduled forward pass per `step()`, events out.

    engine = Engine.from_pretrained("worker/models/course-lm")
    engine.add_request("What is a KV cache?", SamplingParams(max_tokens=32), chat=True)
    while engine.has_unfinished():
        for event in engine.step(): ...

Each step: the scheduler picks sequences and token counts, the model runner computes them in
one packed batch, the sampler picks next tokens, and the step reports what happened as small
JSON-serialisable dicts.
"""

import dataclasses
import itertools
import time
from pathlib import Path

import torch

from worker.engine.block_manager import BlockManager
from worker.engine.config import ModelConfig
from worker.engine.detokenizer import detokenizer_init, text_piece_next
from worker.engine.kernels.cpu import kernels_describe
from worker.engine.kv_transfer import KVHandoff, kv_check, kv_read, kv_write
from worker.engine.layers.sampler import logprobs_of, penalties_apply, tokens_sample
from worker.engine.loader import engine_parts_load
from worker.engine.model_runner import BatchEntry, ModelRunner
from worker.engine.outputs import RequestOutput
from worker.engine.profiling import phase
from worker.engine.sampling_params import ParamError, SamplingParams
from worker.engine.scheduler import QueueFullError, Scheduler, SchedulerOutput
from worker.engine.sequence import Sequence, SequenceStatus
from worker.engine.speculative import SpeculativeDecoder
from worker.engine.stopping import finish_reason_check, text_emit

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
        self._samples: dict[str, list[str]] = {}  # request id -> its other samples' ids (n > 1)
        self._forked: list[Sequence] = []  # samples forked in this step

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
        kv_cache_dtype: str | torch.dtype | None = None,
        max_queued: int | None = None,
        max_queued_per_tenant: int | None = None,
        speculative_method: str | None = None,
    ) -> "Engine":
        """Load a local Hugging Face directory (llama, qwen2 or mistral) and size the KV pool.

        Without `num_kv_blocks`, the pool gets `kv_cache_memory_bytes` (default: 256 MiB on
        CPU, half the free memory on CUDA). Without `max_model_len`, it is the model's context
        capped at what the pool holds. `kv_cache_dtype` ('auto', 'float32', 'bfloat16',
        'float16', 'float8_e4m3fn' or 'fp8') stores K/V in a format of its own, converted back
        on read (layers/kv_dtype.py); the pool's bytes per block follow it. `max_queued` /
        `max_queued_per_tenant` bound the waiting queue (admission control: `add_request`
        raises `QueueFullError` past them). Speculative decoding: `speculative_model` (a draft
        model sharing the tokenizer), or `speculative_method="ngram"` (prompt lookup, no
        model), with `num_speculative_tokens` guesses per step.
        """
        parts = engine_parts_load(
            path, device=device, dtype=dtype, block_size=block_size, num_kv_blocks=num_kv_blocks,
            kv_cache_memory_bytes=kv_cache_memory_bytes, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
            enable_prefix_caching=enable_prefix_caching, scheduling=scheduling,
            speculative_model=speculative_model, num_speculative_tokens=num_speculative_tokens,
            policy=policy, kv_cache_dtype=kv_cache_dtype, max_queued=max_queued,
            max_queued_per_tenant=max_queued_per_tenant, speculative_method=speculative_method,
        )
        return cls(**parts)

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
        cache_salt: str | None = None,
        pace_s: float = 0.0,
    ) -> str:
        """Queue a request; returns its id. The next step() reports it as `queued`.

        `cache_salt` keeps the request's prefix-cache blocks apart from other salts' (one salt
        per API key). `pace_s` makes it a slow reader: at most one token every `pace_s`
        seconds, leaving the steps in between to the other requests.

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
        if pace_s < 0:
            raise ValueError("pace_s must be >= 0")
        if params.n > 1 and (self.speculative is not None or export_kv or kv is not None):
            raise ValueError("n > 1 does not combine with speculative decoding or KV transfer")
        if params.n > self.scheduler.max_num_seqs:
            # Its samples run side by side: more of them than the engine's seats never fit.
            raise ParamError(f"n is {params.n} but this engine runs at most "
                             f"{self.scheduler.max_num_seqs} sequences at once (max_num_seqs)",
                             param="n")
        if self.speculative is not None and (params.penalized or params.logprobs is not None):
            raise ValueError("penalties and logprobs do not combine with speculative decoding")
        full = self.scheduler.queue_full(tenant)
        if full is not None:
            # Admission control: refused before it queues, reported as a `refused` event.
            self.scheduler.num_refused += 1
            self._pending_events.append({"type": "refused", "request_id": request_id,
                                         "tenant": tenant, **full})
            raise QueueFullError(tenant=tenant, **full)
        seq = Sequence(request_id, token_ids, params, tenant=tenant, cache_salt=cache_salt,
                       pace_s=pace_s)
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
        """Stop a request now and free its KV blocks; False if it is not running or queued.
        Aborting a request with n > 1 aborts its other samples too."""
        seq = self._requests.pop(request_id, None)
        if seq is None:
            return False
        for sample_id in self._samples.get(request_id, ()):
            self.abort(sample_id)
        self._runners_forget([seq])
        freed = self.scheduler.finish(seq)
        seq.finish_reason = "abort"
        seq.metrics.finished_time = time.perf_counter()
        self._pending_events.append(
            {"type": "aborted", "request_id": request_id, "blocks_freed": freed,
             # The pool's free blocks right after this abort (later steps move it on).
             "blocks_free": self.block_manager.num_free_blocks,
             "completion_tokens": seq.num_output_tokens})
        self._output_store(seq)
        self._samples_prune(seq)
        return True

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def has_pending_events(self) -> bool:
        """Events (queued, aborted) waiting for the next step() to hand them out."""
        return bool(self._pending_events)

    def seconds_until_ready(self) -> float:
        """0 when step() has work now; else how long until a paced request's next token is
        due (a loop can sleep that long instead of stepping empty)."""
        return self.scheduler.seconds_until_ready()

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

        def done(i: str) -> bool:
            return i in self._outputs and all(c in self._outputs for c in self._samples.get(i, ()))

        while not all(done(i) for i in ids):
            self.step()
        outputs = []
        for i in ids:
            out = self._outputs.pop(i)
            others = [self._outputs.pop(c) for c in self._samples.pop(i, ())]
            if others:
                out.samples = [dataclasses.replace(out), *others]
            outputs.append(out)
        return outputs

    # The step -----------------------------------------------------------------------------------

    def step(self) -> list[dict]:
        """Schedule, compute and sample once; returns the events of this step."""
        t0 = time.perf_counter()
        self.runner.seconds = 0.0
        draft = self._draft_runner()
        if draft is not None:
            draft.seconds = 0.0
        events, self._pending_events = self._pending_events, []
        with phase("schedule"):
            plan = self.scheduler.schedule()
        copies = self.block_manager.copies_take()
        if copies:
            # Copy-on-write: a sample is about to write into a block it shared.
            self.runner.blocks_copy([(src, dst) for _, src, dst in copies])
            events.extend({"type": "copy_on_write", "request_id": rid, "source_block": src,
                           "block": dst} for rid, src, dst in copies)
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
        self._runners_forget(plan.preempted)
        for seq in plan.preempted:
            events.append({"type": "preempted", "request_id": seq.request_id,
                           "num_tokens": seq.num_tokens})
        num_decode = sum(1 + s.num_lookahead_tokens for s in plan.scheduled if s.is_decoding)
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
            "request_ids": [s.request_id for s in plan.scheduled],
            "blocks_free": self.block_manager.num_free_blocks,
            "blocks_total": self.block_manager.num_blocks,
            "seconds": time.perf_counter() - t0,
            # Forward passes only; the rest of `seconds` is host work (scheduling, sampling).
            "model_seconds": self.runner.seconds + (draft.seconds if draft else 0.0),
        })
        return events

    def _execute(self, plan: SchedulerOutput, events: list[dict]) -> None:
        scheduled = plan.scheduled
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            if not seq.is_decoding:
                events.append({
                    "type": "prefill_chunk", "request_id": seq.request_id, "tokens": n,
                    "start": start, "end": start + n, "done": start + n == seq.num_tokens,
                })
        self._forked = []
        if self.speculative is not None:
            new_tokens = self.speculative.step(scheduled, target=self.runner)
            for request_id, spec in self.speculative.last_step.items():
                events.append({"type": "speculation", "request_id": request_id, **spec})
        else:
            new_tokens = self._forward_and_sample(scheduled)
        for child in self._forked:
            events.append({"type": "forked", "request_id": child.request_id,
                           "parent": child.parent_id, "shared_blocks": len(child.block_table)})
        for seq in scheduled:
            # Full blocks whose K/V is complete (in the draft's pool too, when speculating)
            # become findable by later requests.
            ready = seq.num_computed_tokens
            if self.speculative is not None:
                # Accepted drafts are not appended yet: hash only the tokens already there.
                ready = min(ready, seq.draft_num_computed_tokens, seq.num_tokens)
            self.block_manager.register_full_blocks(seq, ready)
        now = time.perf_counter()
        for seq in scheduled:
            self.scheduler.account(seq, seq.num_scheduled_tokens)
        for seq in [*scheduled, *self._forked]:
            if seq in new_tokens and seq.status is not SequenceStatus.FINISHED:
                self._tokens_append(seq, new_tokens[seq], now, events)

    def _forward_and_sample(self, scheduled: list[Sequence]) -> dict[Sequence, list[int]]:
        entries, sampling = [], []
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            completes = start + n == seq.num_tokens
            entries.append(BatchEntry(seq.token_ids[start : start + n], start, seq.block_table,
                                      1 if completes else 0, seq.request_id))
            if completes:
                sampling.append(seq)
        logits = self.runner.execute(entries)
        for seq in scheduled:
            seq.num_computed_tokens += seq.num_scheduled_tokens
        if not sampling:
            return {}
        rows = list(range(len(sampling)))
        for row, seq in enumerate(list(sampling)):
            if not seq.forked:  # the prompt is in: the other samples share its blocks now
                for child in self._fork(seq):
                    sampling.append(child)
                    rows.append(row)
        if len(rows) > logits.shape[0]:
            logits = logits[torch.tensor(rows, device=logits.device)]
        params = [s.params for s in sampling]
        with phase("sample"):
            tokens = tokens_sample(
                penalties_apply(logits, params, [s.output_token_ids for s in sampling]),
                params, [s.noise_key(s.num_tokens) for s in sampling])
            for seq, logprobs in zip(sampling, logprobs_of(logits, tokens, params),
                                     strict=True):
                if logprobs is not None:
                    seq.logprobs_pending = [logprobs]
        return {seq: [tok] for seq, tok in zip(sampling, tokens, strict=True)}

    def _fork(self, seq: Sequence) -> list[Sequence]:
        """The other n - 1 samples of `seq`, sharing its prompt's blocks, now running."""
        seq.forked = True
        children = []
        for index in range(1, seq.params.n):
            child = seq.fork(f"{seq.request_id}:{index}", index)
            self.block_manager.fork(seq, child)
            detokenizer_init(child)
            self._requests[child.request_id] = child
            self.scheduler.running.append(child)
            self._samples.setdefault(seq.request_id, []).append(child.request_id)
            if seq.request_id in self._collect:
                self._collect.add(child.request_id)
            children.append(child)
        self._forked.extend(children)
        return children

    def _tokens_append(self, seq: Sequence, tokens: list[int], now: float,
                       events: list[dict]) -> None:
        """Append sampled tokens one by one, stopping at the first stop condition."""
        for token in tokens:
            seq.token_ids.append(token)
            m = seq.metrics
            if m.first_token_time is None:
                m.first_token_time = now
            else:
                m.itl.append(now - m.last_token_time)
            m.last_token_time = now
            text_before = len(seq.text)
            # Without detokenize (or a tokenizer) the request gets token ids and no text.
            tokenizer = self.tokenizer if seq.params.detokenize else None
            if tokenizer is not None:
                with phase("detokenize"):
                    seq.text += text_piece_next(tokenizer, seq)
            reason = finish_reason_check(
                seq, token, text_before=text_before, eos_token_ids=self.eos_token_ids,
                max_model_len=self.max_model_len, tokenizer=tokenizer)
            piece = text_emit(seq, finished=reason is not None)
            event = {"type": "token", "request_id": seq.request_id, "token_id": token,
                     "text": piece, "index": seq.num_output_tokens - 1}
            if seq.logprobs_pending:
                event["logprobs"] = seq.logprobs_pending.pop(0)
            events.append(event)
            if reason:
                # A stop partway through accepted drafts: the K/V computed for the drafts
                # after the stop belongs to no kept token, so the cursors fall back to the
                # kept tokens (all but the newest have K/V), and an export matches them.
                kept = seq.num_tokens - 1
                seq.num_computed_tokens = min(seq.num_computed_tokens, kept)
                seq.draft_num_computed_tokens = min(seq.draft_num_computed_tokens, kept)
                self._finish(seq, reason, now, events)
                return
        if seq.pace_s:
            seq.hold_until = now + seq.pace_s

    def _finish(self, seq: Sequence, reason: str, now: float, events: list[dict]) -> None:
        if seq.export_kv:
            self._kv_exports[seq.request_id] = kv_read(
                self.runner, token_ids=seq.token_ids, block_table=seq.block_table,
                num_tokens=seq.num_computed_tokens)
        self._runners_forget([seq])
        freed = self.scheduler.finish(seq)
        self._requests.pop(seq.request_id, None)
        seq.finish_reason = reason
        seq.metrics.finished_time = now
        events.append({
            "type": "finished", "request_id": seq.request_id, "finish_reason": reason,
            "num_output_tokens": seq.num_output_tokens, "metrics": _metrics_summary(seq),
            "blocks_freed": freed,
        })
        self._output_store(seq)
        self._samples_prune(seq)

    def _samples_prune(self, seq: Sequence) -> None:
        """Forget a request's list of samples once it and all its samples have ended (unless
        `generate` still collects them)."""
        parent = seq.parent_id or seq.request_id
        samples = self._samples.get(parent)
        if (samples is not None and parent not in self._collect
                and parent not in self._outputs and parent not in self._requests
                and not any(c in self._requests for c in samples)):
            del self._samples[parent]

    def _output_store(self, seq: Sequence) -> None:
        if seq.request_id in self._collect:
            self._collect.discard(seq.request_id)
            self._outputs[seq.request_id] = RequestOutput(
                request_id=seq.request_id, prompt_token_ids=seq.prompt_token_ids,
                token_ids=seq.output_token_ids, text=seq.text, finish_reason=seq.finish_reason,
                metrics=seq.metrics.as_dict())

    def _runners_forget(self, seqs: list[Sequence]) -> None:
        """Tell the runners these sequences left (finished, aborted, preempted), so they drop
        the contiguous decode copies of their context."""
        ids = [s.request_id for s in seqs]
        if ids:
            self.runner.sequences_forget(ids)
            draft = self._draft_runner()
            if draft is not None:
                draft.sequences_forget(ids)

    def _draft_runner(self) -> ModelRunner | None:
        return self.speculative.draft_runner if self.speculative is not None else None

    # Metrics ------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Counters named after vLLM's metrics where they overlap; token counts, block counts."""
        bm, sched = self.block_manager, self.scheduler
        spec = self.speculative
        return {
            "kv_blocks_total": bm.num_blocks,
            "kv_blocks_free": bm.num_free_blocks,
            "kv_block_bytes": self.kv_block_bytes,
            "kv_cache_dtype": str(self.runner.kv_cache_dtype).removeprefix("torch."),
            "kv_cache_usage_perc": 1 - bm.num_free_blocks / bm.num_blocks,  # a fraction, as vLLM
            "block_size": bm.block_size,
            "prefix_cache_queries": bm.prefix_cache_queries,
            "prefix_cache_hits": bm.prefix_cache_hits,
            "num_requests_running": len(sched.running),
            "num_requests_waiting": len(sched.waiting),
            "num_preemptions": sched.num_preemptions,
            "num_refused": sched.num_refused,
            "spec_decode_num_draft_tokens": spec.num_draft_tokens if spec else 0,
            "spec_decode_num_accepted_tokens": spec.num_accepted_tokens if spec else 0,
            # vLLM's per-position acceptance counter, as a list (index 0: the first guess).
            "spec_decode_num_drafts_by_position": list(spec.drafted_by_position) if spec else [],
            "spec_decode_num_accepted_tokens_per_pos": (list(spec.accepted_by_position)
                                                        if spec else []),
            "max_model_len": self.max_model_len,
            # Which fused-kernel build the forward pass runs (or why PyTorch's ops run).
            "cpu_kernels": kernels_describe(getattr(self.runner.model, "cpu_kernels", None)),
        }


def _metrics_summary(seq: Sequence) -> dict:
    d = seq.metrics.as_dict()
    return {k: d[k] for k in ("ttft", "itl", "queue_time", "prefill_time", "e2e")}
