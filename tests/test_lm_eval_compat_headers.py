"""``lm_eval_compat.set_api_request_headers``: still needed, and still working."""

from __future__ import annotations


def _local_chat(monkeypatch):
    from lm_eval.models.openai_completions import LocalChatCompletion

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback-canary")
    return LocalChatCompletion(base_url="http://127.0.0.1:9/v1/chat/completions", model="m", tokenizer_backend=None)


def test_patch_still_needed_lm_eval_falls_back_to_openai_api_key(monkeypatch):
    # when this fails, lm-eval no longer sends $OPENAI_API_KEY to an unkeyed endpoint: the patch can go
    assert _local_chat(monkeypatch).header == {"Authorization": "Bearer sk-fallback-canary"}


def test_patch_sets_exactly_the_given_headers(monkeypatch):
    from medeval_metrics.lm_eval_compat import set_api_request_headers

    lm = _local_chat(monkeypatch)
    set_api_request_headers(lm, {})
    assert lm.header == {}
    lm = _local_chat(monkeypatch)
    set_api_request_headers(lm, {"x-api-key": "v"})
    assert lm.header == {"x-api-key": "v"}
