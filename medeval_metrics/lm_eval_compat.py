"""Patches of lm-eval internals, each saying what it works around and for which lm-eval versions.

Each has a test (tests/test_lm_eval_compat*.py) that fails when lm-eval's behaviour changes, so the
patch is re-checked or removed.
"""

from __future__ import annotations

from typing import Any


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
