"""The 24-hour prep plan on the home page: which pages or problems to work in which hours."""

from dataclasses import dataclass

from problems.registry import Page, Problem, page_get, problem_get


@dataclass(frozen=True)
class PlanBlock:
    first_hour: int
    last_hour: int
    page_numbers: tuple[int, ...]
    problem_numbers: tuple[int, ...]
    goals: tuple[str, ...]

    @property
    def pages(self) -> tuple[Page, ...]:
        return tuple(page_get(number=n) for n in self.page_numbers)

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(problem_get(number=n) for n in self.problem_numbers)


PLAN: tuple[PlanBlock, ...] = (
    PlanBlock(0, 4, (1, 2), (),
              ("explain prefill vs decode", "size a KV cache on paper")),
    PlanBlock(4, 8, (3, 4), (),
              ("why continuous batching wins", "prefix caching and disaggregation")),
    PlanBlock(8, 12, (5, 6), (),
              ("speculative decoding and bandwidth-bound arithmetic",
               "choose a GPU and a precision and defend both")),
    PlanBlock(12, 16, (7, 8), (),
              ("the roofline", "debugging 30% utilisation", "the dashboards to build")),
    PlanBlock(16, 20, (9, 10), (),
              ("operations", "MoE parallelism", "cost levers")),
    PlanBlock(20, 24, (), (25,),
              ("the capstone, out loud, twice, with different assumptions",)),
)
