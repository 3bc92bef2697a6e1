"""What a request asks for: how to pick each token and when to stop."""

from dataclasses import dataclass

N_MAX = 64  # samples of one prompt
LOGPROBS_MAX = 20  # alternatives reported per token (OpenAI's top_logprobs limit)


class ParamError(ValueError):
    """A request the engine refuses because of one of its settings, named in `param` (the
    OpenAI API reports it in its error body)."""

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(message)
        self.param = param


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
    `presence_penalty` and `frequency_penalty` (OpenAI's, from -2 to 2) lower the logit of every
    token the output already holds, by a flat amount and by the number of times it appears.
    `logprobs` (None: off) reports each chosen token's log-probability under the model (before
    temperature, penalties and cuts, as vLLM's default) with that many most likely alternatives.
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
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: int | None = None

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
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not -2 <= value <= 2:
                raise ValueError(f"{name} must be a number from -2 to 2, got {value!r}")
        if self.logprobs is not None and (
                isinstance(self.logprobs, bool) or not isinstance(self.logprobs, int)
                or not 0 <= self.logprobs <= LOGPROBS_MAX):
            raise ValueError(f"logprobs must be None or an integer from 0 to {LOGPROBS_MAX}, "
                             f"got {self.logprobs!r}")
        if not isinstance(self.detokenize, bool):
            raise ValueError(f"detokenize must be True or False, got {self.detokenize!r}")
        if self.stop and not self.detokenize:
            raise ValueError("stop strings need detokenize=True (they are matched in the text)")

    @property
    def penalized(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
