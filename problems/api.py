"""The JSON API over problems.arithmetic: one GET endpoint per formula and one per catalog.

Every answer holds its result fields and `steps`. Bad input never reaches a 500: unknown ids and
out-of-range values come back as 400 `{"detail": ..., "field": ...}`, and malformed or missing
parameters as 422 in the same shape (plus ninja's `errors` list).
"""

import dataclasses
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Router
from ninja.errors import ValidationError
from pydantic import BaseModel, ConfigDict

from problems import arithmetic as a
from problems.arithmetic.inputs import USERS_MAX, count_check
from problems.arithmetic.memory import params_count_model
from problems.arithmetic.reaction import reaction_distance
from problems.arithmetic.request import request_for_scale
from problems.arithmetic.streaming import streaming_for_scale

api = NinjaAPI(
    title="Inference arithmetic",
    version="1",
    description="The calculators of the LLM inference course: every formula returns its "
    "results and the worked steps (label, expression with inputs and units, value, unit, "
    "display). Units: bytes, seconds, FLOP, FLOP/s, bytes/s, tokens/s, USD.",
    urls_namespace="api",
)
calc = Router(tags=["calculators"])
catalog = Router(tags=["catalogs"])

Answer = dict[str, object]


class StepOut(BaseModel):
    """One line of working: the expression has its inputs and units filled in."""

    label: str
    expression: str
    value: float
    unit: str
    display: str


class CalcOut(BaseModel):
    """A formula's result fields (named per endpoint, in SI-style units) plus its steps."""

    model_config = ConfigDict(extra="allow")
    steps: list[StepOut]


@api.exception_handler(a.ArithmeticInputError)
def arithmetic_input_error(request: HttpRequest, exc: a.ArithmeticInputError) -> HttpResponse:
    return api.create_response(
        request, {"detail": f"{exc.field}: {exc.message}", "field": exc.field}, status=400
    )


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    first = exc.errors[0] if exc.errors else {}
    location = [str(part) for part in first.get("loc", ())]
    field = location[-1] if location else ""
    message = first.get("msg", "invalid input")
    return api.create_response(
        request,
        {"detail": f"{field}: {message}", "field": field, "errors": exc.errors},
        status=422,
    )


def _answer(formula: Callable[..., a.Result], **inputs: object) -> Answer:
    """Run a formula; a result that is not finite is refused as bad input, never sent."""
    try:
        return formula(**inputs).to_dict()
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        if isinstance(exc, a.ArithmeticInputError):
            raise
        # Which input pushed the result out of range is not knowable here: name the first
        # numeric one and list them all.
        numeric = [k for k, v in inputs.items() if isinstance(v, int | float)]
        field = numeric[0] if numeric else next(iter(inputs), "")
        raise a.ArithmeticInputError(
            field=field,
            message=f"the result is too large to compute; reduce one of {', '.join(numeric)}",
        ) from exc


@calc.get("/params", response=CalcOut, summary="Parameters from the architecture")
def params(request: HttpRequest, model: str) -> Answer:
    return _answer(a.params_count, model=model)


@calc.get("/weights", response=CalcOut, summary="Weight bytes in a number format")
def weights(request: HttpRequest, model: str, dtype: str = "bf16") -> Answer:
    return _answer(a.weights_bytes, model=model, dtype=dtype)


@calc.get("/kv-cache", response=CalcOut, summary="KV cache bytes, per GPU under tensor parallelism")
def kv_cache(
    request: HttpRequest, model: str, tokens: int, users: int = 1, dtype: str = "bf16", tp: int = 1
) -> Answer:
    return _answer(a.kv_cache, model=model, tokens=tokens, users=users, dtype=dtype, tp=tp)


@calc.get("/batch-max", response=CalcOut, summary="Largest batch whose KV fits beside the weights")
def batch_max(
    request: HttpRequest,
    model: str,
    gpu: str,
    context_tokens: int,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    tp: int = 1,
    memory_fraction: float = 0.9,
) -> Answer:
    return _answer(
        a.batch_max,
        model=model,
        gpu=gpu,
        context_tokens=context_tokens,
        dtype=dtype,
        kv_dtype=kv_dtype,
        tp=tp,
        memory_fraction=memory_fraction,
    )


@calc.get("/prefill", response=CalcOut, summary="Prefill FLOPs and time at an MFU")
def prefill(
    request: HttpRequest,
    model: str,
    gpu: str,
    prompt_tokens: int,
    dtype: str = "bf16",
    mfu: float = 1.0,
) -> Answer:
    return _answer(
        a.prefill, model=model, gpu=gpu, prompt_tokens=prompt_tokens, dtype=dtype, mfu=mfu
    )


@calc.get("/decode", response=CalcOut, summary="One decode step and a whole answer")
def decode(
    request: HttpRequest,
    model: str,
    gpu: str,
    batch: int = 1,
    context_tokens: int = 1,
    output_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
) -> Answer:
    return _answer(
        a.decode,
        model=model,
        gpu=gpu,
        batch=batch,
        context_tokens=context_tokens,
        output_tokens=output_tokens,
        dtype=dtype,
        kv_dtype=kv_dtype,
        bandwidth_efficiency=bandwidth_efficiency,
    )


@calc.get("/roofline", response=CalcOut, summary="Peak, bandwidth and ridge point of a GPU")
def roofline(request: HttpRequest, gpu: str, dtype: str = "bf16") -> Answer:
    return _answer(a.roofline, gpu=gpu, dtype=dtype)


@calc.get("/roofline-decode", response=CalcOut, summary="Decode intensity against the ridge")
def roofline_decode(
    request: HttpRequest,
    model: str,
    gpu: str,
    batch: int = 1,
    context_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> Answer:
    return _answer(
        a.roofline_decode,
        model=model,
        gpu=gpu,
        batch=batch,
        context_tokens=context_tokens,
        dtype=dtype,
        kv_dtype=kv_dtype,
    )


@calc.get("/roofline-batches", response=CalcOut, summary="Decode intensity for each batch size")
def roofline_batches(
    request: HttpRequest,
    model: str,
    gpu: str,
    batches: str = "1,2,4,8,16,32,64,128,256,512",
    context_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> Answer:
    """`batches` is a comma-separated list of batch sizes (at most 64 of them)."""
    try:
        sizes = tuple(int(part) for part in batches.split(",") if part.strip())
    except ValueError as exc:
        raise a.ArithmeticInputError(
            field="batches", message="give whole numbers separated by commas"
        ) from exc
    for size in sizes:
        count_check(size, field="batches", maximum=USERS_MAX)
    return _answer(
        a.roofline_batches,
        model=model,
        gpu=gpu,
        batches=sizes,
        context_tokens=context_tokens,
        dtype=dtype,
        kv_dtype=kv_dtype,
    )


@calc.get(
    "/speculative", response=CalcOut, summary="Speculative decoding: tokens per step, speedup"
)
def speculative(
    request: HttpRequest, acceptance: float, draft_tokens: int, draft_cost: float = 0.0
) -> Answer:
    return _answer(
        a.speculative, acceptance=acceptance, draft_tokens=draft_tokens, draft_cost=draft_cost
    )


@calc.get("/queue", response=CalcOut, summary="M/M/c queue: utilisation, waits, p50 and p99")
def queue(
    request: HttpRequest, arrival_rate: float, service_rate: float, servers: int = 1
) -> Answer:
    return _answer(a.queue, arrival_rate=arrival_rate, service_rate=service_rate, servers=servers)


@calc.get("/chunked-prefill", response=CalcOut, summary="Chunked prefill: chunks and stalls")
def chunked_prefill(
    request: HttpRequest,
    model: str,
    gpu: str,
    prompt_tokens: int,
    chunk_tokens: int = 512,
    dtype: str = "bf16",
    mfu: float = 1.0,
) -> Answer:
    return _answer(
        a.chunked_prefill,
        model=model,
        gpu=gpu,
        prompt_tokens=prompt_tokens,
        chunk_tokens=chunk_tokens,
        dtype=dtype,
        mfu=mfu,
    )


@calc.get("/prefix-cache", response=CalcOut, summary="Prefix caching: FLOPs and time saved")
def prefix_cache(
    request: HttpRequest,
    model: str,
    gpu: str,
    prompt_tokens: int,
    prefix_tokens: int,
    hit_rate: float = 1.0,
    dtype: str = "bf16",
    mfu: float = 1.0,
) -> Answer:
    return _answer(
        a.prefix_cache,
        model=model,
        gpu=gpu,
        prompt_tokens=prompt_tokens,
        prefix_tokens=prefix_tokens,
        hit_rate=hit_rate,
        dtype=dtype,
        mfu=mfu,
    )


@calc.get("/kv-transfer", response=CalcOut, summary="Disaggregation: KV bytes and transfer time")
def kv_transfer(
    request: HttpRequest,
    model: str,
    prompt_tokens: int,
    dtype: str = "bf16",
    gpu: str | None = None,
    link_gb_per_second: float | None = None,
    link_efficiency: float = 1.0,
) -> Answer:
    return _answer(
        a.kv_transfer,
        model=model,
        prompt_tokens=prompt_tokens,
        dtype=dtype,
        gpu=gpu,
        link_gb_per_second=link_gb_per_second,
        link_efficiency=link_efficiency,
    )


@calc.get("/quantization", response=CalcOut, summary="Quantization: memory saved, decode floor")
def quantization(
    request: HttpRequest,
    model: str,
    gpu: str,
    to_dtype: str,
    from_dtype: str = "bf16",
    kv_dtype: str | None = None,
    batch: int = 1,
    context_tokens: int = 1,
) -> Answer:
    return _answer(
        a.quantization,
        model=model,
        gpu=gpu,
        to_dtype=to_dtype,
        from_dtype=from_dtype,
        kv_dtype=kv_dtype,
        batch=batch,
        context_tokens=context_tokens,
    )


@calc.get("/moe-memory", response=CalcOut, summary="MoE weights per GPU under TP, PP and EP")
def moe_memory(request: HttpRequest, model: str, gpus: int, dtype: str = "bf16") -> Answer:
    return _answer(a.moe_memory, model=model, gpus=gpus, dtype=dtype)


@calc.get("/moe-all-to-all", response=CalcOut, summary="MoE all-to-all bytes per token under EP")
def moe_all_to_all(
    request: HttpRequest, model: str, ep: int, tokens: int = 1, dtype: str = "bf16"
) -> Answer:
    return _answer(a.moe_all_to_all, model=model, ep=ep, tokens=tokens, dtype=dtype)


@calc.get("/cost", response=CalcOut, summary="Dollars per million tokens")
def cost(
    request: HttpRequest, gpu: str, tokens_per_second: float, price_per_hour: float | None = None
) -> Answer:
    return _answer(
        a.cost_per_million,
        gpu=gpu,
        tokens_per_second=tokens_per_second,
        price_per_hour=price_per_hour,
    )


@calc.get("/capacity", response=CalcOut, summary="Capacity plan: peak load, GPUs, monthly cost")
def capacity(
    request: HttpRequest,
    daily_users: int,
    requests_per_user: float,
    output_tokens: int,
    tokens_per_second_per_gpu: float,
    gpu: str,
    input_tokens: int = 0,
    peak_to_average: float = 3.0,
    target_utilization: float = 0.7,
    price_per_hour: float | None = None,
) -> Answer:
    return _answer(
        a.capacity_plan,
        daily_users=daily_users,
        requests_per_user=requests_per_user,
        output_tokens=output_tokens,
        tokens_per_second_per_gpu=tokens_per_second_per_gpu,
        gpu=gpu,
        input_tokens=input_tokens,
        peak_to_average=peak_to_average,
        target_utilization=target_utilization,
        price_per_hour=price_per_hour,
    )


@calc.get("/request", response=CalcOut,
          summary="One request for scale: prefill, decode steps, the answer, its KV cache")
def request(
    request: HttpRequest,
    model: str = "llama-3-8b",
    gpu: str = "h100-sxm",
    dtype: str = "bf16",
    prompt_tokens: int = 1_000,
    output_tokens: int = 300,
    mfu: float = 0.5,
    bandwidth_efficiency: float = 1.0,
) -> Answer:
    return _answer(request_for_scale, model=model, gpu=gpu, dtype=dtype,
                   prompt_tokens=prompt_tokens, output_tokens=output_tokens, mfu=mfu,
                   bandwidth_efficiency=bandwidth_efficiency)


@calc.get("/streaming", response=CalcOut,
          summary="Streaming: bytes per event, first byte vs whole answer, abandoned KV blocks")
def streaming(
    request: HttpRequest,
    model: str = "llama-3-8b",
    gpu: str = "h100-sxm",
    dtype: str = "bf16",
    prompt_tokens: int = 1_000,
    output_tokens: int = 1_000,
    cut_after_tokens: int = 100,
    batch: int = 32,
    block_size: int = 16,
    chars_per_token: float = 4.0,
    tokens_per_event: int = 1,
    mfu: float = 0.5,
) -> Answer:
    return _answer(streaming_for_scale, model=model, gpu=gpu, dtype=dtype,
                   prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                   cut_after_tokens=cut_after_tokens, batch=batch, block_size=block_size,
                   chars_per_token=chars_per_token, tokens_per_event=tokens_per_event, mfu=mfu)


@calc.get("/reaction", response=CalcOut,
          summary="Distance a machine travels while its model thinks (speed × latency)")
def reaction(request: HttpRequest, speed_kmh: float, latency_ms: float) -> Answer:
    return _answer(reaction_distance, speed_kmh=speed_kmh, latency_ms=latency_ms)


def _entry(entry: object, **extra: object) -> dict[str, object]:
    return {**dataclasses.asdict(entry), **extra}


@catalog.get("/models", response=list[dict], summary="Models, from their config.json files")
def catalog_models(request: HttpRequest) -> list[dict[str, object]]:
    entries = []
    for model in a.models_all().values():
        counts = params_count_model(model)
        entries.append(_entry(model, params=counts["total"], active_params=counts["active"]))
    return entries


@catalog.get("/gpus", response=list[dict], summary="GPUs, from the vendors' datasheets")
def catalog_gpus(request: HttpRequest) -> list[dict[str, object]]:
    return [
        _entry(g, interconnect_one_way_bytes_per_second=g.interconnect_one_way_bytes_per_second)
        for g in a.GPUS.values()
    ]


@catalog.get("/dtypes", response=list[dict], summary="Number formats, bits per value")
def catalog_dtypes(request: HttpRequest) -> list[dict[str, object]]:
    return [_entry(d, bits=d.bits, bytes=d.bytes) for d in a.DTYPES.values()]


api.add_router("/calc", calc)
api.add_router("/catalog", catalog)
