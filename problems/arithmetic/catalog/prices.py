"""Example GPU prices: one provider's published on-demand rates on one date, so the four GPUs
of problem 12 are compared at prices from the same list. Examples, not quotes: prices vary by
provider, region and commitment, and change month to month; every calculator that uses them
lets the learner enter their own."""

from dataclasses import dataclass

MODAL_SOURCE = "https://modal.com/pricing"
MODAL_NOTE = ("Serverless per-second list price (× 3,600 for an hour), one provider, one date; "
              "dedicated and reserved capacity is usually cheaper. An example, not a quote.")


@dataclass(frozen=True)
class PriceExample:
    """One GPU's example price (dollars per GPU-hour), who lists it, when, and where."""

    gpu: str
    dollars_per_hour: float
    provider: str
    as_of: str
    source: str
    note: str


def _modal(gpu: str, dollars_per_second: float) -> PriceExample:
    return PriceExample(gpu=gpu, dollars_per_hour=dollars_per_second * 3600, provider="Modal",
                        as_of="May 2026", source=MODAL_SOURCE, note=MODAL_NOTE)


# Modal's rate card: H100 $0.001097/s, H200 $0.001261/s, B200 $0.001736/s, L40S $0.000542/s.
# The H100 and L40S rates were checked against techbytes.app's pricing matrix, verified on
# 2026-05-07 (https://techbytes.app/posts/serverless-gpu-pricing-matrix-modal-replicate-lambda-2026/).
PRICE_EXAMPLES: dict[str, PriceExample] = {
    p.gpu: p for p in (
        _modal("h100-sxm", 0.001097),
        _modal("h200", 0.001261),
        _modal("b200", 0.001736),
        _modal("l40s", 0.000542),
    )
}


def price_example_get(gpu: str) -> PriceExample | None:
    """The example price of `gpu` (by catalog id), or None when the list has none."""
    return PRICE_EXAMPLES.get(gpu)
