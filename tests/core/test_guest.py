"""The pack is a guest in lm-eval: importing it, building its tasks and evaluating one of every kind in a plain
lm-eval process replaces no lm-eval attribute and no process-wide hook, before, during or after the run."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from host_snapshot import replaced, snapshot

SCENARIO = Path(__file__).resolve().parent.parent / "guest_scenario.py"


def test_the_snapshot_sees_a_replaced_method_a_hook_and_a_logger_filter():
    """The comparison the guest test relies on notices each kind of replacement it is meant to rule out."""
    from lm_eval.api.task import ConfigurableTask

    before = snapshot()
    original = ConfigurableTask.process_results
    hook, thread_hook, show = sys.excepthook, threading.excepthook, warnings.showwarning
    drop = logging.Filter("nothing")
    logger = logging.getLogger("lm_eval.api.task")
    try:
        ConfigurableTask.process_results = lambda self, doc, results: {}  # type: ignore[method-assign]
        sys.excepthook = lambda *a: None
        threading.excepthook = lambda *a: None
        warnings.showwarning = lambda *a, **k: None
        logger.addFilter(drop)
        found = replaced(before, snapshot())
    finally:
        ConfigurableTask.process_results = original  # type: ignore[method-assign]
        sys.excepthook, threading.excepthook, warnings.showwarning = hook, thread_hook, show
        logger.removeFilter(drop)
    assert found == [
        "lm_eval.api.task:ConfigurableTask.process_results",
        "logger lm_eval.api.task filters",
        "sys.excepthook",
        "threading.excepthook",
        "warnings.showwarning",
    ]
    assert replaced(before, snapshot()) == []


@pytest.mark.e2e
def test_a_plain_lm_eval_process_is_left_as_it_was(tmp_path):
    run = subprocess.run([sys.executable, str(SCENARIO), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["import"] == [], "importing the pack replaced these"
    assert found["during"] == [], "while the model ran, these were replaced"
    assert found["after"] == [], "after the evaluations, these were still replaced"
    results = found["results"]
    # every kind of task was scored (not skipped): a number for its headline metric
    assert isinstance(results["emsqa_public#0"]["acc,flexible-extract"], float)
    assert isinstance(results["emsqa_public_mc#0"]["acc,none"], float)
    assert isinstance(results["emsqa_public_rag#0"]["acc,flexible-extract"], float)
    assert isinstance(results["emrqa_medication#0"]["relaxed_em,none"], float)
    assert isinstance(results["emrqa_smoking#0"]["acc,none"], float)
    assert isinstance(results["emrqa_emrql_1#0"]["lf_acc,none"], float)
    assert results["medicationqa#0"]["judge_computed,scored"] == 0.0
    assert results["medicationqa#1"]["judge_computed,scored"] == 1.0
    assert isinstance(results["medicationqa#1"]["judge_accuracy,scored"], float)
