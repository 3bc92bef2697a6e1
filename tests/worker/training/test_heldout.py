"""The held-out documents: chosen from the validation split, none of them also in training."""

import json

import pytest

from worker.training.corpus import BOS, EOS, JARGON_PATH
from worker.training.heldout import HELDOUT_PATH, heldout_build, plain_text, text_fit


class Words:
    """A stand-in tokenizer: one token per word."""

    class Encoding:
        def __init__(self, ids):
            self.ids = ids

    def encode(self, text, add_special_tokens=False):
        return self.Encoding(text.split())


def test_only_plain_validation_documents_without_a_twin_in_training_are_kept():
    documents = [BOS + "Held out and unique." + EOS,  # 0: validation
                 BOS + "Twin text." + EOS,            # 1: training
                 BOS + "<|user|>\nchat<|end|>\n",     # 2: training (a chat turn)
                 BOS + "Twin text." + EOS,            # 3: validation, but also in training
                 BOS + "Another unique one." + EOS]   # 4: training
    found = heldout_build(documents=documents, tokenizer=Words(), count=5, val_every=3)
    assert found == ["Held out and unique."]


def test_long_documents_are_cut_at_a_sentence_end():
    text = " ".join(["One two three."] * 200)
    cut = text_fit(text, tokenizer=Words(), tokens_max=32)
    assert cut.endswith(".") and len(cut.split()) + 2 <= 32
    assert plain_text(BOS + "<|user|>\nhi<|end|>\n") is None


@pytest.mark.skipif(not JARGON_PATH.exists(), reason="needs Debian's jargon-text")
def test_the_committed_file_is_validation_text_never_seen_in_training():
    from worker.training.corpus import corpus_documents
    from worker.training.heldout import SEED, VAL_EVERY

    documents = corpus_documents(seed=SEED)
    train = {d for i, d in enumerate(documents) if i % VAL_EVERY}
    validation_texts = [plain_text(d) or "" for i, d in enumerate(documents)
                        if i % VAL_EVERY == 0]
    for line in HELDOUT_PATH.read_text().splitlines():
        text = json.loads(line)["text"]
        assert any(v.startswith(text) for v in validation_texts)
        assert BOS + text + EOS not in train
