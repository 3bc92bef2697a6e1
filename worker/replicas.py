"""Several engines on one worker thread, each on a clock of its own: the replicas of the
prefix-cache demo (problem 8) and the prefill and decode engines of the disaggregation demo
(problem 22).

The worker has one CPU, not one per replica, so the engines take turns; each keeps a virtual
clock advanced by its own measured step times (the `seconds` of each `step` event), as if each
had a machine to itself. The driver always runs whatever is earliest: the next timed action
(a request arriving, a KV handoff landing) or the step of the engine whose clock is furthest
behind. A request that arrives while an engine is mid-step waits for its next step, as it
would on a real server. TTFT and inter-token gaps are read off those clocks.
"""

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Replica:
    """One engine and its clock (seconds)."""

    engine: object  # worker.engine.Engine
    name: str
    clock: float = 0.0
    outstanding: int = 0  # requests added and not finished: the router's load signal
    served: int = 0


@dataclass
class Tracked:
    """What the driver records for one request on one engine (seconds on that engine's clock)."""

    replica: int
    arrival: float
    tag: dict
    prompt_tokens: int = 0
    cached_tokens: int = 0
    token_times: list[float] = field(default_factory=list)
    finished: float | None = None


# A timed action: called with the time it is due; it may add requests (via `submit`) or
# schedule more actions.
Action = Callable[[float], None]


class Cluster:
    """Replicas stepped in clock order, with timed actions between steps."""

    def __init__(self, replicas: list[Replica], *, check: Callable[[], None] = lambda: None,
                 on_finished: Callable[[Tracked, dict, float], None] | None = None) -> None:
        self.replicas = replicas
        self.tracked: dict[tuple[int, str], Tracked] = {}
        self._timed: list[tuple[float, int, Action]] = []
        self._order = itertools.count()
        self._check = check
        self._on_finished = on_finished

    def at(self, time: float, action: Action) -> None:
        heapq.heappush(self._timed, (time, next(self._order), action))

    def submit(self, index: int, prompt, params, *, now: float, tag: dict,  # noqa: ANN001
               **kwargs) -> Tracked:
        """Add a request to replica `index` at time `now`; an idle replica's clock jumps to it."""
        r = self.replicas[index]
        if not r.engine.has_unfinished():
            r.clock = max(r.clock, now)
        rid = r.engine.add_request(prompt, params, **kwargs)
        tracked = Tracked(replica=index, arrival=now, tag=tag)
        self.tracked[(index, rid)] = tracked
        r.outstanding += 1
        return tracked

    def run(self) -> None:
        """Until no action is due and every engine is idle."""
        while True:
            self._check()
            busy = [i for i, r in enumerate(self.replicas) if r.engine.has_unfinished()]
            nearest = min(busy, key=lambda i: self.replicas[i].clock) if busy else None
            if self._timed and (nearest is None
                                or self._timed[0][0] <= self.replicas[nearest].clock):
                time, _, action = heapq.heappop(self._timed)
                action(time)
                continue
            if nearest is None:
                return
            self._step(nearest)

    def _step(self, index: int) -> None:
        r = self.replicas[index]
        events = r.engine.step()
        seconds = next(e["seconds"] for e in events if e["type"] == "step")
        r.clock += seconds
        for e in events:
            t = self.tracked.get((index, e.get("request_id")))
            if t is None:
                continue
            if e["type"] == "admitted":
                t.prompt_tokens = e["prompt_tokens"]
                t.cached_tokens = e["cached_tokens"]
            elif e["type"] == "token":
                t.token_times.append(r.clock)
            elif e["type"] in ("finished", "aborted"):
                t.finished = r.clock
                r.outstanding -= 1
                r.served += 1
                if self._on_finished is not None:
                    self._on_finished(t, e, r.clock)


def handoff_move(handoff):  # noqa: ANN001, ANN201
    """The handoff carried over a byte stream: every K and V tensor written into one buffer and
    read back into new tensors (what a transport does on each side); returns the new handoff
    and the seconds the round trip took."""
    import torch

    from worker.engine.kv_transfer import KVHandoff

    t = time.perf_counter()
    tensors = handoff.keys + handoff.values
    buffer = bytearray()
    for x in tensors:
        buffer += x.contiguous().numpy().tobytes()
    moved, offset = [], 0
    for x in tensors:
        size = x.numel() * x.element_size()
        moved.append(torch.frombuffer(buffer, dtype=x.dtype, count=x.numel(),
                                      offset=offset).view(x.shape).clone())
        offset += size
    layers = len(handoff.keys)
    out = KVHandoff(list(handoff.token_ids), handoff.num_computed_tokens, moved[:layers],
                    moved[layers:])
    return out, time.perf_counter() - t
