"""The lifecycle demo's estimate uses the arithmetic's formulas with the measured rates."""

import json

from demos.estimate import lifecycle_estimate
from problems.arithmetic.catalog.models import demo_model_load
from problems.arithmetic.compute import prefill_flops_model

CONFIG = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
          "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 300,
          "max_position_embeddings": 512, "tie_word_embeddings": True}


def test_estimate_divides_the_arithmetic_by_the_measured_rates(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    machine = {"model_path": str(tmp_path), "matmul_flops_per_s": 1e10,
               "memory_bytes_per_s": 1e9, "dtype": "float32"}
    est = lifecycle_estimate(machine=machine, prompt_tokens=20, output_tokens=11,
                             measured={"ttft_ms": 5.0, "tpot_ms": 2.0, "prefill_ms": 4.0})
    model = demo_model_load(tmp_path / "config.json")
    flops = prefill_flops_model(model, 20)["total"]
    assert est["available"] and est["model"] == tmp_path.name
    assert est["prefill_flops"] == flops
    # A roofline bound: the weights read once (74,048 non-embedding + 19,200 tied-head
    # parameters × 4 B = 372,992 B) + 20 tokens' KV (2 layers × 2 × 2 heads × 16 × 4 B = 512 B
    # each, 10,240 B) + 20 embedding rows gathered (64 × 4 B each, 5,120 B) = 388,352 B take
    # 0.388 ms at 1 GB/s, more than the 3,107,840 FLOP take at 10 GFLOP/s (0.311 ms).
    assert flops == 3_107_840
    assert est["prefill_bound"] == "memory"
    assert est["prefill_ms"] == round(388_352 / 1e9 * 1000, 4)
    assert est["prefill_ms"] > round(flops / 1e10 * 1000, 4)
    assert est["tpot_ms"] > 0
    assert abs(est["e2e_ms"] - (est["prefill_ms"] + 10 * est["tpot_ms"])) < 1e-3
    assert est["measured_over_estimate"]["tpot"] == round(2.0 / est["tpot_ms"], 2)
    assert [s["label"] for s in est["steps"]][0] == "Prefill FLOPs"


def test_estimate_says_when_the_config_is_missing(tmp_path):
    est = lifecycle_estimate(machine={"model_path": str(tmp_path), "matmul_flops_per_s": 1,
                                      "memory_bytes_per_s": 1}, prompt_tokens=1,
                             output_tokens=1, measured={})
    assert est == {"available": False, "reason": "the model's config.json could not be read"}
