"""The home page at the inputs its strict review quoted (../shared/reviews/page-01-home.md,
F19), through Django's test client."""

import pytest

from problems.arithmetic.reaction import distance_text
from problems.forms import BANDWIDTH_HELP
from tests.problems.content.helpers import text_of

pytestmark = pytest.mark.django_db


def home_text(client, query: str = "") -> str:
    response = client.get("/" + query)
    assert response.status_code == 200
    return " ".join(text_of(response.content.decode()).split())


def test_f19_a_tiny_distance_is_said_in_a_unit_that_reads(client) -> None:
    """1 km/h for 1 ms: 1,000 m ÷ 3,600 s = 0.2778 m/s × 0.001 s = 0.000278 m = 278 µm, said
    as "278 µm", not "0.000278 m"."""
    text = home_text(client, "?speed_kmh=1&latency_ms=1")
    assert "it travels 278 µm before it can begin to react" in text
    assert "0.000278 m" not in text
    # Metres stay metres from 0.1 m up: 100 km/h for 300 ms is 27.78 m/s × 0.3 s = 8.33 m.
    assert "it travels 8.33 m before" in home_text(client, "?speed_kmh=100&latency_ms=300")
    assert distance_text(0.05) == "50 mm" and distance_text(0) == "0 m"


def test_f19_mbu_has_one_expansion_on_the_home_page_and_in_the_forms(client) -> None:
    """Databricks, who named it, expand MBU as model bandwidth utilisation: the glossary and
    every calculator's help say the same."""
    assert "MBU Model bandwidth utilisation" in home_text(client)
    assert BANDWIDTH_HELP.startswith("Model bandwidth utilisation (MBU")


def test_f19_the_glossary_qualifies_the_prefill_crossover_for_an_moe(client) -> None:
    """Page 01 computes Llama 3 8B's crossover at ≈295 tokens (dense) but DeepSeek-V3's at
    ≈5,278 (× total over active): "a few hundred tokens" holds for a dense model only."""
    text = home_text(client)
    assert "For a dense model, limited by arithmetic once the prompt is more than a few hundred" \
        in text
    assert "an MoE's crossover comes later" in text
