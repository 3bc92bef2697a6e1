"""The proofreader's rules on sentences worked by hand: each rule catches its mistake and lets
the right sentence through (problems/proofread.py)."""

import pytest

from problems.proofread import (
    FormField,
    form_fields,
    problem_html,
    random_grid,
    refusal_unannounced,
    small_grid,
    text_flags,
    visible_text,
)


def rules(text: str) -> list[str]:
    return [rule for rule, _ in text_flags(text)]


@pytest.mark.parametrize("text, rule", [
    ("The step takes nan ms.", "not a number"),
    ("The queue waits inf s.", "infinite"),
    ("The wait is ∞.", "infinite"),
    ("The wait grows to infinity.", "infinite"),
    ("The model is None today.", "None printed"),
    ("It reads the experts () each step.", "empty brackets"),
    ("It stalls them.. Smaller chunks help.", "doubled full stop"),
    ("The fleet needs 2.5 GPUs for it.", "fractional count of whole things"),
    ("At 0 requests the pool is idle.", "zero count with a number (say 'no …')"),
    ("Deploy 1 replicas first.", "one with a plural noun"),
    # Problem 8 at a 100,000-token prefix against 10 GB of room (fresh read of page 04).
    ("With 10 GB left, a replica keeps 0 prefixes.", "zero count with a number (say 'no …')"),
    ("A prompt of 1 tokens.", "one with a plural noun"),
    ("That is 1 times as long.", "one with a plural noun"),
    ("FP8 costs 0.816× less per token.", "ratio under one with a comparative"),
    ("It is 1× faster.", "ratio of one with a comparative"),
    ("The cost falls from 2.1 $ to 3.4 $ a million tokens.",
     "direction verb against the sign of the change"),
    ("TTFT rises from 90 ms to 40 ms.", "direction verb against the sign of the change"),
])
def test_each_rule_catches_its_mistake(text, rule):
    assert rule in rules(text)


@pytest.mark.parametrize("text", [
    "None of the streams wait.",
    "The fleet needs 3 GPUs; 2.5 requests per second arrive, 0.66 requests on average in flight.",
    "No replicas are idle; 1 replica serves the canary.",
    "FP8 costs 1.23× more per token; INT4 is 4.66× less.",
    "TTFT falls from 90 ms to 40 ms and the cost rises from 2.1 to 3.4.",
    "An ellipsis… or three dots... is fine.",
    "Each GPU holds 1 token of context per slot; 11 tokens; 0.1 tokens.",
    # Code a page quotes: a call's empty parentheses follow its name (problems 11, 13, 14).
    "Call torch.cuda.profiler.start() first; an .item() syncs; LLM.int8() keeps outliers.",
    # A formula for a count (γ + 1 of them) and AMD's interconnect, a name.
    "Verifying γ + 1 positions per sequence costs up to γ + 1 steps.",
    "The MI300X's Infinity Fabric (7 links × 128 GB/s) carries 448 GB/s each way.",
    "64 MiB is small enough for the MI300X's 256 MiB Infinity Cache.",
])
def test_right_sentences_pass(text):
    assert rules(text) == []


def test_visible_text_leaves_source_listings_out():
    """Problem 5 shows its demo's tiled kernel in a <pre> block; its float("-inf") was flagged
    as an infinite figure in the prose."""
    listing = '<p>The kernel:</p><pre class="code-listing"><code>m = float("-inf")</code></pre>'
    assert visible_text(listing) == "The kernel:"


def test_visible_text_joins_inline_elements():
    assert visible_text("<p>give each event an <code>id</code>, then</p>") == (
        "give each event an id, then")


PAGE = """
<section class="problem" id="problem-1"><h2>One</h2>
 <form class="calculator-form" method="get">
  <select name="p1-model"><option value="a">A</option><option value="b" selected>B</option></select>
  <input type="number" name="p1-batch" value="4" min="1" max="64" step="1">
  <input type="number" name="p1-mfu" value="0.5" min="0.01" max="1" step="any">
  <p class="field-error" id="x"></p>
 </form>
</section>
<section class="problem" id="problem-2"><h2>Two</h2></section>
<section id="sources">Sources</section>
"""


def test_the_grid_is_read_off_the_problem_form():
    fields = form_fields(problem_html(PAGE, 1))
    assert [(f.name, f.kind, f.default) for f in fields] == [
        ("p1-model", "select", "b"), ("p1-batch", "number", "4"), ("p1-mfu", "number", "0.5")]
    grid = small_grid(fields)
    queries = [q for q, _ in grid]
    assert {"p1-model": "a"} in queries
    assert {"p1-batch": "1"} in queries and {"p1-batch": "64"} in queries
    # 0 is below the batch's minimum; the MFU takes 1 and its minimum.
    assert {"p1-batch": "0"} not in queries and {"p1-mfu": "1.0"} in queries
    # One refused value per calculator, marked as meant to be refused.
    assert [q for q, refused in grid if refused] == [{"p1-batch": "641"}]
    assert problem_html(PAGE, 2).strip().startswith('<section class="problem" id="problem-2"')
    assert "Sources" not in problem_html(PAGE, 2)


def test_random_draws_stay_in_bounds_and_are_seeded():
    fields = [FormField("p-n", "number", "4", minimum=1, maximum=1_000_000, whole=True),
              FormField("p-x", "number", "0.5", minimum=0.01, maximum=1.0)]
    first = random_grid(fields, draws=50, seed=7)
    assert first == random_grid(fields, draws=50, seed=7)
    for query in first:
        assert 1 <= int(query["p-n"]) <= 1_000_000 and 0.01 <= float(query["p-x"]) <= 1.0


def test_refusal_must_be_announced():
    shown = '<p class="field-error" id="e">Enter at least 1 token.</p>'
    assert refusal_unannounced(shown)
    assert not refusal_unannounced('<div class="refused-inputs"></div>' + shown)
    assert not refusal_unannounced('<p class="field-error" id="e"></p>')
