"""Incremental detokenization: the new text each token adds, even mid-character.

A byte-level BPE token can hold part of a UTF-8 character; decoding it alone gives U+FFFD.
So each step decodes a short window of recent tokens twice (with and without the new ones)
and emits the difference only once it no longer ends in an incomplete character. The window
starts a few tokens back because some tokenizers drop a leading space when decoding a slice.
"""

from worker.engine.sequence import Sequence

_CONTEXT_TOKENS = 5


def _decode(tokenizer, ids: list[int]) -> str:  # noqa: ANN001
    """tokenizer.decode(ids, skip_special_tokens=True), straight from the Rust tokenizer when
    transformers would add nothing to it (no space clean-up): its Python wrapper costs more
    than the decoding, twice per token."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and getattr(tokenizer, "clean_up_tokenization_spaces", True) is False:
        return backend.decode(ids, skip_special_tokens=True)
    return tokenizer.decode(ids, skip_special_tokens=True)


def detokenizer_init(seq: Sequence) -> None:
    """Point the window at the end of the prompt, a few prompt tokens back for context."""
    seq.detok_read_offset = seq.num_prompt_tokens
    seq.detok_prefix_offset = max(0, seq.num_prompt_tokens - _CONTEXT_TOKENS)


def text_piece_next(tokenizer, seq: Sequence) -> str:  # noqa: ANN001 (any HF tokenizer)
    """Text added by the tokens past the read offset ('' while a character is incomplete)."""
    ids = seq.token_ids
    prefix = _decode(tokenizer, ids[seq.detok_prefix_offset : seq.detok_read_offset])
    full = _decode(tokenizer, ids[seq.detok_prefix_offset :])
    if len(full) > len(prefix) and not full.endswith("\ufffd"):
        seq.detok_prefix_offset = seq.detok_read_offset
        seq.detok_read_offset = len(ids)
        return full[len(prefix) :]
    return ""


def text_flush(tokenizer, seq: Sequence) -> str:  # noqa: ANN001
    """At the end: whatever the last tokens decode to, complete character or not."""
    ids = seq.token_ids
    if seq.detok_read_offset >= len(ids):
        return ""
    prefix = _decode(tokenizer, ids[seq.detok_prefix_offset : seq.detok_read_offset])
    full = _decode(tokenizer, ids[seq.detok_prefix_offset :])
    seq.detok_prefix_offset = seq.detok_read_offset = len(ids)
    return full[len(prefix) :]
