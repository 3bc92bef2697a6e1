"""One request as the engine sees it: its tokens and the cursors the scheduler moves.

Everything the scheduler decides is arithmetic on three numbers:
- `num_tokens`: prompt plus output tokens so far;
- `num_computed_tokens`: how many of them already have K/V in the cache;
- `num_scheduled_tokens`: how many this step will compute (a prefill chunk, or 1 to decode).
A prefix-cache hit starts `num_computed_tokens` above zero; preemption sets it back to zero.
"""

import enum
import itertools
import time
from dataclasses import dataclass, field

from worker.engine.layers.sampler import noise_key
from worker.engine.sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class RequestMetrics:
    """Wall-clock times (time.perf_counter seconds) of one request's milestones."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    itl: list[float] = field(default_factory=list)  # gaps between output tokens, seconds

    def as_dict(self) -> dict:
        """Derived latencies in seconds (None where the milestone was not reached)."""

        def gap(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else b - a

        return {
            "arrival_time": self.arrival_time,
            "first_scheduled_time": self.first_scheduled_time,
            "first_token_time": self.first_token_time,
            "finished_time": self.finished_time,
            "ttft": gap(self.arrival_time, self.first_token_time),
            "itl": list(self.itl),
            "queue_time": gap(self.arrival_time, self.first_scheduled_time),
            "prefill_time": gap(self.first_scheduled_time, self.first_token_time),
            "e2e": gap(self.arrival_time, self.finished_time),
        }


_arrival_counter = itertools.count()


class Sequence:
    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        *,
        tenant: str | None = None,
        cache_salt: str | None = None,
        pace_s: float = 0.0,
    ) -> None:
        self.request_id = request_id
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.params = params
        self.tenant = tenant
        # Prefix-cache entries are only shared between requests with the same salt (one per
        # API key), so one client cannot learn another's prompts by timing cache hits.
        self.cache_salt = cache_salt
        # A slow reader: at most one token every pace_s seconds. Until `hold_until` (a
        # perf_counter reading) the scheduler leaves the sequence out of steps, blocks kept.
        self.pace_s = pace_s
        self.hold_until = 0.0
        self.arrival_order = next(_arrival_counter)
        self.status = SequenceStatus.WAITING
        self.finish_reason: str | None = None

        # Cache cursors (see the module docstring).
        self.num_computed_tokens = 0
        self.num_scheduled_tokens = 0
        self.num_cached_tokens = 0  # prefix-cache hit at the latest admission
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []  # chained hashes of the full blocks registered so far
        # Speculative decoding: the draft model's own cache cursor and this step's proposals.
        self.draft_num_computed_tokens = 0
        self.num_lookahead_tokens = 0

        # Disaggregated serving: K/V to import on admission, or to export on finishing.
        self.kv_import = None  # a kv_transfer.KVHandoff
        self.export_kv = False

        self.metrics = RequestMetrics(arrival_time=time.perf_counter())
        self.num_preemptions = 0
        # SamplingParams.n > 1: set once the prompt's first token is sampled and the other
        # samples have forked off this sequence (see `fork`).
        self.forked = params.n == 1
        self.parent_id: str | None = None
        self.sample_index = 0  # sample i of n draws its randomness as if seeded with seed + i

        # Text: the detokenizer's state lives here so a sequence owns all it needs.
        self.text = ""
        self.logprobs_pending: list[dict] = []  # sampled, not yet appended (params.logprobs)
        self.emitted_text_len = 0
        self.detok_prefix_offset = 0
        self.detok_read_offset = 0

    def fork(self, request_id: str, index: int) -> "Sequence":
        """Sample `index` of this request: the same prompt, tenant and salt, its own random
        stream (seed + index) and text state. The block manager shares the blocks."""
        params = self.params
        child = Sequence(request_id, self.prompt_token_ids, params, tenant=self.tenant,
                         cache_salt=self.cache_salt, pace_s=self.pace_s)
        child.sample_index = index
        child.forked = True
        child.parent_id = self.request_id
        child.status = SequenceStatus.RUNNING
        child.metrics.arrival_time = self.metrics.arrival_time
        child.metrics.first_scheduled_time = self.metrics.first_scheduled_time
        return child

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    def noise_key(self, position: int) -> int | None:
        """The random key of the token at `position` (None when unseeded): a seeded request's
        randomness is tied to positions, not to the order of draws."""
        seed = self.params.seed
        return noise_key(None if seed is None else seed + self.sample_index, position)

    @property
    def is_decoding(self) -> bool:
        """True when only the newest output token lacks K/V: the next step computes one token
        (plus any speculative ones). Anything else is (re)filling a prompt."""
        return self.num_output_tokens > 0 and self.num_tokens - self.num_computed_tokens == 1

    def __repr__(self) -> str:
        return (
            f"Sequence({self.request_id!r}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens}, blocks={self.block_table})"
        )
