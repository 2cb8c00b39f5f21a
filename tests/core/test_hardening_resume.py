"""Resume an interrupted generation run with lm-eval's ``--use_cache``: the documented command

    medeval run ... --use_cache DIR/responses   (then the same command again after an interruption)

An API model behind a loopback server that dies after 5 answers interrupts the first run; the
second run, same command, asks the server only for the answers not yet cached and ends with the
scores an uninterrupted run gives (hand-computed from the fixture below)."""

from __future__ import annotations

import json

import pytest
from conftest import EMSQA_ITEMS as ITEMS
from conftest import FIXTURES, find_results, run_cli
from conftest import emsqa_gold as _gold

from medeval_metrics.testing.fake_api import FakeChatServer


def _answer(messages: list[dict]) -> str:
    """Gold for even-numbered items, option "e" (never gold here) for odd ones."""
    text = " ".join(str(m.get("content", "")) for m in messages)
    index = max(range(len(ITEMS)), key=lambda i: text.rfind(ITEMS[i]["question"]))
    return json.dumps(_gold(ITEMS[index]) if index % 2 == 0 else ["e"])


@pytest.mark.e2e
def test_interrupted_generation_resumes_from_use_cache(tmp_path):
    assert all("e" not in _gold(item) for item in ITEMS)
    expected_acc = sum(1 for i in range(len(ITEMS)) if i % 2 == 0) / len(ITEMS)
    cache_prefix = tmp_path / "cache" / "responses"
    cache_prefix.parent.mkdir()
    out = tmp_path / "out"

    def run(server: FakeChatServer):
        return run_cli(
            [
                "run",
                "--model",
                "local-chat-completions",
                "--model_args",
                f"model=fake,base_url={server.chat_url},num_concurrent=1,max_retries=2,tokenizer_backend=none",
                "--tasks",
                "emsqa_private",
                "--apply_chat_template",
                "--metadata",
                json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
                "--use_cache",
                str(cache_prefix),
                "--output_path",
                str(out),
                "--log_samples",
            ],
            cwd=tmp_path,
            timeout=300,
        )

    # Run 1: the server answers 5 requests, then fails every request (503): lm-eval gives up.
    with FakeChatServer(answer=_answer, max_requests=5) as dying:
        first = run(dying)
        assert dying.statuses[:5] == [200] * 5 and set(dying.statuses[5:]) == {503}
    assert first.returncode != 0
    assert not list(out.rglob("results_*.json"))
    assert (tmp_path / "cache" / "responses_rank0.db").is_file()

    # Run 2, same command: only the 7 missing answers are requested.
    with FakeChatServer(answer=_answer) as healthy:
        second = run(healthy)
        requests = len(healthy.requests)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Cached requests: 5, Requests remaining: 7" in second.stderr
    assert requests == len(ITEMS) - 5
    results, samples = find_results(out)
    assert results["results"]["emsqa_private"]["acc,flexible-extract"] == pytest.approx(expected_acc)
    flexible = [s for s in samples["emsqa_private"] if s["filter"] == "flexible-extract"]  # logged once per reading
    assert len(flexible) == len(ITEMS) and len(samples["emsqa_private"]) == 2 * len(ITEMS)
