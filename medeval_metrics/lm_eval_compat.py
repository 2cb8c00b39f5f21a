"""What ``medeval run`` wraps in lm-eval while it runs, and nothing else (lm-eval 0.4.12-0.4.13).

Importing the pack, building its tasks and evaluating them in a plain lm-eval process replaces nothing of
lm-eval's and no process-wide hook. ``medeval run`` holds five wrappers around lm-eval's CLI, each a context
manager that puts back what it replaced when the run ends (``tests/core/test_cli_leaves_lm_eval_as_found.py``):

====================================  ===============================================================
wrapper                               replaces while the run lasts
====================================  ===============================================================
1. ``pack_task_index``                ``lm_eval.tasks.TaskManager.__init__``
2. ``run_record``                     ``lm_eval.evaluator.evaluate``
3. ``model_key_only_for_its_endpoint``  ``LocalCompletionsAPI.header`` (set on the class; inherited before)
4. ``guard_model_replies``            ``lm_eval.models.api_models.requests`` and ``.ClientSession``
5. ``private_run_logs``               logging's record factory
====================================  ===============================================================

Six objects; ``medeval run`` itself also sets, for the run only (``cli.py``), ``sys.argv`` for lm-eval's parser, its
Ctrl-C handler and the umask that keeps the run's files private. Each wrapper says which lm-eval behaviour it works around and for which
versions, has a test in ``tests/core/test_lm_eval_compat.py`` that fails when lm-eval no longer needs it, and
an entry in ``docs/upstream.md`` with the lm-eval issue that would retire it. Importing this module imports
nothing from lm-eval.

Also here, replacing nothing: ``set_api_request_headers`` and ``api_request_payload``, which the judge client
(``judge/client.py``) calls on its own backend objects (they read lm-eval's private ``_create_payload``,
``_seed`` and ``_eos_string``), and ``loading_task`` / ``loading_task_config``, which a ``custom_dataset`` loader
calls to find the lm-eval task building it (they read the caller's stack frames).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from medeval_metrics import lm_eval_link
from medeval_metrics.pack import tasks_path
from medeval_metrics.settings import MODEL_API_KEY_ENV

__all__ = [
    "RUN_RECORD_KEY",
    "TESTED_LM_EVAL_VERSIONS",
    "api_request_payload",
    "guard_model_replies",
    "loading_task",
    "loading_task_config",
    "model_key_only_for_its_endpoint",
    "pack_task_index",
    "private_run_logs",
    "run_record",
    "set_api_request_headers",
]

TESTED_LM_EVAL_VERSIONS = ("0.4.12", "0.4.13")

log = logging.getLogger("medeval")


# --- 1. TaskManager.__init__: the pack's tasks in the run's task index ---------------------------------


@contextlib.contextmanager
def pack_task_index(pack_only: bool = False, pack_path: str | None = None) -> Iterator[None]:
    """While active, every ``TaskManager`` lm-eval builds also indexes the pack's tasks folder, next to the user's
    own ``--include_path``; with ``pack_only``, it indexes no built-in task (``medeval run`` asks for that when
    every requested task is the pack's and no ``--include_path`` is given).

    Why: lm-eval 0.4.12-0.4.13 index only ``lm_eval/tasks`` and ``--include_path``, read no plugin entry point
    (the pack declares an ``lm_eval.tasks`` one), and the CLI takes a single ``--include_path``; and it always
    indexes its ~14k built-in tasks (about 4 s of a short run's start), ``TaskManager(include_defaults=False)``
    being unreachable from the command line. A current copy of the pack in an indexed folder (``medeval
    lm-eval-tasks enable``) is used as it is; an older one is overridden by the pack's folder (lm-eval then warns
    per task), with one line saying how to update it. Test: ``test_task_index_wrapper_still_needed``.
    """
    from lm_eval.tasks import TaskManager

    original = TaskManager.__init__
    signature = inspect.signature(original)
    pack = str(Path(pack_path or tasks_path()).resolve())
    lm_eval_tasks = lm_eval_link.lm_eval_tasks_dir()

    @functools.wraps(original)
    def init_with_pack(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        if pack_only:
            bound.arguments["include_defaults"] = False
        include_path = bound.arguments.get("include_path")
        paths = (
            []
            if include_path is None
            else list(include_path)
            if isinstance(include_path, (list, tuple))
            else [include_path]
        )
        if pack not in [str(Path(p).resolve()) for p in paths]:
            scanned = ([lm_eval_tasks] if bound.arguments.get("include_defaults", True) else []) + [
                Path(p) for p in paths
            ]
            states = {str(p): lm_eval_link.copy_state(p) for p in scanned}
            if "current" not in states.values():  # else the enabled copy already holds the tasks
                bound.arguments["include_path"] = [*paths, pack]
                stale = [str(Path(p, lm_eval_link.FOLDER_NAME)) for p, state in states.items() if state == "stale"]
                if stale:
                    log.warning(
                        "medeval: the pack's tasks override an older copy of them in %s; run `medeval lm-eval-tasks "
                        "enable` again to update it.",
                        ", ".join(stale),
                    )
        original(*bound.args, **bound.kwargs)

    TaskManager.__init__ = init_with_pack  # type: ignore[method-assign]
    try:
        yield
    finally:
        TaskManager.__init__ = original  # type: ignore[method-assign]


# --- 2. evaluate: the run's results, with each task's time and judge usage -------------------------------

RUN_RECORD_KEY = "medeval_run"  # results[RUN_RECORD_KEY] = {"setup_s": ..., "tasks": {task: {wall_s, ..., judge}}}
_PARTS = ("prepare_s", "model_s", "filters_s", "scoring_s")
_TASK_STEPS = (("build_all_requests", "prepare_s"), ("apply_filters", "filters_s"), ("process_results", "scoring_s"))
_REQUEST_TYPES = ("generate_until", "loglikelihood", "loglikelihood_rolling")


class Evaluations(list):
    """The results dict of each evaluation of the run, in order; ``samples[i]``: the samples of the i-th (lm-eval's
    CLI takes them out of the dict to save them; None without ``--log_samples``)."""

    def __init__(self) -> None:
        super().__init__()
        self.samples: list[Any] = []

    def last_with_samples(self) -> dict[str, Any]:
        """The last evaluation's results with its samples in them again ({} before any)."""
        if not self:
            return {}
        samples = self.samples[-1]
        return self[-1] if samples is None else {**self[-1], "samples": samples}


@contextlib.contextmanager
def run_record(judge_usage: Mapping[str, Mapping[str, int]] | None = None) -> Iterator[Evaluations]:
    """While active, each evaluation lm-eval runs is recorded: its results dict (the one ``simple_evaluate``
    returns and lm-eval's CLI prints and saves) is appended to the yielded ``Evaluations``, with
    ``results["medeval_run"]`` added before lm-eval saves it: ``setup_s`` (from entering this wrapper to the
    evaluation's start: the model built and the data loaded) and, per task, ``prepare_s`` (building its
    requests), ``model_s`` (its share of each model call, by its number of requests in that call), ``filters_s``
    (its filters: the judge panel of a judged task), ``scoring_s`` and their sum ``wall_s``; for a judged task,
    ``judge``: the judges' requests and the tokens their replies reported (``judge_usage``, counted by the
    judge transport). A function or class left in a task's config (``fewshot_config.sampler``, ``process_docs``)
    is written by name (``medeval_metrics.emsqa.fewshot_pool``), not as ``<function ... at 0x7f...>``, so two
    identical runs write identical configs.

    Why: lm-eval 0.4.12-0.4.13's CLI returns nothing (``medeval run`` needs the results to exit non-zero when a
    judge scored nothing, also without ``--output_path``), and ``evaluate`` sends every task's requests to the
    model together and records no time. ``lm_eval.evaluator.evaluate`` is what ``simple_evaluate`` calls and
    returns the dict it hands on; the timing shims sit on that evaluation's own task and model objects and are
    taken off when it returns. Test: ``test_run_record_wrapper_still_needed``.
    """
    import time
    from collections import Counter, defaultdict

    from lm_eval import evaluator

    original = evaluator.evaluate
    signature = inspect.signature(original)
    usage: Mapping[str, Mapping[str, int]] = {} if judge_usage is None else judge_usage
    started = time.perf_counter()
    captured = Evaluations()

    @functools.wraps(original)
    def evaluate(*args: Any, **kwargs: Any) -> Any:
        setup_s = time.perf_counter() - started
        bound = signature.bind_partial(*args, **kwargs).arguments
        times: dict[str, Counter] = defaultdict(Counter)
        judged: dict[str, Counter] = defaultdict(Counter)
        undo = [_time_model_calls(bound.get("lm"), times)]
        undo += [_time_task(task, times, judged, usage) for task in _tasks_in(bound.get("task_dict"))]
        try:
            results = original(*args, **kwargs)
        finally:
            for step in undo:
                step()
        if isinstance(results, dict):
            if isinstance(results.get("configs"), dict):  # deterministic configs: functions by name, not address
                results["configs"] = _named_callables(results["configs"])
            results[RUN_RECORD_KEY] = {"setup_s": round(setup_s, 3), "tasks": _run_record(times, judged)}
            captured.append(results)
            captured.samples.append(results.get("samples"))
        return results

    evaluator.evaluate = evaluate
    try:
        yield captured
    finally:
        evaluator.evaluate = original


def _named_callables(obj: Any) -> Any:
    """A copy of a JSON-like structure with functions and classes as ``module.qualname`` (lm-eval 0.4.12-0.4.13
    dump those nested in a config with ``str``, their memory address included)."""
    if isinstance(obj, dict):
        return {key: _named_callables(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_named_callables(item) for item in obj]
        return items if isinstance(obj, list) else tuple(items)
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        return f"{getattr(obj, '__module__', None) or ''}.{getattr(obj, '__qualname__', repr(obj))}".lstrip(".")
    return obj


def _tasks_in(task_dict: Any) -> list[Any]:
    """The tasks (not groups) of lm-eval's nested task dict."""
    if isinstance(task_dict, Mapping):
        return [task for value in task_dict.values() for task in _tasks_in(value)]
    return [task_dict] if hasattr(task_dict, "build_all_requests") else []


def _task_name(task: Any) -> str:
    config = getattr(task, "config", None)
    return str(getattr(config, "task", None) or getattr(task, "task_name", None) or "?")


def _time_task(task: Any, times: Any, judged: Any, usage: Mapping[str, Mapping[str, int]]) -> Any:
    """Time ``task``'s steps on the task object itself; returns the undo."""
    import time
    from collections import Counter

    own = dict(vars(task))
    for method, field in _TASK_STEPS:
        step = getattr(task, method)

        def timed(*args: Any, _step: Any = step, _field: str = field, **kwargs: Any) -> Any:
            before = {j: Counter(c) for j, c in usage.items()} if _field == "filters_s" else None
            start = time.perf_counter()
            try:
                return _step(*args, **kwargs)
            finally:
                times[_task_name(task)][_field] += time.perf_counter() - start
                if before is not None:
                    for judge, counts in usage.items():
                        judged[_task_name(task)].update(Counter(counts) - before.get(judge, Counter()))

        setattr(task, method, timed)

    def undo() -> None:
        for method, _ in _TASK_STEPS:
            if method in own:
                setattr(task, method, own[method])
            else:
                vars(task).pop(method, None)

    return undo


def _time_model_calls(lm: Any, times: Any) -> Any:
    """Time each request-type call of ``lm`` and share it among the tasks whose requests it answered."""
    import time
    from collections import Counter

    if lm is None:
        return lambda: None
    own = {method: vars(lm)[method] for method in _REQUEST_TYPES if method in vars(lm)}
    for method in _REQUEST_TYPES:
        bound = getattr(lm, method, None)
        if bound is None:
            continue

        def call(requests: Any, *args: Any, _bound: Any = bound, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _bound(requests, *args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                per_task = Counter(getattr(r, "task_name", "?") for r in requests)
                for task, count in per_task.items():
                    times[task]["model_s"] += spent * count / max(1, len(requests))

        setattr(lm, method, call)

    def undo() -> None:
        for method in _REQUEST_TYPES:
            if method in own:
                setattr(lm, method, own[method])
            else:
                vars(lm).pop(method, None)

    return undo


def _run_record(times: Mapping[str, Any], judged: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for task, spent in sorted(times.items()):
        if task == "?":
            continue
        entry = {field: round(spent.get(field, 0.0), 3) for field in _PARTS}
        entry["wall_s"] = round(sum(entry.values()), 3)
        counts = judged.get(task)
        if counts:
            entry["judge"] = {
                k: int(counts[k]) for k in ("requests", "prompt_tokens", "completion_tokens") if k in counts
            }
        out[task] = entry
    return out


# --- 3. The evaluated local-* model: OPENAI_API_KEY only to OpenAI ---------------------------------

MODEL_KEY_ENV = MODEL_API_KEY_ENV.name  # names the variable holding a local server's key
OPENAI_HOSTS = ("api.openai.com",)


@contextlib.contextmanager
def model_key_only_for_its_endpoint() -> Iterator[None]:
    """While active, lm-eval's ``local-completions`` / ``local-chat-completions`` send a key only where it belongs.

    Why: their ``api_key`` (``LocalCompletionsAPI.api_key``) is ``$OPENAI_API_KEY`` whatever ``base_url`` points
    at, and ``TemplateAPI.header`` turns it into ``Authorization: Bearer ...``: a run against any third-party or
    local host hands it the user's OpenAI key. While this runs they send ``$OPENAI_API_KEY`` only to OpenAI's own
    host; to any other host the value of the variable ``MEDEVAL_MODEL_API_KEY_ENV`` names (e.g.
    ``MEDEVAL_MODEL_API_KEY_ENV=VLLM_API_KEY``), or no ``Authorization`` header at all. A ``header`` model
    argument is sent as given; the ``openai-*`` subclasses, which read their own ``api_key``, are unchanged. One
    attribute: ``LocalCompletionsAPI.header`` (inherited from ``TemplateAPI`` otherwise). Versions: lm-eval 0.4.x
    up to at least 0.4.13. Test: ``test_model_key_wrapper_still_needed``.
    """
    import os
    from urllib.parse import urlparse

    from lm_eval.models.openai_completions import LocalCompletionsAPI

    def routed_key(self: Any) -> str:
        named = os.environ.get(MODEL_KEY_ENV, "").strip()
        if named:
            value = os.environ.get(named, "")
            if value:
                from medeval_metrics import redact  # lazily: the patterns compile on first use

                redact.register_secret(value)  # a name no rule knows: the run's log filter learns it here
            return value
        host = (urlparse(str(self.base_url or "")).hostname or "").lower()
        return os.environ.get("OPENAI_API_KEY", "") if host in OPENAI_HOSTS else ""

    def header(self: Any) -> dict:
        if self._header:
            return self._header
        reads_fallback = next(k for k in type(self).__mro__ if "api_key" in vars(k)) is LocalCompletionsAPI
        if not reads_fallback:  # openai-* and other subclasses with their own key: lm-eval's header
            return {"Authorization": f"Bearer {self.api_key}"}
        key = routed_key(self)
        return {"Authorization": f"Bearer {key}"} if key else {}

    missing = object()
    saved = LocalCompletionsAPI.__dict__.get("header", missing)
    routed = functools.cached_property(header)
    routed.__set_name__(LocalCompletionsAPI, "header")
    LocalCompletionsAPI.header = routed  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        if saved is missing:
            delattr(LocalCompletionsAPI, "header")
        else:
            LocalCompletionsAPI.header = saved  # type: ignore[method-assign]


# --- 4. The evaluated API model: capped replies, credentials kept to their origin ----------------


class _GuardedRequests:
    """``requests`` as lm-eval's ``TemplateAPI.model_call`` uses it (``requests.post``), guarded."""

    def __init__(self, requests_module: Any) -> None:
        self._requests = requests_module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._requests, name)

    def post(self, url: str, **kwargs: Any) -> Any:
        from medeval_metrics import http_safety as safety

        limit, method = safety.model_reply_limit(), "POST"
        kwargs["headers"] = safety.with_accept_encoding(kwargs.get("headers"))
        kwargs.update(allow_redirects=False, stream=True)
        for hop in range(safety.MAX_REDIRECTS + 1):
            response = self._requests.request(method, url, **kwargs)
            target = safety.redirect_target(url, response.status_code, response.headers)
            if target is None or hop == safety.MAX_REDIRECTS:
                break
            response.close()
            kwargs["headers"] = safety.headers_for_hop(kwargs["headers"], url, target)
            if response.status_code in (301, 302, 303):  # as requests does: the POST becomes a GET
                method = "GET"
                kwargs.pop("json", None)
                kwargs.pop("data", None)
            url = target
        try:
            if safety.declared_too_large(response.headers, limit):
                raise safety.ReplyTooLarge(limit, "model endpoint's reply", safety.MODEL_REPLY_ENV)
            response._content = safety.read_capped(
                response.raw.stream(64 * 1024, decode_content=False),
                response.headers.get("Content-Encoding"),
                limit,
                "model endpoint's reply",
                safety.MODEL_REPLY_ENV,
            )
        finally:
            response.close()
        return response


def _guarded_client_session(base: Any) -> Any:
    """A subclass of aiohttp's ``ClientSession`` (as ``TemplateAPI.get_batched_requests`` builds it) that
    follows redirects itself, without credentials to another origin, and reads each reply capped."""

    import warnings

    with warnings.catch_warnings():  # aiohttp discourages subclasses; wrapping lm-eval's own call needs one
        warnings.simplefilter("ignore", DeprecationWarning)

        class GuardedClientSession(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs["auto_decompress"] = False  # unpacked by the capped reader instead
                super().__init__(*args, **kwargs)

            async def _request(self, method: str, str_or_url: Any, **kwargs: Any) -> Any:
                from medeval_metrics import http_safety as safety

                limit, url = safety.model_reply_limit(), str(str_or_url)
                kwargs["headers"] = safety.with_accept_encoding(kwargs.get("headers"))
                kwargs["allow_redirects"] = False
                for hop in range(safety.MAX_REDIRECTS + 1):
                    response = await super()._request(method, url, **kwargs)
                    target = safety.redirect_target(url, response.status, response.headers)
                    if target is None or hop == safety.MAX_REDIRECTS:
                        break
                    response.release()
                    kwargs["headers"] = safety.headers_for_hop(kwargs["headers"], url, target)
                    if response.status in (301, 302, 303):
                        method = "GET"
                        kwargs.pop("json", None)
                        kwargs.pop("data", None)
                    url = target
                try:
                    response._body = await safety.read_capped_async(
                        response, limit, "model endpoint's reply", safety.MODEL_REPLY_ENV
                    )
                finally:
                    response.release()
                return response

    return GuardedClientSession


@contextlib.contextmanager
def guard_model_replies() -> Iterator[None]:
    """While active, lm-eval's API models (``TemplateAPI``: ``local-*``, ``openai-*``, ``anthropic-chat``...)
    read replies capped and send no credential header across origins (put back afterwards).

    Why: lm-eval 0.4.12-0.4.13's ``TemplateAPI.model_call`` posts with ``requests.post`` and ``amodel_call``
    with an aiohttp ``ClientSession`` (``get_batched_requests``), both following redirects with the
    backend's headers and reading the whole body. requests drops ``Authorization`` on a redirect to
    another host and aiohttp drops it to another origin, but both forward ``x-api-key`` (Anthropic's
    key), ``api-key`` and every ``header`` model argument to wherever a 307 points; and a reply of any
    size (or a small gzip that unpacks to gigabytes) is read into memory. The module-level names
    ``requests`` and ``ClientSession`` in ``lm_eval.models.api_models`` are swapped for guarded ones
    (``http_safety``: follow redirects with only harmless headers to another origin; replies capped at
    ``MEDEVAL_MODEL_MAX_REPLY_MB``, default 64). Versions: lm-eval 0.4.x up to at least 0.4.13; the test
    checks that the unguarded backend still forwards ``x-api-key`` across origins.
    """
    from lm_eval.models import api_models

    saved = {name: api_models.__dict__.get(name) for name in ("requests", "ClientSession")}
    if saved["requests"] is None or saved["ClientSession"] is None:  # lm-eval without its API extras
        yield
        return
    api_models.requests = _GuardedRequests(saved["requests"])  # type: ignore[assignment]
    api_models.ClientSession = _guarded_client_session(saved["ClientSession"])  # type: ignore[misc]
    try:
        yield
    finally:
        api_models.requests = saved["requests"]  # type: ignore[assignment]
        api_models.ClientSession = saved["ClientSession"]  # type: ignore[misc]


# --- 5. Logging: no prompt text, error body or credential on the console while the run lasts ---------


@contextlib.contextmanager
def private_run_logs() -> Iterator[None]:
    """While active, every log record is cleaned as it is made (``redact.clean_log_record``): credentials by
    shape and by value, the response body lm-eval logs for a failed API request (it can quote the prompt), the
    outputs in its "Exception: ..., retrying." line, and the prompt and target its ``--write_out`` lines and
    DEBUG lines quote (each replaced by its length and hash).

    Why: lm-eval 0.4.12-0.4.13's API backends log a retried request's error as the ``repr`` of aiohttp's
    ``ClientResponseError``, which carries the request headers (``'Authorization': 'Bearer <key>'``), and the
    server's error body verbatim; ``--write_out`` and DEBUG logging print prompts and answer choices. A record
    factory is the one place that sees every logger's records (lm-eval's do not propagate to the root); it is
    process-wide, so it is held for the run only and put back after. ``docs/security.md`` says what plain
    ``lm_eval`` prints. Test: ``test_log_wrapper_still_needed``.
    """
    from medeval_metrics.redact import clean_log_record

    previous = logging.getLogRecordFactory()

    def clean_record_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            clean_log_record(record)
        except Exception:  # cleaning must never break logging; a blank line rather than an unclean one
            record.msg, record.args, record.exc_info, record.exc_text = "<log message withheld>", (), None, None
        return record

    logging.setLogRecordFactory(clean_record_factory)
    try:
        yield
    finally:
        if logging.getLogRecordFactory() is clean_record_factory:
            logging.setLogRecordFactory(previous)
        else:  # something wrapped ours meanwhile: unwinding it would drop theirs
            log.debug("medeval: logging's record factory was replaced during the run; left as it is")


# --- Helpers for the judge client: they replace nothing ---------------------------------------------


def set_api_request_headers(lm: Any, headers: dict[str, str]) -> None:
    """Make an lm-eval API backend send exactly ``headers`` (``{}``: no Authorization header at all).

    Why: lm-eval's ``TemplateAPI.header`` is a ``cached_property`` returning the ``header`` model arg
    or ``{"Authorization": f"Bearer {self.api_key}"}``, and the OpenAI-style backends' ``api_key``
    falls back to ``$OPENAI_API_KEY``: a judge (or any API model) configured without a key would
    send the user's OpenAI key to whatever host it talks to. Passing the key through the ``header``
    model arg instead would copy it into lm-eval's model-args logging and results JSON. Setting the
    cached value on the instance, after construction and before the first request, bypasses both.

    Needed for lm-eval 0.4.x up to at least 0.4.13 (``lm_eval.models.api_models.TemplateAPI.header``
    and ``lm_eval.models.openai_completions.LocalCompletionsAPI.api_key``).
    """
    lm.__dict__["header"] = dict(headers)  # the cached_property's slot: read by every requests.post
    lm.__dict__["_header"] = dict(headers)


def api_request_payload(lm: Any, messages: Any, gen_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body an lm-eval API backend's ``model_call`` posts for one generation request.

    Why: the judges' asyncio transport (``judge.transport``) sends requests itself, over a pooled
    aiohttp session: lm-eval's own async path (``TemplateAPI.amodel_call``) logs the response body on
    an HTTP error (it can quote the request) and drops ``eos``, ``verify_certificate`` and ``timeout``.
    The body is still built by the backend's own ``create_message``/``_create_payload`` (private
    hooks), with its ``_seed`` and end-of-sequence string, exactly as ``model_call`` does.

    Mirrors ``model_call`` of lm-eval 0.4.x up to at least 0.4.13; the test compares the two bodies.
    """
    import copy

    # ``lm.eos_string`` without a tokenizer or an ``eos_string`` model arg logs "Cannot determine EOS
    # string" and is None; a chat judge (tokenizer_backend none) needs no extra stop string, the
    # server ends its reply. Same value, without the warning on every judge's first request.
    eos = lm.eos_string if (lm._eos_string or lm.tokenizer is not None) else None
    return lm._create_payload(
        lm.create_message(messages),
        generate=True,
        gen_kwargs=copy.deepcopy(gen_kwargs),
        seed=lm._seed,
        eos=eos,
    )


# --- The running loader's task: read by loaders, replaces nothing ------------------------------------


def loading_task_config() -> Any | None:
    """The ``TaskConfig`` of the task whose ``custom_dataset`` loader is running now, else ``None``.

    Why: lm-eval calls ``custom_dataset(**config.metadata, **config.dataset_kwargs)`` with copies,
    so a loader cannot record what it found while loading (the retrieval corpus's version, the
    settings it resolved) in the config that lm-eval writes to the results JSON
    (``results["configs"][task]``). The caller's frame holds the task as ``self``; writing into
    its ``config.metadata`` puts the values there.

    Needed for lm-eval 0.4.x up to at least 0.4.13 (``ConfigurableTask.download`` calls the loader
    directly). Returns ``None`` when called any other way (a loader used outside lm-eval).
    """
    task = _loading_task(sys._getframe(1))
    return None if task is None else task.config


def loading_task() -> Any | None:
    """The task (lm-eval's ``ConfigurableTask``) whose ``custom_dataset`` loader is running now, else ``None``:
    what renders its prompts (``doc_to_text``, a user's override included). Same workaround as above."""
    return _loading_task(sys._getframe(1))


def _loading_task(frame: Any) -> Any | None:
    for _ in range(8):  # the loader, maybe a wrapper or two, then ConfigurableTask.download
        frame = frame.f_back
        if frame is None:
            return None
        task = frame.f_locals.get("self")
        if frame.f_code.co_name == "download" and getattr(getattr(task, "config", None), "custom_dataset", None):
            return task
    return None
