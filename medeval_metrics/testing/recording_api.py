"""A loopback chat-completions endpoint that records every request's headers and body, for leak tests.

    with RecordingChatServer(reply="A", fail={1: 422}, echo_request_in_errors=True) as server:
        ... --model local-chat-completions --model_args base_url={server.chat_url},...
        server.requests  # [{"headers": {...}, "body": {...}, "raw": "...", "status": 422}, ...]

Failures are numbered by arrival (1-based). With ``echo_request_in_errors`` a failure answers the
way an OpenAI-compatible server built on FastAPI answers a 422: a ``detail`` list whose ``input``
quotes the whole request body (the prompt included). Binds 127.0.0.1 on a free port; answers 503
past ``max_requests`` so a runaway retry loop ends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from medeval_metrics.testing.loopback import send_json, start_server, stop_server


class RecordingChatServer:
    def __init__(
        self,
        reply: Callable[[dict[str, Any]], str] | str = "A",
        fail: dict[int, int] | None = None,
        echo_request_in_errors: bool = False,
        max_requests: int = 200,
    ) -> None:
        self.reply = reply if callable(reply) else (lambda _body, text=reply: text)
        self.fail = dict(fail or {})
        self.echo_request_in_errors = echo_request_in_errors
        self.max_requests = max_requests
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def chat_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1/chat/completions"

    def header_values(self) -> list[str]:
        """Every header value any request carried."""
        with self._lock:
            return [value for request in self.requests for value in request["headers"].values()]

    def _error_body(self, status: int, body: Any) -> dict[str, Any]:
        if self.echo_request_in_errors:
            return {"detail": [{"type": "value_error", "loc": ["body"], "msg": f"injected {status}", "input": body}]}
        return {"error": {"message": f"injected failure {status}", "code": status}}

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body = json.loads(raw or "{}")
        except ValueError:
            body = None
        with self._lock:
            number = len(self.requests) + 1
            status = 503 if number > self.max_requests else self.fail.get(number, 200)
            self.requests.append({"headers": dict(handler.headers), "body": body, "raw": raw, "status": status})
        if status == 200:
            text = self.reply(body or {})
            payload: dict[str, Any] = {
                "id": f"rec-{number}",
                "object": "chat.completion",
                "model": (body or {}).get("model", "x"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        else:
            payload = self._error_body(status, body)
        send_json(handler, status, json.dumps(payload).encode())

    def __enter__(self) -> RecordingChatServer:
        self._httpd = start_server(self._handle, "recording-chat-api")
        return self

    def __exit__(self, *exc: object) -> None:
        stop_server(self._httpd)
        self._httpd = None
