"""From logits to token ids: greedy, temperature, top-k, top-p, and seeded randomness.

Sampling uses the exponential race: argmax(p / E) with E ~ Exp(1) picks token i with
probability p_i. A seeded request draws the E for the token at position t from a generator
seeded by (seed, t) alone (`noise_key`), so its tokens depend neither on which other requests
share the batch nor on how many tokens a step produces for it: with speculative decoding on,
the target's token at t is computed from the same E as without it (see speculative.py).
"""

import torch

from worker.engine.sampling_params import SamplingParams


def probs_from_logits(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """Probabilities [N, vocab] after temperature, top-k and top-p, row by row's own params.

    Greedy rows (temperature 0) come out one-hot on their argmax.
    """
    temps = torch.tensor([p.temperature or 1.0 for p in params], dtype=logits.dtype,
                         device=logits.device)
    logits = logits / temps.unsqueeze(1)
    if any(p.top_k > 0 or p.top_p < 1.0 for p in params):
        logits = _top_k_top_p(logits, params)
    probs = logits.softmax(dim=-1)
    greedy = [i for i, p in enumerate(params) if p.temperature == 0]
    if greedy:
        rows = torch.tensor(greedy, device=logits.device)
        probs[rows] = torch.nn.functional.one_hot(
            logits[rows].argmax(-1), logits.shape[-1]
        ).to(probs.dtype)
    return probs


def _top_k_top_p(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    vocab = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    ks = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params], device=logits.device)
    ranks = torch.arange(vocab, device=logits.device).unsqueeze(0)
    drop = ranks >= ks.unsqueeze(1)
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    top_ps = torch.tensor([p.top_p for p in params], dtype=logits.dtype, device=logits.device)
    sorted_probs = sorted_logits.softmax(dim=-1)
    # Keep the smallest set whose mass reaches top_p: drop a token when the mass before it
    # already does. The first token is always kept.
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    drop = mass_before >= top_ps.unsqueeze(1)
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(1, order, sorted_logits)


_MASK64 = 2**64 - 1


def noise_key(seed: int | None, position: int) -> int | None:
    """The generator seed for the token at `position` of a request seeded with `seed` (None
    when unseeded): a SplitMix64 mix of the two, so neighbouring positions and seeds get
    unrelated streams."""
    if seed is None:
        return None
    z = (seed * 0x9E3779B97F4A7C15 + position + 1) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def exponential_noise(
    shape: tuple[int, int], keys: list[int | None], device: torch.device
) -> torch.Tensor:
    """Exp(1) noise [N, vocab]; a row with a key (from `noise_key`) draws from a generator
    seeded with it (on CPU, for portability), the others from the global generator."""
    noise = torch.empty(shape, device=device).exponential_()
    for i, key in enumerate(keys):
        if key is not None:
            generator = torch.Generator().manual_seed(key)
            noise[i] = torch.empty(shape[1]).exponential_(generator=generator).to(device)
    return noise


def tokens_sample(
    logits: torch.Tensor,
    params: list[SamplingParams],
    keys: list[int | None],
) -> list[int]:
    """One token id per row of `logits` [N, vocab]; `keys` from `noise_key` (None: unseeded)."""
    if all(p.temperature == 0 for p in params):
        return logits.argmax(dim=-1).tolist()
    probs = probs_from_logits(logits, params)
    noise = exponential_noise(tuple(probs.shape), keys, probs.device)
    return (probs / noise).argmax(dim=-1).tolist()


def penalties_apply(logits: torch.Tensor, params: list[SamplingParams],
                    outputs: list[list[int]]) -> torch.Tensor:
    """Logits with OpenAI's presence and frequency penalties taken off the tokens each row's
    output already holds: logit - frequency * count - presence * (count > 0). Rows without
    penalties are left as they are (the same tensor when no row has any)."""
    rows = [i for i, p in enumerate(params) if p.penalized and outputs[i]]
    if not rows:
        return logits
    logits = logits.clone()
    vocab = logits.shape[-1]
    for i in rows:
        counts = torch.bincount(torch.tensor(outputs[i]), minlength=vocab)[:vocab].to(
            device=logits.device, dtype=logits.dtype)
        logits[i] -= params[i].frequency_penalty * counts + \
            params[i].presence_penalty * (counts > 0).to(logits.dtype)
    return logits


def logprobs_of(logits: torch.Tensor, tokens: list[int], params: list[SamplingParams]
                ) -> list[dict | None]:
    """For each row that asked for logprobs: the chosen token's log-probability under the
    model's own distribution (raw logits, as vLLM reports by default) and the `logprobs` most
    likely tokens with theirs; None for the other rows."""
    out: list[dict | None] = [None] * len(params)
    rows = [i for i, p in enumerate(params) if p.logprobs is not None]
    if not rows:
        return out
    logp = logits[rows].float().log_softmax(dim=-1)
    widest = max(params[i].logprobs for i in rows)
    top_values, top_ids = logp.topk(widest, dim=-1) if widest else (None, None)
    for j, i in enumerate(rows):
        k = params[i].logprobs
        top = [] if not k else list(zip(top_ids[j, :k].tolist(), top_values[j, :k].tolist(),
                                        strict=True))
        out[i] = {"logprob": float(logp[j, tokens[i]]), "top": top}
    return out
