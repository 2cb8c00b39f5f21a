"""A task's loader turns on redaction with one call: the hooks, and lm-eval's results writer once loaded."""

from __future__ import annotations

import logging
import sys
import threading
import warnings

import pytest

from medeval_metrics import lm_eval_compat, redact


@pytest.fixture
def restored(monkeypatch):
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    from medeval_metrics.redact import hooks

    # whatever the calls below patch is put back afterwards (monkeypatch restores what it set)
    for name in ("save_results_aggregated", "save_results_samples"):
        monkeypatch.setattr(EvaluationTracker, name, getattr(EvaluationTracker, name))
    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(hooks, "_private_documents", set(hooks._private_documents))
    return EvaluationTracker


def test_install_redaction_patches_the_results_writer_and_the_hooks(restored):
    tracker, written = restored, []
    # an unpatched writer (an earlier test's task may have patched the real one already)
    tracker.save_results_aggregated = lambda self, results, samples=None: written.append(results)
    tracker.save_results_samples = lambda self, task_name, samples: written.append(samples)
    lm_eval_compat.install_redaction(private_documents="probe notes")
    assert getattr(tracker.save_results_aggregated, "_medeval_redacting", False)
    tracker.save_results_aggregated(object(), {"config": {"model_args": "api_key=hunter2hunter2"}})
    assert written == [{"config": {"model_args": "api_key=[REDACTED]"}}]
    assert redact.installed() and "probe notes" in redact.private_documents_in_use()
