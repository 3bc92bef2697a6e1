"""A demo's own parameters (demos/schema.py) checked in the web process: defaults, limits, bad
values named by field, and the demos of page 07 through the views (422, the demo page, a kept
file for its owner only)."""

import json

import pytest

from demos import services
from demos.runners import runner_get
from demos.schema import ParamError, ParamSchema, ParamSpec

SCHEMA = ParamSchema(specs=(
    ParamSpec("n", "N", "whole", 4, minimum=1, maximum=16),
    ParamSpec("x", "X", "real", 0.5, minimum=0, maximum=1),
    ParamSpec("kind", "Kind", "choice", "a", choices=(("a", "A"), ("b", "B"))),
    ParamSpec("on", "On", "bool", False),
), work=lambda v: v["n"] * 10)


def test_defaults_fill_what_is_left_out() -> None:
    params = SCHEMA.parse({"n": "7"})
    assert params.as_dict() == {"n": 7, "x": 0.5, "kind": "a", "on": False}
    assert params.work_tokens == 70


@pytest.mark.parametrize("raw, field", [
    ({"n": 0}, "n"), ({"n": 17}, "n"), ({"n": 2.5}, "n"), ({"n": True}, "n"),
    ({"n": 10**40}, "n"), ({"x": "nan"}, "x"), ({"x": "abc"}, "x"), ({"kind": "c"}, "kind"),
    ({"on": "maybe"}, "on"), ({"other": 1}, "other"),
])
def test_bad_values_name_their_field(raw, field) -> None:
    with pytest.raises(ParamError) as error:
        SCHEMA.parse(raw)
    assert error.value.field == field


@pytest.mark.parametrize("slug", ["profile", "utilization", "triton-rmsnorm"])
def test_page_07_demos_declare_schemas_with_modest_work(slug) -> None:
    runner = runner_get(slug)
    assert runner.engine == "own" and runner.params is not None
    # The largest run each allows (every number at its maximum, every option ticked) fits the
    # demos' queue cap of 8,000 tokens of work.
    largest = {s.name: (s.maximum if s.kind in ("whole", "real")
                        else True if s.kind == "bool" else s.default)
               for s in runner.params.specs}
    assert runner.params.parse(largest).work_tokens <= 8000


def test_the_utilization_work_counts_the_lean_pass_recomputed_block() -> None:
    """63 sequences over the six batch sizes. Usual host only, prompt 64 and 8 steps: 64 + 10
    tokens each, 4,662. With the lean host at the limits, prompt 88 and 12 steps: 88 + 14, then
    the block holding the last prompt token again (88 − 5 × 16 = 8) + 14, so 124 each, 7,812;
    a 96-token prompt would recompute a whole block (96 + 14 + 16 + 14 = 140 each, 8,820, over
    the cap), so 88 is the maximum."""
    params = runner_get("utilization").params
    assert params.parse({"prompt_tokens": 64, "steps": 8}).work_tokens == 4_662
    assert params.parse({"prompt_tokens": 88, "steps": 12, "lean_host": True}
                        ).work_tokens == 7_812
    with pytest.raises(ParamError) as error:
        params.parse({"prompt_tokens": 96, "steps": 12, "lean_host": True})
    assert error.value.field == "prompt_tokens"


@pytest.mark.django_db
@pytest.mark.parametrize("slug, body, field", [
    ("profile", {"num_sequences": 99}, "num_sequences"),
    ("utilization", {"steps": "many"}, "steps"),
    ("triton-rmsnorm", {"dtype": "int4"}, "dtype"),
    ("triton-rmsnorm", {"prompt": "hi"}, "prompt"),
])
def test_bad_input_is_a_422_naming_the_field(client, slug, body, field) -> None:
    response = client.post(f"/demos/{slug}/runs", json.dumps(body),
                           content_type="application/json")
    assert response.status_code == 422
    assert response.json()["field"] == field


@pytest.mark.django_db
def test_each_demo_has_a_page_with_its_form(client) -> None:
    for slug, field in (("profile", "profile_steps"), ("utilization", "lean_host"),
                        ("triton-rmsnorm", "residual")):
        content = client.get(f"/demos/{slug}/").content.decode()
        assert f'name="{field}"' in content and f"js/demos/{slug}.js" in content


@pytest.mark.django_db
def test_a_kept_file_is_served_to_its_owner_only(client) -> None:
    from demos.models import Run

    client.post("/progress/01", {})  # any request that makes a session
    session = client.session
    session.save()
    owner = f"session:{session.session_key}"
    run = Run.objects.create(owner=owner, demo="profile", params={}, state="finished")
    url = services.run_file_keep(run_id=str(run.id), name="trace.json.gz", data=b"\x1f\x8bdata")
    assert url == f"/demos/runs/{run.id}/files/trace.json.gz"
    response = client.get(url)
    assert response.status_code == 200 and response.content == b"\x1f\x8bdata"
    assert response["Content-Type"] == "application/gzip"
    assert "attachment" in response["Content-Disposition"]
    from django.test import Client

    assert Client().get(url).status_code == 404  # another visitor
    assert client.get(f"/demos/runs/{run.id}/files/other.txt").status_code == 404
    assert services.run_file_keep(run_id=str(run.id), name="other.txt", data=b"x") is None
    too_big = b"x" * (services.RUN_FILE_MAX_BYTES + 1)
    assert services.run_file_keep(run_id=str(run.id), name="trace.json.gz", data=too_big) is None


def test_a_choices_field_is_a_list_of_known_names_in_declared_order() -> None:
    schema = ParamSchema(specs=(
        ParamSpec("formats", "Formats", "choices", ["a"], choices=(("a", "A"), ("b", "B"),
                                                                    ("c", "C"))),))
    assert schema.parse({"formats": ["c", "a"]}).values == {"formats": ["a", "c"]}
    assert schema.parse({"formats": "b, c"}).values == {"formats": ["b", "c"]}
    assert schema.parse({}).values == {"formats": ["a"]}
    for bad in ([], ["d"], [1], "", {"a": 1}):
        with pytest.raises(ParamError) as error:
            schema.parse({"formats": bad})
        assert error.value.field == "formats"


@pytest.mark.django_db
def test_a_cross_field_check_reaches_the_learner_as_a_422_beside_its_field(client) -> None:
    """Diff review: the benchmark's sweep check (ParamSchema.check) answers through the view as
    a 422 naming the rates field, in a sentence that reads after the field's name."""
    response = client.post("/demos/benchmark/runs",
                           json.dumps({"rates": ["1", "2"], "requests": 32}),
                           content_type="application/json")
    assert response.status_code == 422
    body = response.json()
    assert body["field"] == "rates"
    assert body["error"].startswith("rates would take about 93 s just to send 32 requests")


def test_a_schema_check_runs_on_the_cleaned_values() -> None:
    seen = []

    def check(values: dict) -> None:
        seen.append(values)
        if values["n"] > values["x"] * 10:
            raise ParamError("n", "must be at most ten times x")

    schema = ParamSchema(specs=SCHEMA.specs, check=check)
    assert schema.parse({"n": "5"}).values["n"] == 5 and seen[-1]["n"] == 5
    with pytest.raises(ParamError) as error:
        schema.parse({"n": 8, "x": 0.5})
    assert error.value.field == "n"
