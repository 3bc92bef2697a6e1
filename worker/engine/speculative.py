"""Speculative decoding: a small draft model guesses k tokens, the target checks them at once.

Per step, for each decoding sequence with k lookahead slots:
1. the draft runs k times, proposing d1..dk (sampled from its own distribution q);
2. the target runs once over [last token, d1..dk] and gives k+1 distributions p;
3. each di is kept with probability min(1, p(di)/q(di)) (Leviathan et al., 2023, "Fast
   Inference from Transformers via Speculative Decoding"); at the first rejection a token is
   drawn from max(0, p - q), renormalised; if all k survive, one more comes from the last p.
The tokens that come out are distributed exactly as the target's own sampling, and under
greedy (p and q one-hot) the output equals plain greedy decoding.

The draft shares the target's block tables and has its own KV pool, so its cache follows the
same pages. Its cursor `draft_num_computed_tokens` may trail the target's by a token (when all k
guesses are accepted, the last guess was never fed to the draft); the next step feeds it first.
"""

import torch

from worker.engine.layers.sampler import exponential_noise, probs_from_logits
from worker.engine.model_runner import BatchEntry, ModelRunner
from worker.engine.sequence import Sequence


class SpeculativeDecoder:
    def __init__(self, *, draft_runner: ModelRunner, num_speculative_tokens: int) -> None:
        self.draft_runner = draft_runner
        self.num_speculative_tokens = num_speculative_tokens
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0

    def step(self, scheduled: list[Sequence], *, target: ModelRunner) -> dict[Sequence, list[int]]:
        """Run draft and target for the step; returns the new tokens of each sampling sequence.

        Moves each sequence's cursors (`num_computed_tokens`, `draft_num_computed_tokens`); the
        engine appends the tokens and registers the blocks whose K/V both pools hold.
        """
        drafts, draft_probs = self._propose(scheduled)
        entries = []
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            k = seq.num_lookahead_tokens
            completes = start + n == seq.num_tokens
            tokens = seq.token_ids[start : start + n] + drafts.get(seq, [])
            entries.append(BatchEntry(tokens, start, seq.block_table, (1 + k) if completes else 0,
                                      seq.request_id))
        logits = target.execute(entries)

        new_tokens: dict[Sequence, list[int]] = {}
        row = 0
        for seq in scheduled:
            start, n = seq.num_computed_tokens, seq.num_scheduled_tokens
            if start + n != seq.num_tokens:
                seq.num_computed_tokens += n
                seq.draft_num_computed_tokens = seq.num_computed_tokens
            else:
                k = seq.num_lookahead_tokens
                rows = logits[row : row + 1 + k]
                row += 1 + k
                accepted, extra = _verify(seq, drafts.get(seq, []), draft_probs.get(seq), rows)
                self.num_draft_tokens += k
                self.num_accepted_tokens += len(accepted)
                new_tokens[seq] = accepted + [extra]
                seq.num_computed_tokens = start + n + len(accepted)
                if k:
                    # The draft saw the last token and d1..d(k-1).
                    seq.draft_num_computed_tokens = start + n + min(len(accepted), k - 1)
                else:
                    seq.draft_num_computed_tokens = seq.num_computed_tokens
        return new_tokens

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
            for seq, token, q in zip(active, *_draft_sample(logits, active), strict=True):
                drafts[seq].append(token)
                probs[seq].append(q)
            active = [s for s in active if len(drafts[s]) < s.num_lookahead_tokens]
        return drafts, probs


def _draft_sample(logits: torch.Tensor, seqs: list[Sequence]):
    """Draft tokens and, for sampling requests, their draft distribution q."""
    params = [s.params for s in seqs]
    if all(p.greedy for p in params):
        return logits.argmax(-1).tolist(), [None] * len(seqs)
    probs = probs_from_logits(logits, params)
    noise = exponential_noise(tuple(probs.shape), [s.generator for s in seqs], probs.device)
    tokens = (probs / noise).argmax(-1).tolist()
    return tokens, [None if p.greedy else probs[i] for i, p in enumerate(params)]


def _verify(seq: Sequence, drafts: list[int], qs: list | None, logits: torch.Tensor):
    """Accepted draft tokens and the one extra token the target contributes."""
    if seq.params.greedy:
        target = logits.argmax(-1).tolist()
        accepted = []
        for j, d in enumerate(drafts):
            if d != target[j]:
                break
            accepted.append(d)
        return accepted, target[len(accepted)]
    p = probs_from_logits(logits, [seq.params] * logits.shape[0])
    accepted = []
    for j, d in enumerate(drafts):
        q = qs[j]
        u = torch.rand((), generator=seq.generator).item()
        if u < min(1.0, (p[j, d] / q[d]).item()):
            accepted.append(d)
            continue
        residual = (p[j] - q).clamp(min=0)
        residual = residual / residual.sum() if residual.sum() > 0 else p[j]
        return accepted, _one_sample(residual, seq.generator)
    return accepted, _one_sample(p[len(drafts)], seq.generator)


def _one_sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    noise = exponential_noise((1, probs.shape[-1]), [generator], probs.device)
    return int((probs.unsqueeze(0) / noise).argmax(-1).item())
