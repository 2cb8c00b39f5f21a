"""emrQA's use of lm-eval: dataset_kwargs reach custom_dataset, and the generation budget reaches prompt_too_long."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from medeval_metrics.emrqa.tasks import fits_context, generation_budget, process_classification, process_evidence

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "emrqa"


def test_lm_eval_passes_dataset_kwargs_to_custom_dataset():
    """The YAML names the subset in dataset_kwargs; lm-eval 0.4.13 hands it to the loader with the metadata."""
    from lm_eval.api.task import ConfigurableTask

    source = inspect.getsource(ConfigurableTask.download)
    assert "self.config.custom_dataset(" in source and "**(self.config.dataset_kwargs or {})" in source


def test_lm_eval_still_calls_process_results_without_the_config():
    """Notices when lm-eval starts passing the task config itself: then the compat patch can go."""
    from lm_eval.api.task import ConfigurableTask

    import medeval_metrics.lm_eval_compat as compat

    compat.pass_generation_kwargs_to_process_results()
    original = ConfigurableTask.process_results.__wrapped__
    assert "return self.config.process_results(doc, results)" in inspect.getsource(original)


def test_patch_passes_the_task_generation_kwargs_only_to_marked_functions():
    from lm_eval.api.task import ConfigurableTask

    import medeval_metrics.lm_eval_compat as compat

    compat.pass_generation_kwargs_to_process_results()
    compat.pass_generation_kwargs_to_process_results()  # idempotent: wrapped once
    assert not getattr(ConfigurableTask.process_results.__wrapped__, "_medeval_generation_kwargs", False)
    seen = {}

    def marked(doc, results, generation_kwargs=None):
        seen["marked"] = generation_kwargs
        return {"x": 1.0}

    marked.wants_generation_kwargs = True

    class Config:
        process_results = staticmethod(marked)
        generation_kwargs = {"max_gen_toks": 17, "until": ["\n\n"]}

    class Task:
        config = Config()

    assert ConfigurableTask.process_results(Task(), {"a": 1}, ["out"]) == {"x": 1.0}
    assert seen["marked"] == {"max_gen_toks": 17, "until": ["\n\n"]}
    assert process_evidence.wants_generation_kwargs and process_classification.wants_generation_kwargs


@pytest.mark.parametrize(
    "yaml_name, expected",
    [
        ("emrqa_medication.yaml", 256),
        ("emrqa_evidence_window.yaml", 256),
        ("emrqa_smoking.yaml", 256),
        ("emrqa_emrql_1.yaml", 128),
        (None, 256),
    ],  # no config known: lm-eval's own default
)
def test_generation_budget_is_read_from_the_task_config(yaml_name, expected):
    source = str(TASKS / yaml_name) if yaml_name else None
    assert generation_budget({"config_source": source} if source else {}) == expected


@pytest.mark.parametrize(
    "doc, generation_kwargs, expected",
    [
        # 1,700 prompt tokens against 2,048: 256 generated fit (1,792), 400 do not (1,648).
        ({"prompt_tokens": 1700, "context_limit": 2048, "fits_context": True}, None, True),
        ({"prompt_tokens": 1700, "context_limit": 2048, "fits_context": True}, {"max_gen_toks": 256}, True),
        ({"prompt_tokens": 1700, "context_limit": 2048, "fits_context": True}, {"max_gen_toks": 400}, False),
        (
            {"prompt_tokens": 1792, "context_limit": 2048, "fits_context": True},
            {"max_gen_toks": "256"},
            True,
        ),  # CLI text
        ({"prompt_tokens": 1900, "context_limit": 2048, "fits_context": False}, {"max_gen_toks": 64}, True),
        (
            {"prompt_tokens": 1900, "context_limit": 2048, "fits_context": False},
            {"until": ["\n"]},
            False,
        ),  # no budget given
        ({"fits_context": False}, {"max_gen_toks": 1}, False),  # a doc from before context_limit was logged
    ],
)
def test_fit_uses_the_generation_budget_lm_eval_used(doc, generation_kwargs, expected):
    assert fits_context(doc, generation_kwargs) is expected
