"""Scoring a changed model against a reference on held-out text: bits per byte, how often the
greedy next token agrees, and the mean KL divergence of the next-token distributions.

    from worker.evaluation import heldout_texts, documents_encode, quality_compare
    texts = heldout_texts(limit=24)
    documents = documents_encode(engine.tokenizer, texts)
    scores = quality_compare(reference=engine.runner.model,
                             candidates={"int4": quantized.model},
                             config=engine.config, documents=documents)
    scores["int4"]  # {"bpb", "agreement", "kl_mean", "positions", "bytes", ...}

Shared by the quantization demo (problem 11) and the rollout demo's candidate versions (problem
19). The held-out text is worker/models/heldout.jsonl: validation documents the shipped model
never trained on (worker/training/heldout.py says how they were chosen).

Every document is scored teacher-forced: BOS, the text's tokens, EOS, in one forward pass per
model; each position after BOS is predicted from the ones before it, the final EOS included.
- bits per byte = Σ −log₂ p(token) ÷ the UTF-8 bytes of the texts (special tokens add none);
- agreement = the share of positions where the candidate's argmax equals the reference's
  (the first index on ties, for both);
- KL = Σ_v p(v) (ln p(v) − ln q(v)) in nats, p the reference, q the candidate, per position,
  from log-softmax in float64; the mean is over positions.
Worker-only (imports torch).
"""

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

HELDOUT_PATH = Path(__file__).resolve().parent / "models" / "heldout.jsonl"
BLOCK_SIZE = 16
# Documents packed into one forward pass (tokens): fewer, larger matmuls than one per document.
BATCH_TOKENS = 1024


def heldout_texts(*, limit: int | None = None, path: Path = HELDOUT_PATH) -> list[str]:
    """The held-out documents' texts, in file order (the first `limit` of them)."""
    texts = [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]
    return texts[:limit] if limit is not None else texts


@dataclass(frozen=True)
class Document:
    """One scored document: its token ids (BOS … EOS) and its text's UTF-8 bytes."""

    token_ids: list[int]
    text_bytes: int


def documents_encode(tokenizer, texts: list[str]) -> list[Document]:  # noqa: ANN001
    """Each text as BOS + its tokens + EOS, with its byte count (a transformers tokenizer)."""
    found = []
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        found.append(Document(token_ids=[tokenizer.bos_token_id, *ids, tokenizer.eos_token_id],
                              text_bytes=len(text.encode("utf-8"))))
    return found


class TeacherForced:
    """Runs one model over whole documents and returns every position's logits, through the
    engine's own model runner (its paged attention, a pool of its own), several documents
    packed into each forward pass."""

    def __init__(self, model: nn.Module, config, *, tokens_max: int,  # noqa: ANN001
                 device: str = "cpu", kv_cache_dtype: torch.dtype | None = None) -> None:
        from worker.engine.model_runner import ModelRunner

        dtype = next(model.parameters()).dtype
        self.blocks = -(-tokens_max // BLOCK_SIZE)
        self.runner = ModelRunner(model, config, num_blocks=self.blocks, block_size=BLOCK_SIZE,
                                  device=device, dtype=dtype, kv_cache_dtype=kv_cache_dtype)

    def logits(self, documents: list[list[int]]) -> list[torch.Tensor]:
        """For each document (token ids), its logits [len, vocab] in FP32: row i predicts
        token i + 1. The documents together must fit the pool (`tokens_max`)."""
        from worker.engine.model_runner import BatchEntry

        entries, first = [], 0
        for token_ids in documents:
            needed = -(-len(token_ids) // BLOCK_SIZE)
            entries.append(BatchEntry(token_ids=list(token_ids), start=0,
                                      block_table=list(range(first, first + needed)),
                                      num_logits=len(token_ids)))
            first += needed
        if first > self.blocks:
            raise ValueError(f"{first} blocks of documents do not fit this runner's "
                             f"{self.blocks}")
        logits = self.runner.execute(entries)
        return list(logits.split([len(t) for t in documents]))


def documents_batch(documents: list["Document"], *, tokens: int) -> list[list["Document"]]:
    """Consecutive documents in batches of at most `tokens` tokens (counted in whole blocks),
    a document longer than that alone."""
    batches: list[list[Document]] = []
    used = tokens
    for document in documents:
        size = -(-len(document.token_ids) // BLOCK_SIZE) * BLOCK_SIZE
        if used + size > tokens:
            batches.append([])
            used = 0
        batches[-1].append(document)
        used += size
    return batches


@dataclass
class QualityTally:
    """Running sums for one candidate against the reference, document by document."""

    nll_bits: float = 0.0
    text_bytes: int = 0
    agree: int = 0
    kl_sum: float = 0.0
    positions: int = 0
    per_document: list[dict] = field(default_factory=list)

    def add(self, *, reference: torch.Tensor, candidate: torch.Tensor, targets: torch.Tensor,
            text_bytes: int) -> None:
        """One document: `reference` and `candidate` logits [n, vocab] for the positions that
        predict `targets` [n]."""
        log_p = torch.log_softmax(reference.double(), dim=-1)
        log_q = torch.log_softmax(candidate.double(), dim=-1)
        nll = -log_q.gather(1, targets.view(-1, 1)).sum().item() / math.log(2)
        kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1)
        agree = int((reference.argmax(dim=-1) == candidate.argmax(dim=-1)).sum())
        self.nll_bits += nll
        self.text_bytes += text_bytes
        self.agree += agree
        self.kl_sum += float(kl.sum())
        self.positions += int(targets.numel())
        self.per_document.append({"bpb": nll / text_bytes if text_bytes else 0.0,
                                  "agreement": agree / targets.numel(),
                                  "kl_mean": float(kl.mean())})

    def result(self) -> dict:
        """bpb (bits per byte), agreement (0–1), kl_mean (nats per position), positions,
        bytes, and the bits of the whole text (bits)."""
        return {
            "bpb": self.nll_bits / self.text_bytes if self.text_bytes else 0.0,
            "agreement": self.agree / self.positions if self.positions else 0.0,
            "kl_mean": self.kl_sum / self.positions if self.positions else 0.0,
            "positions": self.positions,
            "bytes": self.text_bytes,
            "bits": self.nll_bits,
        }


def quality_compare(*, reference: nn.Module, candidates: dict[str, nn.Module], config,  # noqa: ANN001
                    documents: list[Document], device: str = "cpu",
                    on_document: Callable[[int, int], None] | None = None,
                    reference_name: str = "reference",
                    batch_tokens: int = BATCH_TOKENS) -> dict[str, dict]:
    """Score the reference and each candidate on `documents` (see the module docstring), up to
    `batch_tokens` tokens of documents per forward pass. Returns {name: result}, the reference
    first (its KL is 0 and its agreement 1 by definition). `on_document(done, of)` is called
    after each batch of documents, every model scored; it may raise to stop (a cancelled run)."""
    batches = documents_batch(documents, tokens=batch_tokens)
    tokens_max = max(sum(-(-len(d.token_ids) // BLOCK_SIZE) * BLOCK_SIZE for d in batch)
                     for batch in batches)
    runners = {reference_name: TeacherForced(reference, config, tokens_max=tokens_max,
                                             device=device)}
    runners.update({name: TeacherForced(model, config, tokens_max=tokens_max, device=device)
                    for name, model in candidates.items()})
    tallies = {name: QualityTally() for name in runners}
    done = 0
    for batch in batches:
        ids = [d.token_ids for d in batch]
        reference_logits = runners[reference_name].logits(ids)
        for name, runner in runners.items():
            logits = reference_logits if name == reference_name else runner.logits(ids)
            for document, ref, cand in zip(batch, reference_logits, logits, strict=True):
                tallies[name].add(reference=ref[:-1], candidate=cand[:-1],
                                  targets=torch.tensor(document.token_ids[1:], device=device),
                                  text_bytes=document.text_bytes)
        done += len(batch)
        if on_document is not None:
            on_document(done, len(documents))
    return {name: tally.result() for name, tally in tallies.items()}


def quality_versions(*, reference: nn.Module, reference_config, candidate: nn.Module,  # noqa: ANN001
                     candidate_config, documents: list[Document], device: str = "cpu",
                     batch_tokens: int = BATCH_TOKENS) -> dict[str, dict]:
    """`quality_compare` for two model versions that may differ in shape (a quantized copy, or
    another model sharing the tokenizer, such as the draft): each runs with its own config.
    Returns {"reference": ..., "candidate": ...} with the same fields."""
    batches = documents_batch(documents, tokens=batch_tokens)
    tokens_max = max(sum(-(-len(d.token_ids) // BLOCK_SIZE) * BLOCK_SIZE for d in batch)
                     for batch in batches)
    ref = TeacherForced(reference, reference_config, tokens_max=tokens_max, device=device)
    cand = TeacherForced(candidate, candidate_config, tokens_max=tokens_max, device=device)
    tallies = {"reference": QualityTally(), "candidate": QualityTally()}
    for batch in batches:
        ids = [d.token_ids for d in batch]
        ref_logits = ref.logits(ids)
        cand_logits = cand.logits(ids)
        for document, r, c in zip(batch, ref_logits, cand_logits, strict=True):
            targets = torch.tensor(document.token_ids[1:], device=device)
            tallies["reference"].add(reference=r[:-1], candidate=r[:-1], targets=targets,
                                     text_bytes=document.text_bytes)
            tallies["candidate"].add(reference=r[:-1], candidate=c[:-1], targets=targets,
                                     text_bytes=document.text_bytes)
    return {name: tally.result() for name, tally in tallies.items()}


def logits_agreement(reference: list[torch.Tensor],
                     candidate: list[torch.Tensor]) -> tuple[float, float]:
    """Over every position of the documents' logits: the share where both pick the same next
    token (0–1), and the mean KL divergence KL(reference ‖ candidate) in nats per position."""
    positions = sum(r.shape[0] for r in reference)
    agree = sum((r.argmax(-1) == c.argmax(-1)).sum().item()
                for r, c in zip(reference, candidate, strict=True))
    kl = sum(torch.nn.functional.kl_div(c.log_softmax(-1), r.log_softmax(-1), log_target=True,
                                        reduction="sum").item()
             for r, c in zip(reference, candidate, strict=True))
    return agree / positions, kl / positions
