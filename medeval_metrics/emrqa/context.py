"""Whether an emrQA prompt fits the evaluated model's context with the task's generation budget."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from medeval_metrics.context_fit import PromptCounter, TaskFit, task_prompt
from medeval_metrics.emrqa.sources import cache_root
from medeval_metrics.lm_eval_compat import loading_task
from medeval_metrics.task_yaml import own_task_config

logger = logging.getLogger("medeval.emrqa")

_LM_EVAL_DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's budget for a task config that sets none
_FIELD = "context_counter"  # the doc's field naming its task's counter (the task's name)


def generation_budget(kwargs: Mapping[str, Any]) -> int:
    """``max_gen_toks`` of the task's own config (the YAML at lm-eval's ``config_source``), else lm-eval's 256.

    The budget of a loader called outside lm-eval; inside it the count reads the task's own
    ``generation_kwargs`` when the item is scored (``--gen_kwargs`` is applied after the data set is loaded).
    """
    generation = own_task_config(kwargs.get("config_source")).get("generation_kwargs") or {}
    return int(generation.get("max_gen_toks", _LM_EVAL_DEFAULT_MAX_GEN_TOKS))


def fits_context(doc: Mapping[str, Any], generation_kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether the doc's prompt and the generation budget fit the model's context.

    A doc of a task loaded in this process (``ContextCheck``) is counted now, with the tokenizer its task's
    metadata names (``--model_args`` merged in by lm-eval; else a labelled estimate), against the budget its
    task's ``generation_kwargs`` hold now (``--gen_kwargs`` included), or ``generation_kwargs`` given here;
    the logged doc shows the count. A logged doc read back elsewhere keeps its count, checked again against
    the given budget.
    """
    given = generation_kwargs.get("max_gen_toks") if generation_kwargs else None
    counter = PromptCounter.of(doc, _FIELD)
    if counter is None:
        if given is not None and doc.get("prompt_tokens") is not None and doc.get("context_limit") is not None:
            return int(doc["prompt_tokens"]) <= int(doc["context_limit"]) - int(given)
        return doc.get("fits_context") is not False  # None: logged by a run that did not score it, never counted
    _count(counter, doc, None if given is None else int(given))  # type: ignore[arg-type]  # lm-eval's docs are dicts
    fits = bool(doc["fits_context"])
    if not fits and not counter.warned:
        counter.warned = True  # once per task and model: the metric counts them all
        logger.warning(
            "emrQA: %s: question %s's prompt (%s tokens, %s) and the generation budget exceed the model's "
            "context; lm-eval cuts the start of the note. The metric prompt_too_long gives the share.",
            counter.task or "the task",
            doc.get("qa_id", "?"),
            doc.get("prompt_tokens"),
            doc.get("context_check"),
        )
    return fits


# A task's prompts are counted when its items are scored, not when it loads (context_fit.PromptCounter): a
# --limit 10 run counts 10 of the 1,000 long-note prompts, with the tokenizer the task's metadata names.


def note(doc: Mapping[str, Any], text: str) -> str:
    """``text``, the prompt a task's ``doc_to_text`` rendered for ``doc``; the doc is noted to be counted
    with the others when the first item is scored (once however often rendered)."""
    counter = PromptCounter.of(doc, _FIELD)
    if counter is not None:
        counter.note(doc, text)
    return text


def _count(counter: PromptCounter, doc: dict[str, Any], budget: int | None) -> None:
    counter.use(budget)
    fit = counter.fit
    count = counter.count(doc)  # the others noted are counted with it, looked up when their items are scored
    doc["prompt_tokens"], doc["context_limit"] = count, fit.limit
    doc["fits_context"], doc["context_check"] = fit.fits(count), fit.method


class ContextCheck:
    """Marks each doc for the check of whether its prompt fits the evaluated model's context
    (``medeval_metrics.context_fit``: the tokenizer and limit the task's metadata names, as lm-eval merges
    ``--model_args`` into it, or a labelled estimate), reserving the generation budget. The count is made
    when the item is scored (``fits_context``), of the prompt the task renders (its ``doc_to_text``, a
    user's override included); counts are kept per tokenizer in the emrQA cache folder (prompt digests and
    numbers, no text), so a later run looks them up."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        self.kwargs = kwargs
        # inside lm-eval: the task being built (its name and prompt; its metadata and budget, read when scored)
        self.loading = loading_task()
        config = getattr(self.loading, "config", None)
        generation = getattr(config, "generation_kwargs", None)
        if config is not None and isinstance(generation, Mapping):
            self.task = str(getattr(config, "task", "") or "")
            self.budget = int(generation.get("max_gen_toks", _LM_EVAL_DEFAULT_MAX_GEN_TOKS))
        else:  # a loader called directly: the YAML it names, if any
            self.task = str(own_task_config(kwargs.get("config_source")).get("task") or "")
            self.budget = generation_budget(kwargs)

    def annotate(self, docs: list[dict[str, Any]], prompt: Callable[[Mapping[str, Any]], str]) -> None:
        """Mark ``docs`` for counting; ``prompt`` renders them where no lm-eval task is being built."""
        fit = TaskFit(self.kwargs, cache_root(self.kwargs))
        # with the task being built: its prompts rendered by its own doc_to_text, and freed when it goes
        render = task_prompt(self.loading, prompt)
        counter = PromptCounter(self.task, "emrqa", render, fit, self.budget, self.loading)
        for doc in docs:
            doc[_FIELD] = counter.key
            doc["prompt_tokens"] = doc["context_limit"] = doc["fits_context"] = None
            doc["context_check"] = "counted when the item is scored"
