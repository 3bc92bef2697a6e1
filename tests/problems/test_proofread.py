"""Every problem over the test suite's grid of its inputs (problems/proofread.py, the grid
`make proofread` extends with random draws): every option of every select, each number at its
bounds and at 0 and 1 where allowed, one refused value per calculator. No sentence may break
the course's rules at any of them (COURSE.md, "Correct at every input")."""

import pytest

from problems.proofread import client_fetch, problem_proofread
from problems.registry import PROBLEMS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fetch():
    return client_fetch()


@pytest.mark.parametrize("number", sorted(PROBLEMS), ids=lambda n: f"problem-{n}")
def test_problem_reads_right_over_its_grid(number, fetch, db):
    report = problem_proofread(PROBLEMS[number], fetch, full=False, seed=0)
    assert report.tried > 1
    flags = "\n".join(f"{f.rule}: {f.url}\n  {f.sentence}" for f in report.flags)
    assert not report.flags, f"problem {number} flagged:\n{flags}"
