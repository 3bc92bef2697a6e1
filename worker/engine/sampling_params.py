"""What a request asks for: how to pick each token and when to stop."""

from dataclasses import dataclass

N_MAX = 64  # samples of one prompt


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings of one request.

    temperature 0 means greedy; top_k 0 means no top-k cut; top_p 1.0 means no nucleus cut.
    A `seed` gives the request its own random generator, so its tokens do not depend on what
    else shares the batch. `stop` strings end the output and are left out of its text.
    `detokenize=False` skips turning tokens into text (as vLLM's option does): the output has
    token ids and empty text, and stop strings, which need the text, are refused.
    `n` > 1 draws that many samples of the one prompt: the prompt is computed once and the
    samples share its KV blocks (reference counts, copy-on-write on the last partial block);
    sample i > 0 uses seed + i when a seed is given.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_tokens: int = 16
    stop: tuple[str, ...] | list[str] | str = ()
    stop_token_ids: tuple[int, ...] | list[int] = ()
    ignore_eos: bool = False
    seed: int | None = None
    detokenize: bool = True
    n: int = 1

    def __post_init__(self) -> None:
        # Normalise containers so params hash and compare by value.
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first field that is out of range."""
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ValueError("stop strings must be non-empty strings")
        if any(not isinstance(t, int) or t < 0 for t in self.stop_token_ids):
            raise ValueError("stop_token_ids must be non-negative integers")
        if not isinstance(self.n, int) or not 1 <= self.n <= N_MAX:
            raise ValueError(f"n must be an integer from 1 to {N_MAX}, got {self.n!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer or None, got {self.seed!r}")
        if not isinstance(self.detokenize, bool):
            raise ValueError(f"detokenize must be True or False, got {self.detokenize!r}")
        if self.stop and not self.detokenize:
            raise ValueError("stop strings need detokenize=True (they are matched in the text)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
