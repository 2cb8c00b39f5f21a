"""Whether an emrQA prompt fits the evaluated model's context with the task's generation budget."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from medeval_metrics.context_fit import ContextFit
from medeval_metrics.emrqa.sources import cache_root
from medeval_metrics.task_yaml import own_task_config

logger = logging.getLogger("medeval.emrqa")

_LM_EVAL_DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's budget for a task config that sets none


def generation_budget(kwargs: Mapping[str, Any]) -> int:
    """``max_gen_toks`` of the task's own config (the YAML at lm-eval's ``config_source``), else lm-eval's 256.

    ``--gen_kwargs`` is applied by lm-eval after the data set is loaded; ``process_evidence`` and
    ``process_classification`` re-check the fit against the budget actually used.
    """
    generation = own_task_config(kwargs.get("config_source")).get("generation_kwargs") or {}
    return int(generation.get("max_gen_toks", _LM_EVAL_DEFAULT_MAX_GEN_TOKS))


def fits_context(doc: Mapping[str, Any], generation_kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether the doc's prompt and the generation budget fit the model's context.

    With the generation settings lm-eval used (``--gen_kwargs`` included), the fit is recomputed from
    the counted prompt tokens; otherwise it is the loader's check against the task config's budget.
    """
    if generation_kwargs and "max_gen_toks" in generation_kwargs and "context_limit" in doc:
        return int(doc["prompt_tokens"]) <= int(doc["context_limit"]) - int(generation_kwargs["max_gen_toks"])
    return bool(doc["fits_context"])


class ContextCheck:
    """Marks each doc with its prompt's token count and whether it fits the evaluated model's context
    (``medeval_metrics.context_fit``: the model's tokenizer and limit from ``--model_args``, or a
    labelled estimate), reserving the task's generation budget. The counts are kept per tokenizer in the
    emrQA cache folder (prompt digests and numbers, no text): 1,000 prompts of long notes are tokenized on
    the first run with a model, looked up on later ones."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        self.fit = ContextFit(kwargs, generation_budget(kwargs), cache_root(kwargs))
        self.limit, self.method = self.fit.limit, self.fit.method

    def annotate(self, docs: list[dict[str, Any]], prompt: Any) -> None:
        counts = self.fit.count([prompt(doc) for doc in docs])
        for doc, count in zip(docs, counts):
            doc["prompt_tokens"] = count
            doc["context_limit"] = self.limit
            doc["fits_context"] = self.fit.fits(count)
            doc["context_check"] = self.method
        too_long = sum(not doc["fits_context"] for doc in docs)
        if too_long:
            logger.warning(
                "emrQA: %d of %d prompts do not fit the model's context (%s); lm-eval will cut the start of "
                "those notes. The metric prompt_too_long reports the fraction.",
                too_long,
                len(docs),
                self.method,
            )
