"""The fake judge server itself (``testing.fake_judge``), spoken to in raw HTTP/1.1: what it records
(requests, models, questions, keys, turns, requests in flight), its latency, keep-alive and
in-order replies on one connection, scripted statuses and headers, bad requests, a client that
leaves mid-request, shutdown with a request still waiting, and a port already in use."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC
from medeval_metrics.testing.fake_judge import FakeJudgeServer, default_scores


def body(model="m1", question="q0", turns=1):
    content = f"Question:\n{question}\n\nReference answer:\nref <<<ANSWER-0123456789ab>>>"
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}] * turns})


def post(server, payload, headers=None, connection=None):
    conn = connection or http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(
        "POST", "/v1/chat/completions", body=payload, headers={"Content-Type": "application/json", **(headers or {})}
    )
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read(), conn


def wait_until(condition, seconds=2.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_a_request_is_recorded_and_answered_with_the_default_verdict():
    with FakeJudgeServer() as server:
        status, headers, raw, _ = post(server, body("m1", "what dose?", turns=3), {"Authorization": "Bearer k-1"})
        assert status == 200
        assert headers["Content-Type"] == "application/json" and int(headers["Content-Length"]) == len(raw)
        verdict = json.loads(json.loads(raw)["choices"][0]["message"]["content"])
        assert verdict["answer_id"] == "0123456789ab"
        assert {d: verdict[d]["score"] for d in ("accuracy", "completeness", "clarity")} == default_scores(
            "m1", "what dose?"
        )
        assert server.requests == [
            {"model": "m1", "question": "what dose?", "authorization": "Bearer k-1", "turns": 3, "step": {}}
        ]
        assert server.count() == 1 and server.count("m1") == 1 and server.count("m2") == 0
        assert server.in_flight == 0 and server.max_in_flight == 1


def test_latency_is_waited_before_the_reply():
    with FakeJudgeServer(latency=0.15) as server:
        start = time.perf_counter()
        post(server, body())
        elapsed = time.perf_counter() - start
    assert 0.15 <= elapsed < 5.0  # the lower bound is the point; the upper only catches a hang


def test_one_kept_alive_connection_answers_requests_in_order_also_when_pipelined():
    script = {("m1", "slow"): [{"delay": 0.2, "scores": {"accuracy": 1, "completeness": 1, "clarity": 1}}]}
    with FakeJudgeServer(script=script) as server:
        _, _, _, conn = post(server, body(question="first"))
        sock = conn.sock
        post(server, body(question="second"), connection=conn)
        assert conn.sock is sock  # the same connection, kept alive
        # two requests written back to back: the slow one's reply still comes first
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
            for question in ("slow", "fast"):
                data = body(question=question).encode()
                raw.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)
                )
            received = b""
            while received.count(b"HTTP/1.1 200") < 2 or not received.rstrip().endswith(b"}"):
                received += raw.recv(65536)
        first, second = received.split(b"HTTP/1.1 200")[1:]
        assert b'\\"score\\": 1' in first and b'\\"score\\": 1' not in second
        assert [r["question"] for r in server.requests] == ["first", "second", "slow", "fast"]


def test_max_in_flight_counts_concurrent_requests_and_in_flight_returns_to_zero():
    with FakeJudgeServer(latency=0.3) as server:
        statuses = []
        threads = [
            threading.Thread(target=lambda i=i: statuses.append(post(server, body(question=f"q{i}"))[0]))
            for i in range(6)
        ]
        for thread in threads:
            thread.start()
        assert wait_until(lambda: server.in_flight == 6)
        for thread in threads:
            thread.join()
        assert statuses == [200] * 6
        assert server.max_in_flight == 6 and server.in_flight == 0 and server.count() == 6


def test_scripted_status_headers_raw_bodies_and_content():
    script = {
        ("m1", "q0"): [
            {"status": 429, "headers": {"Retry-After": "7"}},
            {"raw_body": '{"choi'},
            {"content": "id @ID@ only"},
            {"content": None},
        ]
    }
    with FakeJudgeServer(script=script) as server:
        status, headers, raw, conn = post(server, body())
        assert (status, headers["Retry-After"]) == (429, "7") and b"scripted failure" in raw
        assert post(server, body(), connection=conn)[2] == b'{"choi'
        reply = json.loads(post(server, body(), connection=conn)[2])
        assert reply["choices"][0]["message"]["content"] == "id 0123456789ab only"
        assert json.loads(post(server, body(), connection=conn)[2])["choices"][0]["message"]["content"] is None
        assert json.loads(post(server, body(), connection=conn)[2])["id"] == "fake"  # script used up: default
        assert [r["step"].get("status") for r in server.requests] == [429, None, None, None, None]


@pytest.mark.parametrize(
    "request_bytes, status",
    [
        (b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nnot json!", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: many\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411),
        (b"GET / HTTP/1.1\r\n\r\n", 405),
        (b"nonsense\r\n\r\n", 400),
    ],
)
def test_bad_requests_get_an_error_status_and_are_not_counted(request_bytes, status):
    with FakeJudgeServer() as server, socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(request_bytes)
        assert raw.recv(65536).startswith(b"HTTP/1.1 %d " % status)
        assert server.count() == 0 and server.in_flight == 0


def test_connection_close_is_honoured():
    with FakeJudgeServer() as server, socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        data = body().encode()
        raw.sendall(b"POST / HTTP/1.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        received = b""
        while chunk := raw.recv(65536):  # ends when the server closes
            received += chunk
        assert received.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in received


def test_a_client_that_leaves_mid_request_is_no_longer_in_flight():
    with FakeJudgeServer(latency=30) as server:
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        data = body().encode()
        raw.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        assert wait_until(lambda: server.in_flight == 1)
        raw.close()
        assert wait_until(lambda: server.in_flight == 0)
        assert server.count() == 1 and server.max_in_flight == 1


def test_shutdown_does_not_wait_for_a_request_still_sleeping_and_frees_the_port():
    server = FakeJudgeServer(latency=60)
    with server:
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        data = body().encode()
        raw.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        assert wait_until(lambda: server.in_flight == 1)
        start = time.perf_counter()
    assert time.perf_counter() - start < 2.0
    try:
        assert raw.recv(65536) == b""  # the waiting request's connection was closed, not answered
    except ConnectionResetError:
        pass  # closed with a reset: also not answered
    raw.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


def test_a_port_in_use_is_an_error_in_the_caller():
    with FakeJudgeServer() as first:
        with pytest.raises(OSError), FakeJudgeServer(port=first.port):
            pass
        assert post(first, body())[0] == 200  # the first server is unharmed


def test_concurrency_128_is_reached_with_workers_started_one_loop_pass_apart():
    # a long latency: every worker has started before the first reply, even on a loaded machine
    with FakeJudgeServer(latency=1.5) as server:
        panel = panel_from_obj(
            {
                "judges": [
                    {"name": "judge_m", "backend": "local-chat-completions", "model": "m", "base_url": server.url}
                ],
                "cache": None,
                "concurrency": 128,
            },
            "test",
        )
        out = PanelRunner(panel, RUBRIC).judge([JudgeItem(f"q{i}", "ref", f"a{i}") for i in range(128)], progress=False)
        assert server.count() == 128 and server.max_in_flight == 128
    assert [row["judge_m"]["scores"] for row in out] == [default_scores("m", f"q{i}") for i in range(128)]


@pytest.mark.e2e
def test_standalone_server_process_as_the_benchmark_grid_runs_it():
    import subprocess
    import sys

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "medeval_metrics.testing.fake_judge",
            "--latency",
            "2.0",
        ],  # long enough that all four start first
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1/chat/completions")
        panel = panel_from_obj(
            {
                "judges": [{"name": "judge_m", "backend": "local-chat-completions", "model": "m", "base_url": url}],
                "cache": None,
                "concurrency": 4,
            },
            "test",
        )
        out = PanelRunner(panel, RUBRIC).judge([JudgeItem(f"q{i}", "ref", f"a{i}") for i in range(4)], progress=False)
        assert [row["judge_m"]["scores"] for row in out] == [default_scores("m", f"q{i}") for i in range(4)]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
    # four at once, counted by the server (a wall-clock bound failed on a loaded CI machine)
    assert process.stdout.read().strip() == "served 4 requests, at most 4 at once"


def test_precise_timers_serve_from_a_select_loop_with_the_same_replies():
    import selectors

    with FakeJudgeServer(latency=0.05, precise_timers=True) as precise, FakeJudgeServer(latency=0.05) as default:
        assert isinstance(precise._loop._selector, selectors.SelectSelector)
        assert not isinstance(default._loop._selector, selectors.SelectSelector)
        replies = [post(server, body("m2", "q7"))[2] for server in (precise, default)]
        assert replies[0] == replies[1] and precise.count("m2") == 1
