"""Scoring a model against a reference on held-out text (worker/evaluation.py)."""

import json
import math
from pathlib import Path

import pytest
import torch

from worker.evaluation import (
    HELDOUT_PATH,
    Document,
    QualityTally,
    documents_batch,
    documents_encode,
    heldout_texts,
    quality_compare,
)

MODEL = Path(__file__).resolve().parents[2] / "worker" / "models" / "course-lm"


def test_a_uniform_model_scores_log2_of_the_vocabulary_per_token():
    """A uniform model over 4,096 tokens spends 12 bits on every token: a document of n
    predicted tokens and b bytes scores 12n ÷ b bits per byte."""
    tally = QualityTally()
    logits = torch.zeros(10, 4096)
    tally.add(reference=logits, candidate=logits, targets=torch.arange(10), text_bytes=40)
    result = tally.result()
    assert result["bpb"] == pytest.approx(12 * 10 / 40)
    assert result["kl_mean"] == 0 and result["agreement"] == 1 and result["positions"] == 10


def test_kl_divergence_worked_by_hand():
    """p = (0.5, 0.5), q = (0.9, 0.1): 0.5 ln(0.5 ÷ 0.9) + 0.5 ln(0.5 ÷ 0.1) = 0.5108256 nats;
    the argmax of p is index 0 (first on a tie), as is q's: they agree."""
    tally = QualityTally()
    reference = torch.log(torch.tensor([[0.5, 0.5]]))
    candidate = torch.log(torch.tensor([[0.9, 0.1]]))
    tally.add(reference=reference, candidate=candidate, targets=torch.tensor([1]),
              text_bytes=1)
    result = tally.result()
    assert result["kl_mean"] == pytest.approx(0.5108256, rel=1e-6)
    assert result["agreement"] == 1
    assert result["bpb"] == pytest.approx(-math.log2(0.1), rel=1e-6)


def test_the_heldout_file_parses_and_holds_enough_documents():
    lines = HELDOUT_PATH.read_text().splitlines()
    texts = [json.loads(line)["text"] for line in lines]
    assert len(texts) >= 32 and all(texts) and "<|" not in "".join(texts)
    assert heldout_texts(limit=4) == texts[:4]


def test_documents_are_batched_by_whole_blocks():
    docs = [Document(token_ids=list(range(n)), text_bytes=n) for n in (20, 40, 100, 10)]
    batches = documents_batch(docs, tokens=96)
    # 20 and 40 tokens take 32 + 48 blocks' worth of 16; 100 alone; then 10.
    assert [[len(d.token_ids) for d in b] for b in batches] == [[20, 40], [100], [10]]


def test_comparing_a_model_with_itself_and_batching_changes_nothing():
    from worker.cpu_threads import one_thread
    from worker.demo_engine import engine_build

    with one_thread():
        _compare_with_itself(engine_build)


def _compare_with_itself(engine_build) -> None:  # noqa: ANN001

    engine = engine_build(str(MODEL))
    documents = documents_encode(engine.tokenizer, heldout_texts(limit=4))
    assert all(d.token_ids[0] == engine.tokenizer.bos_token_id
               and d.token_ids[-1] == engine.tokenizer.eos_token_id for d in documents)
    one = quality_compare(reference=engine.runner.model,
                          candidates={"same": engine.runner.model}, config=engine.config,
                          documents=documents, batch_tokens=16)
    many = quality_compare(reference=engine.runner.model,
                           candidates={"same": engine.runner.model}, config=engine.config,
                           documents=documents)
    assert one["same"]["kl_mean"] == pytest.approx(0, abs=1e-9)
    assert one["same"]["agreement"] == 1
    assert one["same"]["positions"] == sum(len(d.token_ids) - 1 for d in documents)
    # The shipped model's own loss on held-out prose: between 1 and 4 bits per byte.
    assert 1 < one["reference"]["bpb"] < 4
    assert many["reference"]["bpb"] == pytest.approx(one["reference"]["bpb"], rel=1e-5)
