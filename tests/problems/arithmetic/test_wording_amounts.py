"""The phrasing helpers page 01's fresh read added (bytes and parameters in the unit they read
best in) and the share that rounded up to 100% (review F5)."""

from problems.arithmetic.catalog import model_get
from problems.arithmetic.memory import window_advice
from problems.arithmetic.wording import bytes_phrase, params_phrase, share_phrase


def test_a_share_below_one_never_reads_100_percent_at_two_digits() -> None:
    """1.343 s of decode ÷ (1.343 + 0.0045) s = 99.67%: two digits would round it to "100%";
    one more digit says "99.7%", which is true. 97.9% keeps two digits: "98%"."""
    assert share_phrase(0.9967, digits=2) == "99.7%"
    assert share_phrase(0.979, digits=2) == "98%"
    assert share_phrase(0.99995) == "over 99.9%"


def test_bytes_read_in_the_unit_that_fits() -> None:
    """course-lm's 5.4×10⁶ parameters × 2 B = 10.8 MB, not "0.011 GB"; 100 × 1,150 × 131,072 B
    × 10 = 151 GB, not "0.15 TB"; DeepSeek-V3's 1.34×10¹² B is "1.3 TB", not "1,300 GB"; the
    default request's 1.7×10⁸ B of KV stays "0.17 GB", as COURSE.md quotes it."""
    assert bytes_phrase(5.4e6 * 2) == "11 MB"
    assert bytes_phrase(100 * 1150 * 131072 * 10) == "150 GB"
    assert bytes_phrase(1.34e12) == "1.3 TB"
    assert bytes_phrase(170262528) == "0.17 GB"
    assert bytes_phrase(0) == "0 B"


def test_parameters_in_millions_below_a_billion() -> None:
    assert params_phrase(8.03e9) == "8.03 billion"
    assert params_phrase(5.4e6) == "5.4 million"


def test_window_advice_names_lengths_that_fit() -> None:
    """course-lm's 1,024-token window with a 1,000-token prompt and a 300-token output: 276
    too many; an output of at most 24 or a prompt of at most 724 fits. A prompt longer than the
    window leaves only the shared total to say."""
    lm = model_get("course-lm")
    assert window_advice(model=lm, first=1000, second=300, first_name="prompt",
                         second_name="output") == (
        "276 tokens too many; with this prompt, an output of at most 24 tokens fits; "
        "with this output, a prompt of at most 724 tokens fits")
    assert window_advice(model=lm, first=700, second=300, first_name="prompt",
                         second_name="output") == ""
    assert "together may be at most 1,024 tokens" in window_advice(
        model=lm, first=2000, second=2000, first_name="prompt", second_name="output")
