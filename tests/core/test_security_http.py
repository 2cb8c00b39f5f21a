"""HTTP replies the pack reads: capped in size, and no credential follows a redirect to another origin
(issue 22, items 2 and 5). Loopback servers only; every server answers a bounded number of requests."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import tracemalloc
from typing import Self

import pytest

from medeval_metrics.testing.loopback import send_json, start_server, stop_server
from medeval_metrics.testing.recording_api import RecordingChatServer

KEY = "sk-ant-api03-canaryKEY0001"
SECRETS = {
    "x-api-key": KEY,
    "api-key": "azure-canary-0002",
    "Authorization": "Bearer canary-0003",
    "X-Custom-Token": "custom-canary-0004",
}
VERDICT = json.dumps({"accuracy": 4, "completeness": 4, "clarity": 4})


class Redirector:
    """Answers every POST to its chat URL with ``status`` and a Location (another server, or its own
    ``/moved`` path, which it answers as a chat endpoint); records the headers of each request."""

    def __init__(self, target: str | None = None, status: int = 307, max_requests: int = 20) -> None:
        self.target, self.status, self.max_requests = target, status, max_requests
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()

    @property
    def chat_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1/chat/completions"

    def _handle(self, handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        handler.rfile.read(length)
        with self._lock:
            self.requests.append((handler.path, dict(handler.headers)))
            over = len(self.requests) > self.max_requests
        if over:
            send_json(handler, 503, b"{}")
        elif handler.path == "/moved":
            reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}]}
            send_json(handler, 200, json.dumps(reply).encode())
        else:
            send_json(handler, self.status, b"{}", {"Location": self.target or "/moved"})

    def __enter__(self) -> Self:
        self._httpd = start_server(self._handle, "redirector")
        return self

    def __exit__(self, *exc) -> None:
        stop_server(self._httpd)


class BigReplies:
    """Answers each POST with ``body`` (as given: already gzip-compressed when ``encoding`` says so),
    with or without a Content-Length."""

    def __init__(self, body: bytes, encoding: str | None = None, length: bool = True) -> None:
        self.body, self.encoding, self.length = body, encoding, length
        self.count = 0

    @property
    def chat_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1/chat/completions"

    def _handle(self, handler) -> None:
        handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        self.count += 1
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if self.encoding:
            handler.send_header("Content-Encoding", self.encoding)
        if self.length:
            handler.send_header("Content-Length", str(len(self.body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        try:
            handler.wfile.write(self.body)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: as it should
            pass
        handler.close_connection = True

    def __enter__(self) -> Self:
        self._httpd = start_server(self._handle, "big-replies")
        return self

    def __exit__(self, *exc) -> None:
        stop_server(self._httpd)


def gzip_bomb(megabytes: int) -> bytes:
    """A gzip body a thousandth the size of what it unpacks to (zeros)."""
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * 2**20
    return b"".join([*(packer.compress(block) for _ in range(megabytes)), packer.flush()])


# --- judges: the reply cap ------------------------------------------------------------------------


def _judge(url: str):
    from medeval_metrics.judge.config import panel_from_obj
    from medeval_metrics.judge.runner import JudgeItem, PanelRunner
    from medeval_metrics.medicationqa import RUBRIC

    panel = panel_from_obj(
        {
            "judges": [{"name": "j", "backend": "local-chat-completions", "model": "m", "base_url": url}],
            "cache": None,
            "max_retries": 2,
        },
        "t",
    )
    runner = PanelRunner(panel, RUBRIC, sleep=lambda s: None)
    runner.judge([JudgeItem("warm-up", "r", "a")], progress=False)  # imports and first-use allocations, untraced
    tracemalloc.start()
    try:
        out = runner.judge([JudgeItem("q", "r", "a")], progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out[0]["j"], peak


@pytest.mark.parametrize(
    "body, encoding, length",
    [
        pytest.param(gzip_bomb(64), "gzip", True, id="64 MB of zeros in a 64 KB gzip"),
        pytest.param(b" " * (6 * 2**20) + b"{}", None, True, id="6 MB plain, announced"),
        pytest.param(b" " * (6 * 2**20) + b"{}", None, False, id="6 MB plain, no Content-Length"),
    ],
)
def test_an_oversized_judge_reply_is_a_transport_failure_read_only_up_to_the_cap(body, encoding, length):
    with BigReplies(body, encoding, length) as server:
        verdict, peak = _judge(server.chat_url)
        asked = server.count - 1  # after the warm-up
    assert verdict["scores"] is None and verdict["unscored_kind"] == "transport"
    assert verdict["unscored_reason"] == "reply larger than 4 MB after 1 request(s)"
    assert asked == 1  # the same reply again would be as large: not retried
    assert peak < 24 * 2**20, peak  # never the whole unpacked body in memory


def test_a_small_gzip_judge_reply_is_still_read():
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": VERDICT}}]}
    with BigReplies(gzip.compress(json.dumps(reply).encode()), "gzip") as server:
        verdict, _ = _judge(server.chat_url)
    assert verdict["scores"] == {"accuracy": 4, "completeness": 4, "clarity": 4}


# --- the evaluated model: the reply cap and redirects, sync and async ------------------------------


def _chat_model(url: str, header: dict[str, str] | None = None):
    from lm_eval.models.openai_completions import LocalChatCompletion

    return LocalChatCompletion(base_url=url, model="m", tokenizer_backend=None, max_retries=1, header=header)


def _ask_sync(lm):
    context = lm.apply_chat_template([{"role": "user", "content": "hi"}])
    return lm.model_call([context], generate=True, gen_kwargs={"until": [], "max_gen_toks": 4})


def _ask_async(lm):
    context = lm.apply_chat_template([{"role": "user", "content": "hi"}])
    return asyncio.run(
        lm.get_batched_requests([context], ["k"], generate=True, gen_kwargs={"until": [], "max_gen_toks": 4})
    )


@pytest.mark.parametrize("ask", [_ask_sync, _ask_async], ids=["sync", "async"])
def test_an_oversized_model_reply_is_an_error_naming_the_setting(ask, monkeypatch):
    from medeval_metrics import lm_eval_compat
    from medeval_metrics.http_safety import ReplyTooLarge

    monkeypatch.setenv("MEDEVAL_MODEL_MAX_REPLY_MB", "2")
    with (
        BigReplies(gzip_bomb(16), "gzip") as server,
        lm_eval_compat.guard_model_replies(),
        pytest.raises(ReplyTooLarge, match=r"model endpoint's reply is larger than 2 MB.*MEDEVAL_MODEL_MAX_REPLY_MB"),
    ):
        ask(_chat_model(server.chat_url))


@pytest.mark.parametrize("ask", [_ask_sync, _ask_async], ids=["sync", "async"])
def test_no_credential_header_follows_a_redirect_to_another_origin(ask):
    from medeval_metrics import lm_eval_compat

    with (
        RecordingChatServer(reply="A") as elsewhere,
        Redirector(elsewhere.chat_url) as endpoint,
        lm_eval_compat.guard_model_replies(),
    ):
        ask(_chat_model(endpoint.chat_url, header=dict(SECRETS)))
        first = {k.lower(): v for k, v in endpoint.requests[0][1].items()}
        moved = [{k.lower(): v for k, v in r["headers"].items()} for r in elsewhere.requests]
    assert first["x-api-key"] == KEY  # the configured endpoint gets its credentials
    assert len(moved) == 1 and moved[0].get("content-type") == "application/json"
    assert not {name.lower() for name in SECRETS} & set(moved[0]), moved[0]
    assert not any(value in json.dumps(moved[0]) for value in SECRETS.values())


@pytest.mark.parametrize("ask", [_ask_sync, _ask_async], ids=["sync", "async"])
def test_a_redirect_within_the_origin_keeps_the_credentials(ask):
    from medeval_metrics import lm_eval_compat

    with Redirector() as endpoint, lm_eval_compat.guard_model_replies():
        assert ask(_chat_model(endpoint.chat_url, header=dict(SECRETS)))
        paths = [
            (path, {k.lower(): v for k, v in headers.items()}.get("x-api-key")) for path, headers in endpoint.requests
        ]
    assert paths == [("/v1/chat/completions", KEY), ("/moved", KEY)]


def test_anthropic_key_does_not_follow_a_redirect(monkeypatch):
    from lm_eval.models.anthropic_llms import AnthropicChat

    from medeval_metrics import lm_eval_compat

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with (
        RecordingChatServer(reply="A") as elsewhere,
        Redirector(elsewhere.chat_url) as endpoint,
        lm_eval_compat.guard_model_replies(),
    ):
        lm = AnthropicChat(base_url=endpoint.chat_url, model="claude", max_retries=1)
        lm.model_call([[{"role": "user", "content": "hi"}]], generate=True, gen_kwargs={"until": [], "max_gen_toks": 4})
        moved = [r["headers"] for r in elsewhere.requests]
    assert len(moved) == 1 and KEY not in json.dumps(moved)


@pytest.mark.parametrize("ask", [_ask_sync, _ask_async], ids=["sync", "async"])
def test_unguarded_lm_eval_still_forwards_x_api_key_across_origins(ask):
    """Notices when lm_eval_compat.guard_model_replies is no longer needed: lm-eval 0.4.13's own
    clients (requests and aiohttp) follow a 307 to another port with the backend's x-api-key."""
    with RecordingChatServer(reply="A") as elsewhere, Redirector(elsewhere.chat_url) as endpoint:
        ask(_chat_model(endpoint.chat_url, header={"x-api-key": KEY}))
        moved = [{k.lower(): v for k, v in r["headers"].items()} for r in elsewhere.requests]
    assert [h.get("x-api-key") for h in moved] == [KEY]


def test_the_model_reply_setting_is_known_to_the_run_check_and_checked():
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.http_safety import model_reply_limit
    from medeval_metrics.preflight import environment_problems

    assert environment_problems({"MEDEVAL_MODEL_MAX_REPLY_MB": "256"}) == []
    assert model_reply_limit({"MEDEVAL_MODEL_MAX_REPLY_MB": "256"}) == 256 * 2**20
    assert model_reply_limit({}) == 64 * 2**20
    for bad in ("0", "-3", "lots"):
        with pytest.raises(MedevalDataError, match="MEDEVAL_MODEL_MAX_REPLY_MB="):
            model_reply_limit({"MEDEVAL_MODEL_MAX_REPLY_MB": bad})


@pytest.mark.e2e
@pytest.mark.parametrize("concurrent", [1, 2], ids=["sync", "async"])
def test_medeval_run_holds_the_reply_guard_and_refuses_a_header_key(tmp_path, concurrent):
    """The guard is on for the whole of `medeval run`: an oversized reply from the evaluated model is an error naming
    the setting. A key given as a --model_args header never reaches a request: it is refused before the run."""
    from conftest import EMSQA_SYNTHETIC, run_cli

    def run(model_args: dict, env: dict | None = None):
        return run_cli(
            ["run", "--model", "local-chat-completions", "--model_args", json.dumps(model_args)]
            + ["--tasks", "emsqa_private", "--limit", "2", "--apply_chat_template"]
            + ["--metadata", json.dumps({"emsqa_private_path": str(EMSQA_SYNTHETIC)})],
            cwd=tmp_path,
            env=env,
            timeout=300,
        )

    with Redirector() as endpoint:
        settings = {"model": "m", "base_url": endpoint.chat_url, "num_concurrent": concurrent, "max_retries": 1}
        refused = run({**settings, "header": {"x-api-key": KEY, "Content-Type": "application/json"}})
        assert refused.returncode == 2 and endpoint.requests == []
        assert refused.stderr.startswith("medeval: error: --model_args header.x-api-key holds a key")
        assert KEY not in refused.stdout + refused.stderr
    with BigReplies(gzip_bomb(16), "gzip") as server:
        settings = {"model": "m", "base_url": server.chat_url, "num_concurrent": concurrent, "max_retries": 1}
        result = run(settings, env={"MEDEVAL_MODEL_MAX_REPLY_MB": "2"})
    assert result.returncode == 2, result.stderr[-3000:]
    assert (
        "model endpoint's reply is larger than 2 MB" in result.stderr and "MEDEVAL_MODEL_MAX_REPLY_MB" in result.stderr
    )
