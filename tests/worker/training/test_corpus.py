"""The demo model's corpus builder: computed facts, the Jargon File reader, determinism.

Bare pytest. The real Jargon File (Debian's jargon-text) is not needed: a small gzip stands in.
"""

import gzip
import random
import re

import pytest

from worker.training.corpus import (
    BOS,
    EOS,
    FACTS,
    MODELS,
    article,
    chat_render,
    corpus_documents,
    fact_blocks,
    fact_kv_per_token,
    jargon_paragraphs,
    number_words,
)

PROSE = (
    "   :cache: n.\n\n"
    "   A small fast store placed in front of a larger slow one. Hackers speak of {cache} hits\n"
    "   and misses with \u201cgreat\u201d feeling \u2014 a hit saves the long trip to the slow\n"
    "   store,"
    " and a miss costs that trip plus the time spent looking in the cache first.\n\n"
    "   short line\n"
)


@pytest.fixture
def jargon_file(tmp_path):
    path = tmp_path / "jargon.txt.gz"
    path.write_bytes(gzip.compress(PROSE.encode()))
    return path


def test_jargon_paragraphs_reflow_prose_and_drop_headwords(jargon_file):
    paragraphs = jargon_paragraphs(path=jargon_file)
    assert len(paragraphs) == 1
    assert paragraphs[0].startswith("A small fast store placed in front")
    # Curly quotes become straight ones; the dash keeps spaces around it (training used this).
    assert '"great" feeling  -  a hit' in paragraphs[0]
    assert "{" not in paragraphs[0] and "\n" not in paragraphs[0]


def test_missing_jargon_file_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="jargon-text"):
        jargon_paragraphs(path=tmp_path / "absent.gz")


def test_corpus_is_the_same_for_the_same_seed(jargon_file):
    first = corpus_documents(seed=0, facts=50, jargon_path=jargon_file)
    again = corpus_documents(seed=0, facts=50, jargon_path=jargon_file)
    other = corpus_documents(seed=1, facts=50, jargon_path=jargon_file)
    assert first == again
    assert first != other
    assert all(doc.startswith(BOS) and doc.endswith((EOS, EOS + "\n")) for doc in first)


def test_kv_fact_uses_the_kv_formula():
    rng = random.Random(5)
    _, answer = fact_kv_per_token(rng)
    model = next(m for m in MODELS if answer.startswith(m.name + " has"))
    layers, kv_heads, head_dim, width = map(int, re.search(
        r"2 x (\d+) x (\d+) x (\d+) x (\d+) bytes", answer).groups())
    assert (layers, kv_heads, head_dim) == (model.layers, model.kv_heads, model.head_dim)
    assert f"{2 * layers * kv_heads * head_dim * width:,} bytes" in answer


def test_block_fact_rounds_up():
    _, answer = fact_blocks(random.Random(2))
    tokens, block_size, blocks, empty = map(
        lambda s: int(s.replace(",", "")),
        re.search(r"It needs ([\d,]+) divided by (\d+), rounded up: ([\d,]+) blocks\. "
                  r"The last block has (\d+) empty", answer).groups())
    assert blocks == -(-tokens // block_size)
    assert empty == blocks * block_size - tokens < block_size


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.__name__)
def test_every_fact_is_a_question_and_a_sentence(fact):
    question, answer = fact(random.Random(0))
    assert question.endswith("?")
    assert answer.endswith(".")
    assert " a 8" not in question + answer and " a H" not in question + answer


@pytest.mark.parametrize(("value", "words"), [
    (8030.0, "8,030"), (15.24, "15.2"), (4.0, "4"), (0.543, "0.54"), (131072, "131,072"),
])
def test_number_words(value, words):
    assert number_words(value) == words


@pytest.mark.parametrize(("word", "expected"), [
    ("H100", "an"), ("8,000", "an"), ("L4", "an"), ("A100", "an"), ("1,000", "a"), ("GPU", "a"),
])
def test_article(word, expected):
    assert article(word) == expected


def test_chat_render_ends_each_turn_and_opens_the_reply():
    text = chat_render(messages=[{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    assert text == "<|begin|><|user|>\nHi<|end|>\n<|assistant|>\n"
