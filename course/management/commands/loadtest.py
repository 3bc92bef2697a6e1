"""`manage.py loadtest` (what `make loadtest` calls): the site under production settings, measured.

Starts, in a temporary directory of its own: a private Redis, one Celery worker, and uvicorn with
the documented number of web processes (`WEB_PROCESSES`, default: one per CPU core) serving
`course.settings.production` on 127.0.0.1 (static files collected, the SSL redirect off since
nothing here speaks TLS). Then three phases with a bounded number of requests:

1. alone: each page requested `--alone` times one after another; the median and p90 of the time
   to the whole response (on loopback that is the server's time plus well under a millisecond);
2. under load: `--clients` clients (20 by default) each sending requests back to back, `--requests`
   in all, mixing every page with calculator re-renders (htmx fragments with varied inputs);
   errors (any status but 200, or no answer), p50 and p99 per kind;
3. throughout phase 2, one more client asking /healthz every 0.5 s: its answers and slowest time.

It prints a table and the goals beside it; it asserts nothing (numbers, not a test).
"""

import os
import random
import statistics
import threading
import time
from collections import defaultdict
from urllib.parse import urlencode

from django.core.management.base import BaseCommand

from course.management.commands._site import http_get as _get
from course.management.commands._site import site_serve

GOAL_ALONE_MS = 15.0
GOAL_P99_MS = 500.0


def _pages() -> list[str]:
    from problems.calculators import calculators_all
    from problems.registry import PAGES

    paths = ["/"] + [f"/pages/{page.number:02d}/" for page in PAGES]
    paths += ["/calculators/"] + [f"/calculators/{c.slug}/" for c in calculators_all()]
    return paths + ["/demos/lifecycle/", "/accounts/login/", "/healthz"]


def _rerenders(rng: random.Random, count: int) -> list[str]:
    """htmx re-render URLs of every calculator with one numeric input changed at random."""
    from problems.calculators import calculators_all

    urls = []
    # Every calculator that has a page to re-render on (one without a page answers 404, which
    # this counted as an error of the site).
    calculators = [c for c in calculators_all(listed_only=False) if c.page]
    for i in range(count):
        calculator = calculators[i % len(calculators)]
        form = calculator.form_class(prefix=calculator.slug)
        data = {form.add_prefix(k): v for k, v in form.defaults().items() if v is not None}
        numeric = [k for k, v in form.defaults().items() if isinstance(v, int | float)
                   and not isinstance(v, bool) and v > 0]
        if numeric:
            name = rng.choice(numeric)
            value = form.defaults()[name] * rng.choice((0.5, 0.75, 1.25, 1.5, 2, 3))
            data[form.add_prefix(name)] = (str(round(value)) if isinstance(form.defaults()[name],
                                           int) else f"{value:g}")
        urls.append(f"/calculators/{calculator.slug}/?"
                    + urlencode({"prefix": calculator.slug, **data}))
    return urls


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class Command(BaseCommand):
    help = "Serve the site with production settings on 127.0.0.1 and measure it (prints a table)."

    def add_arguments(self, parser):
        parser.add_argument("--processes", type=int,
                            default=int(os.environ.get("WEB_PROCESSES", os.cpu_count() or 1)))
        parser.add_argument("--clients", type=int, default=20)
        parser.add_argument("--requests", type=int, default=1200,
                            help="requests in the concurrent phase, in all")
        parser.add_argument("--alone", type=int, default=30,
                            help="requests per page in the one-at-a-time phase")
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args, processes: int, clients: int, requests: int, alone: int,
               seed: int, **options):
        with site_serve(processes=processes) as (port, _directory, _env):
            self._measure(port=port, processes=processes, clients=clients, requests=requests,
                          alone=alone, rng=random.Random(seed))

    def _measure(self, *, port: int, processes: int, clients: int, requests: int, alone: int,
                 rng: random.Random) -> None:
        pages = _pages()
        rerenders = _rerenders(rng, max(40, requests // 3))
        out = self.stdout.write
        # Warm every process: each page and one re-render a few times over.
        box = [None]
        for _ in range(processes * 2):
            for path in pages:
                _get(box, port, path)
        for path in rerenders[:len(pages)]:
            _get(box, port, path, htmx=True)

        out(f"\nProduction settings, {processes} web process(es), 127.0.0.1:{port}\n")
        out(f"1. Alone: {alone} requests per page, one at a time (ms to the whole response)")
        out(f"{'page':<44}{'median':>9}{'p90':>9}{'status':>8}")
        worst = 0.0
        for path in pages + rerenders[:4]:
            htmx = path in rerenders
            times, statuses = [], set()
            for _ in range(alone):
                status, ms = _get(box, port, path, htmx=htmx)
                times.append(ms)
                statuses.add(status)
            median = statistics.median(times)
            worst = max(worst, median)
            label = (path if not htmx else "re-render " + path.split("?")[0])[:43]
            out(f"{label:<44}{median:>9.1f}{_percentile(times, 90):>9.1f}"
                f"{','.join(map(str, sorted(statuses))):>8}")
        out(f"slowest median {worst:.1f} ms (goal: under {GOAL_ALONE_MS:g} ms)\n")

        work = [(p, False) for p in pages] * (requests // (2 * len(pages)) + 1)
        work = work[:requests // 2] + [(p, True) for p in rerenders]
        work = (work * (requests // len(work) + 1))[:requests]
        rng.shuffle(work)
        lock = threading.Lock()
        results: dict[str, list[tuple[int, float]]] = defaultdict(list)
        health: list[tuple[int, float]] = []
        stop = threading.Event()

        def client_loop() -> None:
            conn = [None]
            while True:
                with lock:
                    if not work:
                        return
                    path, htmx = work.pop()
                status, ms = _get(conn, port, path, htmx=htmx)
                with lock:
                    results["calculator re-renders" if htmx else "pages"].append((status, ms))

        def health_loop() -> None:
            conn = [None]
            while not stop.is_set():
                health.append(_get(conn, port, "/healthz"))
                stop.wait(0.5)

        watcher = threading.Thread(target=health_loop, daemon=True)
        watcher.start()
        threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(clients)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        stop.set()
        watcher.join()

        out(f"2. Under load: {clients} clients, {requests} requests in {wall:.1f} s "
            f"({requests / wall:.0f} requests/s)")
        out(f"{'kind':<26}{'requests':>9}{'errors':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
        for kind, rows in sorted(results.items()):
            times = [ms for _, ms in rows]
            errors = sum(1 for status, _ in rows if status != 200)
            out(f"{kind:<26}{len(rows):>9}{errors:>8}{_percentile(times, 50):>9.1f}"
                f"{_percentile(times, 99):>9.1f}{max(times):>9.1f}")
        out(f"(goal: no errors, p99 under {GOAL_P99_MS:g} ms)\n")
        statuses = sorted({status for status, _ in health})
        slowest = max((ms for _, ms in health), default=float("nan"))
        out(f"3. /healthz during the load: {len(health)} asked, answers {statuses}, "
            f"slowest {slowest:.1f} ms")
