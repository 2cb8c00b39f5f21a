"""Every patch the pack applies to lm-eval internals, in one place (tested on lm-eval 0.4.13).

Each patch says which lm-eval behaviour it works around and for which versions, is idempotent,
is applied only by an explicit call (never at import), and has a test in
``tests/core/test_lm_eval_compat.py`` that fails when lm-eval changes so that the patch is no longer
needed, or when the patch stops working. Importing this module imports nothing from lm-eval.

1. ``index_pack_tasks``: ``TaskManager.__init__`` also indexes the pack's tasks (``medeval run``).
2. ``use_attached_stderrs``: ``evaluator_utils.stderr_for_metric`` honours ``stats.with_stderr``.
3. ``redact_results_writer``: ``EvaluationTracker`` writes redacted results JSON and sample logs,
   with functions left in task configs by name rather than by memory address, each file whole or not
   at all, a failed write kept for ``take_write_failures``.
4. ``set_api_request_headers``: an API backend sends exactly the headers it was configured with
   (``TemplateAPI.header``); ``api_request_payload``: the JSON body ``model_call`` would send, for the
   judges' asyncio transport.
5. ``pass_generation_kwargs_to_process_results``: ``ConfigurableTask.process_results`` passes the
   task's generation settings to scorers that ask for them (emrQA's ``prompt_too_long``).
6. ``pack_only_task_index``: ``TaskManager`` skips lm-eval's built-in tasks while ``medeval run``
   needs only the pack's.
7. ``loading_task_config``: the ``TaskConfig`` of the task whose ``custom_dataset`` loader runs, so
   the loader can record what it resolved (retrieval corpus version, settings) in the results' config;
   ``loading_task``, the task itself (its ``doc_to_text`` renders the prompts a loader's items are counted by).
8. ``aggregate_metric_families``: metrics named at run time (one per judge) get the aggregation and
   direction their scorer declares, instead of lm-eval's "No aggregation function defined" fallback.
9. ``quiet_pack_custom_dataset_notice``: no "Custom kwargs can be passed to `--metadata`" line per
   pack task (the pack's loaders name their metadata keys in their own errors).
10. ``capture_results``: the results dict of the evaluation lm-eval's CLI runs in this process
   (``medeval run`` reads its judges' success from it, with or without ``--output_path``).
11. ``model_key_only_for_its_endpoint``: a ``local-*`` backend sends ``$OPENAI_API_KEY`` only to
   OpenAI's own host; elsewhere the key the user names (``MEDEVAL_MODEL_API_KEY_ENV``) or none.
12. ``guard_model_replies``: lm-eval's API models read replies capped (``MEDEVAL_MODEL_MAX_REPLY_MB``)
   and send no credential header to another origin on a redirect.
13. ``quiet_documented_runs``: no ``fatal: not a git repository`` from lm-eval's git probe, and no warning
   the pack's documented commands trigger (a --gen_kwargs token budget, --limit) under ``medeval run``.
14. ``task_timings``: each task's wall time (and a judged task's judge requests and tokens) in the results.
15. ``remember_evaluated_model``: the model ``evaluate`` runs (``evaluated_model()``), for scorers that count
   prompt tokens with its own tokenizer and context limit, and the lengths of the prompts its HF backend
   encoded (``encoded_lengths``), so those scorers need not encode them again.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from medeval_metrics import lm_eval_link
from medeval_metrics.pack import tasks_path
from medeval_metrics.settings import MODEL_API_KEY_ENV
from medeval_metrics.task_yaml import pack_task_yamls

__all__ = [
    "TESTED_LM_EVAL_VERSIONS",
    "aggregate_metric_families",
    "api_request_payload",
    "capture_results",
    "evaluated_model",
    "guard_model_replies",
    "index_pack_tasks",
    "install_redaction",
    "loading_task",
    "loading_task_config",
    "model_key_only_for_its_endpoint",
    "pack_only_task_index",
    "pass_generation_kwargs_to_process_results",
    "quiet_documented_runs",
    "quiet_pack_custom_dataset_notice",
    "redact_results_writer",
    "remember_evaluated_model",
    "set_api_request_headers",
    "take_write_failures",
    "task_timings",
    "use_attached_stderrs",
]

TESTED_LM_EVAL_VERSIONS = ("0.4.13",)

log = logging.getLogger("medeval")


# --- 1. TaskManager.__init__: the pack's tasks folder in every task index -------------------------
# lm-eval 0.4.11-0.4.13 index only lm_eval/tasks and --include_path, read no plugin entry points
# (upstream PR #4015 would add an ``lm_eval.tasks`` group) and take a single --include_path string
# on the command line. ``medeval run`` patches TaskManager in its own process so the user's own
# --include_path keeps working alongside the pack's. Remove once lm-eval discovers the pack's
# ``lm_eval.tasks`` entry point (the test checks for entry-point discovery in lm-eval's task index).
#
# After ``medeval lm-eval-tasks enable`` the tasks are already in lm_eval/tasks/medeval; adding the
# pack's folder as well made lm-eval warn "Task ... overrides existing task" for every pack task
# (about 20 lines a run). So a current copy in an indexed folder means the pack's folder is not
# added; a stale copy (another pack version) is overridden by the pack's folder, with one line.


def _override_warning_filter(pack: str, copies: list[str], counter: list[int]) -> logging.Filter:
    class DropPackOverrides(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            args = record.args if isinstance(record.args, tuple) else ()
            if "overrides existing task" in str(record.msg) and len(args) == 3:
                new, old = str(args[1]), str(args[2])  # "None" for tags (no YAML of their own)
                if (new == old == "None" or new.startswith(pack)) and (old == "None" or old.startswith(tuple(copies))):
                    counter[0] += 1
                    return False
            return True

    return DropPackOverrides()


def index_pack_tasks(pack_path: str | None = None) -> None:
    """Make every TaskManager built in this process also index the pack's tasks folder."""
    from lm_eval.tasks import TaskManager

    if getattr(TaskManager.__init__, "_medeval_patched", False):
        return
    original_init = TaskManager.__init__
    signature = inspect.signature(original_init)
    pack = str(Path(pack_path or tasks_path()).resolve())
    lm_eval_tasks = lm_eval_link.lm_eval_tasks_dir()

    def init_with_pack(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        include_path = bound.arguments.get("include_path")
        paths = (
            []
            if include_path is None
            else (list(include_path) if isinstance(include_path, (list, tuple)) else [include_path])
        )
        if pack in [str(Path(p).resolve()) for p in paths]:
            return original_init(*bound.args, **bound.kwargs)
        scanned = ([lm_eval_tasks] if bound.arguments.get("include_defaults", True) else []) + [Path(p) for p in paths]
        copies = {str(p.resolve()): lm_eval_link.copy_state(p) for p in scanned}
        if "current" in copies.values():
            return original_init(*bound.args, **bound.kwargs)  # the enabled copy already holds the tasks
        bound.arguments["include_path"] = [*paths, pack]
        stale = [str(Path(folder, lm_eval_link.FOLDER_NAME)) for folder, state in copies.items() if state == "stale"]
        if not stale:
            return original_init(*bound.args, **bound.kwargs)
        counter = [0]
        index_logger = logging.getLogger("lm_eval.tasks._index")
        drop = _override_warning_filter(pack, stale, counter)
        index_logger.addFilter(drop)
        try:
            original_init(*bound.args, **bound.kwargs)
        finally:
            index_logger.removeFilter(drop)
        if counter[0]:
            log.warning(
                "medeval: the pack's tasks override %d tasks of an older copy in %s; "
                "run `medeval lm-eval-tasks enable` again to update it.",
                counter[0],
                ", ".join(stale),
            )

    init_with_pack._medeval_patched = True  # type: ignore[attr-defined]
    init_with_pack._medeval_original = original_init  # type: ignore[attr-defined]
    TaskManager.__init__ = init_with_pack  # type: ignore[method-assign]


# --- 2. stderr_for_metric: a standard error for the pack's corpus-level aggregations -------------
# lm-eval 0.4.x (read in 0.4.11-0.4.13) reports "N/A" as the stderr of every aggregation its
# ``lm_eval.api.metrics.stderr_for_metric`` does not know (a corpus macro-F1, an agreement
# statistic). ``evaluator_utils`` imports that function by name and calls it once per metric, so
# replacing ``evaluator_utils.stderr_for_metric`` lets an aggregation carry its own
# (``stats.with_stderr``). Remove once lm-eval asks the aggregation for its stderr itself.


def use_attached_stderrs() -> None:
    """Make lm-eval use an aggregation's ``medeval_stderr`` (attached by ``stats.with_stderr``).

    The attached function is used when bootstrapping is on (``--bootstrap_iters`` > 0), or always
    when it is closed-form; every other metric keeps lm-eval's own rule. Idempotent.
    """
    from lm_eval import evaluator_utils

    original = evaluator_utils.stderr_for_metric
    if getattr(original, "_medeval", False):
        return

    def stderr_for_metric(metric, bootstrap_iters):  # type: ignore[no-untyped-def]
        own = getattr(metric, "medeval_stderr", None)
        if own is not None and (getattr(own, "closed_form", False) or (bootstrap_iters and bootstrap_iters > 0)):
            return own
        return original(metric=metric, bootstrap_iters=bootstrap_iters)

    stderr_for_metric._medeval = True  # type: ignore[attr-defined]
    stderr_for_metric._medeval_original = original  # type: ignore[attr-defined]
    evaluator_utils.stderr_for_metric = stderr_for_metric


# --- 3. EvaluationTracker: redacted results JSON and sample logs ---------------------------------
# lm-eval 0.4.x (0.4.13 checked) copies ``--model_args`` (API keys, auth_token, header values) and
# ``--metadata`` verbatim into results_*.json, and the sample logs can quote a key a model or
# server echoed. The pack redacts what ``EvaluationTracker.save_results_aggregated`` and
# ``save_results_samples`` receive: results fully (``redact_obj``), samples for secret values only
# (documents and model outputs are otherwise kept as they are). Remove if lm-eval stops writing
# model_args values (the test checks that an unpatched writer still writes them).
#
# The same writer turns a function or class left in a task's config (``fewshot_config.sampler`` and
# ``process_docs``, nested where lm-eval's own config dump does not look) into ``str(obj)``,
# ``<function fewshot_pool at 0x7f...>``: two identical runs then write different results. The
# patch writes such objects by name (``medeval_metrics.emsqa.fewshot_pool``); the test checks that
# the unpatched writer still writes addresses.


def _named_callables(obj: Any) -> Any:
    """A copy of a JSON-like structure with functions and classes as ``module.qualname``."""
    if isinstance(obj, dict):
        return {key: _named_callables(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_named_callables(item) for item in obj]
        return items if isinstance(obj, list) else tuple(items)
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        return f"{getattr(obj, '__module__', None) or ''}.{getattr(obj, '__qualname__', repr(obj))}".lstrip(".")
    return obj


def install_redaction(*, private_documents: str | None = None) -> None:
    """The redaction hooks (``medeval_metrics.redact.install``) and, once lm-eval has loaded its results
    writer (it has by the time a task is built), ``redact_results_writer``: what a task's loader calls.

    Redaction is imported here, not with this module: ``import medeval_metrics`` imports this module, and
    the redaction patterns cost about 40 ms to compile (measured with ``python -X importtime``).
    """
    from medeval_metrics import redact

    redact.install(private_documents=private_documents)
    if "lm_eval.loggers.evaluation_tracker" in sys.modules:
        redact_results_writer()


def redact_results_writer() -> None:
    """Patch lm-eval's EvaluationTracker to redact what it writes (and name callables). Idempotent."""
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    from medeval_metrics.redact import redact_obj  # lazily: see install_redaction

    if getattr(EvaluationTracker.save_results_aggregated, "_medeval_redacting", False):
        return
    save_aggregated = EvaluationTracker.save_results_aggregated
    save_samples = EvaluationTracker.save_results_samples

    def save_results_aggregated(self: Any, results: dict, samples: dict | None = None) -> None:
        with _whole_files_or_none():
            return save_aggregated(self, redact_obj(_named_callables(results)), samples)

    def save_results_samples(self: Any, task_name: str, samples: Any) -> None:
        with _whole_files_or_none():
            return save_samples(self, task_name, redact_obj(samples, patterns=False))

    save_results_aggregated._medeval_redacting = True  # type: ignore[attr-defined]
    save_results_aggregated._medeval_original = save_aggregated  # type: ignore[attr-defined]
    save_results_samples._medeval_original = save_samples  # type: ignore[attr-defined]
    EvaluationTracker.save_results_aggregated = save_results_aggregated  # type: ignore[method-assign]
    EvaluationTracker.save_results_samples = save_results_samples  # type: ignore[method-assign]


# The same writer writes with ``Path.write_text`` and ``open(..., "a")`` and turns every exception
# into the warning "Could not save results aggregated" (lm-eval 0.4.x, 0.4.13 checked): a full disk
# leaves a truncated results_*.json or sample log, the run exits 0, and the next step (the pack's
# breakdowns) reads the cut file. While the pack's wrappers run, the tracker's module-level ``Path``
# and ``open`` write through ``safe_files`` (a temporary file renamed into place: whole or absent),
# and each failure is kept for ``medeval run`` (``take_write_failures``), which names the file and
# exits non-zero. Remove once lm-eval writes atomically and lets a failed write fail the run (the
# test checks that the unpatched writer still swallows the error and leaves the truncated file).

_write_failures: list[Any] = []


def take_write_failures() -> list[Any]:
    """The ``MedevalWriteError`` of each results or samples file lm-eval could not write since the last call."""
    failures = list(_write_failures)
    _write_failures.clear()
    return failures


@contextlib.contextmanager
def _whole_files_or_none() -> Iterator[None]:
    import lm_eval.loggers.evaluation_tracker as tracker

    from medeval_metrics.safe_files import MedevalWriteError, atomic_open, atomic_write_text

    class WholeFilePath(type(Path())):  # type: ignore[misc]
        def write_text(
            self, data: str, encoding: str | None = None, errors: str | None = None, newline: str | None = None
        ) -> int:
            try:
                atomic_write_text(self, data, encoding=encoding or "utf-8")
            except MedevalWriteError as exc:
                _write_failures.append(exc)
                raise
            return len(data)

    @contextlib.contextmanager
    def whole_file_open(file: Any, mode: str = "r", encoding: str | None = None, **kwargs: Any) -> Iterator[Any]:
        if mode not in ("a", "w"):
            with open(file, mode, encoding=encoding, **kwargs) as handle:
                yield handle
            return
        try:
            earlier = Path(file).read_text(encoding=encoding) if mode == "a" and Path(file).is_file() else ""
            with atomic_open(file, "w", encoding=encoding or "utf-8") as handle:
                handle.write(earlier)
                yield handle
        except MedevalWriteError as exc:
            _write_failures.append(exc)
            raise

    saved = tracker.__dict__.get("Path"), tracker.__dict__.get("open")
    tracker.Path, tracker.open = WholeFilePath, whole_file_open  # type: ignore[attr-defined]
    try:
        yield
    finally:
        tracker.Path = saved[0]  # type: ignore[attr-defined]
        if saved[1] is None:
            del tracker.open
        else:
            tracker.open = saved[1]  # type: ignore[attr-defined]


# --- 4. API backend requests: exact headers, and the request body for the judges' transport -------


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


# --- 5. process_results: the generation settings lm-eval used, for scorers that need them -------


def pass_generation_kwargs_to_process_results() -> None:
    """Give a task's ``process_results`` the generation settings lm-eval actually used.

    Works around (lm-eval 0.4.13, the 0.4 line): ``ConfigurableTask.process_results`` calls the task
    config's ``process_results(doc, results)`` without the config, and ``--gen_kwargs`` is merged
    into ``generation_kwargs`` only after the data set is loaded, so a scorer that depends on the
    generation budget (emrQA's ``prompt_too_long``: prompt plus ``max_gen_toks`` against the
    context) could only restate the YAML's value. A ``process_results`` function marked
    ``wants_generation_kwargs = True`` is called with ``generation_kwargs=`` the task config's;
    every other task is untouched. Idempotent.
    """
    from lm_eval.api.task import ConfigurableTask

    original = ConfigurableTask.process_results
    if getattr(original, "_medeval_generation_kwargs", False):
        return

    def process_results(self: Any, doc: Any, results: Any) -> Any:
        function = self.config.process_results
        if callable(function) and getattr(function, "wants_generation_kwargs", False):
            return function(doc, results, generation_kwargs=self.config.generation_kwargs)
        return original(self, doc, results)

    process_results._medeval_generation_kwargs = True  # type: ignore[attr-defined]
    process_results.__wrapped__ = original  # type: ignore[attr-defined]
    ConfigurableTask.process_results = process_results  # type: ignore[method-assign]


# --- 6. TaskManager without lm-eval's built-in tasks, for pack-only runs ------------------------


@contextlib.contextmanager
def pack_only_task_index() -> Iterator[None]:
    """While active, every ``TaskManager`` indexes only the folders it is given (no built-in tasks).

    Works around: lm-eval 0.4.13's CLI always builds the full index of its ~14k built-in tasks
    (about 4 s, and most of a short run's start-up), with no flag to skip it; ``TaskManager``'s
    ``include_defaults`` argument is not reachable from the command line. ``medeval run`` uses this
    only when every requested task is the pack's and the user gave no ``--include_path``, so the
    pack's folder (added by the pack's own TaskManager hook) is all that is needed.
    Versions: lm-eval 0.4.13 (``TaskManager.__init__(..., include_defaults=True, ...)``).
    Test: tests/core/test_cli_run_checks.py notices when ``include_defaults`` disappears or when the
    CLI grows its own way to skip the defaults.
    """
    from lm_eval.tasks import TaskManager

    wrapped = TaskManager.__init__

    def init_without_defaults(self, *args, include_defaults=True, **kwargs):
        wrapped(self, *args, include_defaults=False, **kwargs)

    TaskManager.__init__ = init_without_defaults  # type: ignore[method-assign]
    try:
        yield
    finally:
        TaskManager.__init__ = wrapped  # type: ignore[method-assign]


# --- 7. The running loader's task config, for what a loader resolved -----------------------------


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


# --- 8. Metrics named at run time: an aggregation and a direction from their scorer ---------------


class _FamilyAwareTable(dict):
    """A task's aggregation table that also knows the metric families its scorer declares."""

    def __init__(self, table: dict, families: dict, higher_is_better: dict, resolve: Any) -> None:
        super().__init__(table)
        self.families, self.higher_is_better, self.resolve = families, higher_is_better, resolve

    def __missing__(self, metric: str) -> Any:
        for prefix, declared in self.families.items():
            if metric.startswith(prefix):
                aggregation = declared["aggregation"]
                self[metric] = self.resolve(aggregation) if isinstance(aggregation, str) else aggregation
                self.higher_is_better.setdefault(metric, declared["higher_is_better"])
                return self[metric]
        raise KeyError(metric)


def aggregate_metric_families() -> None:
    """Aggregate metrics whose names start with a prefix the scorer declares, as it declares.

    Works around (lm-eval 0.4.13; the same in 0.4.11-0.4.12): a task's aggregations and
    higher_is_better come only from its YAML ``metric_list``, whose names are fixed, so a metric that
    ``process_results`` names at run time (MedicationQA's ``judge_success_<judge>``, one per judge
    of the configured panel) is aggregated by ``evaluator_utils._compute_task_aggregations`` with a
    plain mean after the warning "No aggregation function defined for metric ...", once per judge
    per run, and has no higher_is_better (no arrow in the table, no entry in the results JSON).

    A ``process_results`` function carrying ``metric_families = {prefix: {"aggregation": name or
    callable, "higher_is_better": bool}}`` has each metric starting with ``prefix`` aggregated by
    that aggregation (a name is looked up in lm-eval's aggregation registry, as in a metric_list)
    and given that direction; lm-eval asks for the aggregation of every metric before it reads
    higher_is_better. Other tasks are untouched. Idempotent. Test: tests/core/test_lm_eval_compat.py.
    """
    from lm_eval.api.registry import get_aggregation
    from lm_eval.api.task import ConfigurableTask

    original = ConfigurableTask.aggregation
    if getattr(original, "_medeval_metric_families", False):
        return

    def aggregation(self: Any) -> Any:
        table = original(self)
        families = getattr(self.config.process_results, "metric_families", None)
        if not families or isinstance(table, _FamilyAwareTable):
            return table
        self._aggregation_list = _FamilyAwareTable(table, families, self._higher_is_better, get_aggregation)
        return self._aggregation_list

    aggregation._medeval_metric_families = True  # type: ignore[attr-defined]
    aggregation.__wrapped__ = original  # type: ignore[attr-defined]
    ConfigurableTask.aggregation = aggregation  # type: ignore[method-assign]


# --- 9. The custom_dataset notice, for the pack's own tasks ---------------------------------------

CUSTOM_DATASET_NOTICE = ": Custom kwargs can be passed to `--metadata`"


class _DropPackCustomDatasetNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if CUSTOM_DATASET_NOTICE not in message:
            return True
        return message.split(CUSTOM_DATASET_NOTICE, 1)[0] not in _pack_task_names()


@functools.lru_cache(maxsize=1)
def _pack_task_names() -> frozenset[str]:
    return frozenset(pack_task_yamls())


def quiet_pack_custom_dataset_notice() -> None:
    """Drop lm-eval's "Custom kwargs can be passed to `--metadata`" warning for the pack's tasks.

    Works around (lm-eval 0.4.13, ``ConfigurableTask.download``; 0.4.11-0.4.12 the same): every task
    whose ``custom_dataset`` is a callable logs that warning, whatever its configuration, once per
    task per run (17 lines for the whole pack). The pack's tasks load local data through
    ``custom_dataset`` (nothing else accepts a path from ``--metadata``), document their keys in
    the README and ``medeval list``, and name the missing key and the fix in their own errors, so
    the line is noise there. Other tasks keep it. A logging filter on lm-eval's task logger (it
    imports nothing from lm-eval). Idempotent. Test: tests/core/test_lm_eval_compat.py.
    """
    logger = logging.getLogger("lm_eval.api.task")
    if not any(isinstance(f, _DropPackCustomDatasetNotice) for f in logger.filters):
        logger.addFilter(_DropPackCustomDatasetNotice())


# --- 10. The results of the evaluation the CLI runs in this process ------------------------------


@contextlib.contextmanager
def capture_results() -> Iterator[list[dict[str, Any]]]:
    """While active, each ``lm_eval.simple_evaluate`` call's return value is appended to the yielded list.

    Why: lm-eval 0.4.13's CLI (``lm_eval._cli.run.Run._execute``) looks ``simple_evaluate`` up on the
    ``lm_eval`` package when it runs (``from lm_eval import simple_evaluate``), prints the results and
    writes them only where ``--output_path`` is given; it returns nothing. ``medeval run`` needs them to
    exit non-zero when a judge scored nothing, also without ``--output_path``. Wrapping the package
    attribute for the duration of one CLI call is enough; it is put back afterwards.
    Versions: lm-eval 0.4.12-0.4.13 (the test checks that the CLI still imports it at call time).
    """
    import lm_eval

    original = lm_eval.simple_evaluate
    captured: list[dict[str, Any]] = []

    @functools.wraps(original)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        results = original(*args, **kwargs)
        if isinstance(results, dict):
            captured.append(results)
        return results

    lm_eval.simple_evaluate = simple_evaluate  # type: ignore[assignment]
    try:
        yield captured
    finally:
        lm_eval.simple_evaluate = original  # type: ignore[assignment]


# --- 11. The evaluated local-* model: OPENAI_API_KEY only to OpenAI ---------------------------------

MODEL_KEY_ENV = MODEL_API_KEY_ENV.name  # names the variable holding a local server's key
OPENAI_HOSTS = ("api.openai.com",)


@contextlib.contextmanager
def model_key_only_for_its_endpoint() -> Iterator[None]:
    """While active, lm-eval's ``local-completions`` / ``local-chat-completions`` send a key only where
    it belongs (put back afterwards).

    Why: their ``api_key`` (``LocalCompletionsAPI.api_key``) is ``$OPENAI_API_KEY`` whatever
    ``base_url`` points at, and ``TemplateAPI.header`` turns it into ``Authorization: Bearer ...``, so a
    run against any third-party or local host hands it the user's OpenAI key. With this patch they send
    ``$OPENAI_API_KEY`` only to OpenAI's own host; to any other host the value of the variable that
    ``MEDEVAL_MODEL_API_KEY_ENV`` names (e.g. ``MEDEVAL_MODEL_API_KEY_ENV=VLLM_API_KEY``), or no
    ``Authorization`` header at all. A ``header`` model argument is sent as given, as before. The
    ``openai-*`` backends (OpenAI's own API) are untouched. ``medeval run`` holds it around lm-eval's
    CLI, which builds the model. Versions: lm-eval 0.4.x up to at least 0.4.13 (the test checks the
    fallback).
    """
    import functools
    import os
    from urllib.parse import urlparse

    from lm_eval.models.openai_completions import LocalCompletionsAPI

    def api_key(self: Any) -> str:
        named = os.environ.get(MODEL_KEY_ENV, "").strip()
        if named:
            value = os.environ.get(named, "")
            if value:
                from medeval_metrics import redact  # lazily: see install_redaction

                redact.register_secret(value)
            return value
        host = (urlparse(str(self.base_url or "")).hostname or "").lower()
        return os.environ.get("OPENAI_API_KEY", "") if host in OPENAI_HOSTS else ""

    def header(self: Any) -> dict:
        if self._header:
            return self._header
        key = self.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    missing = object()
    saved = {name: LocalCompletionsAPI.__dict__.get(name, missing) for name in ("api_key", "header")}
    header_property = functools.cached_property(header)
    header_property.__set_name__(LocalCompletionsAPI, "header")
    LocalCompletionsAPI.api_key = property(api_key)  # type: ignore[method-assign,assignment]
    LocalCompletionsAPI.header = header_property  # type: ignore[method-assign,assignment]
    # the openai-* subclasses read OPENAI_API_KEY in their own api_key (OpenAI's endpoint): unchanged
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                delattr(LocalCompletionsAPI, name)
            else:
                setattr(LocalCompletionsAPI, name, value)


# --- 12. The evaluated API model: capped replies, credentials kept to their origin ----------------


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

    Why: lm-eval 0.4.13's ``TemplateAPI.model_call`` posts with ``requests.post`` and ``amodel_call``
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


# --- 13. Quiet runs: no git probe on the console, no warning the pack's own commands cause -------------

# lm-eval's warnings that the pack's documented commands trigger with nothing for the user to act on:
# the greedy decoding the pack's tasks fix (do_sample: false) is what runs whatever --gen_kwargs sets a budget
# for; --limit is said once in the pack's own summary line after the run (``cli.run_summary``).
_GEN_KWARGS_WARNING = "specified through cli, these settings will update set parameters in yaml tasks"
_LIMIT_WARNING = "--limit SHOULD ONLY BE USED FOR TESTING"
BUDGET_ONLY_GEN_KWARGS = frozenset({"max_gen_toks", "max_new_tokens", "until"})


_TRUNCATION_WARNING = "Left truncation applied"


class _DropDocumentedRunWarnings(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.truncations = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if _LIMIT_WARNING in message:
            return False
        if _TRUNCATION_WARNING in message:  # said once per batch by lm-eval: the first says it
            self.truncations += 1
            return self.truncations == 1
        if _GEN_KWARGS_WARNING in message and record.args:
            given = record.args[0] if isinstance(record.args, tuple) else record.args
            keys = (
                set(given) if isinstance(given, dict) else {p.split("=", 1)[0].strip() for p in str(given).split(",")}
            )
            return not keys <= BUDGET_ONLY_GEN_KWARGS  # a sampling setting: the advice is for the user
        return True


def _quiet_git_commit_hash() -> Any:
    """lm-eval's ``get_git_commit_hash`` with git's stderr kept off the console."""
    import os
    import subprocess

    from lm_eval.loggers.utils import get_commit_from_path

    try:
        return subprocess.check_output(["git", "describe", "--always"], stderr=subprocess.DEVNULL).strip().decode()
    except (subprocess.CalledProcessError, FileNotFoundError, OSError):
        return get_commit_from_path(os.getcwd())


def quiet_documented_runs() -> None:
    """No line on the console that a user of the pack's documented commands cannot act on.

    Works around (lm-eval 0.4.13, ``evaluator.simple_evaluate``; 0.4.11-0.4.12 the same): (a) the results'
    ``git_hash`` comes from ``git describe`` run with the console as its stderr, so outside a repository every
    run prints ``fatal: not a git repository``; the pack runs the same probe with stderr discarded (the hash
    recorded is the same); (b) ``--gen_kwargs max_gen_toks=N`` warns "Ensure 'do_sample=True'" though only the
    budget changed (kept when a sampling setting is given); (c) the ``--limit`` warning, said instead in the
    pack's summary line; (d) "Left truncation applied", once per batch of too-long prompts: only the first is
    kept (the pack's context check says which prompts do not fit, when they are scored). ``medeval run`` only; plain ``lm_eval``
    is unchanged. Idempotent.
    Test: tests/core/test_quiet_documented_runs.py.
    """
    import lm_eval.evaluator

    lm_eval.evaluator.get_git_commit_hash = _quiet_git_commit_hash
    for name in ("lm_eval.evaluator", "lm_eval.config.evaluate_config", "lm_eval.models.huggingface"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropDocumentedRunWarnings) for f in logger.filters):
            logger.addFilter(_DropDocumentedRunWarnings())


# --- 14. Per-task wall time and judge usage, in the results ----------------------------------------------

RUN_RECORD_KEY = "medeval_run"  # results[RUN_RECORD_KEY]["tasks"][task] = {wall_s, ..., judge: {...}}


def _task_name(task: Any) -> str:
    config = getattr(task, "config", None)
    return str(getattr(config, "task", None) or getattr(task, "task_name", None) or "?")


@contextlib.contextmanager
def task_timings(judge_usage: Mapping[str, Mapping[str, int]] | None = None) -> Iterator[dict[str, dict[str, Any]]]:
    """While active, each task's time is measured and written into the results ``simple_evaluate`` returns
    (before lm-eval saves them), as ``results["medeval_run"]["tasks"][task]``: ``load_s`` (its data loader),
    ``prepare_s`` (building its
    requests), ``model_s`` (its share of each model call, by its number of requests in that call),
    ``filters_s`` (its filters: the judge panel of a judged task), ``scoring_s`` and their sum ``wall_s``;
    for a judged task, ``judge`` holds the judges' requests and the tokens their API replies reported.

    Why: lm-eval 0.4.13 (``evaluator.evaluate``) sends the requests of every task to the model together, one
    call per request type, and records no time at all; its results have no per-task time. The pack wraps
    ``ConfigurableTask.download``, ``build_all_requests``, ``apply_filters``, ``process_results`` and the model's request
    methods for the duration (put back afterwards). Versions: lm-eval 0.4.11-0.4.13. Test:
    tests/core/test_run_record.py.
    """
    import time
    from collections import Counter, defaultdict

    import lm_eval
    import lm_eval.evaluator
    from lm_eval.api.task import ConfigurableTask

    if judge_usage is None:  # the judges' request and token counts (judge.judge_usage, passed by the caller)
        judge_usage = {}
    times: dict[str, Counter] = defaultdict(Counter)
    judged: dict[str, Counter] = defaultdict(Counter)
    originals = {
        name: getattr(ConfigurableTask, name)
        for name in ("download", "build_all_requests", "apply_filters", "process_results")
    }

    def timed(name: str, field: str) -> Any:
        original = originals[name]

        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            before = {j: Counter(c) for j, c in judge_usage.items()} if name == "apply_filters" else None
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                times[_task_name(self)][field] += time.perf_counter() - started
                if before is not None:
                    for judge, counts in judge_usage.items():
                        judged[_task_name(self)].update(counts - before.get(judge, Counter()))

        return wrapper

    original_evaluate = lm_eval.evaluator.evaluate

    @functools.wraps(original_evaluate)
    def evaluate(lm: Any, *args: Any, **kwargs: Any) -> Any:
        saved = {}
        for method in ("generate_until", "loglikelihood", "loglikelihood_rolling"):
            bound = getattr(lm, method, None)
            if bound is None:
                continue

            def call(requests: Any, *a: Any, _bound: Any = bound, **k: Any) -> Any:
                started = time.perf_counter()
                try:
                    return _bound(requests, *a, **k)
                finally:
                    spent, per_task = (
                        time.perf_counter() - started,
                        Counter(getattr(r, "task_name", "?") for r in requests),
                    )
                    for task, count in per_task.items():
                        times[task]["model_s"] += spent * count / max(1, len(requests))

            saved[method] = lm.__dict__.get(method)
            setattr(lm, method, call)
        try:
            return original_evaluate(lm, *args, **kwargs)
        finally:
            for method, value in saved.items():
                if value is None:
                    delattr(lm, method)
                else:
                    setattr(lm, method, value)

    original_simple = lm_eval.simple_evaluate

    @functools.wraps(original_simple)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        results = original_simple(*args, **kwargs)
        if isinstance(results, dict):
            results[RUN_RECORD_KEY] = {"tasks": record}
            record.update(_run_record(times, judged))
        return results

    record: dict[str, dict[str, Any]] = {}
    for name, field in (
        ("download", "load_s"),
        ("build_all_requests", "prepare_s"),
        ("apply_filters", "filters_s"),
        ("process_results", "scoring_s"),
    ):
        setattr(ConfigurableTask, name, timed(name, field))
    lm_eval.evaluator.evaluate = evaluate
    lm_eval.simple_evaluate = simple_evaluate
    try:
        yield record
    finally:
        for name, original in originals.items():
            setattr(ConfigurableTask, name, original)
        lm_eval.evaluator.evaluate = original_evaluate
        lm_eval.simple_evaluate = original_simple


def _run_record(times: dict[str, Any], judged: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for task, spent in sorted(times.items()):
        if task == "?":
            continue
        entry = {
            field: round(spent.get(field, 0.0), 3)
            for field in ("load_s", "prepare_s", "model_s", "filters_s", "scoring_s")
        }
        entry["wall_s"] = round(sum(entry.values()), 3)
        usage = judged.get(task)
        if usage:
            entry["judge"] = {
                k: int(usage[k]) for k in ("requests", "prompt_tokens", "completion_tokens") if k in usage
            }
        out[task] = entry
    return out


# --- 15. The evaluated model, for scorers that count its tokens ----------------------------------

_EVALUATED: list[Any] = []  # the models of the evaluate calls running now (innermost last)


def remember_evaluated_model() -> None:
    """While lm-eval's ``evaluator.evaluate`` runs, ``evaluated_model()`` is the model it evaluates.

    Works around (lm-eval 0.4.13, the 0.4 line): a task's ``process_results`` gets the doc and the
    replies, not the model, so a scorer that counts prompt tokens (EMSQA RAG's ``prompt_too_long``) had to
    load the model's tokenizer a second time (0.57 s per task for SmolLM2) and restate lm-eval's context
    limit from ``--model_args``; a model given as an object, or a GGUF folder, had none to load.
    ``simple_evaluate`` builds the tasks before it calls ``evaluate``, so a loader installs this in time.
    Idempotent; a wrapper that ``task_timings`` puts back on exit is installed again by the next loader.
    """
    from lm_eval import evaluator

    current = evaluator.evaluate
    if getattr(current, "_medeval_remembers_model", False):
        return

    @functools.wraps(current)
    def evaluate(lm: Any, *args: Any, **kwargs: Any) -> Any:
        _EVALUATED.append(lm)
        stop_recording = _record_encoded_lengths(_unwrapped(lm))
        try:
            return current(lm, *args, **kwargs)
        finally:
            _EVALUATED.pop()
            stop_recording()

    evaluate._medeval_remembers_model = True  # type: ignore[attr-defined]
    evaluator.evaluate = evaluate


# model -> {text digest: tokens}: what the HF backend's tok_encode returned for whole prompts while it was evaluated.
# lm-eval 0.4.13 encodes every generate_until context to sort the requests by length (and again to batch them),
# and tells the task none of it; a scorer counting the same text (prompt_too_long) would encode it a third time.
_ENCODED: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_MAX_ENCODED = 500_000  # per model: a loglikelihood suite encodes every context; the recording stops there


def _record_encoded_lengths(lm: Any) -> Any:
    """While ``evaluate`` runs: the lengths of the texts ``lm``'s ``tok_encode`` encodes as a prompt (its own
    special-token setting, no truncation). Only lm-eval's own HF ``tok_encode`` (a subclass overriding it may
    encode otherwise). Returns the undo."""
    hf = next((c for c in type(lm).__mro__ if (c.__module__, c.__name__) == _HF_BACKEND), None)
    if hf is None or type(lm).tok_encode is not hf.tok_encode or "tok_encode" in vars(lm):
        return lambda: None
    from medeval_metrics.context_fit import text_digest

    lengths = _ENCODED.setdefault(lm, {})
    encode = lm.tok_encode

    def tok_encode(string: Any, add_special_tokens: Any = None, left_truncate_len: Any = None, **kwargs: Any) -> Any:
        ids = encode(string, add_special_tokens, left_truncate_len, **kwargs)
        whole = add_special_tokens is None and not left_truncate_len and isinstance(string, str)
        if whole and len(lengths) < _MAX_ENCODED:
            lengths[text_digest(string)] = len(ids)
        return ids

    lm.tok_encode = tok_encode
    return lambda: vars(lm).pop("tok_encode", None)


def encoded_lengths(model: Any) -> Mapping[str, int]:
    """{``context_fit.text_digest(text)``: tokens} for the prompts ``model`` (``evaluated_model()``) encoded
    as lm-eval encodes a prompt; empty for a model not recorded."""
    try:
        return _ENCODED.get(model) or {}
    except TypeError:  # not weak-referenceable: never recorded
        return {}


_HF_BACKEND = ("lm_eval.models.huggingface", "HFLM")


def _unwrapped(lm: Any) -> Any:
    return getattr(lm, "lm", lm) if type(lm).__name__ == "CachingLM" else lm


_TOKEN_COUNTING_BACKENDS = {_HF_BACKEND, ("lm_eval.models.vllm_causallms", "VLLM")}


def evaluated_model() -> Any | None:
    """The model of the ``evaluate`` call running now, when it is a backend that cuts prompts at its
    ``max_length`` with its ``tokenizer`` (hf, vllm; lm-eval's request cache unwrapped), else None."""
    if not _EVALUATED:
        return None
    lm = _unwrapped(_EVALUATED[-1])
    if any((c.__module__, c.__name__) in _TOKEN_COUNTING_BACKENDS for c in type(lm).__mro__):
        return lm
    return None
