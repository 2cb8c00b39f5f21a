"""``lm_eval_compat.set_api_request_headers`` and ``api_request_payload``: still needed, and still working."""

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


class _Records:
    """lm-eval's API-model log records (its loggers do not propagate to the root)."""

    def __init__(self) -> None:
        import logging

        self.logger = logging.getLogger("lm_eval.models.api_models")
        self.messages: list[str] = []
        self.handler = logging.Handler(logging.DEBUG)
        self.handler.emit = lambda record: self.messages.append(record.getMessage())  # type: ignore[method-assign]

    def __enter__(self) -> _Records:
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self.handler)


def test_eos_workaround_still_needed_a_tokenizer_free_backend_warns_on_eos_string():
    from lm_eval.models.openai_completions import LocalChatCompletion

    lm = LocalChatCompletion(base_url="http://127.0.0.1:9/v1/chat/completions", model="m", tokenizer_backend=None)
    with _Records() as records:
        # when this fails, lm-eval no longer warns for a chat backend without a tokenizer: api_request_payload
        # can read lm.eos_string directly again
        assert lm.eos_string is None
    assert any("Cannot determine EOS string" in m for m in records.messages)


def test_request_body_asks_for_no_eos_string_and_logs_nothing_about_it():
    from lm_eval.models.openai_completions import LocalChatCompletion

    from medeval_metrics.lm_eval_compat import api_request_payload

    gen_kwargs = {"max_gen_toks": 7, "until": [], "temperature": 0, "do_sample": False}
    url = "http://127.0.0.1:9/v1/chat/completions"
    with _Records() as records:
        plain = LocalChatCompletion(base_url=url, model="m", tokenizer_backend=None, max_retries=1)
        configured = LocalChatCompletion(
            base_url=url, model="m", tokenizer_backend=None, max_retries=1, eos_string="<|end|>"
        )
        without_eos, with_eos = (
            api_request_payload(lm, [lm.apply_chat_template([{"role": "user", "content": "hi"}])], gen_kwargs)
            for lm in (plain, configured)
        )
    assert not [m for m in records.messages if "EOS" in m]
    assert without_eos.get("stop") in (None, [])  # the judge's until is empty: no stop string at all
    assert with_eos["stop"] == ["<|end|>"]  # an eos_string the user configured is still sent
