"""An OpenAI-compatible chat-completions server on loopback with scripted judge replies and faults.

Used by the tests and the benchmark: it speaks real HTTP, so judges go through lm-eval's actual API
backends. By default every request gets a valid verdict whose scores are a deterministic function
of (model, question, dimension), so two judges disagree a little and reruns agree exactly. A
``script`` overrides replies per (model, question): a list consumed in order, one entry per request,
each a dict with one of

    {"status": 429, "headers": {"Retry-After": "0"}}   an HTTP error
    {"scores": {"accuracy": 4, ...}, "reasons": ...}   a valid verdict with these scores
    {"content": "text"}                               a reply with this content ("@ID@" -> answer id)
    {"content": None}                                 a reply with null content
    {"raw_body": "{\"choi"}                           a broken (truncated) response body
    {"delay": 3.0, ...}                               sleep first (for client timeouts)

When a script's list is used up, replies go back to the default verdict.
Run standalone: ``python -m medeval_metrics.testing.fake_judge --latency 0.1`` prints its URL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

DIMENSIONS = ("accuracy", "completeness", "clarity")
_ANSWER_ID = re.compile(r"<<<ANSWER-([0-9a-f]{12})>>>")
_QUESTION = re.compile(r"Question:\n(.*?)\n\nReference answer:", re.DOTALL)
_TAGGED_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)  # rubric templates in HELM's style


def default_scores(model: str, question: str) -> dict[str, int]:
    return {
        dim: 1 + int(hashlib.sha256(f"{model}|{question}|{dim}".encode()).hexdigest(), 16) % 5 for dim in DIMENSIONS
    }


def verdict_json(
    answer_id: str, scores: dict[str, int], reasons: dict[str, str] | None = None, style: str = "pack"
) -> str:
    """``style``: "pack" (answer_id and "reason"), or "helm" (no id, "explanation", as HELM's prompt asks)."""
    if style == "helm":
        return json.dumps(
            {d: {"score": s, "explanation": (reasons or {}).get(d, f"{d} ok")} for d, s in scores.items()}
        )
    return json.dumps(
        {
            "answer_id": answer_id,
            **{d: {"score": s, "reason": (reasons or {}).get(d, f"{d} ok")} for d, s in scores.items()},
        }
    )


class FakeJudgeServer:
    """The server on 127.0.0.1: an asyncio server, as real judge endpoints are (vLLM's and other
    OpenAI-compatible servers run on an event loop): one loop serves every connection, keeps
    connections alive (HTTP/1.1, requests with a ``Content-Length`` body) and sets TCP_NODELAY.
    A request's latency is a timer, not a sleeping thread or task: its reply is written the moment
    the timer fires. A thread-per-connection server spent about a millisecond starting each
    connection's thread (at concurrency 128, 0.15 s on the first round), and a task per request
    (aiohttp's server on Python 3.11) waits behind every other ready task before replying; both
    showed up in the judge benchmark as the client's time.

    In a ``with`` block it serves from a daemon thread of its own (its own event loop); ``main``
    serves in the calling thread (the benchmark runs it in a process of its own).

    ``precise_timers``: the loop waits with ``select()`` (microseconds) instead of epoll. CPython
    rounds an epoll wait up to whole milliseconds, so a reply leaves 0-1 ms late and all replies due
    within the same millisecond leave together, which re-synchronises the clients' requests into
    bursts (at 20 ms latency, 2-10% on the benchmark's ratios). ``select()`` only takes descriptors
    below 1024: on in the benchmark's own process (``main``), off in a test process."""

    def __init__(
        self,
        latency: float = 0.0,
        script: dict[tuple[str, str], list[dict[str, Any]]] | None = None,
        port: int = 0,
        style: str = "pack",
        precise_timers: bool = False,
    ) -> None:
        self.latency, self.style, self.port, self.precise_timers = latency, style, port, precise_timers
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.lock = threading.Lock()  # the loop thread writes; tests read from theirs
        self.requests: list[dict[str, Any]] = []  # model, question, status, authorization seen
        self.in_flight = 0
        self.max_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._connections: set[_Connection] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def __enter__(self) -> FakeJudgeServer:
        self._thread = threading.Thread(target=self.serve_forever, name="fake-judge", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join()

    def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve until ``__exit__`` (or the process ends); ``on_ready(url)`` once listening."""
        import selectors

        loop = asyncio.SelectorEventLoop(selectors.SelectSelector() if self.precise_timers else None)
        try:
            loop.run_until_complete(self._serve(on_ready))
        finally:
            loop.close()

    async def _serve(self, on_ready: Callable[[str], None] | None) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            server = await self._loop.create_server(
                lambda: _Connection(self), "127.0.0.1", self.port, backlog=1024, reuse_address=True
            )
        except BaseException as exc:  # a port in use: raised in the thread that entered ``with``
            self._error = exc
            self._ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        if on_ready is not None:
            on_ready(self.url)
        try:
            await self._stop.wait()
        finally:
            server.close()
            for connection in list(self._connections):  # a request still waiting is dropped
                connection.close()
            await server.wait_closed()

    def count(self, model: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if model is None or r["model"] == model)

    def _begin(
        self, headers: dict[str, str], raw: bytes
    ) -> tuple[float, Callable[[], tuple[int, bytes, dict[str, str]]]]:
        """Record one request (in flight until ``_end``); its delay and how to build its reply
        (status, body, extra headers)."""
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            with self.lock:
                self.in_flight += 1
            return 0.0, lambda: (400, b'{"error": {"message": "request body is not a JSON object"}}', {})
        messages = body.get("messages") or []
        text = "\n".join(str(m.get("content", "")) for m in messages)
        id_match, question_match = _ANSWER_ID.search(text), _QUESTION.search(text) or _TAGGED_QUESTION.search(text)
        answer_id = id_match.group(1) if id_match else ""
        question = question_match.group(1) if question_match else ""
        model = str(body.get("model", ""))
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            queue = self.script.get((model, question))
            step = queue.pop(0) if queue else {}
            self.requests.append(
                {
                    "model": model,
                    "question": question,
                    "authorization": headers.get("authorization"),
                    "turns": len(messages),
                    "step": step,
                }
            )

        def reply() -> tuple[int, bytes, dict[str, str]]:
            if "status" in step:
                return (
                    step["status"],
                    json.dumps({"error": {"message": "scripted failure"}}).encode(),
                    step.get("headers", {}),
                )
            if "raw_body" in step:
                return 200, step["raw_body"].encode("utf-8"), {}
            if "content" in step:
                content = step["content"] if step["content"] is None else step["content"].replace("@ID@", answer_id)
            else:
                content = verdict_json(
                    answer_id,
                    step.get("scores") or default_scores(model, question),
                    step.get("reasons"),
                    style=self.style,
                )
            payload = json.dumps(
                {
                    "id": "fake",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                    ],
                    # as an OpenAI-compatible server reports it: the pack records the judges' token use from these
                    "usage": {
                        "prompt_tokens": len(text.split()),
                        "completion_tokens": len(str(content).split()),
                        "total_tokens": len(text.split()) + len(str(content).split()),
                    },
                }
            )
            return 200, payload.encode("utf-8"), {}

        return self.latency + float(step.get("delay", 0.0)), reply

    def _end(self) -> None:
        with self.lock:
            self.in_flight -= 1


_MAX_HEAD = 64 * 1024


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # a scripted status no standard names
        return "Unknown"


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests in order, each answered when its timer fires."""

    def __init__(self, server: FakeJudgeServer) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.pending: asyncio.TimerHandle | None = None  # the request being answered, if any
        self.close_after = False

    def connection_made(self, transport: Any) -> None:
        # asyncio's TCP transports set TCP_NODELAY (a reply is one write anyway): no reply waits
        # for the client's delayed ACK, as with real servers
        self.transport = transport
        self.server._connections.add(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.server._connections.discard(self)
        if self.pending is not None:  # the client timed out and left: its request ends here
            self.pending.cancel()
            self.pending = None
            self.server._end()
        self.transport = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next()

    def _next(self) -> None:
        """Start the next complete request in the buffer, unless one is being answered."""
        if self.pending is not None or self.transport is None:
            return
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            if len(self.buffer) > _MAX_HEAD:
                self._fail(431)
            return
        lines = self.buffer[:head_end].decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        request_line = lines[0].split(" ")
        if len(request_line) != 3 or not request_line[2].startswith("HTTP/1."):
            return self._fail(400)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return self._fail(411)  # the judge client always sends a Content-Length
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            return self._fail(400)
        if len(self.buffer) < head_end + 4 + length:
            return  # the body is still arriving
        raw = self.buffer[head_end + 4 : head_end + 4 + length]
        self.buffer = self.buffer[head_end + 4 + length :]
        self.close_after = headers.get("connection", "").lower() == "close" or request_line[2] == "HTTP/1.0"
        if request_line[0] != "POST":
            self._write(405, b'{"error": {"message": "POST only"}}', {})
            return self._next()
        delay, reply = self.server._begin(headers, raw)
        self.pending = self.server._loop.call_later(delay, self._answer, reply)  # type: ignore[union-attr]

    def _answer(self, reply: Callable[[], tuple[int, bytes, dict[str, str]]]) -> None:
        self.pending = None
        try:
            status, body, headers = reply()
        finally:
            # released before replying: a client cannot send its next request until it has this reply
            self.server._end()
        self._write(status, body, headers)
        self._next()

    def _write(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        if self.transport is None:
            return
        head = [
            f"HTTP/1.1 {status} {_phrase(status)}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        if self.close_after:
            head.append("Connection: close")
        self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        if self.close_after:
            self.transport.close()
            self.transport = None

    def _fail(self, status: int) -> None:
        self.close_after = True
        self._write(status, json.dumps({"error": {"message": _phrase(status)}}).encode(), {})


def main() -> None:
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeJudgeServer(latency=args.latency, port=args.port, precise_timers=True)

    def stop(*_: object) -> None:
        if server._loop is not None and server._stop is not None:
            server._loop.call_soon_threadsafe(server._stop.set)

    # on SIGTERM: stop and say what was served, so a caller checks concurrency by count, not by the clock
    signal.signal(signal.SIGTERM, stop)
    server.serve_forever(on_ready=lambda url: print(url, flush=True))
    print(f"served {server.count()} requests, at most {server.max_in_flight} at once", flush=True)


if __name__ == "__main__":
    main()
