"""emrQA's ``custom_dataset`` loaders: the prepared split, sampled, with its notes, context fit and provenance.

Three loaders serve every task; the YAML names the subset (or emrQL variant) in ``dataset_kwargs``,
which lm-eval passes to ``custom_dataset`` with the metadata (``custom_dataset(**metadata,
**dataset_kwargs)`` in lm-eval 0.4.13's ``ConfigurableTask.download``). Loaders receive lm-eval's
merged metadata and model_args as keyword arguments:
``emrqa_data_json`` / ``emrqa_data_ql_csv`` (or env ``MEDEVAL_EMRQA_DATA_JSON`` / ``..._DATA_QL_CSV``),
``emrqa_cache_dir``, ``emrqa_seed``, ``emrqa_sample_size`` (default 1000 per task; ``all`` for the
full test split) and, from model_args, ``pretrained``/``tokenizer``/``max_length``, by which a prompt is
counted when its item is scored (read then from the task's metadata; ``emrqa.context``).

The pack's own messages and errors name files, records (question ids, note keys) and fields, never
note text, so nothing of the process is hooked to scrub them.
"""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.emrqa.cache import ensure_prepared
from medeval_metrics.emrqa.context import ContextCheck
from medeval_metrics.emrqa.fewshot import FEWSHOT_TOP_UP
from medeval_metrics.emrqa.prompts import classification_prompt, evidence_prompt
from medeval_metrics.emrqa.sampling import sample_size, stratified_sample
from medeval_metrics.emrqa.seeding import stable_fraction
from medeval_metrics.emrqa.sources import resolve_inputs
from medeval_metrics.emrqa.windowing import window_doc
from medeval_metrics.emrqa.write_out import warn_write_out, writes_out
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.provenance import record_scored_data


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
            if line.startswith(prefix) and end > 0 and json.loads(line[len(prefix) : end]) not in keys:
                continue
            record = json.loads(line)
            if record["note_key"] in keys:
                found[record["note_key"]] = record["text"]
    return found


def _qa_docs(subset: str, kwargs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
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
    _warn_write_out()
    docs, manifest = _qa_docs(subset, kwargs)
    for doc in docs:
        doc["answers_json"] = json.dumps(doc.pop("answers"), sort_keys=True)
    ContextCheck(kwargs).annotate(docs, evidence_prompt)
    _record_scored_input(kwargs, manifest, "data_json", len(docs))
    return _dataset(docs)


def load_classification(subset: str, **kwargs: Any) -> Any:
    """``custom_dataset`` of the class-label tasks (``dataset_kwargs: {subset: smoking}``)."""
    _warn_write_out()
    docs, manifest = _qa_docs(subset, kwargs)
    labels = manifest["qa"]["labels"][subset]
    for doc in docs:
        doc["labels"] = labels
    ContextCheck(kwargs).annotate(docs, classification_prompt)
    _record_scored_input(kwargs, manifest, "data_json", len(docs))
    return _dataset(docs)


def load_evidence_window(**kwargs: Any) -> Any:
    """``custom_dataset`` of ``emrqa_evidence_window``: 12-line passages over the three evidence subsets."""
    _warn_write_out()
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
    folder, manifest = ensure_prepared(kwargs)
    counts = manifest["emrql"]["test_lf_template_counts"][variant]
    docs = stratified_sample(
        folder / f"{variant}_test.jsonl", counts, sample_size(kwargs), manifest["seed"], variant, "line"
    )
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


def _warn_write_out() -> None:
    """A note task's loader warns that --write_out prints prompts (notes): lm-eval does not tell a loader about
    it; the command line (lm_eval or medeval run) does."""
    if writes_out(sys.argv[1:]):
        warn_write_out()
