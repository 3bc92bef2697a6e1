"""A configuration that does not fit says so first, above its working, and by how much
(issue 35: "does not fit" was row 29 of 33 in plain text while the working timed a 405B model
on one H100 as if it ran)."""

import pytest
from django.http import QueryDict

from problems.calculators import calculator_evaluate, calculator_get
from problems.calculators.registry import fit_verdict


def test_405b_on_one_h100_says_does_not_fit_first_with_the_shortfall(client):
    """Llama 3.1 405B in BF16 is some 810 GB of weights; one H100 SXM's engine share is about
    0.9 × 79.6 GiB ≈ 77 GB: hundreds of GB short, some ten times the memory there is."""
    decode = calculator_get("decode")
    state = calculator_evaluate(decode, query=QueryDict(
        "decode-model=llama-3.1-405b&decode-gpu=h100-sxm&decode-dtype=bf16"))
    values = state.result.values
    assert values["fits"] is False
    verdict = state.verdict
    assert verdict["headline"] == "Does not fit."
    short = values["memory_needed_bytes"] - values["memory_usable_bytes"]
    assert short > 700e9
    assert " short, " in verdict["detail"] and "times the memory there is" in verdict["detail"]

    html = client.get("/calculators/decode/?decode-model=llama-3.1-405b&decode-gpu=h100-sxm"
                      "&decode-dtype=bf16").content.decode()
    output = html[html.index('id="calc-decode-output"'):]
    # Said before the first step of the working.
    assert output.index('class="fit-verdict"') < output.index('<table class="steps">')


def test_a_configuration_that_fits_has_no_verdict():
    state = calculator_evaluate(calculator_get("decode"))
    assert state.result.values["fits"] is True and state.verdict is None


@pytest.mark.parametrize(("values", "expected"), [
    ({}, None),
    ({"fits": True}, None),
    ({"fits": False}, "Does not fit."),
    ({"fits_in_memory": False, "fits": False, "memory_needed_bytes": 3e9,
      "memory_usable_bytes": 2e9}, "1 GB short"),
    ({"fits": False, "free_bytes": -5e9}, "5 GB short of memory"),
])
def test_the_verdict_reads_the_fit_values_a_result_carries(values, expected):
    verdict = fit_verdict(values)
    if expected is None:
        assert verdict is None
    else:
        assert expected in verdict["headline"] + " " + verdict["detail"]
