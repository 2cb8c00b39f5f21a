"""Run a judge panel over many answers: concurrent, retried, cached, never silently scored.

Judges are lm-eval model backends built by name (``lm_eval.api.registry.get_model``). For API
backends (lm-eval's ``TemplateAPI`` family) each verdict is one request made through the backend's
own ``model_call``/``parse_generations`` (its payload, headers and reply parsing), while this
module owns concurrency (one thread pool across all judges, bounded by ``concurrency``), retries
(transport errors and 429/5xx, honouring ``Retry-After``) and re-asks after unusable verdicts.
Other backends (``hf``, ``vllm``) are called in batches through ``generate_until``.

A verdict that cannot be obtained is *unscored* with its reason; it is never turned into a score.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.cache import VerdictCache, cache_key
from medeval_metrics.judge.config import JudgeConfig, PanelConfig
from medeval_metrics.judge.rubric import Rubric

log = logging.getLogger("medeval.judge")
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_REPLY_KEEP = 2000  # characters of the judge's last reply kept for auditing


def install_log_redaction() -> None:
    """REDACTION CALL SITE: lm-eval's API backends log request headers (API keys) on some failures.

    ``medeval_metrics.redact`` (written separately) filters those log records; until it exists this
    is a no-op. The judge's own requests go through ``model_call``, whose failure log carries the
    response body only, and this module never logs exception text.
    """
    try:
        from medeval_metrics import redact  # type: ignore[attr-defined]
    except ImportError:
        return
    redact.install()


@dataclass(frozen=True)
class JudgeItem:
    question: str
    reference: str
    answer: str


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


def _classify(exc: BaseException) -> TransportFailure:
    """A safe description of a failed request: status code or error class, never the message text
    (requests' messages can quote URLs, and aiohttp's quote headers)."""
    import requests

    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        return TransportFailure(
            f"HTTP {status}",
            retryable=status in _RETRYABLE_STATUS,
            retry_after=_retry_after_seconds(exc.response.headers.get("Retry-After")),
        )
    if isinstance(exc, requests.Timeout):
        return TransportFailure("timeout", retryable=True)
    if isinstance(exc, requests.ConnectionError):
        return TransportFailure("connection error", retryable=True)
    if isinstance(exc, ValueError):  # reply body was not JSON
        return TransportFailure("reply body is not valid JSON", retryable=True)
    return TransportFailure(f"request failed ({type(exc).__name__})", retryable=True)


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
        if is_api:
            if c.base_url:
                args["base_url"] = c.base_url
            # our own retry loop and thread pool replace the backend's
            args.update(num_concurrent=1, max_retries=1, timeout=max(1, int(round(self.panel.timeout))))
            args.setdefault("tokenizer_backend", "none")
            args.setdefault("tokenized_requests", False)
        else:
            args = {"pretrained": c.model, **c.model_args}
        lm = cls.create_from_arg_obj(args, {})
        if c.api_key_env:
            key = os.environ.get(c.api_key_env)
            if not key:
                raise MedevalDataError(
                    f"judge {c.name}: the environment variable {c.api_key_env} (its api_key_env) is not set."
                )
            if not is_api:
                raise MedevalDataError(f"judge {c.name}: api_key_env only applies to API backends, not {c.backend}.")
            # set on the instance after construction, so the key never passes through lm-eval's model args
            lm._header = {**(getattr(lm, "_header", None) or {}), "Authorization": f"Bearer {key}"}
            lm.__dict__.pop("header", None)
        return lm

    def _context(self, messages: list[dict[str, str]]) -> Any:
        try:
            return self.lm.apply_chat_template(messages)
        except Exception:  # backends without a chat template: plain text turns
            return "\n\n".join(f"{m['role'].upper()}: {m['content']}" for m in messages) + "\n\nASSISTANT:"

    def _gen_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_gen_toks": self.config.max_tokens, "until": [], "temperature": self.config.temperature}
        if self.config.temperature == 0:
            kwargs["do_sample"] = False
        return kwargs

    def request_once(self, messages: list[dict[str, str]]) -> str | None:
        """One API request; raises TransportFailure."""
        context = self._context(messages)
        try:
            outputs = self.lm.model_call(messages=[context], generate=True, gen_kwargs=self._gen_kwargs())
            replies = self.lm.parse_generations(outputs=outputs, contexts=[context])
        except TransportFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a classified, retryable-or-not reason
            raise _classify(exc) from None
        return replies[0] if replies else None

    def generate_batch(self, conversations: Sequence[list[dict[str, str]]]) -> list[str | None]:
        from lm_eval.api.instance import Instance

        requests = [
            Instance(request_type="generate_until", doc={}, arguments=(self._context(m), self._gen_kwargs()), idx=i)
            for i, m in enumerate(conversations)
        ]
        return list(self.lm.generate_until(requests, disable_tqdm=True))


def _verdict(judge: str, rubric: Rubric, **fields: Any) -> dict[str, Any]:
    record = {"judge": judge, "rubric": rubric.name, "rubric_version": rubric.version, "scores": None,
              "reasons": {}, "unscored_reason": None, "requests": 0, "reply": None, "cached": False}
    record.update(fields)
    return record


class PanelRunner:
    def __init__(
        self,
        panel: PanelConfig,
        rubric: Rubric,
        clients: dict[str, JudgeClient] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        install_log_redaction()
        self.panel, self.rubric, self.sleep = panel, rubric, sleep
        self.clients = clients or {j.name: JudgeClient(j, panel) for j in panel.judges}
        self.cache = VerdictCache(panel.cache) if panel.cache else None
        self._rng = random.Random(0)
        self._rng_lock = threading.Lock()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, 300.0)
        with self._rng_lock:
            jitter = self._rng.uniform(0.5, 1.0)
        return min(self.panel.backoff_max, self.panel.backoff_base * (2**attempt)) * jitter

    def _ask_with_retries(self, client: JudgeClient, messages: list[dict[str, str]]) -> tuple[str | None, int]:
        """The reply and the number of requests made; raises TransportFailure when retries run out."""
        for attempt in range(self.panel.max_retries + 1):
            try:
                return client.request_once(messages), attempt + 1
            except TransportFailure as failure:
                if not failure.retryable or attempt == self.panel.max_retries:
                    failure.reason = f"{failure.reason} after {attempt + 1} request(s)"
                    failure.requests = attempt + 1  # type: ignore[attr-defined]
                    raise
                self.sleep(self._backoff(attempt, failure.retry_after))
        raise AssertionError("unreachable")

    def _judge_api(self, judge: JudgeConfig, item: JudgeItem, messages: list[dict[str, str]]) -> tuple[dict[str, Any], bool]:
        """(verdict, final): final verdicts are cached; transport failures are not."""
        client = self.clients[judge.name]
        conversation, used = list(messages), 0
        parsed, reply = None, None
        for _ask in range(self.panel.max_reasks + 1):
            try:
                reply, requests_made = self._ask_with_retries(client, conversation)
            except TransportFailure as failure:
                used += getattr(failure, "requests", 1)
                return _verdict(judge.name, self.rubric, unscored_reason=failure.reason, requests=used), False
            used += requests_made
            parsed = self.rubric.parse(reply, item.answer)
            if parsed.ok:
                return _verdict(judge.name, self.rubric, scores=parsed.scores, reasons=parsed.reasons,
                                requests=used, reply=(reply or "")[:_REPLY_KEEP]), True
            conversation = [*conversation, {"role": "assistant", "content": reply or ""}, self.rubric.reask_message(parsed.error)]
        return _verdict(
            judge.name, self.rubric, requests=used, reply=(reply or "")[:_REPLY_KEEP],
            unscored_reason=f"unusable verdict after {self.panel.max_reasks + 1} ask(s): {parsed.error}",
        ), True

    def _judge_batch(self, judge: JudgeConfig, jobs: list[tuple[int, JudgeItem, list[dict[str, str]]]]) -> list[tuple[dict[str, Any], bool]]:
        client = self.clients[judge.name]
        conversations = [list(m) for _, _, m in jobs]
        out: list[tuple[dict[str, Any], bool] | None] = [None] * len(jobs)
        open_jobs = list(range(len(jobs)))
        errors: dict[int, str] = {}
        replies: dict[int, str | None] = {}
        for ask in range(self.panel.max_reasks + 1):
            if not open_jobs:
                break
            try:
                generated = client.generate_batch([conversations[j] for j in open_jobs])
            except Exception as exc:  # noqa: BLE001 - a failed batch leaves its items unscored, with the reason
                for j in open_jobs:
                    out[j] = (_verdict(judge.name, self.rubric, unscored_reason=f"generation failed ({type(exc).__name__})"), False)
                return out  # type: ignore[return-value]
            still_open = []
            for j, reply in zip(open_jobs, generated):
                parsed = self.rubric.parse(reply, jobs[j][1].answer)
                replies[j] = reply
                if parsed.ok:
                    out[j] = (_verdict(judge.name, self.rubric, scores=parsed.scores, reasons=parsed.reasons,
                                       requests=ask + 1, reply=(reply or "")[:_REPLY_KEEP]), True)
                else:
                    errors[j] = parsed.error or "unusable"
                    conversations[j] = [*conversations[j], {"role": "assistant", "content": reply or ""},
                                        self.rubric.reask_message(errors[j])]
                    still_open.append(j)
            open_jobs = still_open
        for j in open_jobs:
            out[j] = (_verdict(judge.name, self.rubric, reply=(replies.get(j) or "")[:_REPLY_KEEP],
                               requests=self.panel.max_reasks + 1,
                               unscored_reason=f"unusable verdict after {self.panel.max_reasks + 1} ask(s): {errors[j]}"), True)
        return out  # type: ignore[return-value]

    def judge(self, items: Sequence[JudgeItem], progress: bool = True) -> list[dict[str, dict[str, Any]]]:
        """Per item, ``{judge name: verdict}``; cached verdicts are reused and fresh final ones stored."""
        from tqdm import tqdm

        results: list[dict[str, dict[str, Any]]] = [{} for _ in items]
        api_jobs, batch_jobs = [], {}
        for index, item in enumerate(items):
            messages = self.rubric.messages(item.question, item.reference, item.answer)
            for judge in self.panel.judges:
                key = cache_key(judge.identity(), self.rubric.version, messages)
                hit = self.cache.get(key) if self.cache else None
                if hit is not None:
                    results[index][judge.name] = {**hit, "judge": judge.name, "cached": True, "requests": 0}
                elif self.clients[judge.name].is_api:
                    api_jobs.append((index, judge, item, messages, key))
                else:
                    batch_jobs.setdefault(judge.name, []).append((index, judge, item, messages, key))

        total = len(api_jobs) + sum(len(v) for v in batch_jobs.values())
        bar = tqdm(total=total, desc="Judging", disable=not progress or total == 0)

        def store(index: int, judge: JudgeConfig, key: str, verdict: dict[str, Any], final: bool) -> None:
            results[index][judge.name] = verdict
            if final and self.cache is not None:
                self.cache.put(key, {k: v for k, v in verdict.items() if k not in ("cached", "requests")})
            bar.update(1)

        if api_jobs:
            with ThreadPoolExecutor(max_workers=self.panel.concurrency) as pool:
                futures = {pool.submit(self._judge_api, judge, item, messages): (index, judge, key)
                           for index, judge, item, messages, key in api_jobs}
                for future in as_completed(futures):
                    index, judge, key = futures[future]
                    verdict, final = future.result()
                    store(index, judge, key, verdict, final)
        for name, jobs in batch_jobs.items():
            judged = self._judge_batch(jobs[0][1], [(index, item, messages) for index, _, item, messages, _ in jobs])
            for (index, judge, _item, _messages, key), (verdict, final) in zip(jobs, judged):
                store(index, judge, key, verdict, final)
        bar.close()
        return results
