"""Stop strings spanning pieces, and the held-back text that might start one."""

from worker.engine.sampling_params import SamplingParams
from worker.engine.sequence import Sequence
from worker.engine.stopping import finish_reason_check, text_emit


def feed(seq: Sequence, pieces: list[str]) -> tuple[list[str], str | None]:
    """Append one fake token per piece; returns the streamed pieces and the finish reason."""
    streamed = []
    for piece in pieces:
        seq.token_ids.append(7)
        before = len(seq.text)
        seq.text += piece
        reason = finish_reason_check(seq, 7, text_before=before, eos_token_ids={2},
                                     max_model_len=100, tokenizer=None)
        streamed.append(text_emit(seq, finished=reason is not None))
        if reason:
            return streamed, reason
    return streamed, None


def test_stop_string_split_across_pieces_is_never_streamed():
    seq = Sequence("s", [1], SamplingParams(max_tokens=10, stop=["END"]))
    streamed, reason = feed(seq, ["Hello E", "N", "D tail"])
    assert reason == "stop"
    assert "".join(streamed) == "Hello " == seq.text
    assert all("E" not in p for p in streamed)


def test_held_back_text_comes_out_when_no_stop_string_forms():
    seq = Sequence("s", [1], SamplingParams(max_tokens=3, stop=["END"]))
    streamed, reason = feed(seq, ["ab", "cE", "Nd"])
    assert reason == "length"
    assert streamed == ["", "ab", "cENd"]


def test_max_tokens_and_eos():
    seq = Sequence("s", [1], SamplingParams(max_tokens=2))
    assert feed(seq, ["a", "b", "c"])[1] == "length" and seq.num_output_tokens == 2
    seq = Sequence("s", [1], SamplingParams(max_tokens=5))
    seq.token_ids.append(2)
    assert finish_reason_check(seq, 2, text_before=0, eos_token_ids={2}, max_model_len=100,
                               tokenizer=None) == "stop"
    ignoring = Sequence("s", [1], SamplingParams(max_tokens=5, ignore_eos=True))
    ignoring.token_ids.append(2)
    assert finish_reason_check(ignoring, 2, text_before=0, eos_token_ids={2},
                               max_model_len=100, tokenizer=None) is None
