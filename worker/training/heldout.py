"""Held-out evaluation text for the shipped model: documents of the validation split that the
model never trained on, for scoring a changed model (quantized, a new version) against the
shipped one (worker/evaluation.py).

    python -m worker.training.heldout   # rewrites worker/models/heldout.jsonl

The validation split is every 50th document of the seeded corpus, exactly as
`train.token_streams` holds it out. The corpus repeats the course's explanations, so a
validation document can have an identical twin in the training split; those are dropped, and so
are chat turns (their role markers are special tokens, not text). What is left is plain prose: the
Jargon File's paragraphs and computed facts written as sentences. Each is cut at a sentence end
to fit `TOKENS_MAX` tokens with its BOS and EOS. Needs Debian's `jargon-text` package, like the
corpus; the committed file is what the demos read. No torch.
"""

import json
from pathlib import Path

from worker.training.corpus import BOS, EOS, corpus_documents

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
HELDOUT_PATH = MODELS_DIR / "heldout.jsonl"
TOKENIZER_PATH = MODELS_DIR / "course-lm" / "tokenizer.json"
SEED = 0  # the corpus seed of train.py
VAL_EVERY = 50  # train.token_streams' default
TOKENS_MAX = 256  # BOS and EOS included
DOCUMENTS = 32


def plain_text(document: str) -> str | None:
    """The text of a plain document (BOS + text + EOS), or None for a chat turn."""
    if not (document.startswith(BOS) and document.endswith(EOS)):
        return None
    text = document[len(BOS):-len(EOS)]
    return None if "<|" in text else text


def text_fit(text: str, *, tokenizer, tokens_max: int = TOKENS_MAX) -> str:  # noqa: ANN001
    """`text`, or its longest prefix ending at a sentence end (". ") whose tokens plus BOS and
    EOS number at most `tokens_max`; "" when no such prefix exists."""
    def fits(candidate: str) -> bool:
        return len(tokenizer.encode(candidate, add_special_tokens=False).ids) + 2 <= tokens_max

    if fits(text):
        return text
    ends = [i + 1 for i in range(len(text) - 1) if text[i] == "." and text[i + 1] == " "]
    for end in reversed(ends):
        if fits(text[:end]):
            return text[:end]
    return ""


def heldout_build(*, documents: list[str], tokenizer, count: int = DOCUMENTS,  # noqa: ANN001
                  val_every: int = VAL_EVERY) -> list[str]:
    """The first `count` plain validation documents with no identical twin in training, each
    cut to fit TOKENS_MAX tokens (texts, without BOS and EOS)."""
    train = {d for i, d in enumerate(documents) if i % val_every}
    found = []
    for index in range(0, len(documents), val_every):
        document = documents[index]
        text = plain_text(document)
        if text is None or document in train:
            continue
        text = text_fit(text, tokenizer=tokenizer)
        if text:
            found.append(text)
        if len(found) == count:
            break
    return found


def heldout_write(*, path: Path = HELDOUT_PATH) -> list[str]:
    """Rebuild the corpus, pick the held-out documents and write them, one JSON object a line."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    texts = heldout_build(documents=corpus_documents(seed=SEED), tokenizer=tokenizer)
    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts))
    return texts


if __name__ == "__main__":
    written = heldout_write()
    print(f"{len(written)} documents, {sum(len(t.encode()) for t in written):,} bytes, "
          f"written to {HELDOUT_PATH}")
