"""lm-eval glue for emrQA: loaders (``custom_dataset``), prompts, ``process_results``, aggregations.

Three loaders serve every task; the YAML names the subset (or emrQL variant) in ``dataset_kwargs``,
which lm-eval passes to ``custom_dataset`` with the metadata (``custom_dataset(**metadata,
**dataset_kwargs)`` in lm-eval 0.4.13's ``ConfigurableTask.download``). Loaders receive lm-eval's
merged metadata and model_args as keyword arguments:
``emrqa_data_json`` / ``emrqa_data_ql_csv`` (or env ``MEDEVAL_EMRQA_DATA_JSON`` / ``..._DATA_QL_CSV``),
``emrqa_cache_dir``, ``emrqa_seed``, ``emrqa_sample_size`` (default 1000 per task; ``all`` for the
full test split) and, from model_args, ``pretrained``/``tokenizer``/``max_length`` to count how many
prompts do not fit the model's context.
"""

from __future__ import annotations

import heapq
import json
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from medeval_metrics.lm_eval_compat import install_redaction
from medeval_metrics.data import MedevalDataError, record_scored_data
from medeval_metrics.emrqa import metrics as M
from medeval_metrics.emrqa.cache import ensure_prepared
from medeval_metrics.emrqa.sources import resolve_inputs
from medeval_metrics.emrqa.seeding import stable_fraction
from medeval_metrics.settings import setting
from medeval_metrics.stats import install_stderr_hook, with_stderr
from medeval_metrics.task_yaml import own_task_config

logger = logging.getLogger("medeval.emrqa")

DEFAULT_SAMPLE_SIZE = 1000
_LM_EVAL_DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's budget for a task config that sets none
WINDOW_LINES = 12  # windowed variant: lines of note around the evidence
# Prompts hold clinical notes: error bodies lm-eval logs are withheld (length and hash only).
PRIVATE_DOCUMENTS = "emrQA clinical notes"


# --- sampling -----------------------------------------------------------------------------------


def allocate(counts: Mapping[str, int], size: int) -> dict[str, int]:
    """How many items to draw per stratum: proportional, at least one each while size allows."""
    total = sum(counts.values())
    if size <= 0 or size >= total:
        return dict(counts)
    names = sorted(counts)
    alloc = {n: 0 for n in names}
    if size >= len(names):
        alloc = {n: min(1, counts[n]) for n in names}
    remaining = size - sum(alloc.values())
    shares = {n: remaining * counts[n] / total for n in names}
    for n in names:
        alloc[n] += min(int(shares[n]), counts[n] - alloc[n])
    leftover = size - sum(alloc.values())
    order = sorted(names, key=lambda n: (-(shares[n] - int(shares[n])), n))
    while leftover > 0:
        progressed = False
        for n in order:
            if leftover and alloc[n] < counts[n]:
                alloc[n] += 1
                leftover -= 1
                progressed = True
        if not progressed:
            break
    return alloc


def stratified_sample(
    path: Path, counts: Mapping[str, int], size: int, seed: int, kind: str, id_field: str
) -> list[dict[str, Any]]:
    """A seeded sample stratified by ``lf_template``, streamed from a JSONL file, in file order."""
    alloc = allocate(counts, size)
    heaps: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            record = json.loads(line)
            quota = alloc.get(record["lf_template"], 0)
            if quota <= 0:
                continue
            rank = stable_fraction(seed, "sample", kind, record[id_field])
            heap = heaps.setdefault(record["lf_template"], [])
            item = (-rank, number, record)
            if len(heap) < quota:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                heapq.heapreplace(heap, item)
    chosen = [(number, record) for heap in heaps.values() for _, number, record in heap]
    return [record for _, record in sorted(chosen, key=lambda pair: pair[0])]


def sample_size(kwargs: Mapping[str, Any]) -> int:
    value = setting(kwargs, "emrqa_sample_size", DEFAULT_SAMPLE_SIZE)
    if str(value).strip().lower() in {"all", "full", "0"}:
        return 0
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise MedevalDataError(
            f"emrqa_sample_size is {value!r}: give a positive number of test questions, or 'all' for the full split."
        ) from None
    if size < 0:
        raise MedevalDataError(f"emrqa_sample_size is {size}: give a positive number, or 'all'.")
    return size


# --- prompts ------------------------------------------------------------------------------------


def evidence_prompt(doc: Mapping[str, Any]) -> str:
    # Note first, question last: if lm-eval has to cut the prompt, it cuts the note's beginning.
    return (
        f"Clinical note:\n{doc['note']}\n\n"
        "Copy the line or lines of the clinical note above that answer the question, exactly as written, "
        "one per line.\n"
        f"Question: {doc['question']}\nEvidence:"
    )


def evidence_target(doc: Mapping[str, Any]) -> str:
    """The gold evidence lines (shown in sample logs; scoring uses all gold answers)."""
    return "\n".join(dict.fromkeys(answer["evidence"] for answer in json.loads(doc["answers_json"])))


def classification_prompt(doc: Mapping[str, Any]) -> str:
    return (
        f"Clinical note:\n{doc['note']}\n\n"
        f"Answer the question about the clinical note above with exactly one of: {'; '.join(doc['labels'])}.\n"
        f"Question: {doc['question']}\nAnswer:"
    )


def lf_prompt(doc: Mapping[str, Any]) -> str:
    return f"Question: {doc['question']}\nLogical form:"


def lf_target(doc: Mapping[str, Any]) -> str:
    return doc["logical_form"]


# --- context fit --------------------------------------------------------------------------------


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
    labelled estimate), reserving the task's generation budget."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        from medeval_metrics.context_fit import ContextFit

        self.fit = ContextFit(kwargs, generation_budget(kwargs))
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
                "those notes. The metric prompt_too_long reports the fraction.", too_long, len(docs), self.method,
            )


# --- loaders ------------------------------------------------------------------------------------


def _dataset(test: list[dict[str, Any]], train: list[dict[str, Any]] | None = None) -> Any:
    import datasets

    splits = {"test": datasets.Dataset.from_list(test)}
    if train is not None:
        splits["train"] = datasets.Dataset.from_list(train)
    return datasets.DatasetDict(splits)


def _notes(folder: Path, keys: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    prefix, after_key = '{"note_key": ', ', "split": '
    with open(folder / "notes.jsonl", encoding="utf-8") as handle:
        for line in handle:
            # Records are written with sorted keys, note_key first: skip other notes without decoding them.
            end = line.find(after_key)
            if line.startswith(prefix) and end > 0 and json.loads(line[len(prefix):end]) not in keys:
                continue
            record = json.loads(line)
            if record["note_key"] in keys:
                found[record["note_key"]] = record["text"]
    return found


def _qa_docs(subset: str, kwargs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    install_redaction(private_documents=PRIVATE_DOCUMENTS)  # task building: before the first request
    folder, manifest = ensure_prepared(kwargs)
    counts = manifest["qa"]["test_lf_template_counts"].get(subset, {})
    if not counts:
        raise MedevalDataError(
            f"the emrQA data.json has no test questions in the {subset!r} subset (after the split by note). "
            "Check that the file is the full emrQA data.json with all five subsets."
        )
    docs = stratified_sample(
        folder / f"qa_{subset}_test.jsonl", counts, sample_size(kwargs), manifest["seed"], f"qa-{subset}", "qa_id"
    )
    notes = _notes(folder, {doc["note_key"] for doc in docs})
    for doc in docs:
        doc["note"] = notes[doc["note_key"]]
    return docs, manifest


def _record_scored_input(kwargs: Mapping[str, Any], manifest: Mapping[str, Any], which: str, items: int) -> None:
    """The scored input file's name and sha256 (from the preparation's manifest: not hashed again) in the
    results' task config; names only, never folders or note text."""
    data_json, data_ql = resolve_inputs(kwargs)
    path = data_json if which == "data_json" else data_ql
    digest = manifest.get("inputs", {}).get("data_json_sha256" if which == "data_json" else "data_ql_csv_sha256")
    scored = {"file": path.name, **({"sha256": digest} if digest else {})}  # caches before the digests: name only
    record_scored_data(f"the emrQA {path.name} (seeded split, sample)", [scored], items)


def load_evidence(subset: str, **kwargs: Any) -> Any:
    """``custom_dataset`` of the evidence tasks (``dataset_kwargs: {subset: medication}``)."""
    _install_hooks()
    docs, manifest = _qa_docs(subset, kwargs)
    for doc in docs:
        doc["answers_json"] = json.dumps(doc.pop("answers"), sort_keys=True)
    ContextCheck(kwargs).annotate(docs, evidence_prompt)
    _record_scored_input(kwargs, manifest, "data_json", len(docs))
    return _dataset(docs)


def load_classification(subset: str, **kwargs: Any) -> Any:
    """``custom_dataset`` of the class-label tasks (``dataset_kwargs: {subset: smoking}``)."""
    install_stderr_hook()  # else lm-eval reports macro_f1's stderr as "N/A"
    _install_hooks()
    docs, manifest = _qa_docs(subset, kwargs)
    labels = manifest["qa"]["labels"][subset]
    for doc in docs:
        doc["labels"] = labels
    ContextCheck(kwargs).annotate(docs, classification_prompt)
    _record_scored_input(kwargs, manifest, "data_json", len(docs))
    return _dataset(docs)


def window_doc(doc: dict[str, Any], seed: int, lines: int = WINDOW_LINES) -> dict[str, Any]:
    """The note cut to ``lines`` lines that hold the first gold evidence, at a seeded position.

    Gold answers whose evidence falls outside the window are dropped (as in para-level emrQA,
    Rawat et al. 2020); positions are re-based onto the window.
    """
    note = doc["note"]
    answers = json.loads(doc["answers_json"])
    anchor = next((a for a in answers if a["evidence_start"] >= 0), None)
    starts = [0] + [i + 1 for i, ch in enumerate(note) if ch == "\n"]
    if anchor is None:
        first_line = 0
    else:
        ev_first = max(i for i, s in enumerate(starts) if s <= anchor["evidence_start"])
        ev_last = max(i for i, s in enumerate(starts) if s <= anchor["evidence_start"] + len(anchor["evidence"]) - 1)
        slack = max(0, lines - (ev_last - ev_first + 1))
        # Seeded offset so the evidence is not always in the same place in the window.
        first_line = max(0, ev_first - int(stable_fraction(seed, "window", doc["qa_id"]) * (slack + 1)))
    last_line = min(len(starts), first_line + max(lines, 1))
    begin = starts[first_line]
    end = starts[last_line] - 1 if last_line < len(starts) else len(note)
    kept = []
    for answer in answers:
        s = answer["evidence_start"]
        if s >= begin and s + len(answer["evidence"]) <= end:
            kept.append({**answer, "evidence_start": s - begin})
    out = dict(doc)
    out["qa_id"] = doc["qa_id"] + "@window"  # distinct from the whole-note item in logs and tables
    out["note"] = note[begin:end]
    # Evidence longer than the window, or never located: keep the first answer, position unknown.
    out["answers_json"] = json.dumps(kept or [{**answers[0], "evidence_start": -1}], sort_keys=True)
    return out


def load_evidence_window(**kwargs: Any) -> Any:
    """``custom_dataset`` of ``emrqa_evidence_window``: 12-line passages over the three evidence subsets."""
    _install_hooks()
    docs: list[dict[str, Any]] = []
    for subset in ("medication", "relations", "risk"):
        subset_docs, manifest = _qa_docs(subset, kwargs)
        for doc in subset_docs:
            doc["answers_json"] = json.dumps(doc.pop("answers"), sort_keys=True)
            docs.append(window_doc(doc, manifest["seed"]))
    ContextCheck(kwargs).annotate(docs, evidence_prompt)
    _record_scored_input(kwargs, manifest, "data_json", len(docs))
    return _dataset(docs)


def load_logical_forms(variant: str, **kwargs: Any) -> Any:
    """``custom_dataset`` of the emrQL tasks (``dataset_kwargs: {variant: emrql_1}``)."""
    install_redaction(private_documents=PRIVATE_DOCUMENTS)  # task building: before the first request
    folder, manifest = ensure_prepared(kwargs)
    counts = manifest["emrql"]["test_lf_template_counts"][variant]
    docs = stratified_sample(folder / f"{variant}_test.jsonl", counts, sample_size(kwargs), manifest["seed"], variant, "line")
    with open(folder / f"{variant}_fewshot.jsonl", encoding="utf-8") as handle:
        fewshot = [json.loads(line) for line in handle]
    if not docs or not fewshot:
        raise MedevalDataError(f"the emrQA data-ql.csv gives an empty {variant} test split or few-shot pool.")
    fewshot = [{**row, "fewshot_role": "pool"} for row in fewshot]
    fewshot += [{**row, "fewshot_role": "top_up"} for row in _top_up_rows(folder, variant, fewshot, manifest["seed"])]
    for doc in docs + fewshot:
        doc["qa_id"] = f"ql:{doc['line']}"  # one id field across every emrQA task
    for doc in fewshot:
        doc["emrql_variant"] = variant
    _record_scored_input(kwargs, manifest, "data_ql", len(docs))
    return _dataset(docs, fewshot)


def _top_up_rows(folder: Path, variant: str, pool: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Training rows outside a small pool (seeded order), so the pool reaches FEWSHOT_TOP_UP rows where training allows."""
    from medeval_metrics.emrqa.fewshot import FEWSHOT_TOP_UP

    wanted = FEWSHOT_TOP_UP - len(pool)
    if wanted <= 0:
        return []
    in_pool = {row["line"] for row in pool}
    ranked: list[tuple[float, int, dict[str, Any]]] = []
    with open(folder / f"{variant}_train.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["line"] in in_pool:
                continue
            item = (-stable_fraction(seed, "fewshot-top-up", variant, row["line"]), row["line"], row)
            if len(ranked) < wanted:
                heapq.heappush(ranked, item)
            elif item[:2] > ranked[0][:2]:
                heapq.heapreplace(ranked, item)
    return [row for _, _, row in sorted(ranked, key=lambda item: (-item[0], item[1]))]


WRITE_OUT_WARNING = (
    "emrQA: --write_out prints whole prompts to the console, and emrQA prompts hold patient-note text. "
    "Keep that console output private (it is covered by the n2c2 data-use agreement), or run without --write_out."
)


def writes_out(argv: list[str]) -> bool:
    """Whether an lm-eval command line asks for ``--write_out`` (``-w``)."""
    return any(arg in ("--write_out", "-w") or arg.startswith("--write_out=") for arg in argv)


@lru_cache(maxsize=1)
def _warn_write_out() -> None:
    logger.warning(WRITE_OUT_WARNING)  # once per process, however many note tasks are loaded


def _install_hooks() -> None:
    """What every note task's loader sets up: the generation-budget hook and the --write_out warning."""
    import sys

    from medeval_metrics.lm_eval_compat import pass_generation_kwargs_to_process_results

    pass_generation_kwargs_to_process_results()  # so prompt_too_long sees --gen_kwargs max_gen_toks
    # lm-eval does not tell a task's loader about --write_out; the command line (lm_eval or medeval run) does.
    if writes_out(sys.argv[1:]):
        _warn_write_out()


# --- scoring ------------------------------------------------------------------------------------


def _output(results: Iterable[Any]) -> str:
    results = list(results)
    return str(results[0]) if results else ""


def process_evidence(
    doc: Mapping[str, Any], results: Iterable[Any], generation_kwargs: Mapping[str, Any] | None = None
) -> dict[str, float]:
    scores = M.score_evidence(_output(results), json.loads(doc["answers_json"]), doc["note"])
    scores["prompt_too_long"] = float(not fits_context(doc, generation_kwargs))
    return scores


process_evidence.wants_generation_kwargs = True  # type: ignore[attr-defined]  # see lm_eval_compat


def process_logical_form(doc: Mapping[str, Any], results: Iterable[Any]) -> dict[str, float]:
    return M.score_logical_form(_output(results), doc["logical_form"], doc["lf_template"])


def process_classification(
    doc: Mapping[str, Any], results: Iterable[Any], generation_kwargs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    prediction = M.parse_label(_output(results), doc["labels"])
    pair = (doc["label"], prediction)
    # macro_f1 is corpus-level: its items are (gold, predicted) pairs, aggregated once.
    return {
        "acc": float(prediction == doc["label"]),
        "macro_f1": pair,
        "unparseable": float(prediction is None),
        "prompt_too_long": float(not fits_context(doc, generation_kwargs)),
    }


process_classification.wants_generation_kwargs = True  # type: ignore[attr-defined]


def macro_f1_stderr(items: list[tuple[str, str | None]]) -> float:
    """Seeded bootstrap standard error of macro-F1 (resampling items)."""
    return M.bootstrap_stderr([tuple(item) for item in items])


@with_stderr(macro_f1_stderr)
def aggregate_macro_f1(items: list[tuple[str, str | None]]) -> float:
    return M.macro_f1([tuple(item) for item in items])

