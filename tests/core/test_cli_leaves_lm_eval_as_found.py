"""An in-process `medeval run` wraps lm-eval only while it runs: inside the run, only the objects the wrappers of
``lm_eval_compat`` name are replaced (six, at most eight), with the command's own ``sys.argv``, Ctrl-C handler and
umask; when ``cli.main`` returns, every lm-eval attribute and process-wide hook is the one it found."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, run_medeval

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from host_snapshot import replaced, snapshot

# What the five wrappers replace while the run lasts (LocalCompletionsAPI.header is set on a class that inherited
# it: a new name there, not a replacement, checked on its own below).
WRAPPED = [
    "lm_eval.evaluator:evaluate",
    "lm_eval.models.api_models:ClientSession",
    "lm_eval.models.api_models:requests",
    "lm_eval.tasks.manager:TaskManager.__init__",
    "logging.record_factory",
]


RUN_SETTINGS = ["SIGINT handler", "process umask", "sys.argv"]


@pytest.mark.e2e
def test_medeval_run_replaces_only_its_wrapped_objects_and_puts_them_back(tmp_path, capsys, monkeypatch):
    import lm_eval.api.task
    import lm_eval.evaluator
    import lm_eval.evaluator_utils
    import lm_eval.loggers
    import lm_eval.models.api_models
    import lm_eval.models.huggingface
    import lm_eval.models.openai_completions
    import lm_eval.tasks
    from lm_eval.utils import setup_logging

    from medeval_metrics import rigs
    from medeval_metrics.testing.scripted import ScriptedLM

    setup_logging()  # lm-eval's CLI adds its console handler on its first run in a process: lm-eval's own doing
    rigs.register_scripted_model()
    inside: list[dict] = []
    answer = ScriptedLM.generate_until

    def generate_until(self, requests, *args, **kwargs):
        inside.append(
            {"snapshot": snapshot(), "header": "header" in vars(lm_eval.models.openai_completions.LocalCompletionsAPI)}
        )
        return answer(self, requests, *args, **kwargs)

    monkeypatch.setattr(ScriptedLM, "generate_until", generate_until)  # the pack's test rig, not lm-eval
    table = tmp_path / "answers.json"
    table.write_text(json.dumps({"key": "question", "default": "A"}))
    argv = [
        "run",
        "--model",
        "medeval-scripted",
        "--model_args",
        f"table={table}",
        "--tasks",
        "emsqa_private",
        "--limit",
        "3",
        "--metadata",
        json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
        "--output_path",
        str(tmp_path / "out"),
        "--log_samples",
    ]
    saved_argv = list(sys.argv)
    before = snapshot()
    proc = run_medeval(argv, capsys)
    after = snapshot()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert inside, "the scripted model was never asked"
    during = replaced(before, inside[0]["snapshot"])
    # the wrappers' objects (+ the header below), and the command's own process settings for the run: the
    # command line lm-eval's parser reads, its Ctrl-C handler and the umask that keeps the run's files private
    assert during == sorted([*WRAPPED, *RUN_SETTINGS])
    assert len(WRAPPED) + 1 <= 8
    assert inside[0]["header"] and "header" not in vars(lm_eval.models.openai_completions.LocalCompletionsAPI)
    assert replaced(before, after) == [], "left replaced after the run"
    assert sys.argv == saved_argv
    assert "medeval: emsqa_private: acc " in proc.stdout
