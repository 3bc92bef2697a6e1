"""The metrics runner: a Poisson load on the shared engine, a dashboard tick by tick, a summary
whose measured figures and predictions are the run's own, and the engine left empty."""

import pytest

from demos.runners import RunCancelled
from demos.runners.metrics import (
    CUT_MARGIN_S,
    PARAMS,
    arrivals_draw,
    gauges_time_average,
    metrics_run,
    prompts_build,
)
from demos.schema import ParamError
from problems.arithmetic.serving_metrics import metrics_prediction
from tests.demos.runners.conftest import engine_idle

SMALL = {**PARAMS.defaults(), "rate": 6.0, "duration_s": 1.0, "prompt_tokens": 40,
         "output_tokens": 4, "prefix_share": 1.0, "prefix_tokens": 32}


def test_arrivals_are_poisson_and_seeded() -> None:
    times = arrivals_draw(rate=50.0, duration_s=20.0, seed=3)
    assert times == arrivals_draw(rate=50.0, duration_s=20.0, seed=3)
    assert all(0 <= a < b < 20 for a, b in zip(times, times[1:], strict=False))
    # About rate × duration = 1,000 arrivals (σ ≈ 32): well inside ± 15%.
    assert 850 < len(times) < 1150


def test_even_the_smallest_load_sends_a_request() -> None:
    """Review: at 0.5 requests/s for 1 s most plain Poisson draws are empty, and a run with
    no request has nothing to show (and the note called it a worker that could not keep up)."""
    for seed in range(200):
        times = arrivals_draw(rate=0.5, duration_s=1.0, seed=seed)
        assert times and all(0 <= t < 1.0 for t in times)
    assert PARAMS.parse({"rate": 0.5, "duration_s": 1.0}).work_tokens > 0


def test_the_queue_is_time_averaged_by_hand() -> None:
    # 2 requests for 1 s, 4 for 0.5 s, then 0 until the end at 2 s: (2 + 2 + 0) ÷ 2 = 2.
    assert gauges_time_average([(0.0, 2), (1.0, 4), (1.5, 0)], end=2.0) == pytest.approx(2.0)
    assert gauges_time_average([], end=2.0) == 0.0


def test_prompts_share_one_prefix_at_most_the_prompt_less_one() -> None:
    prompts, shared = prompts_build(count=40, prompt_tokens=10, prefix_tokens=30, share=0.5,
                                    seed=1)
    assert all(len(p) == 10 for p in prompts) and 0 < sum(shared) < 40
    heads = {tuple(p[:9]) for p, s in zip(prompts, shared, strict=True) if s}
    assert len(heads) == 1  # the prefix was cut to 9 tokens, and every shared prompt has it


def test_prediction_worked_by_hand() -> None:
    # 6 requests/s × 24 tokens = 144 tokens/s; 6 × 0.5 s = 3 in the engine; half share a
    # 40-token prefix, of which two 16-token blocks are cacheable: 0.5 × 32 ÷ 48 = 1/3.
    p = metrics_prediction(rate=6, output_tokens=24, prompt_tokens=48, prefix_share=0.5,
                           prefix_tokens=40, block_size=16, mean_e2e_s=0.5)
    assert p == pytest.approx({"tokens_per_s": 144, "in_system": 3, "hit_rate": 1 / 3})


def test_the_schema_refuses_bad_values_naming_the_field() -> None:
    with pytest.raises(ParamError) as error:
        PARAMS.parse({"rate": 500})
    assert error.value.field == "rate"


def test_a_small_load_runs_to_its_summary(serving, client, recorder) -> None:
    from demos.runners.metrics import _metrics_lines

    before = _scraped(_metrics_lines())  # this worker's registry before the run
    outcome = metrics_run(client=client, machine=serving.machine, params=SMALL,
                          ctx=recorder.context())
    types = recorder.types()
    assert types[0] == "started" and set(types[1:]) <= {"tick"}
    s = outcome.summary
    assert outcome.state == "finished"
    assert s["finished"] == s["requests"] == recorder.events[0][2]["requests"] > 0
    assert s["latency"]["ttft"]["p50"] <= s["latency"]["e2e"]["p99"]
    # Every prompt starts with the same 32 tokens, two whole blocks: every request after the
    # first can find them, none can find more.
    assert 0 <= s["measured"]["hit_rate"] <= s["predicted"]["hit_rate"] == pytest.approx(0.8)
    assert s["predicted"]["tokens_per_s"] == pytest.approx(s["offered_rate"] * 4)
    # The hourly price the learner set, paid for the run's wall time, shared by its requests.
    price = SMALL["price_per_hour"]
    assert s["cost"]["per_request"] == pytest.approx(price / 3600 * s["wall_s"] / s["finished"])
    assert s["cost"]["per_million_output_tokens"] == pytest.approx(
        price / 3600 * s["wall_s"] / (s["finished"] * 4) * 1e6)
    assert len(s["plots"]) == 5 and s["note"]
    assert "vllm:generation_tokens_total" in s["metrics_text"]
    assert "vllm:request_time_per_output_token_seconds_count" in s["metrics_text"]
    # Each tick carries the worker's /metrics lines as they stood, counting up; the last tick
    # (published while the run is still running, before its summary) counts every request.
    ticks = [data for kind, _, data in recorder.events if kind == "tick"]
    counts = [_scraped(t["metrics_text"]) for t in ticks]
    for name in ("vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count"):
        assert all(a[name] <= b[name] for a, b in zip(counts, counts[1:], strict=False))
        assert counts[-1][name] - before[name] >= s["finished"] * (4 if "tokens" in name else 1)
    assert s["kv_blocks_free"] == s["kv_blocks_total"]
    assert engine_idle(serving)


def _scraped(text: str) -> dict[str, float]:
    return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()}


def test_a_load_past_the_time_limit_is_cut_short_and_summarised(serving, client,
                                                                recorder) -> None:
    """Review: a load the worker cannot keep up with used to fail at the time limit and lose
    its dashboard; it now stops sending before the limit and summarises what finished."""
    ctx = recorder.context(time_limit_s=CUT_MARGIN_S + 0.3)
    outcome = metrics_run(client=client, machine=serving.machine,
                          params={**SMALL, "duration_s": 5.0, "rate": 20.0}, ctx=ctx)
    s = outcome.summary
    assert outcome.state == "finished" and s["cut_short"]["sent"] < s["requests"]
    assert s["finished"] == s["cut_short"]["sent"] - s["cut_short"]["unfinished"]
    assert s["note"].startswith("This load was cut short")
    assert len(s["plots"]) == 5
    assert engine_idle(serving)


def test_a_cancel_stops_the_load_and_frees_the_engine(serving, client, recorder) -> None:
    recorder.cancel_after = ("tick", None, "all", "cancelled by the visitor")
    with pytest.raises(RunCancelled):
        metrics_run(client=client, machine=serving.machine,
                    params={**SMALL, "duration_s": 3.0}, ctx=recorder.context())
    client.close()
    assert engine_idle(serving)


def test_each_plot_has_one_unit_on_its_axis() -> None:
    """Issue 35: tokens/s (~153), requests in the engine (0.66) and a hit rate (31%) shared one
    axis, so the Little's-law bars were invisible. Now each quantity is set against its own
    prediction: 150 of 160 tokens/s → 0.9375, 0.66 of 0.6 requests → 1.1, 31% of 40% → 0.775,
    on one unitless axis, with the values and their units in the table."""
    from demos.runners.metrics import _plots

    tick = {"t": 1.0, "ttft": {"p50": 0.1, "p99": 0.2}, "tpot": {"p50": 0.01, "p99": 0.02},
            "e2e": {"p50": 0.3, "p99": 0.4}, "waiting": 1, "running": 2, "kv_usage": 0.5,
            "hit_rate": 0.31, "tokens_per_s": 150.0}
    plots = _plots([tick, {**tick, "t": 2.0}],
                   predicted={"tokens_per_s": 160.0, "in_system": 0.6, "hit_rate": 0.4},
                   measured={"tokens_per_s": 150.0, "in_system": 0.66, "hit_rate": 0.31})
    titles = [p["figure"]["layout"]["yaxis"]["title"]["text"] for p in plots[1:3]]
    assert titles == ["requests", "%"]
    compare = plots[-1]
    bars = compare["figure"]["data"][0]
    values = bars["x"] if bars.get("orientation") == "h" else bars["y"]
    assert [round(v, 4) for v in values] == [0.9375, 1.1, 0.775]
    rows = compare["table"]["rows"]
    assert rows[0][2:4] == ["150 tokens/s", "160 tokens/s"]
    assert rows[2][2:4] == ["31%", "40%"]
