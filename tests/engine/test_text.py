"""Text in and out: the chat template, streamed pieces, multi-byte characters, stop strings."""

import pytest

from worker.engine import Engine, SamplingParams
from worker.engine.detokenizer import detokenizer_init, text_flush, text_piece_next
from worker.engine.sequence import Sequence


@pytest.fixture(scope="module")
def engine(tiny_text_model) -> Engine:
    return Engine.from_pretrained(tiny_text_model, num_kv_blocks=32)


def stream(engine: Engine, prompt, params: SamplingParams, **kw) -> tuple[str, list[dict]]:
    rid = engine.add_request(prompt, params, **kw)
    events = []
    while engine.has_unfinished():
        events.extend(e for e in engine.step() if e.get("request_id") == rid)
    return "".join(e["text"] for e in events if e["type"] == "token"), events


def test_chat_prompt_uses_the_template(engine):
    expected = "<|user|>What is a KV cache?\n<|assistant|>"
    assert engine.decode(engine.encode_prompt("What is a KV cache?", chat=True)) == expected
    assert engine.encode_prompt("What is a KV cache?", chat=True) == \
        engine.tokenizer.encode(expected, add_special_tokens=False)


def test_pieces_rebuild_multibyte_text_exactly(engine):
    text = "Caf\u00e9 \u6f22\u5b57 \U0001f680 na\u00efve"
    token_ids = engine.tokenizer.encode(text, add_special_tokens=False)
    # Byte-level BPE splits some characters across tokens: at least one piece is incomplete.
    assert any("\ufffd" in engine.decode([t]) for t in token_ids)
    seq = Sequence("s", [1], SamplingParams())
    detokenizer_init(seq)
    pieces = []
    for t in token_ids:
        seq.token_ids.append(t)
        pieces.append(text_piece_next(engine.tokenizer, seq))
    pieces.append(text_flush(engine.tokenizer, seq))
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_streamed_pieces_equal_the_final_text(engine):
    params = SamplingParams(temperature=1.0, seed=3, max_tokens=30, ignore_eos=True)
    streamed, events = stream(engine, "The KV cache", params)
    out = engine.generate(["The KV cache"], params)[0]
    assert streamed == out.text
    assert out.text == engine.decode(out.token_ids)


def test_stop_string_ends_output_and_is_left_out(engine):
    params = SamplingParams(temperature=1.0, seed=3, max_tokens=30, ignore_eos=True)
    free_text = engine.generate(["The KV cache"], params)[0].text
    assert len(free_text) > 8
    stop = free_text[5:8]
    cut = free_text[: free_text.index(stop)]
    stopped = SamplingParams(temperature=1.0, seed=3, max_tokens=30, ignore_eos=True,
                             stop=[stop, "never-appears"])
    streamed, events = stream(engine, "The KV cache", stopped)
    assert streamed == cut
    assert events[-1]["finish_reason"] == "stop"
    out = engine.generate(["The KV cache"], stopped)[0]
    assert out.text == cut and out.finish_reason == "stop"
