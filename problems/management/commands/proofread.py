"""`manage.py proofread`: every problem rendered over a grid of its inputs and its text checked
(problems/proofread.py). Exits 1 when any sentence is flagged, so CI and scripts can rely on it.
"""

import random

from django.core.management.base import BaseCommand, CommandError
from django.test.utils import setup_test_environment, teardown_test_environment

from problems.proofread import proofread, report_text
from problems.registry import PROBLEMS

CI_SEED = 20261207


class Command(BaseCommand):
    help = ("Render every problem over a grid of its inputs and flag sentences that break the "
            "course's rules (nan, fractional counts, '1 replicas', '0.8× less', unannounced "
            "refusals, 500s).")

    def add_arguments(self, parser):
        parser.add_argument("--problems", default="",
                            help="comma-separated problem numbers (default: all)")
        parser.add_argument("--small", action="store_true",
                            help="the test suite's grid: options and bounds, no random draws")
        parser.add_argument("--draws", type=int, default=12,
                            help="random draws per calculator in the full grid (default 12)")
        parser.add_argument("--seed", default=str(CI_SEED),
                            help=f"seed of the random draws ('random' for a new one; default "
                                 f"{CI_SEED}, the one CI uses)")

    def handle(self, *args, problems: str, small: bool, draws: int, seed: str, **options):
        try:
            numbers = [int(n) for n in problems.split(",") if n.strip()] or None
        except ValueError as error:
            raise CommandError("--problems takes numbers such as 1,2,21") from error
        unknown = [n for n in numbers or () if n not in PROBLEMS]
        if unknown:
            raise CommandError(f"no such problem: {unknown}")
        chosen_seed = random.SystemRandom().randrange(2**31) if seed == "random" else int(seed)
        # The test client needs Django's test environment (allowed hosts, templates).
        setup_test_environment()
        try:
            reports, seconds = proofread(numbers, full=not small, seed=chosen_seed,
                                         draws=draws)
        finally:
            teardown_test_environment()
        self.stdout.write(report_text(reports, seconds))
        self.stdout.write(f"seed {chosen_seed}")
        if any(r.flags for r in reports):
            raise SystemExit(1)
