"""The arithmetic of inference: plain Python (no Django), every formula returning a `Result`
of named values plus the worked `Step`s that produced them.

Catalogs (each entry names its source): `MODELS`, `GPUS`, `DTYPES`; resolve ids with
`model_get`, `gpu_get`, `dtype_get`, which raise `ArithmeticInputError(field=..., message=...)`.

Formulas (keyword-only, each returns a `Result`):
- memory: `params_count`, `weights_bytes`, `kv_cache`, `batch_max`
- compute: `prefill`
- decode: `decode`
- roofline: `roofline`, `roofline_decode`, `roofline_batches`
- speculative: `speculative`, `speculative_plan` (best γ, where verification stops being free)
- queueing: `queue`, `tenant_fairness`, `seat_waits_steps`, `tail_latency` (M/M/1 and M/M/c
  percentiles, the output-length tail)
- itl: `itl_levers` (TPOT against tokens/s per GPU, each latency lever, problem 9)
- batching: `chunked_prefill`, `static_vs_continuous`, `long_prompt`
- caching: `prefix_cache`, `prefix_routing` (a cached system prompt on a fleet, problem 8)
- disagg: `kv_transfer`, `disagg_plan` (KV handed between prefill and decode pools, problem 22)
- quant: `quantization`
- moe: `moe_memory`, `moe_all_to_all`
- cost: `cost_per_million`, `capacity_plan`, `cost_waterfall` (problem 24's levers)
- parallel: `moe_layout` (TP, PP, EP and data-parallel attention for an MoE model)
- replica: `replica_cost` (one replica's batch, step and dollars per million tokens)
- capacity: `capstone`, `chat_demand`, `tornado` (users to a fleet, problem 25)
- utilization: `decode_step_breakdown` (a decode step by kernel group), `gpu_utilization`
  (nvidia-smi's busy share against MFU and MBU, problems 13 and 14)
- fusion: `rmsnorm_fusion` (eager against fused RMSNorm traffic, problem 15)
- serving_metrics: `request_latencies`, `percentile`, `histogram_quantile` (Prometheus's),
  `goodput`, `request_cost` (cost per request and a hit-rate drop, problem 16)
- benchmarking: `benchmark_plan` (a load point's percentile range and Little's law for the
  client), `benchmark_summary` (what a benchmark client prints), `expected_output_throughput`
  (problem 18)

Formatting for people lives in `units`.
"""

from problems.arithmetic.batching import chunked_prefill
from problems.arithmetic.caching import prefix_cache, prefix_routing
from problems.arithmetic.catalog import (
    DTYPES,
    GPUS,
    MODELS,
    Dtype,
    Gpu,
    Model,
    dtype_get,
    gpu_get,
    model_get,
    models_all,
)
from problems.arithmetic.compute import prefill
from problems.arithmetic.cost import capacity_plan, cost_per_million
from problems.arithmetic.decode import decode
from problems.arithmetic.disagg import disagg_plan, kv_transfer
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.memory import batch_max, kv_cache, params_count, weights_bytes
from problems.arithmetic.moe import moe_all_to_all, moe_memory
from problems.arithmetic.quant import quantization
from problems.arithmetic.queueing import queue
from problems.arithmetic.roofline import roofline, roofline_batches, roofline_decode
from problems.arithmetic.speculative import speculative
from problems.arithmetic.steps import Result, Step

__all__ = [
    "DTYPES",
    "GPUS",
    "MODELS",
    "ArithmeticInputError",
    "Dtype",
    "Gpu",
    "Model",
    "Result",
    "Step",
    "batch_max",
    "decode",
    "dtype_get",
    "gpu_get",
    "kv_cache",
    "model_get",
    "models_all",
    "params_count",
    "prefill",
    "roofline",
    "roofline_batches",
    "roofline_decode",
    "weights_bytes",
    "chunked_prefill",
    "prefix_cache",
    "prefix_routing",
    "capacity_plan",
    "cost_per_million",
    "kv_transfer",
    "disagg_plan",
    "moe_all_to_all",
    "moe_memory",
    "quantization",
    "queue",
    "speculative",
]
