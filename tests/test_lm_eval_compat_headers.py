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


def test_post_api_request_still_needed_model_call_opens_a_connection_per_request():
    import inspect

    from lm_eval.models.api_models import TemplateAPI

    # when this fails, lm-eval's model_call reuses connections itself: post_api_request can go
    assert "requests.post(" in inspect.getsource(TemplateAPI.model_call)


def test_post_api_request_sends_what_model_call_sends(monkeypatch):
    import requests
    from lm_eval.models.openai_completions import LocalChatCompletion

    from medeval_metrics.lm_eval_compat import post_api_request, set_api_request_headers
    from medeval_metrics.testing.fake_api import FakeChatServer

    with FakeChatServer(answer="hello") as server:
        lm = LocalChatCompletion(base_url=server.chat_url, model="m", tokenizer_backend=None, max_retries=1)
        set_api_request_headers(lm, {"x-api-key": "v"})
        messages = [lm.apply_chat_template([{"role": "user", "content": "hi"}])]
        gen_kwargs = {"max_gen_toks": 7, "until": [], "temperature": 0, "do_sample": False}
        ours = post_api_request(lm, requests.Session(), messages, gen_kwargs)
        theirs = lm.model_call(messages=messages, generate=True, gen_kwargs=gen_kwargs)
        first, second = server.requests
    assert first["body"] == second["body"] and first["path"] == second["path"]
    assert first["headers"]["x-api-key"] == second["headers"]["x-api-key"] == "v"
    assert lm.parse_generations(outputs=ours, contexts=messages) == lm.parse_generations(outputs=theirs, contexts=messages) == ["hello"]
