"""Whether an emrQA prompt fits the evaluated model's context with the task's generation budget."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from medeval_metrics.context_fit import ContextFit
from medeval_metrics.emrqa.sources import cache_root
from medeval_metrics.lm_eval_compat import evaluated_model, remember_evaluated_model
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

    A doc whose prompt is not counted yet (``ContextCheck``) is counted first, in this process, with the
    evaluated model's tokenizer, and the logged doc shows the count. With the generation settings lm-eval
    used (``--gen_kwargs`` included), the fit is recomputed from the counted prompt tokens; otherwise it
    is the check against the task config's budget.
    """
    if doc.get("prompt_tokens") is None and doc.get("context_counter"):
        _count(doc)  # type: ignore[arg-type]  # lm-eval's docs are dicts: the count is written into the logged one
    if generation_kwargs and "max_gen_toks" in generation_kwargs and doc.get("context_limit") is not None:
        fits = int(doc["prompt_tokens"]) <= int(doc["context_limit"]) - int(generation_kwargs["max_gen_toks"])
    else:
        fits = bool(doc["fits_context"])
    check = _CHECKS.get(str(doc.get("context_counter") or ""))
    if not fits and check is not None and not check["warned"]:
        check["warned"] = True  # once per task: the metric counts them all
        logger.warning(
            "emrQA: %s: question %s's prompt (%s tokens, %s) and the generation budget exceed the model's "
            "context; lm-eval cuts the start of the note. The metric prompt_too_long gives the share.",
            check["task"] or "the task",
            doc.get("qa_id", "?"),
            doc.get("prompt_tokens"),
            doc.get("context_check"),
        )
    return fits


# A task's prompts are counted when its items are scored, not when it loads: a --limit 10 run counts 10 of
# the 1,000 long-note prompts, with the evaluated model's own tokenizer (lm-eval's evaluate runs by then).
# The prompts lm-eval renders are noted (``noted``) and counted in one call when the first item is scored.
_CHECKS: dict[str, dict[str, Any]] = {}
_COUNT_SETTINGS = ("tokenizer", "pretrained", "gguf_file", "max_length", "max_model_len", "add_bos_token")


def noted(prompt: Callable[[Mapping[str, Any]], str]) -> Callable[[Mapping[str, Any]], str]:
    """``prompt`` as a task's ``doc_to_text``: each prompt rendered for a doc not counted yet is noted."""

    @functools.wraps(prompt)
    def render(doc: Mapping[str, Any]) -> str:
        text = prompt(doc)
        check = _CHECKS.get(str(doc.get("context_counter") or ""))
        if check is not None and doc.get("prompt_tokens") is None:
            check["uncounted"].append(text)
        return text

    return render


def _count(doc: dict[str, Any]) -> None:
    check = _CHECKS.get(str(doc["context_counter"]))
    if check is None:  # a logged doc read back in another process: nothing to count with
        return
    if check["fit"] is None:
        check["fit"] = ContextFit(check["settings"], check["budget"], check["cache"], evaluated_model())
    fit = check["fit"]
    texts = [check["prompt"](doc), *check["uncounted"]]
    check["uncounted"].clear()
    count = fit.count(texts)[0]  # the others are looked up by content when their items are scored
    doc["prompt_tokens"], doc["context_limit"] = count, fit.limit
    doc["fits_context"], doc["context_check"] = fit.fits(count), fit.method


class ContextCheck:
    """Marks each doc for the check of whether its prompt fits the evaluated model's context
    (``medeval_metrics.context_fit``: the evaluated model's tokenizer and limit, else the ones
    ``--model_args`` names, or a labelled estimate), reserving the task's generation budget. The count is
    made when the item is scored (``fits_context``); counts are kept per tokenizer in the emrQA cache
    folder (prompt digests and numbers, no text), so a later run looks them up."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        self.settings = {k: v for k, v in kwargs.items() if k in _COUNT_SETTINGS and isinstance(v, (str, int, bool))}
        self.budget = generation_budget(kwargs)
        self.cache = cache_root(kwargs)
        self.task = str(own_task_config(kwargs.get("config_source")).get("task") or "")
        remember_evaluated_model()  # the count, made while lm-eval evaluates, takes its model's tokenizer

    def annotate(self, docs: list[dict[str, Any]], prompt: Callable[[Mapping[str, Any]], str]) -> None:
        key = f"{self.task or 'emrqa'}#{len(_CHECKS)}"
        _CHECKS[key] = {
            "settings": self.settings,
            "budget": self.budget,
            "cache": self.cache,
            "task": self.task,
            "prompt": prompt,
            "fit": None,
            "uncounted": [],
            "warned": False,
        }
        for doc in docs:
            doc["context_counter"] = key
            doc["prompt_tokens"] = doc["context_limit"] = None
            doc["fits_context"], doc["context_check"] = True, "counted when the item is scored"
