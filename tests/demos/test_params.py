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
