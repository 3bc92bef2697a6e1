"""Simulators: demos that need no model, only arithmetic over random events (numpy).

What they are
    A simulator plays out what the course's closed-form arithmetic summarises: tokens routed to
    experts one by one, requests arriving at random at a replica that batches them step by
    step, a day of load against an autoscaler that waits out cold starts. Each demo ends by
    setting what it measured beside what `problems/arithmetic` predicts, and says why they
    differ.

Rules
    - One module per simulator, `demos/simulators/<name>.py`: plain Python and numpy, no
      Django, no torch (the web process imports them; a test keeps torch out of it).
    - Deterministic: every random draw comes from `numpy.random.default_rng(seed)`, with the
      seed an input, so the same inputs give the same plot (and the render cache can keep it).
    - Bounded: every input has limits, and the work grows with a product of inputs that the
      limits cap, so no request can ask for minutes of CPU.
    - Keyword-only functions with units in their docstrings, returning plain dicts of numbers
      and numpy arrays; plotting and words live with the page.

Where they run
    In the web process, synchronously, as a calculator: the problem's content module registers
    a `Calculator` whose `compute` calls the simulator and returns its summary as worked steps,
    whose `plots` draw its runs (the last one measured against predicted) and whose `note` is
    the sentence saying why they differ. The page embeds it with `{% calculator %}`, so its form,
    field errors, htmx re-render, render cache and JSON endpoint are the calculators' own.
    That is only right while a run is cheap, and these are: at their defaults, on one core of
    the (shared, slow) development machine, the routing simulator takes about 70 ms, the
    replica simulator about 50 ms and a simulated day about 20 ms (both pools); their input
    limits (a cap on token-expert draws, on steps per load, on steps per day) hold the worst
    case to a few hundred ms. Each result is deterministic, so the calculators' render cache
    serves a repeated request without running it again. A simulator that needs seconds
    belongs in a Celery task on the experiments queue instead (`demos/runners/`), streaming
    its progress like a live demo, so it never holds a web worker.

Modules
    - `moe_routing`: top-k routing with skewed expert popularity over an expert-parallel
      group, with and without redundant copies of hot experts (problem 23).
    - `replica`: one serving replica under Poisson load, with chunked prefill sharing the
      decode steps (problem 24).
    - `autoscaling`: a day of load (daily curve, noise, an optional spike) against a pool
      scaled by a policy (static, reactive, on queue depth, predictive, a warm pool) with
      cold starts (problems 20 and 25).
"""
