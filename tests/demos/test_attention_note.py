"""The attention-kernels demo's closing sentence, from results built by hand: a measurement below
its floor is explained by both ways a floor can be too pessimistic, not by one assumed cause."""

from demos.runners.attention_kernels import attention_note


def _kernel(seconds: float, predicted: float, intermediate: int) -> dict:
    return {"seconds": seconds, "predicted_seconds": predicted, "predicted_bound": "memory",
            "intermediate_bytes": intermediate, "max_error": 1e-6}


def test_a_time_below_its_floor_names_both_causes() -> None:
    rows = [{"tokens": 1024, "kernels": {
        "naive": _kernel(0.001, 0.002, 8_000_000),
        "tiled": _kernel(0.004, 0.003, 100_000),
        "sdpa": _kernel(0.0005, 0.0004, 50_000),
    }}]
    text = attention_note(rows, device="cpu")
    assert "fell below its floor (at 1,024 tokens)" in text
    assert "peak rates" in text and "caches" in text


def test_no_floor_sentence_when_every_time_is_above_it() -> None:
    rows = [{"tokens": 512, "kernels": {
        "naive": _kernel(0.003, 0.002, 2_000_000),
        "tiled": _kernel(0.004, 0.003, 100_000),
        "sdpa": _kernel(0.0005, 0.0004, 50_000),
    }}]
    assert "below its floor" not in attention_note(rows, device="cpu")


def test_the_worst_error_of_every_length_is_reported_and_a_disagreement_named() -> None:
    agreeing = {"naive": _kernel(0.003, 0.002, 2_000_000), "tiled": _kernel(0.004, 0.003, 1),
                "sdpa": _kernel(0.0005, 0.0004, 1)}
    off = {**agreeing, "tiled": {**agreeing["tiled"], "max_error": 0.5}}
    rows = [{"tokens": 128, "kernels": off}, {"tokens": 256, "kernels": agreeing}]
    text = attention_note(rows, device="cpu")
    # The bad length is the first, not the last: the note still sees it.
    assert "disagree" in text and "0.5" in text and "agree to within" not in text
