"""One judge as an lm-eval backend: build it, its request body (the API transport sends it) or a batch (``hf``/``vllm``).

API backends (lm-eval's ``TemplateAPI`` family) get one request per call, with the backend's own
payload (``api_payload``) and reply parsing and exactly the headers the judge's config names
(``lm_eval_compat.set_api_request_headers``); the scheduler (``judge.runner``) sends them over its
asyncio transport (``judge.transport``) and owns concurrency, retries and re-asks. Other backends (``hf``, ``vllm``) are
called in batches through ``generate_until``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.config import JudgeConfig, PanelConfig, judge_device

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class TransportFailure(Exception):
    """A request that failed before a reply could be read; ``reason`` is safe to log and store."""

    def __init__(self, reason: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retryable, self.retry_after = reason, retryable, retry_after


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to exponential backoff


def judge_headers(config: JudgeConfig, environ: Any = None) -> dict[str, str]:
    """Exactly the headers this judge's config names, read from the environment now."""
    environ = os.environ if environ is None else environ
    headers: dict[str, str] = {}
    for variable in [config.api_key_env, *config.header_env.values()]:
        if variable and not environ.get(variable):
            raise MedevalDataError(
                f"judge {config.name}: the environment variable {variable} (named in its config) is not set."
            )
    if config.api_key_env:
        headers["Authorization"] = f"Bearer {environ[config.api_key_env]}"
    for header, variable in config.header_env.items():
        headers[header] = environ[variable]
    return headers


class JudgeClient:
    """One judge: an lm-eval backend plus how to send it one conversation."""

    def __init__(self, config: JudgeConfig, panel: PanelConfig, lm: Any | None = None) -> None:
        self.config, self.panel = config, panel
        self.lm = lm if lm is not None else self._build()
        from lm_eval.models.api_models import TemplateAPI

        self.is_api = isinstance(self.lm, TemplateAPI)

    def _build(self) -> Any:
        import lm_eval.models  # noqa: F401  (fills the model registry)
        from lm_eval.api.registry import get_model

        c = self.config
        args: dict[str, Any] = {"model": c.model, **c.model_args}
        try:
            cls = get_model(c.backend)
        except (KeyError, ValueError) as exc:
            raise MedevalDataError(f"judge {c.name}: unknown lm-eval backend {c.backend!r}.") from exc
        from lm_eval.models.api_models import TemplateAPI

        is_api = isinstance(cls, type) and issubclass(cls, TemplateAPI)
        headers = judge_headers(c)
        if headers and not is_api:
            raise MedevalDataError(
                f"judge {c.name}: api_key_env/header_env only apply to API backends, not {c.backend}."
            )
        if is_api:
            if c.base_url:
                args["base_url"] = c.base_url
            # the scheduler's retry loop and asyncio workers replace the backend's
            args.update(num_concurrent=1, max_retries=1, timeout=max(1, int(round(self.panel.timeout))))
            args.setdefault("tokenizer_backend", "none")
            args.setdefault("tokenized_requests", False)
        else:
            args = {"pretrained": c.model, **c.model_args}
            device = judge_device(c)
            if device:
                args["device"] = device
        lm = cls.create_from_arg_obj(args, {})
        if is_api:
            from medeval_metrics.lm_eval_compat import set_api_request_headers

            # exactly the configured headers, or none: never lm-eval's $OPENAI_API_KEY fallback. The key is read
            # from its variable here and goes nowhere but this header (the transport never logs headers).
            set_api_request_headers(lm, headers)
        return lm

    def _context(self, messages: list[dict[str, str]]) -> Any:
        try:
            return self.lm.apply_chat_template(messages)
        except Exception:  # backends without a chat template: plain text turns
            return "\n\n".join(f"{m['role'].upper()}: {m['content']}" for m in messages) + "\n\nASSISTANT:"

    def _gen_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_gen_toks": self.config.max_tokens,
            "until": [],
            "temperature": self.config.temperature,
        }
        if self.config.temperature == 0:
            kwargs["do_sample"] = False
        return kwargs

    def api_payload(self, messages: list[dict[str, str]]) -> tuple[Any, dict[str, Any]]:
        """The backend's context for ``messages`` and the JSON body its ``model_call`` would post."""
        from medeval_metrics.lm_eval_compat import api_request_payload

        context = self._context(messages)
        return context, api_request_payload(self.lm, [context], self._gen_kwargs())

    def generate_batch(self, conversations: Sequence[list[dict[str, str]]]) -> list[str | None]:
        from lm_eval.api.instance import Instance

        requests = [
            Instance(request_type="generate_until", doc={}, arguments=(self._context(m), self._gen_kwargs()), idx=i)
            for i, m in enumerate(conversations)
        ]
        return list(self.lm.generate_until(requests, disable_tqdm=True))
