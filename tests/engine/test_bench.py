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
    assert "decode floor:" in out and "x the floor" in out and "TPOT" in out


def _floor(weights: int, cache: int | None, at_size: float, dram: float) -> bench.DecodeFloor:
    return bench.DecodeFloor(weights, cache, at_size, dram)


def test_the_floor_says_where_the_weights_are_read_from():
    """21.6 MB of weights fit a 32 MiB L3 (read from cache) but not an 8 MiB one (from DRAM);
    the floor is the bytes at the faster rate measured, whichever buffer gave it."""
    mb = 21_600_000
    in_cache = bench.floor_lines(_floor(mb, 32 * 2**20, 120e9, 18e9), [0.0004, 0.0003, 0.0005])
    assert "they fit the 32 MiB last-level cache" in in_cache[1]
    assert "the floor is 0.180 ms" in in_cache[1] and "2.2x the floor" in in_cache[1]
    assert "TPOT 0.400 ms median (min 0.300, max 0.500)" in in_cache[0]
    in_dram = bench.floor_lines(_floor(mb, 8 * 2**20, 14.4e9, 18e9), [0.0024])
    assert "do not fit the 8 MiB last-level cache, so every step reads them from DRAM" \
        in in_dram[1]
    assert "the floor is 1.200 ms" in in_dram[1] and "2.0x the floor" in in_dram[1]
    assert "cache size is unknown" in bench.floor_lines(_floor(mb, None, 1e10, 1e10), [0.01])[1]


def test_the_largest_cache_is_read_from_sysfs(tmp_path, monkeypatch):
    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "32768K")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    monkeypatch.setattr(bench, "_CACHE_DIR", tmp_path)
    assert bench.last_level_cache_bytes() == 32 * 2**20
    monkeypatch.setattr(bench, "_CACHE_DIR", tmp_path / "absent")
    assert bench.last_level_cache_bytes() is None


@pytest.mark.slow
def test_batch1_only_ends_with_a_json_line(tiny_models, capsys):
    """What `manage.py streambench` reads: batch-1 TPOTs, the floor and the threads."""
    import json

    bench.main(["--model", str(tiny_models["llama_tied"]), "--batch1-only",
                "--batch1-repeats", "2"])
    lines = capsys.readouterr().out.strip().splitlines()
    report = json.loads(lines[-1])
    assert len(report["batch1_tpot_s"]) == 2 and all(t > 0 for t in report["batch1_tpot_s"])
    assert report["floor_s"] > 0 and report["threads"] >= 1 and report["weight_bytes"] > 0
    assert any(line.startswith("decode floor:") for line in lines)
