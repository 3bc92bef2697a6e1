"""Which sequences run this step, and how many tokens each computes.

Continuous batching: every step, running sequences go first (decodes before prefill chunks, so
a long prompt cannot stall the decoders' next token), then waiting ones are admitted while the
token budget, `max_num_seqs` and free blocks allow. A prompt larger than what is left of the
budget is cut into chunks (chunked prefill) that ride along with the decodes. When a sequence
needs a block and none is free, a running sequence is preempted: its blocks are freed and it
goes back to the front of the queue, to be recomputed later (its prefix may still be cached).
Under `policy="fcfs"` the victim is the newest running sequence; under `"fair"` it is the
newest of the tenant holding the most running sequences (then the most tokens served), so a
heavy tenant's requests give way before a light tenant's.

Admission control: with `max_queued` (all tenants) or `max_queued_per_tenant` set, a new
request is refused while the queue it would join is full (`queue_full`); the engine reports
the refusal and never queues the request. Preempted requests going back to the queue are
never refused.

Static batching, for comparison: a batch is formed only when nothing runs, with room reserved
for every member's full length, and it runs until its last member finishes.
"""

import time
from dataclasses import dataclass, field

from worker.engine.block_manager import BlockManager
from worker.engine.sequence import Sequence, SequenceStatus


class QueueFullError(RuntimeError):
    """A new request refused by admission control: its queue is at its bound. An API answers
    it with 429 Too Many Requests."""

    def __init__(self, *, tenant: str | None, scope: str, queued: int, limit: int) -> None:
        self.tenant, self.scope, self.queued, self.limit = tenant, scope, queued, limit
        where = "the queue" if scope == "global" else f"tenant {tenant!r}'s queue"
        super().__init__(f"{where} is full: {queued} waiting, bound {limit}")


@dataclass
class SchedulerOutput:
    scheduled: list[Sequence] = field(default_factory=list)  # num_scheduled_tokens set on each
    admitted: list[Sequence] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        *,
        block_manager: BlockManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        scheduling: str = "continuous",
        policy: str = "fcfs",
        num_lookahead_tokens: int = 0,
        max_queued: int | None = None,
        max_queued_per_tenant: int | None = None,
    ) -> None:
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.scheduling = scheduling
        self.policy = policy
        self.num_lookahead_tokens = num_lookahead_tokens
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.tenant_tokens: dict[str | None, int] = {}  # tokens computed per tenant (fair policy)
        self.max_queued = max_queued
        self.max_queued_per_tenant = max_queued_per_tenant
        self.num_refused = 0

    def queue_full(self, tenant: str | None) -> dict | None:
        """None when a new request of `tenant` may queue; else which bound refuses it:
        {"scope": "global" or "tenant", "queued": waiting now, "limit": the bound}."""
        if self.max_queued is not None and len(self.waiting) >= self.max_queued:
            return {"scope": "global", "queued": len(self.waiting), "limit": self.max_queued}
        if self.max_queued_per_tenant is not None:
            queued = sum(1 for s in self.waiting if s.tenant == tenant)
            if queued >= self.max_queued_per_tenant:
                return {"scope": "tenant", "queued": queued, "limit": self.max_queued_per_tenant}
        return None

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def seconds_until_ready(self) -> float:
        """0 when a step has work now; else how long until the first paced sequence is due."""
        if self.waiting or not self.running:
            return 0.0
        return max(0.0, min(s.hold_until for s in self.running) - time.perf_counter())

    # The step's plan ---------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        if self.scheduling == "static" and not self.running:
            self._form_static_batch(out)
        budget = self.max_num_batched_tokens
        now = time.perf_counter()
        # Paced sequences (slow readers) sit out the steps before their next token is due.
        ready = [s for s in self.running if s.hold_until <= now]
        decodes = [s for s in ready if s.is_decoding]
        prefills = [s for s in ready if not s.is_decoding]
        for seq in decodes + prefills:
            if budget == 0:
                break
            if seq.status is not SequenceStatus.RUNNING:
                continue  # preempted earlier in this loop
            budget -= self._schedule_running(seq, budget, out)
        if self.scheduling == "continuous" and not out.preempted:
            self._admit_waiting(budget, out)
        return out

    def _schedule_running(self, seq: Sequence, budget: int, out: SchedulerOutput) -> int:
        """Schedule one running sequence, preempting newer ones for room; returns tokens used."""
        num_new = min(seq.num_tokens - seq.num_computed_tokens, budget)
        lookahead = 0
        if seq.is_decoding and self.num_lookahead_tokens:
            # Speculative slots, never past max_tokens, max_model_len or the step's budget.
            lookahead = max(0, min(
                self.num_lookahead_tokens,
                budget - num_new,
                seq.params.max_tokens - seq.num_output_tokens - 1,
                self.max_model_len - seq.num_tokens,
            ))
        while not self.block_manager.can_append(seq, num_new + lookahead):
            victim = self._preempt(out)
            if victim is seq:
                return 0
        self.block_manager.append_slots(seq, num_new + lookahead)
        seq.num_scheduled_tokens = num_new
        seq.num_lookahead_tokens = lookahead
        out.scheduled.append(seq)
        return num_new + lookahead

    def _victim(self) -> Sequence:
        """The running sequence to preempt: the newest (fcfs), or under the fair policy the
        newest of the tenant with the most running sequences, then the most tokens served."""
        if self.policy == "fcfs":
            return self.running[-1]
        running_per_tenant: dict[str | None, int] = {}
        for s in self.running:
            running_per_tenant[s.tenant] = running_per_tenant.get(s.tenant, 0) + 1
        newest = {id(s): i for i, s in enumerate(self.running)}
        return max(self.running, key=lambda s: (
            running_per_tenant[s.tenant], self.tenant_tokens.get(s.tenant, 0), newest[id(s)]))

    def _preempt(self, out: SchedulerOutput) -> Sequence:
        victim = self._victim()
        self.running.remove(victim)
        if victim in out.scheduled:
            out.scheduled.remove(victim)
        self.block_manager.free_sequence(victim)
        victim.status = SequenceStatus.WAITING
        victim.num_scheduled_tokens = victim.num_lookahead_tokens = 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.insert(0, victim)
        out.preempted.append(victim)
        return victim

    def _admit_waiting(self, budget: int, out: SchedulerOutput) -> None:
        bm = self.block_manager
        while self.waiting and budget > 0 and self._seats_taken() < self.max_num_seqs:
            seq = self._next_waiting()
            if not seq.forked and self._seats_taken() + seq.params.n > self.max_num_seqs:
                break  # its n samples will each need a seat once the prompt is in
            matched = [] if seq.kv_import else bm.prefix_match(seq)
            imported = seq.kv_import.num_computed_tokens if seq.kv_import else 0
            num_new = min(seq.num_tokens - len(matched) * bm.block_size - imported, budget)
            if not bm.can_admit(seq, matched, imported + num_new):
                break
            self._admit(seq, matched, out)
            bm.append_slots(seq, num_new)
            seq.num_scheduled_tokens = num_new
            seq.num_lookahead_tokens = 0
            out.scheduled.append(seq)
            budget -= num_new

    def _seats_taken(self) -> int:
        """Running sequences, counting a request whose prompt is still going in as its n
        samples: they fork off it as soon as the prompt is in, each into a seat of its own."""
        return sum(1 if s.forked else s.params.n for s in self.running)

    def _form_static_batch(self, out: SchedulerOutput) -> None:
        """Admit up to max_num_seqs waiting sequences with room for their full length."""
        bm = self.block_manager
        reserved = 0
        while self.waiting and self._seats_taken() < self.max_num_seqs:
            seq = self._next_waiting()
            if not seq.forked and self._seats_taken() + seq.params.n > self.max_num_seqs:
                break
            full_len = min(seq.num_prompt_tokens + seq.params.max_tokens, self.max_model_len)
            need = bm.blocks_for(full_len)
            if self.running and reserved + need > bm.num_free_blocks:
                break
            reserved += need
            self._admit(seq, [] if seq.kv_import else bm.prefix_match(seq), out)

    def _admit(self, seq: Sequence, matched: list[int], out: SchedulerOutput) -> None:
        self.waiting.remove(seq)
        self.block_manager.admit(seq, matched)
        if seq.kv_import is not None:
            # Blocks for the imported K/V; the engine copies it in before the forward pass.
            # The draft model (if any) has none of it, so its cursor stays at zero.
            seq.num_computed_tokens = seq.kv_import.num_computed_tokens
            self.block_manager.append_slots(seq, 0)
        seq.status = SequenceStatus.RUNNING
        self.running.append(seq)
        out.admitted.append(seq)

    def _next_waiting(self) -> Sequence:
        if self.policy == "fcfs":
            return self.waiting[0]
        # Fair share: the tenant with the fewest running requests, then the fewest tokens
        # served so far, goes next; within a tenant, first come first served.
        running_per_tenant: dict[str | None, int] = {}
        for s in self.running:
            running_per_tenant[s.tenant] = running_per_tenant.get(s.tenant, 0) + 1
        return min(
            self.waiting,
            key=lambda s: (
                running_per_tenant.get(s.tenant, 0),
                self.tenant_tokens.get(s.tenant, 0),
                s.num_preemptions == 0,  # a preempted request resumes before new ones
                s.arrival_order,
            ),
        )

    # After the step ----------------------------------------------------------------------------

    def account(self, seq: Sequence, num_tokens: int) -> None:
        """Count tokens computed for the sequence's tenant (the fair policy's measure)."""
        self.tenant_tokens[seq.tenant] = self.tenant_tokens.get(seq.tenant, 0) + num_tokens

    def finish(self, seq: Sequence) -> int:
        """Remove a finished or aborted sequence; returns how many blocks became free."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        seq.status = SequenceStatus.FINISHED
        return self.block_manager.free_sequence(seq)
