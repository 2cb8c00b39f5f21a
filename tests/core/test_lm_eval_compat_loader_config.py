"""medeval_metrics.lm_eval_compat.loading_task_config: a custom_dataset loader reaches the config
lm-eval writes to the results JSON (used by the EMSQA RAG loaders to record retrieval settings)."""

from __future__ import annotations

import sys
import types

import pytest

from medeval_metrics.lm_eval_compat import loading_task, loading_task_config

SEEN: dict = {}


def probe_loader(**metadata):
    import datasets

    SEEN["kwargs"] = metadata
    config = loading_task_config()
    SEEN["config"], SEEN["task"] = config, loading_task()
    if config is not None:
        config.metadata = {**config.metadata, "recorded": {"corpus": "abc"}}
    return datasets.DatasetDict({"test": datasets.Dataset.from_list([{"q": "x", "a": "y"}])})


@pytest.fixture
def probe_task(tmp_path, monkeypatch):
    module = types.ModuleType("rag_compat_probe")
    module.probe_loader = probe_loader
    monkeypatch.setitem(sys.modules, "rag_compat_probe", module)
    (tmp_path / "probe.yaml").write_text(
        "task: rag_compat_probe\ncustom_dataset: !function rag_compat_probe.probe_loader\ntest_split: test\n"
        "output_type: generate_until\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\nmetadata:\n  version: 1\n"
    )
    return tmp_path


def test_a_loader_records_into_the_dumped_task_config(probe_task):
    from lm_eval.tasks import TaskManager

    SEEN.clear()
    task = TaskManager(include_defaults=False, include_path=str(probe_task), metadata={"k": 3}).load(
        ["rag_compat_probe"]
    )
    task = task["tasks"]["rag_compat_probe"]
    assert SEEN["config"] is task.config and SEEN["task"] is task  # the task renders the prompts a loader counts
    assert task.dump_config()["metadata"]["recorded"] == {"corpus": "abc"}
    # Still needed: lm-eval hands the loader copies, so a change to its kwargs would not reach the config.
    SEEN["kwargs"]["k"] = 99
    assert task.dump_config()["metadata"]["k"] == 3
    assert "config" not in SEEN["kwargs"] and "task" not in SEEN["kwargs"]


def test_outside_lm_eval_there_is_no_task_config():
    assert loading_task_config() is None and loading_task() is None
