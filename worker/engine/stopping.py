"""When a request stops, and how much of its text may be streamed yet.

Stop conditions, checked after each new token: an EOS id (unless `ignore_eos`), one of the
request's stop ids, a stop string in the text (cut off, never shown), max_tokens, or the
sequence reaching max_model_len. While stop strings are set, the last characters that could
begin one are held back from the stream until the next token decides.
"""

from worker.engine.detokenizer import text_flush
from worker.engine.sequence import Sequence


def finish_reason_check(
    seq: Sequence,
    token: int,
    *,
    text_before: int,
    eos_token_ids: set[int],
    max_model_len: int,
    tokenizer,  # noqa: ANN001 (a transformers tokenizer or None)
) -> str | None:
    """"stop", "length" or None for the token just appended; cuts a matched stop string.

    `text_before` is the text's length before this token's piece was added.
    """
    params = seq.params
    reason = None
    if token in eos_token_ids and not params.ignore_eos:
        reason = "stop"
    elif token in params.stop_token_ids:
        reason = "stop"
    elif params.stop and stop_string_cut(seq, text_before):
        return "stop"
    elif seq.num_output_tokens >= params.max_tokens or seq.num_tokens >= max_model_len:
        reason = "length"
    if reason and tokenizer is not None:
        # Keep the tail even if it ends mid-character; it may complete a stop string too, and
        # then the request stopped on it, whatever else ended it.
        seq.text += text_flush(tokenizer, seq)
        if params.stop and stop_string_cut(seq, text_before):
            reason = "stop"
    return reason


def stop_string_cut(seq: Sequence, text_before: int) -> bool:
    """Cut the text at the first stop string that the newest piece completed."""
    longest = max(len(s) for s in seq.params.stop)
    search_from = max(0, text_before - longest + 1)
    hits = [i for s in seq.params.stop if (i := seq.text.find(s, search_from)) != -1]
    if not hits:
        return False
    seq.text = seq.text[: min(hits)]
    seq.emitted_text_len = min(seq.emitted_text_len, len(seq.text))
    return True


def text_emit(seq: Sequence, *, finished: bool) -> str:
    """The text that may be streamed now, advancing the sequence's emitted cursor."""
    stop = seq.params.stop
    hold = 0 if finished or not stop else max(len(s) for s in stop) - 1
    emit_to = max(seq.emitted_text_len, len(seq.text) - hold)
    piece = seq.text[seq.emitted_text_len : emit_to]
    seq.emitted_text_len = emit_to
    return piece
