"""After a run: the share of each generative task's outputs that ran to the token budget (``max_gen_toks``), said
once, with the flag that sets it.

lm-eval logs no token count and no finish reason, only the text (cut at a stop sequence when the model wrote
one). So an output is counted as having run to the budget when the model's own tokenizer, run again over the
text, gives at least ``HIT_SHARE`` of ``max_gen_toks`` tokens: an output cut by the budget re-encodes to about
the budget (a token or two fewer where decoding and encoding again merge tokens), one that ended by itself
mostly stops well short of it. A long answer that ended by itself just under the budget is counted too (an
upper bound). Without the run's samples (``--log_samples``) or a tokenizer that loads offline (API models, the
scripted test model), nothing is said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

HIT_SHARE = 0.95  # re-encoded length, as a share of max_gen_toks, from which an output counts as cut by the budget
BUDGET_FLAG = "--gen_kwargs max_gen_toks=N"


def _gen_kwargs(arguments: Any) -> Mapping[str, Any] | None:
    """The generation settings of a sample's first request: in memory ``[(context, gen_kwargs), ...]``, in a
    samples file ``{"gen_args_0": {"arg_0": context, "arg_1": gen_kwargs}}``."""
    first = None
    if isinstance(arguments, (list, tuple)) and arguments:
        first = arguments[0]
    elif isinstance(arguments, Mapping) and arguments:
        first = next(iter(arguments.values()))
        first = list(first.values()) if isinstance(first, Mapping) else first
    if isinstance(first, (list, tuple)) and len(first) > 1 and isinstance(first[1], Mapping):
        return first[1]
    return None


def _outputs(resps: Any) -> Iterable[str]:
    """The model's raw outputs of one sample (``resps``: one list per request, one text per repeat)."""
    for request in resps if isinstance(resps, list) else []:
        for text in request if isinstance(request, list) else [request]:
            if isinstance(text, str):
                yield text


def _budget(sample: Mapping[str, Any], config: Mapping[str, Any]) -> int | None:
    value = (_gen_kwargs(sample.get("arguments")) or {}).get("max_gen_toks")
    if value is None:  # the request's own settings first (what the model got), else the task's
        task_kwargs = config.get("generation_kwargs")
        value = task_kwargs.get("max_gen_toks") if isinstance(task_kwargs, Mapping) else None
    try:
        return int(value) if value is not None and int(value) > 0 else None
    except (TypeError, ValueError):
        return None


def budget_hits(results: Mapping[str, Any], count_tokens: Callable[[str], int]) -> dict[str, tuple[int, int, set[int]]]:
    """Per generative task with samples: (outputs that ran to the budget, outputs, the budgets seen)."""
    out: dict[str, tuple[int, int, set[int]]] = {}
    configs = results.get("configs") or {}
    for task, samples in (results.get("samples") or {}).items():
        config = configs.get(task) or {}
        if config.get("output_type", "generate_until") != "generate_until":
            continue
        hit = total = 0
        budgets: set[int] = set()
        seen: set[Any] = set()
        for sample in samples or []:
            if not isinstance(sample, Mapping):
                continue
            # lm-eval logs an item once per filter (EMSQA's two readings), with the same outputs: count it once
            doc_id = sample.get("doc_id")
            if isinstance(doc_id, int) and not isinstance(doc_id, bool):
                if doc_id in seen:
                    continue
                seen.add(doc_id)
            budget = _budget(sample, config)
            if budget is None:
                continue
            for text in _outputs(sample.get("resps")):
                total += 1
                budgets.add(budget)
                hit += count_tokens(text) >= HIT_SHARE * budget
        if total:
            out[task] = (hit, total, budgets)
    return out


def budget_notice(results: Mapping[str, Any], count_tokens: Callable[[str], int] | None = None) -> str | None:
    """One line naming each task some of whose outputs ran to the token budget (count, share, budget) and the flag
    that sets it; None when none did or nothing can be counted. ``results``: the run's results with its samples
    (what ``medeval run`` holds after the run); ``count_tokens``: the tokenizer (default: the run's model's, loaded
    offline from its ``model_args``)."""
    if not results.get("samples"):
        return None
    count_tokens = count_tokens or tokenizer_counter(results.get("config") or {})
    if count_tokens is None:
        return None
    parts = []
    for task, (hit, total, budgets) in budget_hits(results, count_tokens).items():
        if hit:
            budget = "/".join(str(b) for b in sorted(budgets))
            parts.append(f"{task} {hit} of {total} ({hit / total:.0%}, max_gen_toks {budget})")
    if not parts:
        return None
    return (
        f"outputs that ran to the token budget, cut short (an answer after the cut is lost): {'; '.join(parts)}. "
        f"`{BUDGET_FLAG}` sets the budget (docs/medeval-run.md, the token budget)."
    )


def _model_args(config: Mapping[str, Any]) -> dict[str, Any]:
    args = config.get("model_args")
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str):
        from medeval_metrics.command_line import merge_key_values

        try:
            return merge_key_values("--model_args", [[args]])
        except Exception:
            return {}
    return {}


def tokenizer_counter(config: Mapping[str, Any]) -> Callable[[str], int] | None:
    """A token counter from the run's model (results ``config``): its ``tokenizer`` or ``pretrained`` loaded by
    transformers from local files only (the run downloaded it already); None for other backends or when it does
    not load."""
    from medeval_metrics.preflight.model import PRETRAINED_BACKENDS

    args = _model_args(config)
    name = args.get("tokenizer") or args.get("pretrained")
    if (config.get("model") or "hf") not in PRETRAINED_BACKENDS or not isinstance(name, str) or args.get("gguf_file"):
        return None
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True, revision=args.get("revision"))
    except Exception:  # the notice is a courtesy: a tokenizer that does not load offline leaves it out
        return None
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
