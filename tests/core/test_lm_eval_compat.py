"""Each wrapper in ``medeval_metrics.lm_eval_compat``: still needed (lm-eval's behaviour unchanged), still working,
and put back when the run ends. A "still needed" test failing means lm-eval changed: re-read the wrapper's
docstring and its entry in docs/upstream.md, and remove or adapt it. In-process and fast (no model)."""

from __future__ import annotations

import inspect
import json
import logging
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO_ROOT, run_cli

from medeval_metrics import lm_eval_compat, lm_eval_link, tasks_path

CANARY = "canary-compat-0123456789abcdef"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def capture_logs():
    """Records of the named loggers (lm-eval's loggers do not propagate to the root)."""
    attached: list[tuple[logging.Logger, _Capture, int]] = []

    def attach(name: str) -> _Capture:
        handler = _Capture()
        logger = logging.getLogger(name)
        attached.append((logger, handler, logger.level))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        return handler

    yield attach
    for logger, handler, level in attached:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_wrappers_are_five_and_the_module_imports_nothing_from_lm_eval():
    functions = [name for name in lm_eval_compat.__all__ if inspect.isfunction(getattr(lm_eval_compat, name))]
    helpers = {"set_api_request_headers", "api_request_payload", "loading_task", "loading_task_config"}
    wrappers = sorted(set(functions) - helpers)  # the helpers replace nothing
    assert wrappers == [
        "guard_model_replies",
        "model_key_only_for_its_endpoint",
        "pack_task_index",
        "private_run_logs",
        "run_record",
    ]
    source = Path(lm_eval_compat.__file__).read_text()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top_level if re.match(r"(?:from|import) lm_eval(?:\.|\s|$)", line)]
    documented = (REPO_ROOT / "docs" / "upstream.md").read_text()  # the checkout's: CI installs the pack
    for name in wrappers:
        assert f"`{name}`" in documented, f"docs/upstream.md has no entry for {name}"


def test_importing_the_pack_adds_no_filter_to_lm_eval_s_loggers():
    import medeval_metrics  # noqa: F401

    for name in ("lm_eval", "lm_eval.api.task", "lm_eval.evaluator", "lm_eval.tasks._index"):
        assert not [f for f in logging.getLogger(name).filters if type(f).__module__.startswith("medeval_metrics")]


# --- 1. pack_task_index: TaskManager.__init__ -------------------------------------------------------


def test_task_index_wrapper_still_needed():
    """lm-eval's task index reads no entry points (the pack's ``lm_eval.tasks`` entry point is ignored), and its
    command line cannot leave the built-in tasks out (``include_defaults`` is the class's argument only)."""
    import lm_eval.tasks as tasks_package
    from lm_eval._cli import run as cli_run
    from lm_eval.config import evaluate_config
    from lm_eval.tasks import TaskManager, _index, manager

    for module in (tasks_package, manager, _index):
        assert "entry_points" not in inspect.getsource(module), f"{module.__name__} now reads entry points"
    params = list(inspect.signature(TaskManager.__init__).parameters)
    assert params[:5] == ["self", "verbosity", "include_path", "include_defaults", "metadata"]
    assert "include_defaults" not in inspect.getsource(cli_run) + inspect.getsource(evaluate_config)


def test_the_pack_is_indexed_next_to_user_paths_and_only_while_the_run_lasts(tmp_path):
    from lm_eval.tasks import TaskManager

    user = tmp_path / "user_tasks"
    user.mkdir()
    (user / "my_probe.yaml").write_text("task: my_probe\ndataset_path: json\noutput_type: generate_until\n")
    before = TaskManager.__init__
    with lm_eval_compat.pack_task_index():
        alone = TaskManager(include_defaults=False)
        assert "emsqa_public" in alone.all_tasks and "medicationqa" in alone.all_tasks
        both = TaskManager(None, str(user), False)  # include_path given positionally
        assert {"my_probe", "emsqa_public"} <= set(both.all_tasks)
        listed = TaskManager(include_defaults=False, include_path=[user, tasks_path()])  # the pack given too
        assert {"my_probe", "emsqa_public"} <= set(listed.all_tasks)
    with lm_eval_compat.pack_task_index(pack_only=True):
        only = TaskManager(include_path=str(user))
        assert {"my_probe", "emsqa_public"} <= set(only.all_tasks) and "hellaswag" not in only.all_tasks
    assert TaskManager.__init__ is before
    assert "emsqa_public" not in TaskManager(include_defaults=False, include_path=str(user)).all_tasks


def _enabled_copy(tmp_path: Path) -> Path:
    fake_lm_eval_tasks = tmp_path / "lm_eval_tasks"
    fake_lm_eval_tasks.mkdir()
    lm_eval_link.enable(fake_lm_eval_tasks)
    return fake_lm_eval_tasks


def test_an_enabled_copy_indexed_with_the_pack_s_folder_makes_lm_eval_warn_per_task(tmp_path, capture_logs):
    """Why the wrapper leaves the pack's folder out next to a current copy: ~20 override warnings a run."""
    from lm_eval.tasks import TaskManager

    indexed = _enabled_copy(tmp_path)
    index_log = capture_logs("lm_eval.tasks._index")
    TaskManager(include_defaults=False, include_path=[indexed, tasks_path()])
    assert len([m for m in index_log.messages if "overrides existing task" in m]) >= 15  # every task and group


def test_a_current_enabled_copy_is_not_indexed_twice(tmp_path, capture_logs):
    from lm_eval.tasks import TaskManager

    indexed = _enabled_copy(tmp_path)
    assert lm_eval_link.copy_state(indexed) == "current"
    index_log, medeval_log = capture_logs("lm_eval.tasks._index"), capture_logs("medeval")
    with lm_eval_compat.pack_task_index():
        manager = TaskManager(include_defaults=False, include_path=str(indexed))
    assert "emsqa_public" in manager.all_tasks
    assert not [m for m in index_log.messages if "overrides existing task" in m]
    assert medeval_log.messages == []
    assert Path(manager._index["emsqa_public"].yaml_path).is_relative_to(indexed / lm_eval_link.FOLDER_NAME)


def test_a_stale_enabled_copy_is_overridden_with_a_line_saying_how_to_update_it(tmp_path, capture_logs):
    from lm_eval.tasks import TaskManager

    indexed = _enabled_copy(tmp_path)
    stale_yaml = indexed / lm_eval_link.FOLDER_NAME / "emsqa" / "emsqa_public.yaml"
    stale_yaml.write_text(stale_yaml.read_text() + "\n# older pack version\n")
    assert lm_eval_link.copy_state(indexed) == "stale"
    medeval_log = capture_logs("medeval")
    with lm_eval_compat.pack_task_index():
        manager = TaskManager(include_defaults=False, include_path=[str(indexed)])
    assert len(medeval_log.messages) == 1 and "run `medeval lm-eval-tasks enable` again" in medeval_log.messages[0]
    assert Path(manager._index["emsqa_public"].yaml_path).is_relative_to(Path(tasks_path()))  # the current YAML wins


# --- 2. run_record: evaluator.evaluate ----------------------------------------------------------------


def test_run_record_wrapper_still_needed():
    """lm-eval's CLI hands nothing back, ``simple_evaluate`` calls the module's ``evaluate`` when it runs and
    returns the dict it got from it, and ``evaluate`` keeps no time."""
    import lm_eval.evaluator
    from lm_eval._cli import run as cli_run

    assert "return results" not in inspect.getsource(cli_run.Run._execute)
    assert "evaluate" in inspect.unwrap(lm_eval.evaluator.simple_evaluate).__code__.co_names
    assert re.search(r"results = evaluate\(", inspect.getsource(lm_eval.evaluator.simple_evaluate))
    source = inspect.getsource(lm_eval.evaluator.evaluate)
    assert "perf_counter" not in source and "time.time" not in source


def test_lm_eval_still_writes_a_function_in_a_config_with_its_address(tmp_path):
    """Why the run record names the functions in the results' configs: lm-eval writes them as ``str(obj)``."""
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    from medeval_metrics.emsqa import fewshot_pool

    tracker = EvaluationTracker(output_path=str(tmp_path))
    tracker.save_results_aggregated(results={"configs": {"t": {"fewshot_config": {"process_docs": fewshot_pool}}}})
    assert re.search(r"<function fewshot_pool at 0x[0-9a-f]+>", next(tmp_path.rglob("results_*.json")).read_text())


class _Request:
    def __init__(self, task_name: str) -> None:
        self.task_name = task_name


class _Model:
    def generate_until(self, requests):
        return ["a" for _ in requests]


class _Task:
    def __init__(self, name: str, judges=None) -> None:
        self.config = type("Config", (), {"task": name})()
        self.judges = judges  # the judge transport's usage counts, which this task's filters raise

    def build_all_requests(self, **kwargs):
        return None

    def apply_filters(self):
        if self.judges is not None:
            self.judges["judge-a"] = {"requests": 3, "prompt_tokens": 30}

    def process_results(self, doc, results):
        return {"acc": 1.0}


def test_the_run_record_times_each_task_on_its_own_objects_and_puts_evaluate_back(monkeypatch):
    import lm_eval.evaluator

    usage = {"judge-a": {"requests": 0}}

    def evaluate(lm, task_dict, limit=None):  # what evaluate does, in the steps the record times
        for task in task_dict.values():
            task.build_all_requests(limit=limit)
        lm.generate_until([_Request("t1"), _Request("t1"), _Request("t2")])
        task_dict["t1"].apply_filters()
        task_dict["t2"].apply_filters()
        for task in task_dict.values():
            task.process_results({}, ["a"])
        from medeval_metrics.emsqa import fewshot_pool

        return {"results": {"t1": {}, "t2": {}}, "configs": {"t1": {"fewshot_config": {"process_docs": fewshot_pool}}}}

    monkeypatch.setattr(lm_eval.evaluator, "evaluate", evaluate)
    model, tasks = _Model(), {"t1": _Task("t1", judges=usage), "group": {"t2": _Task("t2")}}
    with lm_eval_compat.run_record(usage) as evaluations:
        results = lm_eval.evaluator.evaluate(lm=model, task_dict={"t1": tasks["t1"], "t2": tasks["group"]["t2"]})
    assert lm_eval.evaluator.evaluate is evaluate
    assert evaluations == [results] and evaluations.samples == [None]
    assert results["configs"]["t1"]["fewshot_config"]["process_docs"] == "medeval_metrics.emsqa.data.fewshot_pool"
    record = results["medeval_run"]
    assert record["setup_s"] >= 0 and set(record["tasks"]) == {"t1", "t2"}
    assert set(record["tasks"]["t1"]) == {"prepare_s", "model_s", "filters_s", "scoring_s", "wall_s", "judge"}
    assert (
        record["tasks"]["t1"]["judge"] == {"requests": 3, "prompt_tokens": 30} and "judge" not in record["tasks"]["t2"]
    )
    assert vars(model) == {} and all(set(vars(t)) == {"config", "judges"} for t in (tasks["t1"], tasks["group"]["t2"]))


# --- 3. model_key_only_for_its_endpoint: LocalCompletionsAPI.header -----------------------------------


def _local_chat(base_url: str):
    from lm_eval.models.openai_completions import LocalChatCompletion

    return LocalChatCompletion(base_url=base_url, model="m", tokenizer_backend=None)


def test_model_key_wrapper_still_needed(monkeypatch):
    """lm-eval's local-* backends hand $OPENAI_API_KEY to whatever base_url they are given."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-000111")
    assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {
        "Authorization": "Bearer sk-canary-openai-000111"
    }


def test_each_host_gets_only_the_key_meant_for_it(monkeypatch):
    from lm_eval.models.openai_completions import OpenAIChatCompletion

    from medeval_metrics.redact import redact_text

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-000111")
    monkeypatch.delenv(lm_eval_compat.MODEL_KEY_ENV, raising=False)
    with lm_eval_compat.model_key_only_for_its_endpoint():
        assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {}  # no Authorization at all
        assert _local_chat("https://api.openai.com/v1/chat/completions").header == {
            "Authorization": "Bearer sk-canary-openai-000111"
        }
        monkeypatch.setenv(lm_eval_compat.MODEL_KEY_ENV, "MY_VLLM_KEY")
        monkeypatch.setenv("MY_VLLM_KEY", "vllm-canary-222333444")
        assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {
            "Authorization": "Bearer vllm-canary-222333444"
        }
        assert "vllm-canary-222333444" not in redact_text("Bearer vllm-canary-222333444 and vllm-canary-222333444")
        monkeypatch.delenv(lm_eval_compat.MODEL_KEY_ENV)
        openai = OpenAIChatCompletion(base_url="https://api.openai.com/v1/chat/completions", model="gpt-4o")
        assert openai.header == {"Authorization": "Bearer sk-canary-openai-000111"}  # OpenAI's own backend


def test_the_key_wrapper_is_put_back_after_the_run(monkeypatch):
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-000111")
    assert "header" not in vars(LocalCompletionsAPI)  # inherited from TemplateAPI
    with lm_eval_compat.model_key_only_for_its_endpoint():
        assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {}
    assert "header" not in vars(LocalCompletionsAPI)
    assert _local_chat("http://127.0.0.1:9/v1/chat/completions").header == {
        "Authorization": "Bearer sk-canary-openai-000111"
    }


# --- 4. guard_model_replies: api_models.requests, api_models.ClientSession (tests/core/test_security_http.py) --


def test_the_reply_guard_is_put_back_after_the_run():
    from lm_eval.models import api_models

    before = (api_models.requests, api_models.ClientSession)
    with lm_eval_compat.guard_model_replies():
        assert (api_models.requests, api_models.ClientSession) != before
    assert (api_models.requests, api_models.ClientSession) == before


# --- 5. private_run_logs: logging's record factory ----------------------------------------------------


def test_log_wrapper_still_needed():
    """lm-eval logs a failed API request's error body and the repr of the error (request headers included), and
    ``--write_out`` logs a prompt and its target."""
    from lm_eval import evaluator_utils
    from lm_eval.models.api_models import TemplateAPI

    amodel_call = inspect.getsource(TemplateAPI.amodel_call)
    assert "Response text: {error_text}" in amodel_call
    assert re.search(r"Exception:\{(e!r|repr\(e\))\}", amodel_call)  # 0.4.13 / 0.4.12's spelling
    assert "API request failed with error message: {response.text}" in inspect.getsource(TemplateAPI.model_call)
    assert "context prompt (starting on next line)" in inspect.getsource(evaluator_utils.print_writeout)


def test_the_run_s_logs_hold_no_key_error_body_or_prompt_and_the_factory_is_put_back(monkeypatch, capture_logs):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    api_log, pack_log = capture_logs("lm_eval.models.api_models"), capture_logs("medeval.probe")
    writeout_log = capture_logs("lm_eval.evaluator_utils")
    factory = logging.getLogRecordFactory()
    with lm_eval_compat.private_run_logs():
        logging.getLogger("lm_eval.models.api_models").error(
            "Exception:%s, (no outputs), retrying.",
            f"ClientResponseError(headers={{'Authorization': 'Bearer {CANARY}'}})",
        )
        logging.getLogger("lm_eval.models.api_models").warning(
            'API request failed! Status code: 422, Response text: {"detail": "Patient notes here"}. Retrying...'
        )
        logging.getLogger("lm_eval.evaluator_utils").info(
            "Task: t; document 0; context prompt (starting on next line):    \nMr. Quillfeather keeps bees.\n"
            "(end of prompt on previous line)\ntarget string or answer choice index (starting on next line):\n"
            "non-smoker\n(end of target on previous line)"
        )
        logging.getLogger("medeval.probe").warning("judge at %s answered", f"key={CANARY}")
    assert logging.getLogRecordFactory() is factory
    logged = "\n".join(api_log.messages + pack_log.messages + writeout_log.messages)
    assert CANARY not in logged and "Bearer [REDACTED:OPENAI_API_KEY]" in logged
    assert "Patient notes" not in logged and "[response body withheld: " in logged
    assert "Quillfeather" not in logged and "[prompt withheld: " in logged and "non-smoker" not in logged
    logging.getLogger("lm_eval.models.api_models").warning("after the run: %s", CANARY)
    assert api_log.messages[-1] == f"after the run: {CANARY}"  # outside the run, lm-eval's logs are its own


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
