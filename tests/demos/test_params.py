"""Parameter checks for starting a run: each bad value names its field."""

import json

import pytest

from demos.params import MAX_TOKENS_LIMIT, PROMPT_MAX_CHARS, ParamError, run_params_parse


def parse(body) -> object:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return run_params_parse(demo="lifecycle", body=raw)


def test_defaults_fill_missing_fields():
    params = parse({"prompt": "  hello  "})
    assert params.prompt == "hello"
    assert 1 <= params.max_tokens <= MAX_TOKENS_LIMIT
    assert 0 <= params.temperature <= 2 and 0 < params.top_p <= 1


@pytest.mark.parametrize(("body", "field"), [
    (b"not json", "body"),
    (b"[1, 2]", "body"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": "   "}, "prompt"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": "x" * (PROMPT_MAX_CHARS + 1)}, "prompt"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": MAX_TOKENS_LIMIT + 1}, "max_tokens"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_tokens": "many"}, "max_tokens"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": 2.5}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.01}, "top_p"),
    ({"seed": 3}, "seed"),
])
def test_bad_values_name_their_field(body, field):
    with pytest.raises(ParamError) as caught:
        parse(body)
    assert caught.value.field == field


def test_limits_are_inclusive():
    params = parse({"max_tokens": MAX_TOKENS_LIMIT, "temperature": 0, "top_p": 1,
                    "prompt": "x" * PROMPT_MAX_CHARS})
    assert params.max_tokens == MAX_TOKENS_LIMIT and params.temperature == 0.0


def test_unknown_demo_is_refused():
    with pytest.raises(ParamError) as caught:
        run_params_parse(demo="nope", body=b"{}")
    assert caught.value.field == "demo"


# ---- the prompt's length in tokens, counted in the web process without torch (item 9) -------

@pytest.mark.django_db
def test_a_prompt_within_the_character_limit_but_past_the_context_is_422(client):
    from django.conf import settings

    from demos.params import PROMPT_MAX_CHARS, prompt_context_tokens

    prompt = "🙂" * PROMPT_MAX_CHARS  # 2,000 characters, thousands of byte-level tokens
    response = client.post("/demos/lifecycle/runs", data=json.dumps({"prompt": prompt}),
                           content_type="application/json")
    assert response.status_code == 422
    body = response.json()
    assert body["field"] == "prompt"
    assert "tokens" in body["error"]
    assert str(prompt_context_tokens(settings.ENGINE_MODEL)) in body["error"].replace(",", "")


@pytest.mark.django_db
def test_max_tokens_past_what_the_context_leaves_is_422_naming_max_tokens(client):
    from django.conf import settings

    from demos.params import prompt_context_tokens, prompt_tokens_count

    context = prompt_context_tokens(settings.ENGINE_MODEL)
    prompt = "KV cache? " * 180  # 1,800 characters, about 550 tokens
    used = prompt_tokens_count(prompt.strip(), model_dir=settings.ENGINE_MODEL)
    assert used + MAX_TOKENS_LIMIT > context  # the case under test
    response = client.post("/demos/lifecycle/runs", content_type="application/json",
                           data=json.dumps({"prompt": prompt, "max_tokens": MAX_TOKENS_LIMIT}))
    assert response.status_code == 422 and response.json()["field"] == "max_tokens"


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["What happens during prefill?", "🙂" * 40,
                                    "naïve café — 東京\nline two\ttab", "<|end|> injected"])
def test_the_web_count_equals_the_engines_own(prompt):
    from django.conf import settings

    from demos.params import prompt_tokens_count
    from worker.engine import Engine

    engine = Engine.from_pretrained(settings.ENGINE_MODEL, num_kv_blocks=8)
    assert prompt_tokens_count(prompt, model_dir=settings.ENGINE_MODEL) == len(
        engine.encode_prompt(prompt, chat=True))
