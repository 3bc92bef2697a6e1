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


class ByteTokenizer:
    """Each id is a few UTF-8 bytes; decoding joins them, as a byte-level BPE does."""

    table = {1: b"", 10: b"a", 20: b"b\xc3"}  # 20: a 'b' and the first byte of an 'é'

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return b"".join(self.table[i] for i in ids).decode("utf-8", errors="replace")


def test_a_stop_string_completed_only_by_the_final_flush_reports_stop():
    """Stop "ab", max_tokens 2: token 10 gives "a"; token 20 gives "b" plus half a character,
    so its piece is held back ("ab\ufffd" ends mid-character) and only the final flush at
    max_tokens adds it. The flush completes "ab": the request stopped on its stop string, and
    the reason was reported as "length" before."""
    from worker.engine.detokenizer import detokenizer_init, text_piece_next

    tokenizer = ByteTokenizer()
    seq = Sequence("s", [1], SamplingParams(max_tokens=2, stop=["ab"]))
    detokenizer_init(seq)
    reasons = []
    for token in (10, 20):
        seq.token_ids.append(token)
        before = len(seq.text)
        seq.text += text_piece_next(tokenizer, seq)
        reasons.append(finish_reason_check(seq, token, text_before=before, eos_token_ids={2},
                                           max_model_len=100, tokenizer=tokenizer))
    assert reasons == [None, "stop"]
    assert seq.text == ""
