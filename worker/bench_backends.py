"""Two serving backends behind one OpenAI-compatible HTTP interface, for the benchmark demo
(problem 18): this course's engine (continuous batching, stepped by an EngineLoop) and Hugging
Face `generate` with static batches. Each listens on 127.0.0.1 on a port of its own, so the
same benchmark client (demos/benchmark_client.py) measures both exactly as it would measure any
server.

    server = CompletionServer(EngineBackend(engine), tokenize=engine_tokenize).start()
    ... base_url = server.base_url ...
    server.stop()

Both backends receive the same token ids for a prompt (one tokenizer, `tokenize`), decode
greedily, and honour `max_tokens` and `ignore_eos`. The HTTP side is deliberately small
(stdlib ThreadingHTTPServer, HTTP/1.0, one connection per request): GET /v1/models and POST
/v1/completions, streaming (Server-Sent Events, with the usage chunk when asked) or not.

Worker-only: imports torch and transformers when a backend is built.
"""

import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

logger = logging.getLogger(__name__)

_EVENT_WAIT_S = 0.05
_TOKEN_WAIT_S = 120.0  # a request that sees no token for this long is given up


class EngineBackend:
    """The course's engine with continuous batching: every request joins the running batch at
    the next step. The prefix cache is salted per request, so no request reuses another's
    blocks (the Hugging Face backend has no prefix cache to match)."""

    name = "engine"
    title = "this course's engine (continuous batching)"

    def __init__(self, engine) -> None:  # noqa: ANN001
        from worker.engine_loop import EngineLoop

        self.loop = EngineLoop(engine).start()

    def stream(self, prompt_ids: list[int], *, max_tokens: int,
               ignore_eos: bool) -> Iterator[str]:
        from worker.engine import SamplingParams

        client = self.loop.client(owner=f"bench-{uuid.uuid4().hex[:8]}")
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=ignore_eos)
        try:
            client.add_request(prompt_ids, params, cache_salt=uuid.uuid4().hex)
            deadline = time.monotonic() + _TOKEN_WAIT_S
            while time.monotonic() < deadline:
                for event in client.events(timeout=_EVENT_WAIT_S):
                    kind = event.get("type")
                    if kind == "token":
                        deadline = time.monotonic() + _TOKEN_WAIT_S
                        yield event.get("text", "")
                    elif kind in ("finished", "aborted"):
                        return
                    elif kind == "error":
                        raise RuntimeError(event.get("message", "engine error"))
            raise TimeoutError("no token for too long")
        finally:
            client.close()  # a client that left mid-answer: its blocks return at once

    def stop(self) -> None:
        self.loop.stop()


class _Pending:
    def __init__(self, prompt_ids: list[int], max_tokens: int, ignore_eos: bool) -> None:
        self.prompt_ids, self.max_tokens, self.ignore_eos = prompt_ids, max_tokens, ignore_eos
        self.out: queue.SimpleQueue = queue.SimpleQueue()  # token ids, then None at the end


class HFStaticBackend:
    """Hugging Face `generate` with static batches: the requests waiting when a batch starts
    form it (up to `batch_size`), left-padded to one length, and decode together until the
    longest is done; nobody joins a running batch, so a request that arrives meanwhile waits
    for all of it. Each request's tokens are streamed as `generate` produces them."""

    name = "hf-static"
    title = "Hugging Face generate, static batches"

    def __init__(self, model_path: str, *, batch_size: int, decode: Callable[[list[int]], str],
                 pad_token_id: int = 0, eos_token_id: int | None = None,
                 device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.device = device  # the engine's device: a GPU engine against a CPU generate is no
        # comparison of batching
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        self.model.to(device)
        self.model.eval()
        self.batch_size = batch_size
        self.decode = decode
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        self.batches: list[int] = []  # the size of every batch run, for the summary
        self._waiting: queue.SimpleQueue = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="hf-static")
        self._thread.start()

    def stream(self, prompt_ids: list[int], *, max_tokens: int,
               ignore_eos: bool) -> Iterator[str]:
        pending = _Pending(prompt_ids, max_tokens, ignore_eos)
        self._waiting.put(pending)
        while True:
            token = pending.out.get(timeout=_TOKEN_WAIT_S)
            if token is None:
                return
            if isinstance(token, BaseException):
                raise RuntimeError(f"generate failed: {token}")
            yield self.decode([token])

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                first = self._waiting.get(timeout=0.1)
            except queue.Empty:
                continue
            batch = [first]
            while len(batch) < self.batch_size:
                try:
                    batch.append(self._waiting.get_nowait())
                except queue.Empty:
                    break
            try:
                self._generate(batch)
            except Exception as exc:  # every request of the batch hears of it
                logger.exception("hf-static generate failed")
                for pending in batch:
                    pending.out.put(exc)

    def _generate(self, batch: list[_Pending]) -> None:
        torch = self.torch
        from transformers.generation.streamers import BaseStreamer

        self.batches.append(len(batch))
        width = max(len(p.prompt_ids) for p in batch)
        ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, pending in enumerate(batch):
            n = len(pending.prompt_ids)
            ids[row, width - n:] = torch.tensor(pending.prompt_ids)  # left padding
            mask[row, width - n:] = 1
        longest = max(p.max_tokens for p in batch)
        sent = [0] * len(batch)
        done = [False] * len(batch)

        class Rows(BaseStreamer):
            """Hands each new token to its request, until the request's own max_tokens or
            its end-of-sequence token (when it does not ignore it)."""

            def __init__(self) -> None:
                self.prompt_seen = False

            def put(self, value) -> None:  # noqa: ANN001
                if not self.prompt_seen:  # the first call carries the prompts
                    self.prompt_seen = True
                    return
                for row, token in enumerate(value.reshape(-1).tolist()):
                    pending = batch[row]
                    if done[row]:
                        continue
                    if not pending.ignore_eos and token == eos:
                        done[row] = True
                        pending.out.put(None)
                        continue
                    pending.out.put(token)
                    sent[row] += 1
                    if sent[row] >= pending.max_tokens:
                        done[row] = True
                        pending.out.put(None)

            def end(self) -> None:
                for row, pending in enumerate(batch):
                    if not done[row]:
                        done[row] = True
                        pending.out.put(None)

        eos = self.eos_token_id
        ignore_all = all(p.ignore_eos for p in batch)
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            self.model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=longest,
                min_new_tokens=longest if ignore_all else 0, do_sample=False,
                pad_token_id=self.pad_token_id, streamer=Rows())

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)


class CompletionServer:
    """An OpenAI-compatible /v1 on 127.0.0.1 (a free port) in front of one backend."""

    def __init__(self, backend, *, tokenize: Callable[[str], list[int]],  # noqa: ANN001
                 model_id: str) -> None:
        self.backend, self.tokenize, self.model_id = backend, tokenize, model_id
        self.prompt_tokens: list[int] = []  # every request's prompt length, for the summary
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args) -> None:  # noqa: A002
                return  # quiet: the worker's log is for the worker

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") != "/v1/models":
                    return self._json(404, {"error": {"message": "not found"}})
                return self._json(200, {"object": "list", "data": [
                    {"id": server.model_id, "object": "model", "created": 0,
                     "owned_by": "course"}]})

            def do_POST(self) -> None:  # noqa: N802
                if self.path.rstrip("/") != "/v1/completions":
                    return self._json(404, {"error": {"message": "not found"}})
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length",
                                                                            0))))
                    prompt = body["prompt"]
                    prompt = prompt[0] if isinstance(prompt, list) else prompt
                    max_tokens = int(body.get("max_tokens") or 16)
                    ignore_eos = bool(body.get("ignore_eos", False))
                    stream = bool(body.get("stream", False))
                    usage_asked = bool((body.get("stream_options") or {}).get("include_usage"))
                    prompt_ids = server.tokenize(prompt)
                except (ValueError, KeyError, TypeError) as exc:
                    return self._json(400, {"error": {"message": f"bad request: {exc}"}})
                server.prompt_tokens.append(len(prompt_ids))
                meta = {"id": f"cmpl-{uuid.uuid4().hex}", "created": int(time.time()),
                        "model": server.model_id, "object": "text_completion"}
                pieces = server.backend.stream(prompt_ids, max_tokens=max_tokens,
                                               ignore_eos=ignore_eos)
                if not stream:
                    text = list(pieces)
                    return self._json(200, {**meta, "choices": [
                        {"index": 0, "text": "".join(text), "logprobs": None,
                         "finish_reason": "length"}], "usage": _usage(prompt_ids, text)})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                count = 0
                try:
                    for piece in pieces:
                        count += 1
                        self._event({**meta, "choices": [{"index": 0, "text": piece,
                                                          "logprobs": None,
                                                          "finish_reason": None}]})
                    self._event({**meta, "choices": [{"index": 0, "text": "",
                                                      "logprobs": None,
                                                      "finish_reason": "length"}]})
                    if usage_asked:
                        self._event({**meta, "choices": [],
                                     "usage": _usage(prompt_ids, [""] * count)})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pieces.close()  # the client left: stop generating for it

            def _event(self, body: dict) -> None:
                self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name=f"bench-{backend.name}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> "CompletionServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.backend.stop()


def _usage(prompt_ids: list[int], pieces: list[str]) -> dict:
    return {"prompt_tokens": len(prompt_ids), "completion_tokens": len(pieces),
            "total_tokens": len(prompt_ids) + len(pieces)}
