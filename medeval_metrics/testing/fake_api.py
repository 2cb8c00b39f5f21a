"""A loopback OpenAI-compatible chat-completions server with scripted failures, for tests.

    with FakeChatServer(answer=lambda messages: "B", fail={1: 429, 2: 500}) as server:
        ... --model local-chat-completions --model_args base_url={server.chat_url},...
        server.statuses  # [429, 500, 200, ...] in arrival order

It binds 127.0.0.1 on a free port, answers ``POST .../chat/completions`` (and ``.../completions``),
fails the requests numbered in ``fail`` (1-based arrival order) with that status (429 carries a
``Retry-After`` header), and answers 503 to everything past ``max_requests`` so a runaway retry
loop ends. It records each request's headers and JSON body, so tests can count what reached it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from medeval_metrics.testing.loopback import send_json, start_server, stop_server


class FakeChatServer:
    def __init__(
        self,
        answer: Callable[[list[dict[str, Any]]], str] | str = "A",
        fail: dict[int, int] | None = None,
        max_requests: int = 200,
        retry_after_s: int = 0,
    ) -> None:
        self.answer = answer if callable(answer) else (lambda _messages, text=answer: text)
        self.fail = dict(fail or {})
        self.max_requests = max_requests
        self.retry_after_s = retry_after_s
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body", "status"}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def statuses(self) -> list[int]:
        with self._lock:
            return [r["status"] for r in self.requests]

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def chat_url(self) -> str:
        return self.base_url + "/chat/completions"

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        with self._lock:
            number = len(self.requests) + 1
            if number > self.max_requests:
                status = 503
            else:
                status = self.fail.get(number, 200)
            self.requests.append(
                {"path": handler.path, "headers": dict(handler.headers), "body": body, "status": status}
            )
        if status != 200:
            payload = json.dumps({"error": {"message": f"injected failure {status}", "code": status}}).encode()
            headers = {"Retry-After": str(self.retry_after_s)} if status == 429 else {}
        else:
            messages = (body or {}).get("messages") or [{"role": "user", "content": (body or {}).get("prompt", "")}]
            text = self.answer(messages)
            if handler.path.rstrip("/").endswith("chat/completions"):
                choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            else:
                choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
            payload = json.dumps(
                {
                    "id": f"fake-{number}",
                    "object": "chat.completion",
                    "model": (body or {}).get("model", "fake"),
                    "choices": [choice],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            headers = {}
        send_json(handler, status, payload, headers)

    def __enter__(self) -> FakeChatServer:
        self._httpd = start_server(self._handle, "fake-chat-api")
        return self

    def __exit__(self, *exc: object) -> None:
        stop_server(self._httpd)
        self._httpd = None
