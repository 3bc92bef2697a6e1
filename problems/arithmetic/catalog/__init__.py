"""Catalogs of models, GPUs and number formats, each entry naming its source, and the
helpers that resolve ids to entries (raising `ArithmeticInputError` naming the field)."""

from problems.arithmetic.catalog.dtypes import DTYPES, Dtype, kv_dtypes
from problems.arithmetic.catalog.gpus import GPUS, Gpu
from problems.arithmetic.catalog.models import MODELS, Model, demo_model_load, models_all
from problems.arithmetic.errors import ArithmeticInputError


def model_get(model_id: str, *, field: str = "model") -> Model:
    """The model with id `model_id` (the demo model included when shipped)."""
    models = models_all()
    if model_id not in models:
        raise ArithmeticInputError(
            field=field,
            message=f"unknown model {model_id!r}; known: {', '.join(sorted(models))}",
        )
    return models[model_id]


def gpu_get(gpu_id: str, *, field: str = "gpu") -> Gpu:
    """The GPU with id `gpu_id`."""
    if gpu_id not in GPUS:
        raise ArithmeticInputError(
            field=field, message=f"unknown GPU {gpu_id!r}; known: {', '.join(GPUS)}"
        )
    return GPUS[gpu_id]


def dtype_get(dtype_id: str, *, field: str = "dtype") -> Dtype:
    """The number format with id `dtype_id`."""
    if dtype_id not in DTYPES:
        raise ArithmeticInputError(
            field=field, message=f"unknown number format {dtype_id!r}; known: {', '.join(DTYPES)}"
        )
    return DTYPES[dtype_id]


def kv_dtype_get(dtype_id: str | None, *, model: Model, field: str = "kv_dtype") -> Dtype:
    """The KV cache's number format: `dtype_id`, or the model's own precision when None.

    Never the weights' format by default: quantizing the weights leaves the activations, and
    so the keys and values, in the model's precision unless the engine is told otherwise.
    Formats no engine offers for a KV cache (group-quantized weight formats) are refused.
    """
    if dtype_id is None or dtype_id == "":
        return DTYPES[model.dtype]
    found = dtype_get(dtype_id, field=field)
    if not found.kv:
        offered = ", ".join(d.name for d in kv_dtypes().values())
        raise ArithmeticInputError(
            field=field,
            message=f"{found.name} is a weight format, not one engines offer for the KV cache "
            f"(they offer {offered})",
        )
    return found


__all__ = [
    "DTYPES",
    "GPUS",
    "MODELS",
    "Dtype",
    "Gpu",
    "Model",
    "demo_model_load",
    "dtype_get",
    "kv_dtype_get",
    "kv_dtypes",
    "gpu_get",
    "model_get",
    "models_all",
]
