"""Speculative decoding: a cheap drafter guesses k tokens, the target checks them at once.

Per step, for each decoding sequence with k lookahead slots:
1. the drafter proposes d1..dk: a small draft model sampling from its own distribution q, or
   prompt lookup (`method="ngram"`), which needs no model: it finds the latest earlier place
   where the sequence's last n tokens occurred (n from `ngram_max` down to `ngram_min`) and
   proposes what followed there (q is then one-hot on the guess);
2. the target runs once over [last token, d1..dk] and gives k+1 distributions p;
3. each di is checked in order, and the first failure ends the run:
   - greedy: di is kept if it is the target's argmax; the argmax at the first failure (or
     after the last draft, the "bonus" token) comes out too;
   - seeded sampling: the target's own token at each position is fixed by the request's seed
     and the position (layers/sampler.py, `noise_key`); di is kept if it equals that token,
     and the target's token at the first failure comes out. The tokens are exactly those the
     target samples without speculation, in any batch and for any k; the draft samples with
     the same noise, so a draft close to the target agrees often;
   - unseeded sampling: di is kept with probability min(1, p(di)/q(di)) (Leviathan et al.,
     2023, "Fast Inference from Transformers via Speculative Decoding"); at the first
     rejection a token is drawn from max(0, p - q), renormalised; if all k survive, one more
     comes from the last p. The highest acceptance a lossless rule can have.
Either way the tokens that come out are distributed exactly as the target's own sampling.

A draft model shares the target's block tables and has its own KV pool, so its cache follows
the same pages. Its cursor `draft_num_computed_tokens` may trail the target's by a token (when
all k guesses are accepted, the last guess was never fed to the draft); the next step feeds it
first. Prompt lookup has no cache, so its cursor follows the target's.
"""

import torch

from worker.engine.layers.sampler import exponential_noise, probs_from_logits
from worker.engine.model_runner import BatchEntry, ModelRunner
from worker.engine.sequence import Sequence

METHODS = ("draft", "ngram")


class SpeculativeDecoder:
    def __init__(self, *, draft_runner: ModelRunner | None, num_speculative_tokens: int,
                 method: str = "draft", ngram_max: int = 3, ngram_min: int = 1) -> None:
        if method not in METHODS:
            raise ValueError(f"speculative method must be one of {METHODS}")
        if (method == "draft") != (draft_runner is not None):
            raise ValueError("a draft model is needed for method 'draft', and only for it")
        if not 1 <= ngram_min <= ngram_max:
            raise ValueError("need 1 <= ngram_min <= ngram_max")
        self.draft_runner = draft_runner
        self.num_speculative_tokens = num_speculative_tokens
        self.method = method
        self.ngram_max, self.ngram_min = ngram_max, ngram_min
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0
        # Acceptance by draft position (index j counts the (j+1)-th guess of a step).
        self.drafted_by_position = [0] * num_speculative_tokens
        self.accepted_by_position = [0] * num_speculative_tokens
        # What the latest step did per sequence, for the engine's `speculation` events.
        self.last_step: dict[str, dict] = {}

    def step(self, scheduled: list[Sequence], *, target: ModelRunner) -> dict[Sequence, list[int]]:
        """Run drafter and target for the step; returns the new tokens of each sampling sequence.

        Moves each sequence's cursors (`num_computed_tokens`, `draft_num_computed_tokens`); the
        engine appends the tokens and registers the blocks whose K/V both pools hold.
        """
        if self.method == "ngram":
            drafts, draft_probs = self._lookup(scheduled), {}
        else:
            drafts, draft_probs = self._propose(scheduled)
        entries = []
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            completes = start + n == seq.num_tokens
            guesses = drafts.get(seq, [])
            tokens = seq.token_ids[start : start + n] + guesses
            entries.append(BatchEntry(tokens, start, seq.block_table,
                                      (1 + len(guesses)) if completes else 0, seq.request_id))
        logits = target.execute(entries)

        new_tokens: dict[Sequence, list[int]] = {}
        self.last_step = {}
        row = 0
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            if start + n != seq.num_tokens:
                seq.num_computed_tokens += n
                seq.draft_num_computed_tokens = seq.num_computed_tokens
                continue
            guesses = drafts.get(seq, [])
            k = len(guesses)
            rows = logits[row : row + 1 + k]
            row += 1 + k
            accepted, extra = _verify(seq, guesses, draft_probs.get(seq), rows)
            self.num_draft_tokens += k
            self.num_accepted_tokens += len(accepted)
            for j in range(k):
                self.drafted_by_position[j] += 1
                self.accepted_by_position[j] += j < len(accepted)
            if seq.num_output_tokens:  # a decode (a prompt's first token is no speculation)
                self.last_step[seq.request_id] = {"drafts": list(guesses),
                                                  "accepted": len(accepted), "token_id": extra}
            new_tokens[seq] = accepted + [extra]
            seq.num_computed_tokens = start + n + len(accepted)
            if k and self.draft_runner is not None:
                # The draft saw the last token and d1..d(k-1).
                seq.draft_num_computed_tokens = start + n + min(len(accepted), k - 1)
            else:
                seq.draft_num_computed_tokens = seq.num_computed_tokens
        return new_tokens

    def _lookup(self, scheduled: list[Sequence]) -> dict[Sequence, list[int]]:
        """Prompt lookup: each decoding sequence's guesses from its own earlier tokens."""
        return {s: ngram_propose(s.token_ids, s.num_lookahead_tokens, ngram_max=self.ngram_max,
                                 ngram_min=self.ngram_min)
                for s in scheduled if s.num_lookahead_tokens}

    def _propose(self, scheduled: list[Sequence]):
        """Feed the draft what it has not seen, then let it guess; returns guesses and q."""
        drafts: dict[Sequence, list[int]] = {s: [] for s in scheduled if s.num_lookahead_tokens}
        probs: dict[Sequence, list[torch.Tensor]] = {s: [] for s in drafts}
        # Pass 1 catches the draft up with every scheduled sequence (prefill chunks included).
        entries = []
        for seq in scheduled:
            begin = seq.draft_num_computed_tokens
            end = seq.num_computed_tokens + seq.num_scheduled_tokens
            entries.append(BatchEntry(seq.token_ids[begin:end], begin, seq.block_table,
                                      1 if seq in drafts else 0, seq.request_id))
        # Rows of logits follow `active`, the sequences still guessing, in scheduled order.
        active = [s for s in scheduled if s in drafts]
        entries = [e for e in entries if e.token_ids]
        logits = self.draft_runner.execute(entries) if entries else None
        for j in range(self.num_speculative_tokens):
            if not active:
                break
            if j > 0:
                entries = [BatchEntry([drafts[s][-1]], s.num_tokens + j - 1, s.block_table, 1,
                                      s.request_id) for s in active]
                logits = self.draft_runner.execute(entries)
            for seq, token, q in zip(active, *_draft_sample(logits, active, j), strict=True):
                drafts[seq].append(token)
                probs[seq].append(q)
            active = [s for s in active if len(drafts[s]) < s.num_lookahead_tokens]
        return drafts, probs


def ngram_propose(token_ids: list[int], k: int, *, ngram_max: int = 3,
                  ngram_min: int = 1) -> list[int]:
    """Up to `k` guesses by prompt lookup: the tokens that followed the latest earlier
    occurrence of the last n tokens, trying the longest n first; [] when none recurs."""
    total = len(token_ids)
    for n in range(min(ngram_max, total - 1), ngram_min - 1, -1):
        tail = token_ids[total - n :]
        # Latest start first; the match must end before the tail itself begins to repeat.
        for start in range(total - n - 1, -1, -1):
            if token_ids[start : start + n] == tail:
                return list(token_ids[start + n : start + n + k])
    return []


def _draft_sample(logits: torch.Tensor, seqs: list[Sequence], j: int):
    """Draft tokens for guess j and, for sampling requests, their draft distribution q. A
    seeded request's draft uses the noise the target will use at the same position."""
    params = [s.params for s in seqs]
    if all(p.greedy for p in params):
        return logits.argmax(-1).tolist(), [None] * len(seqs)
    probs = probs_from_logits(logits, params)
    noise = exponential_noise(tuple(probs.shape), [s.noise_key(s.num_tokens + j) for s in seqs],
                              probs.device)
    tokens = (probs / noise).argmax(-1).tolist()
    return tokens, [None if p.greedy else probs[i] for i, p in enumerate(params)]


def _verify(seq: Sequence, drafts: list[int], qs: list | None, logits: torch.Tensor):
    """Accepted draft tokens and the one extra token the target contributes. `qs` are the
    draft's distributions (None for prompt lookup, whose guesses are certain: q one-hot)."""
    if seq.params.greedy:
        return _match(drafts, logits.argmax(-1).tolist())
    p = probs_from_logits(logits, [seq.params] * logits.shape[0])
    if seq.params.seed is not None:
        keys = [seq.noise_key(seq.num_tokens + j) for j in range(logits.shape[0])]
        noise = exponential_noise(tuple(p.shape), keys, p.device)
        return _match(drafts, (p / noise).argmax(-1).tolist())
    accepted = []
    for j, d in enumerate(drafts):
        q = qs[j] if qs is not None else torch.nn.functional.one_hot(
            torch.tensor(d), p.shape[-1]).to(p)
        u = torch.rand(()).item()
        if u < min(1.0, (p[j, d] / q[d]).item()):
            accepted.append(d)
            continue
        residual = (p[j] - q).clamp(min=0)
        residual = residual / residual.sum() if residual.sum() > 0 else p[j]
        return accepted, _one_sample(residual)
    return accepted, _one_sample(p[len(drafts)])


def _match(drafts: list[int], target: list[int]) -> tuple[list[int], int]:
    """Drafts kept while they equal the target's own tokens, and the target's next token."""
    accepted = []
    for j, d in enumerate(drafts):
        if d != target[j]:
            break
        accepted.append(d)
    return accepted, target[len(accepted)]


def _one_sample(probs: torch.Tensor) -> int:
    noise = exponential_noise((1, probs.shape[-1]), [None], probs.device)
    return int((probs.unsqueeze(0) / noise).argmax(-1).item())
