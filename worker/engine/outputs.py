"""What `Engine.generate` returns for each request."""

from dataclasses import dataclass, field


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    token_ids: list[int]  # generated ids (an EOS that ended the request included)
    text: str  # generated text, special tokens skipped, a matched stop string cut off
    finish_reason: str | None  # "stop", "length" or "abort"
    metrics: dict = field(default_factory=dict)  # seconds: ttft, itl, queue_time, prefill_time, e2e
    # With SamplingParams.n > 1: every sample's output, this request's own first (its token_ids
    # and text are sample 0's).
    samples: list["RequestOutput"] = field(default_factory=list)
