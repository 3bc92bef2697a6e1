"""Problem 20 on page 09, through Django's test client: every section written, the cold start's
figures equal to the arithmetic's and the JSON API's, inputs that change them, the policies
simulator with its measured-against-predicted plot, and no figure typed into the template."""

import re
from pathlib import Path

import pytest

from problems.content import p20
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures
from tests.problems.content.page09 import api_get, calculator_query, page_get

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p20.__file__).with_suffix(".html")


def worked_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 20), 20, "worked"))


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 20)
    for slug, heading in SECTIONS:
        section = section_html(problem, 20, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_figures_equal_the_api(client) -> None:
    """141 GB, a 7.69 min cold start, 17.4% headroom, 5 replicas, $36,500 a month
    (test_coldstart.py works them by hand)."""
    worked = worked_text(client)
    body = api_get(client, "cold-start")
    assert body["extra_replicas"] == 5 and body["cost_headroom"] == 36_500
    assert "In all 7.69 min" in worked
    assert "= 17.4%" in worked
    assert "5 more replicas (20 GPUs) running all the time, $36,500 a month" in worked



def test_the_node_is_called_the_largest_part_as_it_is(client) -> None:
    """At 1 GB/s the node's 4 min already beats the weights' 2.35 min (52% of 7.69 min); at
    8 GB/s it is 240 ÷ 337.6 s = 71.1%. With a 1-minute node and 0.2 GB/s (705 s of weights)
    the node becomes the largest only after loading faster (60 s against 17.6 s)."""
    worked = worked_text(client)
    assert "The node, already the largest part, is now 71.1% of the cold start" in worked
    query = calculator_query(p20.CALCULATOR, p20.PREFIX, node_minutes=1.0, load_gbps=0.2)
    worked = worked_text(client, query)
    assert "The node is now the largest part" in worked
    assert "already the largest part" not in worked

def test_changing_inputs_changes_the_figures(client) -> None:
    query = calculator_query(p20.CALCULATOR, p20.PREFIX, load_gbps=10.0, node_minutes=0.0)
    worked = worked_text(client, query)
    body = api_get(client, "cold-start", load_gbps=10.0, node_minutes=0.0)
    assert body["cold_start_seconds"] == pytest.approx(20 + 14.1107412992 + 60)
    assert "In all 94.1 s" in worked


def test_a_bad_input_is_named_beside_its_field(client) -> None:
    response = client.get("/api/calc/cold-start", {"utilisation": 0})
    assert response.status_code in (400, 422)
    assert "utilisation" in response.content.decode()


def test_the_simulator_compares_every_policy(client) -> None:
    body = api_get(client, "autoscaling-policies")
    rows = {row["policy"]: row for row in body["rows"]}
    assert set(rows) == {"static", "reactive", "queue", "predictive", "warm_pool"}
    # Sized for the peak with its spike, the static fleet never queues and pays the most.
    assert rows["static"]["peak_backlog"] == 0
    assert rows["static"]["gpu_hours"] == max(r["gpu_hours"] for r in rows.values())
    # The spike is a surprise to every autoscaler; a warm pool shortens the queue it causes.
    assert rows["reactive"]["peak_backlog"] > 0
    assert rows["warm_pool"]["peak_backlog"] < rows["reactive"]["peak_backlog"]
    assert rows["warm_pool"]["p99_ttft"] < rows["reactive"]["p99_ttft"]


def test_the_simulated_queue_is_near_the_arithmetic_without_noise(client) -> None:
    body = api_get(client, "autoscaling-policies", noise=0.0)
    reactive = next(r for r in body["rows"] if r["policy"] == "reactive")
    assert reactive["peak_backlog"] == pytest.approx(reactive["predicted_backlog"], rel=0.35)


def test_a_shorter_cold_start_shortens_the_queue(client) -> None:
    slow = api_get(client, "autoscaling-policies", cold_start_minutes=20.0)
    fast = api_get(client, "autoscaling-policies", cold_start_minutes=2.0)
    assert fast["backlog_reactive"] < slow["backlog_reactive"]


def test_the_demo_draws_five_plots_with_a_note(client) -> None:
    demo = section_html(problem_html(page_get(client), 20), 20, "demo")
    assert 'data-calculator="autoscaling-policies"' in demo and demo.count('class="plot"') == 5
    assert "Worst queue in the spike: simulated against the arithmetic" in demo
    assert "The reactive policy's worst queue was" in text_of(demo)


def test_the_load_measurement_is_set_beside_the_bytes() -> None:
    figures = p20.engine_load_figures({"model": "course-lm", "device": "cpu",
                                       "file_bytes": 20e6, "load_seconds": 0.5,
                                       "warmup_seconds": 0.2}, load_bandwidth=1e9)
    assert figures["load_bytes_time_text"] == "20 ms"
    assert figures["load_seconds_text"] == "500 ms"
    assert p20.engine_load_figures(None, load_bandwidth=1.0) == {"load_measured": False}


def test_the_page_shows_the_workers_load_when_one_was_stored(client) -> None:
    from unittest import mock

    measured = {"model": "course-lm", "device": "cpu", "file_bytes": 21_613_472,
                "load_seconds": 2.5, "warmup_seconds": 1.25}
    with mock.patch.object(p20, "engine_load_measured", return_value=measured):
        demo = text_of(section_html(problem_html(page_get(client), 20), 20, "demo"))
    assert "loaded its shipped model (course-lm, 21.6 MB of safetensors, on cpu) in 2.5 s" in demo
    assert "warmed it up in 1.25 s" in demo


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 20), 20, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p20.SOURCES) >= 5
    for title, url in p20.SOURCES:
        assert title and url.startswith("https://")


def test_the_streamer_source_says_it_stages_through_a_cpu_buffer() -> None:
    """The Run:ai Model Streamer's README: threads read into a CPU buffer, and the application
    copies tensors to the GPU while others are still being read (not straight to the GPU)."""
    (title,) = [t for t, _ in p20.SOURCES if "Model Streamer" in t]
    assert "CPU buffer" in title and "straight to GPU" not in title


def test_every_cold_start_figure_without_a_source_is_called_an_assumption() -> None:
    """FACTS.md holds no node, image, load-bandwidth or warm-up times: each is an input the
    learner edits, and its help says it is an assumption (no "often about" without a source)."""
    assumed = ("node_minutes", "image_gb", "image_gbps", "load_gbps", "warmup_seconds",
               "react_seconds", "ramp_per_minute", "warm_start_seconds", "fast_load_gbps",
               "replica_rps", "price_per_hour")
    helps = {i.name: i.help for i in p20.INPUTS}
    for name in assumed:
        assert "assumption" in helps[name], name
    assert "often about" not in " ".join(helps.values())
    day = {i.name: i.help for i in p20.DAY_INPUTS}
    for name in ("warm_start_minutes", "replica_rps", "base_ttft_s"):
        assert "assumption" in day[name], name


def test_the_weights_time_is_called_a_floor_at_both_bandwidths(client) -> None:
    worked = worked_text(client)
    assert "(a floor," in worked and "again a floor" in worked
    steps = {s["label"]: s for s in api_get(client, "cold-start")["steps"]}
    assert steps["Weights (a floor at this bandwidth)"]["display"] == "2.35 min"
    assert "again a floor" in steps["Faster loading instead: cold start"]["expression"]
    assert "assumed" in steps["Node"]["expression"]


def test_the_note_says_which_policy_paid_most_as_it_was(client) -> None:
    """At the defaults the static fleet pays the most; a warm pool of 200 four-GPU replicas on
    standby all day (200 × 4 × 24 = 19,200 GPU-hours at least) pays more than it."""
    demo = text_of(section_html(problem_html(page_get(client), 20), 20, "demo"))
    assert "never queued and paid the most GPU-hours" in demo
    query = calculator_query(p20.DAY, p20.DEMO_PREFIX, warm_pool=200)
    demo = text_of(section_html(problem_html(page_get(client, query), 20), 20, "demo"))
    assert "yet the warm pool + reactive policy paid more GPU-hours" in demo
    assert "paid the most GPU-hours" not in demo


def test_the_workers_load_is_called_fixed_work_only_when_it_is() -> None:
    """21.6 MB at 1 GB/s is 21.6 ms: under a tenth of a 2.5 s load, so "nearly all fixed"; at
    0.01 GB/s it is 2.16 s, 86.5% of the load, and the page gives that share instead."""
    measured = {"model": "course-lm", "device": "cpu", "file_bytes": 21_613_472,
                "load_seconds": 2.5, "warmup_seconds": 1.25}
    assert p20.engine_load_figures(measured, load_bandwidth=1e9)["load_fixed_mostly"]
    slow = p20.engine_load_figures(measured, load_bandwidth=1e7)
    assert not slow["load_fixed_mostly"] and slow["load_bytes_share_text"] == "86.5%"


def test_the_note_names_the_loosest_prediction_as_it_was() -> None:
    """The policy whose worst queue overshot its prediction by the most is read off the run.
    At the defaults it is the queue-depth policy (8,960 against 6,587, a gap of 2,373, against
    reactive's 1,653 and the pool's 1,055); at seed 3 the queue-depth and reactive gaps are
    both 78 and the warm pool's is 825 (2,046 against 1,221), so the note must not call the
    queue-depth prediction the loosest there."""
    base = {i.name: i.initial for i in p20.DAY_INPUTS}

    def note_and_rows(**change):
        given = {**base, **change}
        result = p20.day_policies(**given)
        return p20.day_note(inputs=given, result=result), {
            r["policy"]: r for r in result.values["rows"]}

    def gap(row):
        return row["peak_backlog"] - row["predicted_backlog"]

    note, rows = note_and_rows()
    assert gap(rows["queue"]) > max(gap(rows[p]) for p in ("reactive", "predictive", "warm_pool"))
    assert "its prediction is the loosest here (8,960 against 6,587)" in note
    note, rows = note_and_rows(seed=3)
    assert gap(rows["warm_pool"]) > max(gap(rows[p]) for p in ("reactive", "predictive", "queue"))
    assert "loosest" in note and "its prediction is the loosest" not in note
    assert "the warm pool + reactive policy's (2,046 against 1,221)" in note


def test_the_utilisation_cap_and_the_ramp_headroom_are_said_to_stack(client) -> None:
    """Review M5 at the defaults: 29 replicas at a 70% cap plus 5 for a 17.4% ramp run the
    fleet at 0.7 ÷ 1.174 = 59.6% of its capacity within the target; a target from the ramp
    alone, 1 ÷ 1.174 = 85.2%, needs ⌈40 × 1.174 ÷ 2⌉ = 24 replicas instead of 34."""
    worked = worked_text(client)
    assert "The two margins add: the 70% cap" in worked
    assert "= 59.6% of what it serves within the latency target" in worked
    assert "= 85.2%: 24 replicas instead of 34 replicas" in worked


def test_a_warm_pool_of_zero_is_not_priced_as_a_pool(client) -> None:
    """Review M13: an 8B model on one GPU, no node wait, 10 requests/s a replica, no cap: the
    warm start leaves 1 extra replica and 0 in the pool, so the page says a pool adds nothing
    and the $1,825 is the running headroom's cost (1 GPU × $2.50 × 730 h)."""
    query = calculator_query(p20.CALCULATOR, p20.PREFIX, model="llama-3.1-8b",
                             gpus_per_replica=1, node_minutes=0, replica_rps=10, utilisation=1)
    worked = worked_text(client, query)
    assert "with 0 in the pool" not in worked
    assert "a pool adds nothing here and the $1,825 a month is the running headroom" in worked
    assert "1 GPUs" not in worked and "1 extra replicas" not in worked
    assert "With no utilisation cap, this headroom is the only margin" in worked


def test_warm_pools_name_sleep_mode_and_fast_loaders_with_sources(client) -> None:
    """Review K5: a warm pool's standby cost need not be a whole running replica's: vLLM's
    sleep mode (weights to host memory, process kept) and fast loaders (Run:ai Model Streamer,
    ServerlessLLM's checkpoint format) are named, each with its source on the page."""
    concepts = text_of(section_html(problem_html(page_get(client), 20), 20, "concepts"))
    assert "sleep mode" in concepts and "runai_streamer" in concepts
    assert "ServerlessLLM" in concepts
    urls = [url for _, url in p20.SOURCES]
    assert any("sleep_mode" in u for u in urls) and any("2401.14351" in u for u in urls)


def answer_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 20), 20, "answer"))


def test_the_cap_sentence_says_whether_the_cap_applied(client) -> None:
    """At a 99% cap and 40 requests/s the fleet that carries the 17.4% ramp is ⌈46.96 ÷ 1.98⌉
    = 24 replicas, and ⌈46.96 ÷ 2⌉ = 24 at full load too: the cap costs no replica, so "the two
    margins add on purpose" was untrue; the 24 run 46.96 ÷ 48 = 97.8% busy at the ramp's peak.
    At 39 requests/s the cap binds (⌈45.79 ÷ 1.98⌉ = 24 against ⌈45.79 ÷ 2⌉ = 23), and the
    page says how little room a 99% cap keeps (1%) and how busy the 24 really run today
    (39 ÷ 48 = 81.2%, within 99% ÷ 1.174 = 84.3%)."""
    loose = worked_text(client, "?p20-cold-utilisation=0.99")
    assert "The two margins add" not in loose
    assert ("The 99% cap costs no replica here: 24 whole replicas, the fewest that carry the "
            "ramp's peak at full load, already run 97.8% busy when it peaks") in loose
    binding = worked_text(client, "?p20-cold-utilisation=0.99&p20-cold-load_rps=39")
    assert "the 99% cap keeps 1% of each replica free for the short bursts" in binding
    assert "= 84.3% of what it serves within the latency target (81.2% with 24 whole" in binding
    assert "23 replicas instead of 24 replicas, 99.5% busy when the ramp peaks" in binding


def test_a_cap_just_below_one_is_not_shown_as_100_percent(client) -> None:
    """0.9995 read "100%" (three figures), so ⌈40 ÷ (2 × 100%)⌉ = 21 and "the 100% cap"."""
    worked = worked_text(client, "?p20-cold-utilisation=0.9995")
    assert "⌈40 requests/s ÷ (2 requests/s × 99.95%)⌉ = 21" in worked
    assert "100% cap" not in worked
    body = api_get(client, "cold-start", utilisation=0.9995)
    assert any("99.95%" in step["expression"] for step in body["steps"])


def test_no_ramp_replica_is_credited_to_the_cap_when_rounding_or_a_flat_load_did_it(
        client) -> None:
    """The model answer said "none here, since the 70% cap already leaves room for it" whenever
    no replica was added: at a flat load (nothing to cover), and at 39 requests/s with a 0.1%
    ramp (0.869% headroom), where ⌈39 ÷ 1.98⌉ = 20 replicas serve 39.6 requests/s within a 99%
    cap, 1.54% more than the load, and with no cap at all ("the 100% cap") 40, 2.56% more.
    Whole replicas leave the room, not the cap; the warm pool then adds nothing either."""
    flat = answer_text(client, "?p20-cold-ramp_per_minute=0")
    assert "cap already leaves room" not in flat and "grows 0%" not in flat
    assert "With a flat load nothing grows while a replica starts" in flat
    assert "Loading faster still shortens that replacement" in flat
    small = "?p20-cold-ramp_per_minute=0.001&p20-cold-load_rps=39"
    capped = answer_text(client, small + "&p20-cold-utilisation=0.99")
    assert ("no replica more here, since the 20 today's load needs, rounded up to whole "
            "replicas, already serve 1.54% more than it within the 99% cap") in capped
    assert "A warm pool would add nothing here either" in capped
    assert "$0.00 at half the standby cost" not in capped
    assert "Loading faster saves no replica here" in capped
    uncapped = answer_text(client, small + "&p20-cold-utilisation=1")
    assert "100% cap" not in uncapped and "already serve 2.56% more than it." in uncapped
    worked = worked_text(client, small + "&p20-cold-utilisation=1")
    assert "no more replicas (no GPUs) running all the time" not in worked
    assert "serve 40 requests/s at full load, 2.56% more than today's load" in worked
    assert "the replicas run 98.3% busy" in worked and "every replica is fully busy" not in worked


def test_a_slower_fast_load_is_not_called_a_saving(client) -> None:
    """At 0.5 GB/s the "faster" load is slower than the 1 GB/s the weights already load at."""
    answer = answer_text(client, "?p20-cold-fast_load_gbps=0.5")
    assert "cleaner saving" not in answer and "drops to" not in answer
    assert "Loading at 500 MB/s would save nothing" in answer


def test_the_note_keeps_spare_capacity_only_below_a_full_target() -> None:
    """The day's note said the ready capacity was "kept below full by the target utilisation"
    even at a target of 100%."""
    base = {i.name: i.initial for i in p20.DAY_INPUTS}
    full = {**base, "utilisation": 1.0}
    note = p20.day_note(inputs=full, result=p20.day_policies(**full))
    assert "kept below full" not in note and "sized to run at most" not in note
    assert "a target utilisation of 100% keeps no spare capacity" in note
    note = p20.day_note(inputs=base, result=p20.day_policies(**base))
    assert "sized to run at most 70% busy, is used up" in note


def test_a_99_percent_cap_says_how_little_burst_room_it_keeps(client) -> None:
    """Review: where a 99% cap binds (40.8 requests/s: ⌈47.88 ÷ 1.98⌉ = 25 against ⌈47.88 ÷ 2⌉
    = 24) the page said the cap keeps 1% free 'for the short bursts' as if that were a margin
    like 70%'s 30%. It now gives problem 17's M/M/1 factor, 1 ÷ (1 − 0.99) = 100× the service
    time (3.33× at 70%), and how busy the 25 run at the ramp's peak, 47.88 ÷ 50 = 95.8%.
    Where the cap costs no replica (40 requests/s), the room the bursts get at the peak is
    what rounding leaves: 1 − 46.96 ÷ 48 = 2.19%."""
    binding = worked_text(client, "?p20-cold-utilisation=0.99&p20-cold-load_rps=40.8")
    assert "The two margins add on purpose" not in binding
    assert ("answers in its service time × 1 ÷ (1 − ρ) on average: 100× its service time at "
            "99%)") in binding
    assert "(81.6% with 25 whole replicas, 95.8% at the ramp's peak)" in binding
    default = worked_text(client)
    assert "on average: 3.33× its service time at 70%)" in default
    assert "(58.8% with 34 whole replicas, 69% at the ramp's peak)" in default
    loose = worked_text(client, "?p20-cold-utilisation=0.99")
    assert ("so at the peak the bursts get the 2.19% of the fleet's capacity that rounding up "
            "to whole replicas leaves") in loose
