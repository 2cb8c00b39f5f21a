"""Each patch in ``medeval_metrics.lm_eval_compat``: still needed (lm-eval's behaviour unchanged) and
still working. A "needed" test failing means lm-eval changed: re-read the patch's comment and
remove or adapt the patch. In-process and fast (no subprocess, no model)."""

from __future__ import annotations

import inspect
import json
import logging
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from medeval_metrics import lm_eval_compat, lm_eval_link, tasks_path
from medeval_metrics.stats import with_stderr

CANARY = "canary-compat-0123456789abcdef"
HEADER_CANARY = "hdr-canary-9876543210fedcba"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def capture_logs():
    """Records of the named loggers (lm-eval's loggers do not propagate to the root)."""
    attached: list[tuple[logging.Logger, _Capture]] = []

    def attach(name: str) -> _Capture:
        handler = _Capture()
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        attached.append((logger, handler))
        return handler

    yield attach
    for logger, handler in attached:
        logger.removeHandler(handler)


# --- 1. TaskManager.__init__ ----------------------------------------------------------------------


@pytest.fixture
def patched_task_manager():
    from lm_eval.tasks import TaskManager

    before = TaskManager.__init__
    original = getattr(before, "_medeval_original", before)
    TaskManager.__init__ = original
    lm_eval_compat.index_pack_tasks()
    yield TaskManager
    TaskManager.__init__ = before


def test_task_manager_patch_still_needed():
    """lm-eval's task index reads no entry points (our ``lm_eval.tasks`` entry point is ignored)."""
    import lm_eval.tasks as tasks_package
    from lm_eval.tasks import _index, manager

    for module in (tasks_package, manager, _index):
        assert "entry_points" not in inspect.getsource(module), f"{module.__name__} now reads entry points"
    from lm_eval.tasks import TaskManager

    original = getattr(TaskManager.__init__, "_medeval_original", TaskManager.__init__)
    params = list(inspect.signature(original).parameters)
    assert params[:5] == ["self", "verbosity", "include_path", "include_defaults", "metadata"]


def test_task_manager_patch_indexes_the_pack_next_to_user_paths(patched_task_manager, tmp_path):
    user = tmp_path / "user_tasks"
    user.mkdir()
    (user / "my_probe.yaml").write_text("task: my_probe\ndataset_path: json\noutput_type: generate_until\n")
    alone = patched_task_manager(include_defaults=False)
    assert "emsqa_public" in alone.all_tasks and "medicationqa" in alone.all_tasks
    both = patched_task_manager(None, str(user), False)  # include_path given positionally
    assert {"my_probe", "emsqa_public"} <= set(both.all_tasks)
    listed = patched_task_manager(include_defaults=False, include_path=[user, tasks_path()])  # pack given twice
    assert {"my_probe", "emsqa_public"} <= set(listed.all_tasks)


def _enabled_copy(tmp_path: Path) -> Path:
    fake_lm_eval_tasks = tmp_path / "lm_eval_tasks"
    fake_lm_eval_tasks.mkdir()
    lm_eval_link.enable(fake_lm_eval_tasks)
    return fake_lm_eval_tasks


def test_enabled_copy_causes_override_warnings_without_the_fix(tmp_path, capture_logs):
    """The root cause of ~20 warnings a run after ``enable``: the pack indexed twice."""
    from lm_eval.tasks import TaskManager

    indexed = _enabled_copy(tmp_path)
    index_log = capture_logs("lm_eval.tasks._index")
    original = getattr(TaskManager.__init__, "_medeval_original", TaskManager.__init__)
    manager = TaskManager.__new__(TaskManager)
    original(manager, include_defaults=False, include_path=[indexed, tasks_path()])
    overrides = [m for m in index_log.messages if "overrides existing task" in m]
    assert len(overrides) >= 15  # every pack task and group


def test_current_enabled_copy_is_not_indexed_twice(patched_task_manager, tmp_path, capture_logs):
    indexed = _enabled_copy(tmp_path)
    assert lm_eval_link.copy_state(indexed) == "current"
    index_log, medeval_log = capture_logs("lm_eval.tasks._index"), capture_logs("medeval")
    manager = patched_task_manager(include_defaults=False, include_path=str(indexed))
    assert "emsqa_public" in manager.all_tasks
    assert not [m for m in index_log.messages if "overrides existing task" in m]
    assert medeval_log.messages == []
    entry = manager._index["emsqa_public"]
    assert Path(entry.yaml_path).is_relative_to(indexed / lm_eval_link.FOLDER_NAME)


def test_stale_enabled_copy_is_overridden_with_one_line(patched_task_manager, tmp_path, capture_logs):
    indexed = _enabled_copy(tmp_path)
    stale_yaml = indexed / lm_eval_link.FOLDER_NAME / "emsqa" / "emsqa_public.yaml"
    stale_yaml.write_text(stale_yaml.read_text() + "\n# older pack version\n")
    assert lm_eval_link.copy_state(indexed) == "stale"
    index_log, medeval_log = capture_logs("lm_eval.tasks._index"), capture_logs("medeval")
    manager = patched_task_manager(include_defaults=False, include_path=[str(indexed)])
    assert not [m for m in index_log.messages if "overrides existing task" in m]
    assert len(medeval_log.messages) == 1
    assert "run `medeval lm-eval-tasks enable` again" in medeval_log.messages[0]
    assert Path(manager._index["emsqa_public"].yaml_path).is_relative_to(Path(tasks_path()))  # the current YAML wins


# --- 2. stderr_for_metric -------------------------------------------------------------------------


def _spread(items):
    return float(max(items) - min(items))


@with_stderr(_spread)
def _corpus_max(items):
    return float(max(items))


class _FakeTask:
    task_name = "probe"

    def aggregation(self):
        return {"score": _corpus_max}


@pytest.fixture
def unpatched_stderr():
    from lm_eval import evaluator_utils

    before = evaluator_utils.stderr_for_metric
    evaluator_utils.stderr_for_metric = getattr(before, "_medeval_original", before)
    yield evaluator_utils
    evaluator_utils.stderr_for_metric = before


def test_stderr_patch_still_needed(unpatched_stderr):
    """Without the patch lm-eval reports "N/A" for an aggregation it does not know."""
    metrics, _ = unpatched_stderr._compute_task_aggregations(_FakeTask(), {("score", "none"): [1.0, 4.0, 2.0]}, 100)
    assert metrics["score,none"] == 4.0
    assert metrics["score_stderr,none"] == "N/A"
    # the patch replaces a module global that the aggregation step looks up at call time
    assert "stderr_for_metric" in unpatched_stderr._compute_task_aggregations.__code__.co_names


def test_stderr_patch_gives_the_attached_stderr(unpatched_stderr):
    from lm_eval.api.metrics import mean

    lm_eval_compat.use_attached_stderrs()
    lm_eval_compat.use_attached_stderrs()  # idempotent: wraps once
    assert not hasattr(unpatched_stderr.stderr_for_metric._medeval_original, "_medeval")
    metrics, _ = unpatched_stderr._compute_task_aggregations(_FakeTask(), {("score", "none"): [1.0, 4.0, 2.0]}, 100)
    assert metrics["score_stderr,none"] == 3.0
    off, _ = unpatched_stderr._compute_task_aggregations(_FakeTask(), {("score", "none"): [1.0, 4.0]}, 0)
    assert off["score_stderr,none"] == "N/A"  # --bootstrap_iters 0: lm-eval's own rule
    assert unpatched_stderr.stderr_for_metric(metric=mean, bootstrap_iters=100)([0.0, 1.0]) == pytest.approx(0.5)


# --- 3. EvaluationTracker -------------------------------------------------------------------------


def _results() -> dict:
    model_args = {
        "model": "fake-gpt",
        "api_key": CANARY,
        "header": {"X-Gateway-Auth": HEADER_CANARY, "Content-Type": "application/json"},
    }
    return {
        "results": {"probe": {"acc,none": 1.0}},
        "config": {"model": "local-chat-completions", "model_args": model_args},
        "configs": {"probe": {"metadata": {**model_args, "version": 1}}},
    }


def _sample() -> dict:
    return {
        "doc_id": 0,
        "doc": {"q": "x"},
        "target": "A",
        "arguments": [["prompt", {"until": []}]],
        "resps": [[f"the server said {HEADER_CANARY}"]],
        "filtered_resps": ["A"],
        "doc_hash": "d",
        "prompt_hash": "p",
        "target_hash": "t",
    }


@pytest.fixture
def tracker_class():
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    saved = (EvaluationTracker.save_results_aggregated, EvaluationTracker.save_results_samples)
    EvaluationTracker.save_results_aggregated = getattr(saved[0], "_medeval_original", saved[0])
    EvaluationTracker.save_results_samples = getattr(saved[1], "_medeval_original", saved[1])
    yield EvaluationTracker
    EvaluationTracker.save_results_aggregated, EvaluationTracker.save_results_samples = saved


def _write(tracker_class, out: Path) -> str:
    tracker = tracker_class(output_path=str(out))
    tracker.save_results_aggregated(results=_results(), samples=None)
    tracker.save_results_samples("probe", [_sample()])
    return "\n".join(p.read_text() for p in sorted(out.rglob("*")) if p.is_file())


def test_tracker_patch_still_needed(tracker_class, tmp_path):
    """lm-eval writes model_args values (keys, header values) verbatim into the results JSON."""
    written = _write(tracker_class, tmp_path / "plain")
    assert CANARY in written and HEADER_CANARY in written


def test_tracker_patch_redacts_results_and_samples(tracker_class, tmp_path, monkeypatch):
    from medeval_metrics import redact

    redact.register_secret(HEADER_CANARY)  # what `medeval run` does with a header from --model_args
    lm_eval_compat.redact_results_writer()
    lm_eval_compat.redact_results_writer()  # idempotent
    out = tmp_path / "patched"
    written = _write(tracker_class, out)
    assert CANARY not in written and HEADER_CANARY not in written
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert results["config"]["model_args"] == {
        "model": "fake-gpt",
        "api_key": "[REDACTED]",
        "header": {"X-Gateway-Auth": "[REDACTED]", "Content-Type": "application/json"},
    }
    assert results["results"]["probe"]["acc,none"] == 1.0
    sample = json.loads(next(out.rglob("samples_*.jsonl")).read_text())
    assert sample["resps"] == [["the server said [REDACTED]"]] and sample["filtered_resps"] == ["A"]


def _results_with_a_function_in_a_config():
    from medeval_metrics.emsqa import fewshot_pool
    from medeval_metrics.emsqa.data import DeferredPool

    results = _results()
    results["configs"] = {"probe": {"fewshot_config": {"sampler": DeferredPool, "process_docs": fewshot_pool}}}
    return results


def test_tracker_writes_function_addresses_unpatched(tracker_class, tmp_path):
    tracker = tracker_class(output_path=str(tmp_path / "plain"))
    tracker.save_results_aggregated(results=_results_with_a_function_in_a_config(), samples=None)
    written = next((tmp_path / "plain").rglob("results_*.json")).read_text()
    assert re.search(r"<function fewshot_pool at 0x[0-9a-f]+>", written)  # still needed


def test_tracker_patch_writes_callables_by_name(tracker_class, tmp_path):
    lm_eval_compat.redact_results_writer()
    tracker = tracker_class(output_path=str(tmp_path / "patched"))
    tracker.save_results_aggregated(results=_results_with_a_function_in_a_config(), samples=None)
    results = json.loads(next((tmp_path / "patched").rglob("results_*.json")).read_text())
    assert results["configs"]["probe"]["fewshot_config"] == {
        "sampler": "medeval_metrics.emsqa.data.DeferredPool",
        "process_docs": "medeval_metrics.emsqa.data.fewshot_pool",
    }


def test_compat_module_imports_nothing_from_lm_eval():
    source = Path(lm_eval_compat.__file__).read_text()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top_level if re.match(r"(?:from|import) lm_eval(?:\.|\s|$)", line)]


# --- `medeval lm-eval-tasks`: refusals are one line; `enable` keeps runs quiet --------------------


def _cli(argv, capsys) -> tuple[int, str, str]:
    from medeval_metrics.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_lm_eval_tasks_refusals_are_one_line(tmp_path, capsys, monkeypatch):
    foreign = tmp_path / "lm_eval_tasks"
    (foreign / "medeval").mkdir(parents=True)
    for action in ("enable", "disable"):
        code, out, err = _cli(["lm-eval-tasks", action, "--target", str(foreign)], capsys)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("medeval lm-eval-tasks: ") and "was not made by medeval" in err
    code, _, err = _cli(["lm-eval-tasks", "enable", "--target", str(tmp_path / "typo")], capsys)
    assert (code, err.count("\n")) == (2, 1) and "is not an existing folder" in err
    assert not (tmp_path / "typo").exists()  # a mistyped --target is not created

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(lm_eval_link.shutil, "copytree", read_only)
    writable_name = tmp_path / "site_packages_tasks"
    writable_name.mkdir()
    code, _, err = _cli(["lm-eval-tasks", "enable", "--target", str(writable_name)], capsys)
    assert (code, err.count("\n")) == (2, 1)
    assert "cannot write" in err and "Permission denied" in err and "medeval run" in err


def test_status_reports_a_copy_whose_files_differ(tmp_path, capsys):
    target = tmp_path / "lm_eval_tasks"
    target.mkdir()
    code, out, _ = _cli(["lm-eval-tasks", "enable", "--target", str(target)], capsys)
    assert code == 0 and "medeval tasks copied to" in out
    code, out, _ = _cli(["lm-eval-tasks", "status", "--target", str(target)], capsys)
    assert out.strip() == f"enabled in {target / 'medeval'}"
    (target / "medeval" / "emsqa" / "_template_yaml").write_text("# edited\n")
    (target / "medeval" / lm_eval_link.MARKER).write_text("{not json")  # a damaged marker: no traceback
    code, out, _ = _cli(["lm-eval-tasks", "status", "--target", str(target)], capsys)
    assert code == 0 and "its files differ from this medeval's: run `enable` again" in out


@pytest.mark.e2e
def test_medeval_run_after_enable_prints_no_override_warnings(tmp_path):
    """`medeval run` where lm-eval's index already holds the enabled copy: no "overrides" lines."""
    indexed = _enabled_copy(tmp_path)
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": '["a"]'}))
    proc = run_cli(
        [
            "run",
            "--include_path",
            str(indexed),
            "--tasks",
            "emsqa_private",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={table}",
            "--metadata",
            json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "emsqa_private" in proc.stdout
    assert "overrides existing task" not in proc.stderr
    assert f"Task: emsqa_private ({indexed / 'medeval'}" in proc.stderr  # served from the enabled copy


# --- 8. Metrics named at run time (one per judge) -------------------------------------------------


@pytest.fixture
def unpatched_aggregation():
    from lm_eval.api.task import ConfigurableTask

    import medeval_metrics.medicationqa.scoring  # noqa: F401  (its import installs the patch: do that first)

    before = ConfigurableTask.aggregation
    ConfigurableTask.aggregation = getattr(before, "__wrapped__", before)
    yield ConfigurableTask
    ConfigurableTask.aggregation = before


def _judged_task(task_class, process_results):
    """The attributes of a ConfigurableTask that its aggregation() and lm-eval's aggregation step read."""
    from lm_eval.api.metrics import mean

    class Config:
        pass

    class Task:
        task_name = "medicationqa"
        aggregation = task_class.aggregation
        higher_is_better = task_class.higher_is_better

    task = Task()
    task.config = Config()
    task.config.process_results = process_results
    task._aggregation_list = {"rougeL": mean}
    task._higher_is_better = {"rougeL": True}
    return task


RAW_JUDGE_METRICS = {
    ("rougeL", "scored"): [0.5, 0.25, 0.0],
    ("judge_success_a", "scored"): [1.0, 0.0, 1.0],
    ("judge_success_b", "scored"): [1.0, 1.0, 1.0],
}


def test_metric_families_patch_still_needed(unpatched_aggregation, capture_logs):
    """Without the patch a per-judge metric (absent from the YAML) gets lm-eval's warned mean fallback."""
    from lm_eval import evaluator_utils

    from medeval_metrics.medicationqa import process_results

    logged = capture_logs("lm_eval.evaluator_utils")
    task = _judged_task(unpatched_aggregation, process_results)
    metrics, _ = evaluator_utils._compute_task_aggregations(task, RAW_JUDGE_METRICS, 100)
    assert metrics["judge_success_a,scored"] == pytest.approx(2 / 3)
    assert [m for m in logged.messages if "No aggregation function defined" in m] == [
        "[medicationqa] No aggregation function defined for metric judge_success_a. Using mean.",
        "[medicationqa] No aggregation function defined for metric judge_success_b. Using mean.",
    ]
    assert "judge_success_a" not in task.higher_is_better()


def test_metric_families_get_their_declared_aggregation_and_direction(unpatched_aggregation, capture_logs):
    from lm_eval import evaluator_utils

    from medeval_metrics.medicationqa import process_results

    lm_eval_compat.aggregate_metric_families()
    lm_eval_compat.aggregate_metric_families()  # idempotent: wrapped once
    assert not getattr(unpatched_aggregation.aggregation.__wrapped__, "_medeval_metric_families", False)
    logged = capture_logs("lm_eval.evaluator_utils")
    task = _judged_task(unpatched_aggregation, process_results)
    undeclared = {**RAW_JUDGE_METRICS, ("judge_novel", "scored"): [1.0, 3.0, 2.0]}
    metrics, _ = evaluator_utils._compute_task_aggregations(task, undeclared, 100)
    # mean of (1, 0, 1); its stderr: sample sd sqrt(1/3) over sqrt(3) = 1/3, lm-eval's own mean_stderr
    assert metrics["judge_success_a,scored"] == pytest.approx(2 / 3)
    assert metrics["judge_success_a_stderr,scored"] == pytest.approx(1 / 3)
    assert metrics["judge_success_b,scored"] == 1.0 and metrics["rougeL,scored"] == 0.25
    assert task.higher_is_better() == {"rougeL": True, "judge_success_a": True, "judge_success_b": True}
    # only the declared family is quiet: another run-time name still gets lm-eval's warning
    assert [m for m in logged.messages if "No aggregation function" in m] == [
        "[medicationqa] No aggregation function defined for metric judge_novel. Using mean."
    ]


def test_metric_families_leave_tasks_without_a_declaration_alone(unpatched_aggregation):
    lm_eval_compat.aggregate_metric_families()
    task = _judged_task(unpatched_aggregation, lambda doc, results: {})
    assert type(task.aggregation()) is dict and task.aggregation() is task._aggregation_list
    with pytest.raises(KeyError):
        task.aggregation()["judge_success_a"]


def test_medicationqa_declares_every_per_judge_metric_it_emits():
    from medeval_metrics.medicationqa import process_results

    scores = {"accuracy": 4, "completeness": 3, "clarity": 5}
    record = {
        "answer": "Take it with food.",
        "judges": ["gpt", "llama-70b"],
        "verdicts": {"gpt": {"scores": scores}, "llama-70b": {"scores": None, "unscored_reason": "timeout"}},
    }
    out = process_results({"answer": "Take it with or without food."}, [record])
    per_judge = {k: v for k, v in out.items() if any(k.startswith(p) for p in process_results.metric_families)}
    assert per_judge == {"judge_success_gpt": 1.0, "judge_success_llama-70b": 0.0}
    assert process_results.metric_families == {"judge_success_": {"aggregation": "mean", "higher_is_better": True}}


# --- 9. The custom_dataset notice -----------------------------------------------------------------


def _download(task_name: str) -> None:
    """ConfigurableTask.download on the attributes it reads, with a callable custom_dataset."""
    from lm_eval.api.task import ConfigurableTask

    class Config:
        task = task_name
        metadata = {"version": 1}
        dataset_kwargs = None

        @staticmethod
        def custom_dataset(**kwargs):
            return {"test": [kwargs]}

    class Task:
        config = Config()

    ConfigurableTask.download(Task())


@pytest.fixture
def task_logger_without_filter():
    logger = logging.getLogger("lm_eval.api.task")
    saved = list(logger.filters)
    for f in saved:
        logger.removeFilter(f)
    yield logger
    for f in list(logger.filters):
        logger.removeFilter(f)
    for f in saved:
        logger.addFilter(f)


def test_custom_dataset_notice_filter_still_needed(task_logger_without_filter, capture_logs):
    """lm-eval warns for every task whose custom_dataset is callable, whatever its configuration."""
    logged = capture_logs("lm_eval.api.task")
    _download("emsqa_private")
    assert [m.splitlines()[0] for m in logged.messages] == [
        "emsqa_private: Custom kwargs can be passed to `--metadata` in console (as json string) or to the TaskManager."
    ]


def test_custom_dataset_notice_is_dropped_for_pack_tasks_only(task_logger_without_filter, capture_logs):
    logged = capture_logs("lm_eval.api.task")
    lm_eval_compat.quiet_pack_custom_dataset_notice()
    lm_eval_compat.quiet_pack_custom_dataset_notice()  # idempotent: one filter
    assert len(task_logger_without_filter.filters) == 1
    for task in ("emsqa_private", "medicationqa", "emrqa_smoking", "emrqa_emrql_2"):
        _download(task)
    assert logged.messages == []
    _download("my_own_task")  # a task that is not the pack's keeps lm-eval's notice
    assert len(logged.messages) == 1 and logged.messages[0].startswith("my_own_task: Custom kwargs")
    task_logger_without_filter.warning("emsqa_private: some other warning")
    assert logged.messages[-1] == "emsqa_private: some other warning"


def test_importing_the_pack_installs_the_notice_filter():
    from medeval_metrics.lm_eval_compat import _DropPackCustomDatasetNotice

    assert any(isinstance(f, _DropPackCustomDatasetNotice) for f in logging.getLogger("lm_eval.api.task").filters)


# --- 10. capture_results ------------------------------------------------------------------------


def test_cli_still_looks_up_simple_evaluate_on_the_package_when_it_runs():
    """Needed while lm-eval's CLI returns nothing and reads ``lm_eval.simple_evaluate`` at call time."""
    from lm_eval._cli import run as cli_run

    source = inspect.getsource(cli_run)
    assert "from lm_eval import simple_evaluate" in source
    assert "return results" not in inspect.getsource(cli_run.Run._execute)  # the CLI hands nothing back


def test_capture_results_sees_each_evaluation_and_puts_the_function_back(monkeypatch):
    import lm_eval

    calls = []
    monkeypatch.setattr(lm_eval, "simple_evaluate", lambda *a, **k: calls.append((a, k)) or {"results": {"t": {}}})
    original = lm_eval.simple_evaluate
    with lm_eval_compat.capture_results() as captured:
        from lm_eval import simple_evaluate  # as the CLI does, at call time

        assert simple_evaluate(model="m") == {"results": {"t": {}}}
        simple_evaluate(model="n")
    assert captured == [{"results": {"t": {}}}, {"results": {"t": {}}}] and len(calls) == 2
    assert lm_eval.simple_evaluate is original


# --- 15. remember_evaluated_model -----------------------------------------------------------------


def test_evaluated_model_patch_still_needed():
    """Needed while a task's process_results gets no model (its scorers cannot reach the evaluated tokenizer)."""
    from lm_eval.api.task import ConfigurableTask

    process_results = getattr(ConfigurableTask.process_results, "__wrapped__", ConfigurableTask.process_results)
    assert list(inspect.signature(process_results).parameters) == ["self", "doc", "results"]


@pytest.fixture
def fake_evaluate(monkeypatch):
    """lm-eval's evaluate replaced by one that returns what ``evaluated_model()`` says while it runs."""
    import lm_eval.evaluator

    def evaluate(lm, task_dict=None, fail=False):
        if fail:
            raise RuntimeError("the model failed")
        return lm_eval_compat.evaluated_model()

    monkeypatch.setattr(lm_eval.evaluator, "evaluate", evaluate)
    lm_eval_compat.remember_evaluated_model()
    lm_eval_compat.remember_evaluated_model()  # idempotent: wrapped once
    assert lm_eval.evaluator.evaluate.__wrapped__ is evaluate
    return lm_eval.evaluator


def test_the_evaluated_model_is_known_while_evaluate_runs_and_only_then(fake_evaluate):
    from lm_eval.api.model import CachingLM
    from lm_eval.models.huggingface import HFLM

    hf = HFLM.__new__(HFLM)  # no weights: only its class matters here
    cached = CachingLM.__new__(CachingLM)
    cached.lm = hf
    assert fake_evaluate.evaluate(lm=hf, task_dict={}) is hf  # as simple_evaluate calls it (by keyword)
    assert fake_evaluate.evaluate(cached) is hf  # --use_cache wraps the model: the model inside it
    assert fake_evaluate.evaluate(object()) is None  # a backend whose prompts lm-eval does not cut by tokenizer
    with pytest.raises(RuntimeError, match="the model failed"):
        fake_evaluate.evaluate(hf, fail=True)
    assert lm_eval_compat.evaluated_model() is None  # forgotten after each call, a failed one too


def test_encoded_lengths_patch_still_needed():
    """Needed while lm-eval keeps the lengths it encodes to itself: a request (``Instance``) carries no token
    count, and the HF backend's ``tok_encode`` keeps nothing (no cache a scorer could read)."""
    import dataclasses

    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    assert not [f.name for f in dataclasses.fields(Instance) if "tok" in f.name or "len" in f.name]
    assert inspect.isfunction(HFLM.tok_encode) and not hasattr(HFLM.tok_encode, "cache_info")


def _word_encode(self, string, add_special_tokens=None, left_truncate_len=None, **kwargs):
    ids = list(range(len(string.split()) + (add_special_tokens is not False)))  # one "BOS" unless told not to
    return ids[-left_truncate_len:] if left_truncate_len else ids


def test_the_lengths_the_hf_backend_encodes_for_whole_prompts_are_kept_for_its_scorers(monkeypatch):
    """While evaluate runs, the HF backend's tok_encode of a whole prompt (its own special tokens, not cut)
    is recorded by text digest; a cut one or one with other special tokens is not (its count differs); the
    model's tok_encode is its own again afterwards; a subclass encoding its own way is not recorded."""
    import lm_eval.evaluator
    from lm_eval.api.model import CachingLM
    from lm_eval.models.huggingface import HFLM

    from medeval_metrics.context_fit import text_digest

    monkeypatch.setattr(HFLM, "tok_encode", _word_encode)

    def evaluate(lm, task_dict=None):
        model = lm_eval_compat.evaluated_model()
        model.tok_encode("a b c")  # as generate_until sorts its requests
        model.tok_encode("a b c d", left_truncate_len=2)
        model.tok_encode("p q", add_special_tokens=False)
        return dict(lm_eval_compat.encoded_lengths(model))

    monkeypatch.setattr(lm_eval.evaluator, "evaluate", evaluate)
    lm_eval_compat.remember_evaluated_model()
    hf = HFLM.__new__(HFLM)  # no weights: the patched class encodes words
    assert lm_eval.evaluator.evaluate(hf) == {text_digest("a b c"): 4}
    assert "tok_encode" not in vars(hf) and hf.tok_encode("x y") == [0, 1, 2]
    assert dict(lm_eval_compat.encoded_lengths(hf)) == {text_digest("a b c"): 4}  # kept with the model
    cached = CachingLM.__new__(CachingLM)
    cached.lm = HFLM.__new__(HFLM)
    assert lm_eval.evaluator.evaluate(cached) == {text_digest("a b c"): 4}  # --use_cache: the model inside

    class OwnEncoding(HFLM):
        def tok_encode(self, string, add_special_tokens=None, left_truncate_len=None, **kwargs):
            return [0]

    assert lm_eval.evaluator.evaluate(OwnEncoding.__new__(OwnEncoding)) == {}
    assert lm_eval_compat.encoded_lengths(object()) == {}


# --- 11. model_key_only_for_its_endpoint ----------------------------------------------------------


def _local_chat(base_url: str):
    from lm_eval.models.openai_completions import LocalChatCompletion

    return LocalChatCompletion(base_url=base_url, model="m", tokenizer_backend=None)


def test_local_backends_still_send_the_openai_key_anywhere_without_the_patch(monkeypatch):
    """Needed while lm-eval's local-* backends hand $OPENAI_API_KEY to whatever base_url they are given."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-000111")
    assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {
        "Authorization": "Bearer sk-canary-openai-000111"
    }


@pytest.fixture
def key_patch():
    with lm_eval_compat.model_key_only_for_its_endpoint():
        yield


def test_each_host_gets_only_the_key_meant_for_it(key_patch, monkeypatch):
    from lm_eval.models.openai_completions import OpenAIChatCompletion

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-000111")
    monkeypatch.delenv(lm_eval_compat.MODEL_KEY_ENV, raising=False)
    assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {}  # no Authorization at all
    assert _local_chat("https://api.openai.com/v1/chat/completions").header == {
        "Authorization": "Bearer sk-canary-openai-000111"
    }
    monkeypatch.setenv(lm_eval_compat.MODEL_KEY_ENV, "MY_VLLM_KEY")
    monkeypatch.setenv("MY_VLLM_KEY", "vllm-canary-222333444")
    assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {
        "Authorization": "Bearer vllm-canary-222333444"
    }
    from medeval_metrics.redact import redact_text

    assert "vllm-canary-222333444" not in redact_text("headers: Bearer vllm-canary-222333444 and vllm-canary-222333444")
    # OpenAI's own backend keeps reading its variable
    monkeypatch.delenv(lm_eval_compat.MODEL_KEY_ENV)
    openai = OpenAIChatCompletion(base_url="https://api.openai.com/v1/chat/completions", model="gpt-4o")
    assert openai.header == {"Authorization": "Bearer sk-canary-openai-000111"}


def test_the_key_patch_is_put_back_after_the_run(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-000111")
    with lm_eval_compat.model_key_only_for_its_endpoint():
        assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {}
    assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {
        "Authorization": "Bearer sk-canary-openai-000111"
    }
