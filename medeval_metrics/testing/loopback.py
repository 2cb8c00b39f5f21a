"""What the threaded loopback HTTP servers of the test rig (fake_api, recording_api) share: starting one on
127.0.0.1 and replying with JSON. The judge server (fake_judge) runs on one asyncio loop instead."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# serve_forever checks for shutdown() every poll_interval (0.5 s by default): every ``with`` block
# would end half a second late, which adds up over the test suite.
SHUTDOWN_POLL = {"poll_interval": 0.02}


def send_json(handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: Mapping[str, str] = {}) -> None:
    """One JSON reply: status, content type and length, any extra headers, the body."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def start_server(on_post: Callable[[BaseHTTPRequestHandler], None], name: str) -> ThreadingHTTPServer:
    """A threading HTTP server on a free loopback port, serving in a daemon thread; each POST goes to
    ``on_post(handler)``. Stop it with ``stop_server``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            on_post(self)

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs=SHUTDOWN_POLL, name=name, daemon=True).start()
    return httpd


def stop_server(httpd: ThreadingHTTPServer | None) -> None:
    if httpd is not None:
        httpd.shutdown()
        httpd.server_close()
