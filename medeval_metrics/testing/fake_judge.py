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

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from medeval_metrics.testing.loopback import SHUTDOWN_POLL, send_json

DIMENSIONS = ("accuracy", "completeness", "clarity")
_ANSWER_ID = re.compile(r"<<<ANSWER-([0-9a-f]{12})>>>")
_QUESTION = re.compile(r"Question:\n(.*?)\n\nReference answer:", re.DOTALL)
_TAGGED_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)  # rubric templates in HELM's style


def default_scores(model: str, question: str) -> dict[str, int]:
    return {
        dim: 1 + int(hashlib.sha256(f"{model}|{question}|{dim}".encode()).hexdigest(), 16) % 5 for dim in DIMENSIONS
    }


def verdict_json(answer_id: str, scores: dict[str, int], reasons: dict[str, str] | None = None,
                 style: str = "pack") -> str:
    """``style``: "pack" (answer_id and "reason"), or "helm" (no id, "explanation", as HELM's prompt asks)."""
    if style == "helm":
        return json.dumps({d: {"score": s, "explanation": (reasons or {}).get(d, f"{d} ok")} for d, s in scores.items()})
    return json.dumps(
        {"answer_id": answer_id, **{d: {"score": s, "reason": (reasons or {}).get(d, f"{d} ok")} for d, s in scores.items()}}
    )


class FakeJudgeServer:
    def __init__(self, latency: float = 0.0, script: dict[tuple[str, str], list[dict[str, Any]]] | None = None,
                 port: int = 0, style: str = "pack") -> None:
        self.latency, self.style = latency, style
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # model, question, status, authorization seen
        self.in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # as real servers do: headers and body go out in two writes, and with Nagle's algorithm a
            # kept-alive client waits ~40 ms for the delayed ACK of each reply
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server._handle(self, body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs=SHUTDOWN_POLL, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/chat/completions"

    def __enter__(self) -> "FakeJudgeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def count(self, model: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if model is None or r["model"] == model)

    def _handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
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
            released = False
            self.requests.append({"model": model, "question": question, "authorization": handler.headers.get("Authorization"),
                                  "turns": len(messages), "step": step})
        try:
            time.sleep(self.latency + float(step.get("delay", 0.0)))
            if "status" in step:
                payload, status, headers = json.dumps({"error": {"message": "scripted failure"}}), step["status"], step.get("headers", {})
            elif "raw_body" in step:
                payload, status, headers = step["raw_body"], 200, {}
            else:
                if "content" in step:
                    content = step["content"] if step["content"] is None else step["content"].replace("@ID@", answer_id)
                else:
                    content = verdict_json(answer_id, step.get("scores") or default_scores(model, question),
                                           step.get("reasons"), style=self.style)
                payload = json.dumps({
                    "id": "fake", "object": "chat.completion", "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                })
                status, headers = 200, {}
            data = payload.encode("utf-8")
            # done before replying: a client cannot send its next request until it has this reply
            with self.lock:
                self.in_flight -= 1
                released = True
            try:
                send_json(handler, status, data, headers)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass
        finally:
            if not released:
                with self.lock:
                    self.in_flight -= 1


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeJudgeServer(latency=args.latency, port=args.port)
    print(server.url, flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
