"""emrQA's use of lm-eval: dataset_kwargs reach custom_dataset, and the generation budget reaches prompt_too_long
(read from the task when an item is scored; a logged doc read back is checked against a given budget)."""

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


def test_lm_eval_calls_process_results_with_the_doc_and_results_only():
    """Why the budget is read from the task object when an item is scored (``PromptCounter.run_settings``):
    lm-eval 0.4.13 calls a YAML's ``process_results(doc, results)``, without the task config."""
    from lm_eval.api.task import ConfigurableTask

    source = inspect.getsource(inspect.unwrap(ConfigurableTask.process_results))
    assert "return self.config.process_results(doc, results)" in source


def test_the_scorers_take_what_lm_eval_gives_them_and_ask_for_no_patch():
    """emrQA's scorers are called as lm-eval calls them; no mark asks a patched ``process_results`` for more, and
    importing them leaves lm-eval's ``process_results`` as it is."""
    from lm_eval.api.task import ConfigurableTask

    before = ConfigurableTask.process_results
    for scorer in (process_evidence, process_classification):
        assert list(inspect.signature(scorer).parameters) == ["doc", "results"]
        assert not hasattr(scorer, "wants_generation_kwargs")
    import medeval_metrics.emrqa.loaders  # noqa: F401

    assert ConfigurableTask.process_results is before


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
def test_a_logged_doc_is_checked_again_against_a_given_budget(doc, generation_kwargs, expected):
    assert fits_context(doc, generation_kwargs) is expected
