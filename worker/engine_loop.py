"""One engine per worker process, stepped by one thread that every chat-like request joins.

Each request's Celery task (a lifecycle or streaming demo run, an OpenAI-API request) runs in
a thread of its own. It opens an `EngineClient`, adds its requests and reads its own events;
the loop thread steps the engine while any request has work, so requests from different
visitors share each step, as in a real serving engine.

    loop = EngineLoop(engine)          # once per worker process, after loading
    client = loop.client(owner="session:abc")
    request_id = client.add_request(token_ids, SamplingParams(max_tokens=32))
    while ...:
        for event in client.events(timeout=0.05): ...   # queued, admitted, token, step, ...
    client.close()                      # aborts whatever is left: every block returns

The engine is not thread-safe: only code holding `loop.lock` touches it. The loop holds it
for one step at a time (a few milliseconds), clients for one call. A step that raises fails
every request in it (each client gets an `error` event) and the loop carries on with a fresh
engine from `engine_factory`, so one bad step never wedges the worker.
"""

import logging
import queue
import threading
import uuid
from collections.abc import Callable

logger = logging.getLogger(__name__)

# How long the idle loop sleeps between checks when nobody wakes it (seconds).
_IDLE_WAIT_S = 1.0


class EngineClient:
    """One task's view of the shared engine: its own requests and its own event queue."""

    def __init__(self, loop: "EngineLoop", *, owner: str) -> None:
        self.loop = loop
        self.owner = owner
        self.request_ids: set[str] = set()  # added and not yet finished or aborted
        self._events: queue.SimpleQueue = queue.SimpleQueue()

    # Calls into the engine, each under the loop's lock.

    def add_request(self, prompt, params, *, chat: bool = False,  # noqa: ANN001
                    cache_salt: str | None = None, pace_s: float = 0.0) -> str:
        """Queue a request in the shared engine; raises ValueError for a bad prompt."""
        request_id = f"{self.owner[:24]}-{uuid.uuid4().hex[:12]}"
        # Tokenize before taking the lock: a long prompt's template and tokenizer would
        # otherwise hold every other request's next step (a 2.4 MB prompt stalled an 8-token
        # request for 24 s). Token ids pass through the engine's encoder unchanged.
        if chat or not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            with self.loop.tokenize_lock:
                prompt, chat = self.loop.engine.encode_prompt(prompt, chat=chat), False
        with self.loop.lock:
            self.loop.engine.add_request(prompt, params, request_id=request_id, chat=chat,
                                         tenant=self.owner, cache_salt=cache_salt,
                                         pace_s=pace_s)
            self.loop.clients[request_id] = self
            self.request_ids.add(request_id)
        self.loop.wake()
        return request_id

    def abort(self, request_id: str) -> bool:
        """Abort one of this client's requests now; its blocks return at once."""
        if request_id not in self.request_ids:
            return False
        with self.loop.lock:
            aborted = self.loop.engine.abort(request_id)
        self.request_ids.discard(request_id)
        self.loop.wake()  # the next step hands out the `aborted` event
        return aborted

    def close(self) -> None:
        """Abort whatever this client still has running (a failed or cancelled task)."""
        for request_id in list(self.request_ids):
            self.abort(request_id)

    def stats(self) -> dict:
        with self.loop.lock:
            return self.loop.engine.stats()

    def encode_prompt(self, prompt, *, chat: bool = False) -> list[int]:  # noqa: ANN001
        with self.loop.lock:
            return self.loop.engine.encode_prompt(prompt, chat=chat)

    def token_pieces(self, token_ids: list[int]) -> list[str]:
        """Each token's own text; special tokens (which decode to nothing) by name."""
        with self.loop.lock:
            engine = self.loop.engine
            names = (engine.tokenizer.convert_ids_to_tokens(token_ids)
                     if engine.tokenizer is not None else [""] * len(token_ids))
            return [engine.decode([token_id]) or name
                    for token_id, name in zip(token_ids, names, strict=True)]

    @property
    def model_name(self) -> str:
        return self.loop.model_name

    # Events.

    def events(self, *, timeout: float) -> list[dict]:
        """This client's events: waits up to `timeout` seconds for the first, then takes every
        one already there. Step events count only the steps that carried this client's
        requests, with `num_mine` (this client's sequences) and `num_owners` (visitors)."""
        try:
            first = self._events.get(timeout=timeout)
        except queue.Empty:
            return []
        out = [first]
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def _deliver(self, event: dict) -> None:
        if event.get("type") in ("finished", "aborted", "error"):
            self.request_ids.discard(event.get("request_id"))
        self._events.put(event)


class FairLock:
    """A re-entrant lock handed out first come, first served.

    The loop holds the engine's lock for each step and takes it again as soon as the step is
    done. A plain lock lets the thread that just released it win that race nearly every time,
    so a client thread waiting to abort could wait out whole answers: a timed-out client's
    1,000-token request once ran to its end before the abort got in. Here each acquirer draws a
    ticket, and the loop's next step waits behind any client already waiting. A waiter
    interrupted before its turn (KeyboardInterrupt, an exception raised into its thread) gives
    its ticket up, so the threads behind it are still served.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._next_ticket = 0
        self._serving = 0
        self._abandoned: set[int] = set()  # tickets whose threads stopped waiting

    def acquire(self) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            ticket = self._next_ticket
            self._next_ticket += 1
            try:
                while self._serving != ticket:
                    self._cond.wait()
            except BaseException:
                # Wait re-takes the condition's lock before raising: the state is ours here.
                if self._serving == ticket:
                    self._serve_next()  # its turn had come: pass it on
                else:
                    self._abandoned.add(ticket)
                raise
            self._owner, self._depth = me, 1
            return True

    def _serve_next(self) -> None:
        """The next waiting ticket's turn (called holding the condition's lock)."""
        self._serving += 1
        while self._serving in self._abandoned:
            self._abandoned.remove(self._serving)
            self._serving += 1
        self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a FairLock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._serve_next()

    def __enter__(self) -> "FairLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class EngineLoop:
    def __init__(self, engine=None, *, model_name: str = "",  # noqa: ANN001
                 setup: Callable[[], object] | None = None,
                 engine_factory: Callable[[], object] | None = None,
                 on_events: Callable[[list[dict], dict], None] | None = None) -> None:
        """Give an `engine`, or a `setup` that builds (and warms up) one in the loop thread.

        Building it there matters on CPU: torch's intra-op thread team belongs to the thread
        that uses it, and a second thread's team (the one that loaded the model) spinning
        beside the loop's slowed each step from 1.8 to 7 ms on two cores.
        `on_events(events, stats)` sees every step's events and the engine's stats after it
        (the metrics hook), called from the loop thread."""
        self.engine = engine
        self.setup = setup
        self.ready = threading.Event()
        self.setup_error: BaseException | None = None
        self.model_name = model_name
        self.engine_factory = engine_factory
        self.on_events = on_events
        self.lock = FairLock()  # the engine's: clients take it between the loop's steps
        # Tokenizing happens outside `lock`, one prompt at a time (a fast tokenizer shared by
        # threads can refuse a concurrent call), so the steps go on meanwhile.
        self.tokenize_lock = threading.Lock()
        self.clients: dict[str, EngineClient] = {}  # request id -> its client
        self.steps = 0
        self._work = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="engine-loop")

    def client(self, *, owner: str) -> EngineClient:
        return EngineClient(self, owner=owner)

    def start(self) -> "EngineLoop":
        """Start the loop thread; with a `setup`, wait until it has built the engine (and
        raise what it raised)."""
        self._thread.start()
        self.ready.wait()
        if self.setup_error is not None:
            raise self.setup_error
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self.wake()
        self._thread.join(timeout=timeout)

    def wake(self) -> None:
        self._work.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            if self.engine is None:
                self.engine = self.setup()
        except BaseException as exc:
            self.setup_error = exc
            return
        finally:
            self.ready.set()
        while not self._stopping.is_set():
            self._work.clear()  # before looking, so a wake() after the look is not lost
            with self.lock:
                engine = self.engine
                busy = engine.has_unfinished() or engine.has_pending_events()
                wait = engine.seconds_until_ready() if busy else _IDLE_WAIT_S
                if busy and (wait == 0 or engine.has_pending_events()):
                    self._step_locked()
                    continue
            self._work.wait(wait)

    def _step_locked(self) -> None:
        try:
            events = self.engine.step()
        except Exception as exc:  # a broken step must not take every later request down
            logger.exception("engine step failed; failing its requests and reloading")
            self._fail_all(f"the engine failed: {exc}")
            return
        self.steps += 1
        stats = self.engine.stats()
        self._dispatch(events)
        if self.on_events is not None:
            try:
                self.on_events(events, stats)
            except Exception:  # metrics must never stop serving
                logger.exception("engine metrics hook failed")

    def _dispatch(self, events: list[dict]) -> None:
        # Who rode in the step, looked up before its finished requests leave the map.
        step = next((e for e in events if e["type"] == "step"), None)
        riders = [self.clients[i] for i in (step or {}).get("request_ids", [])
                  if i in self.clients]
        for event in events:
            if event["type"] == "step":
                self._step_deliver(event, riders)
                continue
            request_id = event.get("request_id")
            if event["type"] == "forked" and event.get("parent") in self.clients:
                # Sample i of an n > 1 request belongs to the parent's client: its tokens,
                # its end and its abort (see close()) go there.
                parent_client = self.clients[event["parent"]]
                self.clients[request_id] = parent_client
                parent_client.request_ids.add(request_id)
            client = self.clients.get(request_id)
            if client is None:
                continue
            if event["type"] in ("finished", "aborted"):
                del self.clients[request_id]
            client._deliver(event)

    @staticmethod
    def _step_deliver(event: dict, riders: list[EngineClient]) -> None:
        """Each client whose requests this step carried gets the step, with who else rode."""
        if not riders:
            return
        mine: dict[EngineClient, int] = {}
        for client in riders:
            mine[client] = mine.get(client, 0) + 1
        visitors = len({c.owner for c in mine})
        for client, count in mine.items():
            client._deliver({**event, "num_mine": count, "num_owners": visitors})

    def _fail_all(self, message: str) -> None:
        failed = list(self.clients.items())
        self.clients.clear()
        try:  # free what the requests held; a half-done step may make even this fail
            for request_id, _ in failed:
                self.engine.abort(request_id)
            self.engine.step()
        except Exception:
            if self.engine_factory is None:
                raise
            logger.warning("engine left inconsistent by the failed step: loading it afresh")
            self.engine = self.engine_factory()
        # Told last, so a client that retries at once finds the engine ready.
        for request_id, client in failed:
            client._deliver({"type": "error", "request_id": request_id, "message": message})
