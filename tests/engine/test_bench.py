"""`make bench` on a tiny model: the table's spread, the method, parity, and the decode floor.
(transformers' generate_batch row, --generate-batch, is left out: on this CPU it takes some 30 s
for four tiny requests.)"""

import pytest

from worker.engine import bench


def test_parity_line_names_the_first_divergence():
    ref = bench.RunResult("hf", 1.0, 6, [], [], [[1, 2, 3], [4, 5, 6]])
    same = bench.RunResult("engine", 1.0, 6, [], [], [[1, 2, 3], [4, 5, 6]])
    off = bench.RunResult("engine", 1.0, 6, [], [], [[1, 2, 3], [4, 9, 6]])
    assert bench.parity_line("engine", same, ref).endswith("2 of 2 requests identical")
    assert bench.parity_line("engine", off, ref).endswith(
        "1 of 2 requests identical (first divergence at request 1, output token 1)")


@pytest.mark.slow
def test_the_bench_prints_spread_method_parity_and_the_floor(tiny_models, capsys):
    bench.main(["--model", str(tiny_models["llama_tied"]), "--num-requests", "4",
                "--batch-size", "2", "--prompt-len", "4", "12", "--output-len", "3", "9",
                "--rounds", "2", "--batch1-repeats", "2"])
    out = capsys.readouterr().out
    assert "% busy over the second before starting" in out
    assert "the worker rule" in out  # threads from ENGINE_THREADS, not a fixed 2
    assert "method: every request arrives at time zero" in out and "sdpa attention" in out
    assert "rotated each round" in out
    rows = {line.split("  ")[0]: line for line in out.splitlines()
            if line.startswith(("engine", "transformers")) and line.endswith("x")
            and "per round" not in line}
    assert set(rows) == {"engine continuous", "engine continuous, C kernels off",
                         "engine static", "transformers generate (static)"}
    assert "out tok/s: min" in out and "median" in out
    # Round 1 runs in the listed order, round 2 starts one further along.
    order = [line.split(": ")[1] for line in out.splitlines() if line.startswith("round ")]
    assert order[:4] != order[4:8] and order[4] == order[1]
    # The engine reproduces transformers' greedy tokens on the tiny model (parity tests hold
    # it to that), with and without its kernels.
    assert "greedy parity, engine continuous vs transformers generate (static): 4 of 4" in out
    assert "greedy parity, engine continuous, C kernels off vs" in out
    assert "decode floor:" in out and "x the cache floor" in out and "TPOT" in out
