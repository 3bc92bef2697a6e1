"""The course's ten pages and 25 problems: numbers, titles and which page holds which problem.

Plain Python, no Django: views, templates and tests read it. A problem keeps its own number
wherever it sits; the pages group them by theme.
"""

from dataclasses import dataclass
from functools import cache
from importlib import import_module
from pathlib import Path
from types import ModuleType

CONTENT_DIR = Path(__file__).resolve().parent / "content"

# The nine sections every problem has, in order: (anchor slug, heading).
SECTIONS: tuple[tuple[str, str], ...] = (
    ("why", "Why it is asked"),
    ("concepts", "Concepts"),
    ("worked", "Worked answer"),
    ("tradeoffs", "Trade-offs"),
    ("answer", "Model interview answer"),
    ("listens", "What the interviewer listens for"),
    ("followups", "Follow-ups"),
    ("mistakes", "Common mistakes"),
    ("demo", "Interactive demo"),
)


# How senior an interview the problem belongs to, and about how many minutes a good spoken
# answer takes (the model answer is about two; a design problem runs longer).
LEVELS: dict[int, tuple[str, int]] = {
    1: ("junior", 3), 2: ("junior", 3), 3: ("senior", 5), 4: ("senior", 4), 5: ("senior", 4),
    6: ("junior", 3), 7: ("senior", 4), 21: ("staff", 6), 8: ("senior", 5), 22: ("staff", 7),
    9: ("senior", 5), 10: ("senior", 5), 17: ("staff", 5), 11: ("senior", 5), 12: ("senior", 5),
    13: ("senior", 4), 14: ("senior", 4), 15: ("staff", 5), 16: ("junior", 4), 18: ("senior", 5),
    19: ("senior", 5), 20: ("staff", 6), 23: ("staff", 8), 24: ("staff", 8), 25: ("staff", 12),
}


@dataclass(frozen=True)
class Problem:
    number: int
    title: str
    page: int

    @property
    def level(self) -> str:
        """"junior", "senior" or "staff": the interview the question usually comes up in."""
        return LEVELS[self.number][0]

    @property
    def minutes(self) -> int:
        """About how long a good spoken answer takes."""
        return LEVELS[self.number][1]

    @property
    def drills(self) -> list:
        """The drill kinds that practise this problem's arithmetic (problems/drills.py)."""
        from problems.drills import kinds_for

        return kinds_for(problem=self.number)

    @property
    def anchor(self) -> str:
        return f"problem-{self.number}"

    @property
    def template_name(self) -> str | None:
        """The problem's prose as a template path, or None until it is written."""
        name = f"content/p{self.number:02d}.html"
        return name if (CONTENT_DIR / f"p{self.number:02d}.html").exists() else None

    @property
    def content_module(self) -> ModuleType | None:
        """problems.content.pNN, which builds the problem's worked arithmetic, when it exists."""
        return _content_module(self.number)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        """(title, url) of each source the problem cites: its content module's SOURCES."""
        return tuple(getattr(self.content_module, "SOURCES", ()))


@dataclass(frozen=True)
class Page:
    number: int
    title: str
    summary: str
    problems: tuple[Problem, ...]

    @property
    def slug(self) -> str:
        return f"{self.number:02d}"


_PAGES: tuple[tuple[int, str, str, tuple[tuple[int, str], ...]], ...] = (
    (1, "A request, end to end",
     "What happens between pressing enter and the first token, and how tokens reach the client.",
     ((1, "From request to first token"),
      (2, "Streaming over SSE, disconnects and cancellation"))),
    (2, "The KV cache and attention",
     "The memory that decides how many users fit, how it is paged, and why fused attention wins.",
     ((3, "Size the KV cache for a 70B model at 32K context × 100 users"),
      (4, "PagedAttention"),
      (5, "Why FlashAttention is faster with the same maths"))),
    (3, "Batching and scheduling",
     "Sharing each forward pass among many requests without letting any of them starve.",
     ((6, "Continuous vs static batching"),
      (7, "Chunked prefill for a 100K-token prompt"),
      (21, "Multi-tenant fairness and admission control"))),
    (4, "Reusing and moving the KV cache",
     "Skipping work already done, and running prefill and decode on different machines.",
     ((8, "Prefix caching and cache-aware routing"),
      (22, "Splitting prefill and decode, and moving the KV cache"))),
    (5, "Latency",
     "Where inter-token latency comes from, when speculation pays, and why the tail is long.",
     ((9, "Cut inter-token latency without losing throughput"),
      (10, "When speculative decoding helps or hurts"),
      (17, "p99 is 10× p50"))),
    (6, "Precision and hardware",
     "Number formats and accelerators: what each buys in memory, bandwidth and compute.",
     ((11, "FP8 vs INT8 vs INT4 vs NVFP4"),
      (12, "H100 vs H200 vs B200 vs L40S"))),
    (7, "Profiling and kernels",
     "Finding where a step's time goes, and writing the kernel that takes it back.",
     ((13, "Profile with Nsight"),
      (14, "The GPU at 30% utilisation"),
      (15, "A fused Triton RMSNorm"))),
    (8, "Measuring",
     "The metrics that describe a serving system, and benchmarks that compare engines fairly.",
     ((16, "TTFT, TPOT, queue depth, cache hit rate, cost per request"),
      (18, "Benchmarking vLLM vs TensorRT-LLM vs SGLang"))),
    (9, "Operations",
     "Changing a live model safely, and adding capacity when new replicas start slowly.",
     ((19, "Rolling out a new model or quantisation with rollback"),
      (20, "Autoscaling with slow cold starts"))),
    (10, "Scale and cost",
     "Very large models across many GPUs, the levers on cost, and a whole service designed.",
     ((23, "Serving a large MoE: tensor, pipeline and expert parallelism"),
      (24, "Cut cost per million tokens by 70%"),
      (25, "ChatGPT-style serving for 1M daily users"))),
)

PAGES: tuple[Page, ...] = tuple(
    Page(number, title, summary, tuple(Problem(n, t, number) for n, t in problems))
    for number, title, summary, problems in _PAGES
)
PROBLEMS: dict[int, Problem] = {p.number: p for page in PAGES for p in page.problems}
PAGE_NUMBERS: tuple[int, ...] = tuple(page.number for page in PAGES)


def page_get(*, number: int) -> Page | None:
    """The page with this number (1-10), or None."""
    return PAGES[number - 1] if 1 <= number <= len(PAGES) else None


def problem_get(*, number: int) -> Problem | None:
    """The problem with this number (1-25), or None."""
    return PROBLEMS.get(number)


@cache
def _content_module(number: int) -> ModuleType | None:
    if not (CONTENT_DIR / f"p{number:02d}.py").exists():
        return None
    return import_module(f"problems.content.p{number:02d}")
