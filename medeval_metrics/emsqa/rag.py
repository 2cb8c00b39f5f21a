"""EMSQA with retrieval: the paper's knowledge-base RAG (global) and ExpertRAG (filtered by the item's
subject areas) settings.

The loaders retrieve once per item when the dataset is built and store in each doc what it got:
``rag_chunks`` (chunk ids, source files and scores: visible in ``--log_samples``), ``rag_context``
(the documents block the prompt shows) and ``rag_header`` (how they were retrieved). The prompt's
length is counted when the item is scored (``prompt_too_long``), so a ``--limit`` run counts only
its items. Settings come from ``--metadata`` (or ``MEDEVAL_<KEY>``), first match wins; the task YAML
sets ``rag_mode``:

- ``emsqa_knowledge_path``: folder of the knowledge files (default: the Hub dataset EMS-Knowledge);
- ``rag_retriever``: ``bm25`` (default) or ``medcpt`` (dense; ``rag_query_encoder`` /
  ``rag_article_encoder`` name other encoders); ``rag_k`` (32), ``rag_chunk_tokens`` (512),
  ``rag_chunk_overlap`` (128) (the removed settings: ``knowledge.RAG_REMOVED``);
- ``rag_areas``: ``gold`` (the items' own subject areas, the paper's "GT" rows) or a file of
  predicted areas per item id (the "Filter" rows);
- ``rag_prompt``: ``pack`` (default, the pack's CoT wording) or ``authors`` (the authors' RAG templates);
- ``rag_save_retrievals``: write the task's retrievals into this file (a section per task, so the
  tasks of a run share it); ``rag_retrievals``: read them from such a file (or a run's
  samples_*.jsonl) instead of retrieving, refused when made with another mode, k, areas, retriever,
  knowledge or chunking;
- ``rag_cache_dir``: where built indexes are kept (default ~/.cache/medeval/retrieval).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medeval_metrics.context_fit import ContextFit
from medeval_metrics.data import MedevalDataError, download_hub_file, setting
from medeval_metrics.emsqa.data import EmsqaSplits, load_private, load_public
from medeval_metrics.emsqa.knowledge import AREA_FILES, KNOWLEDGE_FILES, KNOWLEDGE_SOURCE, RAG_REMOVED
from medeval_metrics.emsqa.prompts import doc_to_text_cot, doc_to_text_expert_cot
from medeval_metrics.emsqa.retrieval import (
    MODES,
    CorpusFile,
    RetrievalSettings,
    cached_build,
    corpus_version,
    default_cache_root,
    file_sha256,
    open_index,
)
from medeval_metrics.emsqa.retrieval.precomputed import header_difference, read_sections, save_task_retrievals
from medeval_metrics.emsqa.scoring import process_results
from medeval_metrics.files import unwritable_reason
from medeval_metrics.lm_eval_compat import loading_task_config, pass_generation_kwargs_to_process_results
from medeval_metrics.settings import refuse_removed
from medeval_metrics.task_yaml import own_task_config, task_set_metadata

log = logging.getLogger("medeval_metrics.emsqa")

_WHAT = "the EMSQA knowledge base"
_FIX = f"Replace it with the published file. {KNOWLEDGE_SOURCE.how_to_get}"
_noticed: set[str] = set()  # warnings already given in this process
_SETTINGS = {  # metadata key -> (RetrievalSettings field, type)
    "rag_retriever": ("retriever", str),
    "rag_mode": ("mode", str),
    "rag_k": ("k", int),
    "rag_chunk_tokens": ("chunk_tokens", int),
    "rag_chunk_overlap": ("chunk_overlap", int),
    "rag_query_encoder": ("query_encoder", str),
    "rag_article_encoder": ("article_encoder", str),
}
_DEFAULT_MAX_GEN_TOKS = 1024  # the CoT variants' (used when the loader runs outside lm-eval)


def retrieval_settings(metadata: Mapping[str, Any]) -> RetrievalSettings:
    refuse_removed(metadata, RAG_REMOVED)
    values: dict[str, Any] = {}
    for key, (name, kind) in _SETTINGS.items():
        value = setting(metadata, key)
        if value is None:
            continue
        try:
            values[name] = kind(value)
        except (TypeError, ValueError) as exc:
            raise MedevalDataError(f"{key}={value!r} is not a {kind.__name__}.") from exc
    if str(values.get("retriever", "")).lower() == "dense":
        values["retriever"] = "medcpt"
    return RetrievalSettings(**values)


# --- the knowledge files -------------------------------------------------------------------------


def knowledge_files(metadata: Mapping[str, Any]) -> tuple[list[CorpusFile], str]:
    """The knowledge files present (local folder, else the Hub) and where they came from."""
    local = KNOWLEDGE_SOURCE.local_path(metadata)
    if local is not None:
        if not local.is_dir():
            raise MedevalDataError(
                f"{local} is a file; {KNOWLEDGE_SOURCE.key} must name the folder holding the knowledge files "
                f"({', '.join(KNOWLEDGE_FILES[:3])}, ...)."
            )
        present = {p.stem: p for p in local.glob("*.json") if p.is_file()}
        others = sorted(set(present) - set(KNOWLEDGE_FILES))
        if others:
            log.warning("medeval: %s: ignoring files that are not knowledge-base subjects: %s", local, others)
        files = [
            CorpusFile(stem, present[stem], file_sha256(present[stem])) for stem in KNOWLEDGE_FILES if stem in present
        ]
        if not files:
            raise MedevalDataError(
                f"{local}: none of the knowledge files ({', '.join(KNOWLEDGE_FILES)}) is here. {KNOWLEDGE_SOURCE.how_to_get}"
            )
        return files, str(local)
    revision = setting(metadata, "emsqa_knowledge_revision")
    files = []
    for stem in KNOWLEDGE_FILES:
        try:
            path = download_hub_file(KNOWLEDGE_SOURCE, [f"/{stem}.json", f"{stem}.json"], revision)
        except MedevalDataError:
            if not files and stem == KNOWLEDGE_FILES[0]:
                raise
            continue
        files.append(CorpusFile(stem, path, file_sha256(path)))
    return files, f"hub:{KNOWLEDGE_SOURCE.hub_repo}"


# --- subject areas per item ----------------------------------------------------------------------


def _check_areas(areas: Sequence[str], where: str) -> list[str]:
    unknown = [a for a in areas if a not in AREA_FILES]
    if unknown:
        raise MedevalDataError(
            f"{where}: subject area {unknown[0]!r} has no knowledge file. Known areas: {', '.join(sorted(AREA_FILES))}."
        )
    return list(areas)


def read_predicted_areas(path: Path, item_ids: Sequence[str]) -> dict[str, list[str]]:
    """item id -> predicted areas, from a JSON object ``{id: [areas]}`` or JSON Lines ``{"id", "areas"}``."""
    path = Path(path).expanduser()
    fix = 'Write one entry per test item: {"<item id>": ["cardiology_and_resuscitation", ...], ...}.'
    if not path.is_file():
        raise MedevalDataError(f"rag_areas points at {path}, which is not a file. {fix}")
    from medeval_metrics.emsqa.retrieval.precomputed import checked_loads, checked_text

    description = "the predicted-areas file"
    text = checked_text(path, description)
    try:
        if text.lstrip().startswith("{") and "\n{" not in text.strip():
            raw = checked_loads(text, path, description)
            entries = list(raw.items()) if isinstance(raw, dict) else None
        else:
            entries = []
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    record = checked_loads(line, path, description, f" (line {number})")
                    if not isinstance(record, dict):
                        raise MedevalDataError(
                            f"{path}: line {number} of {description} is a {type(record).__name__}, not an object. {fix}"
                        )
                    entries.append((record.get("id"), record.get("areas", record.get("category"))))
    except json.JSONDecodeError as exc:
        raise MedevalDataError(
            f"{path}: the predicted-areas file is not valid JSON (line {exc.lineno}: {exc.msg}). {fix}"
        ) from exc
    if entries is None:
        raise MedevalDataError(f"{path}: the predicted-areas file must be a JSON object or JSON Lines. {fix}")
    known = set(item_ids)
    out: dict[str, list[str]] = {}
    for item_id, areas in entries:
        item_id = str(item_id)
        if item_id not in known:
            raise MedevalDataError(
                f"{path}: item id {item_id!r} is not in the evaluated set (ids are the records' 'id' field, or "
                f"their position from 0 when the file has none, e.g. {sorted(known)[:3]}). {fix}"
            )
        areas = [areas] if isinstance(areas, str) else areas
        if not isinstance(areas, list) or not all(isinstance(a, str) for a in areas):
            raise MedevalDataError(f"{path}: item {item_id!r}: the areas must be a list of area names. {fix}")
        out[item_id] = _check_areas(areas, f"{path}: item {item_id!r}")
    missing = [i for i in item_ids if i not in out]
    if missing:
        raise MedevalDataError(f"{path}: {len(missing)} items have no predicted areas (first: {missing[:5]}). {fix}")
    return out


# --- prompts -------------------------------------------------------------------------------------

# ``rag_prompt``: "pack" (default) keeps the pack's CoT and Expert-CoT wording, so a RAG score differs
# from the matching non-RAG task's by the documents alone; "authors" follows the authors' templates
# (code/EMSRAG/ems_rag.py with prompts/rag_cot.txt and prompts/rag_cot_attr.txt): their system message,
# field labels, order and answer instruction.
PROMPT_STYLES = ("pack", "authors")
_NO_DOCUMENTS = "Relevant documents: none were retrieved for this question."
_DOCUMENTS_HEADER = "Relevant documents:"
_AUTHORS_DOCUMENTS_HEADER = "EMS Knowledge:"  # the authors' knowledge-base block (their PR block: no data)
_AUTHORS_SYSTEM_COT = (
    "You are a helpful EMS expert, and your task is to answer a multi-choice ems question using the relevant "
    "documents. Please first think step-by-step and then choose the answer from the provided options. Your "
    "responses will be used for research purposes only, so please have a definite answer. Respond ONLY in the "
    "JSON schema provided."
)
_AUTHORS_SYSTEM_EXPERT = (
    "You are a helpful EMS expert, and your task is to answer a multi-choice ems question at the requested "
    "certification depth using the relevant documents. Please first think step-by-step from the standpoint of "
    "{category} and then choose the answer from the provided options. Your responses will be used for research "
    "purposes only, so please have a definite answer. Respond ONLY in the JSON schema provided."
)


def document_line(chunk: Mapping[str, Any]) -> str:
    return f"- {chunk['title']}: {chunk['text']}"


def documents_block(chunks: Sequence[Mapping[str, Any]], style: str = "pack") -> str:
    """The documents as the prompt lists them: "- title: text" entries (the authors' format)."""
    if style == "authors":  # the authors' block, also when empty: "EMS Knowledge:" and a newline
        return _AUTHORS_DOCUMENTS_HEADER + "\n" + "\n".join(document_line(c) for c in chunks)
    if not chunks:
        return _NO_DOCUMENTS
    return _DOCUMENTS_HEADER + "\n" + "\n".join(document_line(c) for c in chunks)


def prompt_style(metadata: Mapping[str, Any]) -> str:
    style = str(setting(metadata, "rag_prompt", "pack") or "pack").strip().lower()
    if style not in PROMPT_STYLES:
        raise MedevalDataError(
            f"rag_prompt={style!r} is not one of {', '.join(PROMPT_STYLES)} (pack: the pack's "
            "CoT wording, the default; authors: the authors' RAG templates)."
        )
    return style


def _documents(doc: Mapping[str, Any]) -> str | None:
    if doc.get("rag_missing"):
        raise MedevalDataError(
            f"EMSQA item {doc['id']!r} has no entry in the precomputed-retrievals file ({doc['rag_missing']}). "
            "Use the file of a run over the same items, or retrieve again without rag_retrievals."
        )
    return doc.get("rag_context")


def _authors_choices(doc: Mapping[str, Any]) -> str:
    # the data's choice strings ("a. text"), one a line, as the authors pass them
    return "\n".join(f"{letter}. {text}" for letter, text in zip(doc["letters"], doc["options"]))


def _authors_list(values: Sequence[str]) -> str:
    return str([str(v) for v in values])  # their templates receive the record's list as it prints: ['trauma']


def authors_system_message(doc: Mapping[str, Any], expert: bool) -> str:
    """The authors' system message for the item ("\n\n" ends it: without a chat template lm-eval joins the
    system and user text with no separator)."""
    text = _AUTHORS_SYSTEM_EXPERT.format(category=_authors_list(doc["category"])) if expert else _AUTHORS_SYSTEM_COT
    return text + "\n\n"


def _authors_cot(doc: Mapping[str, Any], documents: str) -> str:  # prompts/rag_cot.txt
    return (
        f"Relevant Documents: {documents}\n\nQuestion: {doc['question']}\n\nChoices: {_authors_choices(doc)}\n\n"
        "Please think step-by-step and and then choose the answer from the provided options, organize your output "
        'in a json formatted as (only Letters e.g.: A/B/C/D) with explanation as Dict{"step_by_step_thinking": '
        'Str(explanation), "answer": List(A, B) or List([C])}'
    )


def _authors_expert_cot(doc: Mapping[str, Any], documents: str) -> str:  # prompts/rag_cot_attr.txt
    category = _authors_list(doc["category"])
    return (
        f"Certification Level: {_authors_list(doc['level'])}\n\nCategory: {category}\n\n"
        f"Question: {doc['question']}\n\nChoices: {_authors_choices(doc)}\n\nRelevant Documents: {documents}\n\n"
        f"Based on the relevant documents, think step by step from the standpoint of {category}, choose the correct "
        "answer to the following multiple-choice question. Return your final answer as a lowercase letter in strict "
        'JSON format, like: ["a"]'
    )


def doc_to_text_rag_cot(doc: dict[str, Any]) -> str:
    """KB + CoT: the retrieved documents, then the CoT prompt (plain variants show them first)."""
    documents = _documents(doc)
    if doc.get("rag_prompt") == "authors" and documents is not None:
        return _authors_cot(doc, documents)
    body = doc_to_text_cot(doc)
    return body if documents is None else f"{documents}\n\n{body}"


def doc_to_text_rag_expert_cot(doc: dict[str, Any]) -> str:
    """Expert-CoT with documents after the choices (the expertise variants' order), before the instruction."""
    documents = _documents(doc)
    if doc.get("rag_prompt") == "authors" and documents is not None:
        return _authors_expert_cot(doc, documents)
    body = doc_to_text_expert_cot(doc)
    if documents is None:
        return body
    last_choice = f"{doc['letters'][-1].upper()}. {doc['options'][-1]}\n"
    cut = body.rfind(last_choice)
    if cut < 0:  # the base prompt no longer lists choices that way: documents last, still shown
        return f"{body}\n{documents}\n"
    cut += len(last_choice)
    return f"{body[:cut]}\n{documents}\n\n{body[cut:]}"


# --- prompt length, counted for the items a run scores -------------------------------------------

# add_retrieval registers how its docs' prompts are counted; the first item scored loads the tokenizer.
# Counting when scoring, not when the data set is built, means a --limit 40 run counts 40 prompts.
_COUNTERS: dict[str, dict[str, Any]] = {}


def _counter(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    counter = _COUNTERS.get(str(doc.get("rag_counter") or ""))
    if counter is not None and counter.get("fit") is None:
        counter["fit"] = ContextFit(counter["metadata"], counter["max_gen_toks"], counter["cache_root"])
        counter["record"]["prompt_length"] = counter["fit"].method
    return counter


def prompt_tokens(doc: Mapping[str, Any]) -> tuple[int, int] | None:
    """(tokens of the item's whole prompt, system message included; the model's context limit), or None
    for a doc no loader of this process registered. Counts are cached per tokenizer by content."""
    started = time.perf_counter()
    counter = _counter(doc)
    if counter is None or doc.get("rag_missing"):
        return None
    text = (doc.get("rag_system") or "") + counter["prompt"](dict(doc))
    tokens = counter["fit"].count([text])[0]
    seconds = counter["record"]["seconds"]  # the results' config shows the counting's share of the run
    seconds["prompt_length"] = round(seconds.get("prompt_length", 0.0) + time.perf_counter() - started, 4)
    return tokens, counter["fit"].limit


# --- scoring -------------------------------------------------------------------------------------


def process_results_rag(
    doc: dict[str, Any], results: Sequence[Any], generation_kwargs: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """The set metrics plus retrieval diagnostics: ``retrieved_own_area`` (share of the item's chunks
    from its own subject-area files; none retrieved counts 0), ``retrieved_documents`` (chunks shown),
    ``no_documents`` (1 when none were shown) and ``prompt_too_long`` (the prompt and the generation
    budget exceed the model's context).

    ``generation_kwargs``: the settings lm-eval generated with (``--gen_kwargs`` included), where the
    pack's lm-eval compat layer passes them; else the task's budget when the data set was built."""
    metrics = process_results(doc, results)
    chunks = doc.get("rag_chunks") or []
    own = set(doc.get("rag_own_sources") or [])
    metrics["retrieved_own_area"] = sum(c["source"] in own for c in chunks) / len(chunks) if chunks else 0.0
    metrics["retrieved_documents"] = float(len(chunks))
    metrics["no_documents"] = float(not chunks)
    counted = (
        prompt_tokens(doc) if doc.get("prompt_tokens") is None else (doc["prompt_tokens"], doc.get("context_limit"))
    )
    budget = (generation_kwargs or {}).get("max_gen_toks", doc.get("rag_max_gen_toks"))
    if counted is not None and counted[1] and budget is not None:
        doc["prompt_tokens"], doc["context_limit"] = counted  # the logged sample shows them
        metrics["prompt_too_long"] = float(counted[0] + int(budget) > counted[1])
        doc["fits_context"] = not metrics["prompt_too_long"]
        counter = _COUNTERS.get(str(doc.get("rag_counter") or ""))
        if metrics["prompt_too_long"] and counter is not None and not counter.get("warned"):
            counter["warned"] = True  # once per task: the metric counts them all
            log.warning(
                "medeval: %s: item %s's prompt (%d tokens) and the generation budget (%d) exceed the model's "
                "context (%d); lm-eval cuts the prompt's start. The metric prompt_too_long gives the share; a "
                "smaller --gen_kwargs max_gen_toks or rag_k leaves more room (tasks/emsqa/README.md, 'k vs prompt length').",
                counter["task"] or "EMSQA RAG",
                doc["id"],
                counted[0],
                int(budget),
                counted[1],
            )
    else:
        metrics["prompt_too_long"] = float(not doc.get("fits_context", True))
    return metrics


process_results_rag.wants_generation_kwargs = True  # type: ignore[attr-defined]


# --- loaders -------------------------------------------------------------------------------------


def load_public_rag(**metadata: Any):
    """``custom_dataset`` for the public set with retrieval (the test split; validation unchanged)."""
    dataset = load_public(**metadata)
    return _dataset_with_retrieval(dataset, metadata)


def load_private_rag(**metadata: Any):
    return _dataset_with_retrieval(load_private(**metadata), metadata)


def check_task_owns_its_mode(metadata: Mapping[str, Any]) -> None:
    """``rag_mode`` is what distinguishes the RAG tasks (KB vs ExpertRAG filter-then-retrieve or
    retrieve-then-filter); lm-eval lets ``--metadata`` override a task's own metadata, which would run
    another setting under the task's name. A different mode is an error naming the task that has it."""
    source = metadata.get("config_source")
    config = own_task_config(source)
    own = (config.get("metadata") or {}).get("rag_mode")
    given = metadata.get("rag_mode")
    if own is None or given is None or str(given) == str(own):
        return
    with_mode = task_set_metadata().get("rag_mode", {}).get(str(given), [])
    task = config.get("task", Path(str(source)).stem)
    instead = f"run {' or '.join(with_mode)} instead" if with_mode else f"the modes are {', '.join(MODES)}"
    raise MedevalDataError(
        f"--metadata rag_mode={given!r}: each RAG task sets its own retrieval mode ({task} is {own!r}), so that "
        f"results under its name mean one setting; {instead}, and drop rag_mode from --metadata."
    )


def _dataset_with_retrieval(dataset: Any, metadata: Mapping[str, Any]):
    check_task_owns_its_mode(metadata)
    pass_generation_kwargs_to_process_results()  # so prompt_too_long sees --gen_kwargs max_gen_toks
    task_config = loading_task_config()
    max_gen_toks = _DEFAULT_MAX_GEN_TOKS
    if task_config is not None and isinstance(getattr(task_config, "generation_kwargs", None), dict):
        max_gen_toks = int(task_config.generation_kwargs.get("max_gen_toks", max_gen_toks))
    prompt = getattr(task_config, "doc_to_text", None)
    docs = dataset["test"].to_list()
    task = str(getattr(task_config, "task", "") or "")
    record = add_retrieval(
        docs, metadata, max_gen_toks, prompt if callable(prompt) else doc_to_text_rag_expert_cot, task
    )
    if task_config is not None:
        task_config.metadata = {**(task_config.metadata or {}), "rag": record}
    import datasets

    # the other splits as they came (the public validation pool stays unread until examples are drawn)
    return EmsqaSplits({**dataset, "test": datasets.Dataset.from_list(docs)})


def _cached_retrieval(
    index: Any, ids: Sequence[str], questions: Sequence[str], sources: Sequence[Sequence[str]] | None, cache_root: Path
) -> dict[str, list[dict[str, Any]]]:
    """Retrieve for every item, or read what an identical earlier run retrieved (same chunks, retriever,
    settings, items and areas): lm-eval runs of one task on many models retrieve once."""
    settings = index.settings
    queries = json.dumps([ids, questions, sources], ensure_ascii=False)
    spec = {
        "kind": "retrievals",
        "store": "npz",
        "chunks": index.version,
        "retriever": index.retriever.spec,
        "mode": settings.mode,
        "k": settings.k,
        "pool_factor": settings.pool_factor,
        "queries": hashlib.sha256(queries.encode()).hexdigest(),
    }

    def retrieve(folder: Path) -> None:
        # positions and scores as arrays: read back in a fraction of the time 3,721 JSON lines take
        hits = index.retrieve(questions, sources)
        np.savez(
            folder / "retrievals.npz",
            counts=np.asarray([len(h) for h in hits], dtype=np.int64),
            positions=np.asarray([p for h in hits for p, _ in h], dtype=np.int64),
            scores=np.asarray([s for h in hits for _, s in h], dtype=np.float64),
        )

    folder, _ = cached_build(cache_root, spec, retrieve)
    stored = np.load(folder / "retrievals.npz")
    positions, scores = stored["positions"].tolist(), stored["scores"].tolist()
    ends = np.cumsum(stored["counts"]).tolist()
    chunk_ids, chunk_sources = index.chunk_ids, index.chunk_sources
    out, start = {}, 0
    for item_id, end in zip(ids, ends):
        out[item_id] = [
            {"id": chunk_ids[p], "source": chunk_sources[p], "score": s}
            for p, s in zip(positions[start:end], scores[start:end])
        ]
        start = end
    return out


def check_writable_settings(metadata: Mapping[str, Any]) -> Path:
    """The index cache folder (``rag_cache_dir``), after checking that it and ``rag_save_retrievals``'s folder can
    be written: a one-line error naming the path and the setting, before anything is built."""
    cache_root = Path(setting(metadata, "rag_cache_dir", "") or default_cache_root()).expanduser()
    save_path = setting(metadata, "rag_save_retrievals")
    for key, folder in (
        ("rag_cache_dir", cache_root),
        ("rag_save_retrievals", save_path and Path(save_path).expanduser().parent),
    ):
        reason = folder is not None and folder != "" and unwritable_reason(folder)
        if reason:
            shown = cache_root if key == "rag_cache_dir" else save_path
            raise MedevalDataError(
                f"{key}: {shown} cannot be written ({reason}). Set {key} (--metadata or "
                f"MEDEVAL_{key.upper()}) to a path in a folder you can write to."
            )
    return cache_root


def add_retrieval(
    docs: list[dict[str, Any]],
    metadata: Mapping[str, Any],
    max_gen_toks: int = _DEFAULT_MAX_GEN_TOKS,
    prompt: Any = None,
    task: str = "",
) -> dict[str, Any]:
    """Retrieve for every doc (or read the precomputed retrievals) and store the result in it.

    Returns what the results' config records: how the documents were retrieved (``retrievals``: mode, k,
    areas, retriever, knowledge, chunking), what the prompts showed (``shown``), files, timings.
    """
    started = time.perf_counter()
    settings = retrieval_settings(metadata)
    style = prompt_style(metadata)
    files, origin = knowledge_files(metadata)
    present = {f.source for f in files}
    missing_files = [stem for stem in KNOWLEDGE_FILES if stem not in present]
    ids = [str(doc["id"]) for doc in docs]

    areas_setting = str(setting(metadata, "rag_areas", "gold"))
    if areas_setting == "gold":
        areas = {i: _check_areas(doc["category"], f"EMSQA item {i!r}") for i, doc in zip(ids, docs)}
    else:
        areas = read_predicted_areas(Path(areas_setting), ids)
    filtered = settings.mode != "global"
    sources = [[AREA_FILES[a] for a in areas[i] if AREA_FILES[a] in present] for i in ids]
    if missing_files:
        needed = [stem for stem in missing_files if stem != "terminology"]
        affected = sum(1 for i in ids if any(AREA_FILES[a] in needed for a in areas[i]))
        only = sum(1 for i in ids if areas[i] and all(AREA_FILES[a] in needed for a in areas[i]))
        message = (
            f"{_WHAT} at {origin} lacks {', '.join(f + '.json' for f in missing_files)}: "
            + (
                f"{affected} of {len(ids)} items have a subject area whose file is missing; in mode {settings.mode} "
                f"they get documents only from their other areas' files, and the {only} with no other area get "
                "none. "
                if filtered
                else "global retrieval searches the files present. "
            )
            + f"Add the missing file(s) to the folder to retrieve as the paper did ({KNOWLEDGE_SOURCE.how_to_get})"
        )
        if message not in _noticed:  # once per run, not once per RAG task of a group
            _noticed.add(message)
            log.warning("medeval: %s", message)

    cache_root = check_writable_settings(metadata)
    precomputed_path = setting(metadata, "rag_retrievals")
    index = open_index(files, settings, cache_root, _WHAT, _FIX, with_retriever=precomputed_path is None)
    header = retrieval_header(
        task, settings, files, index, areas_setting, [areas[i] for i in ids] if filtered else None
    )
    retrieve_started = time.perf_counter()
    if precomputed_path is None:
        retrieved = _cached_retrieval(
            index, ids, [doc["question"] for doc in docs], sources if filtered else None, cache_root
        )
    else:
        retrieved = precomputed_retrievals(Path(precomputed_path), header, ids, index)
    retrieve_seconds = time.perf_counter() - retrieve_started

    counter_key = f"{task or 'emsqa'}#{len(_COUNTERS)}"
    for item_id, doc, item_sources in zip(ids, docs, sources):
        doc["rag_own_sources"] = sorted({AREA_FILES[a] for a in doc["category"] if a in AREA_FILES})
        doc["rag_sources"] = sorted(set(item_sources)) if filtered else []
        doc["rag_chunks_version"] = index.version
        doc["rag_header"] = header  # a sample log given back as rag_retrievals is checked against it
        doc["rag_prompt"] = style
        doc["rag_counter"], doc["rag_max_gen_toks"] = counter_key, int(max_gen_toks)
        doc["prompt_tokens"], doc["context_limit"], doc["fits_context"] = None, None, True  # set when scored
        chunks = retrieved.get(item_id)
        if chunks is None:
            doc["rag_missing"] = str(precomputed_path)
            doc["rag_chunks"], doc["rag_context"], doc["rag_system"] = [], None, ""
            continue
        doc["rag_missing"] = ""
        stored = [index.chunks[index.position_of[c["id"]]] for c in chunks]
        doc["rag_chunks"] = [
            {"id": c["id"], "source": c.get("source", chunk.source), "score": float(c["score"])}
            for c, chunk in zip(chunks, stored)
        ]
        doc["rag_context"] = documents_block([{"title": c.title, "text": c.text} for c in stored], style)
        expert = (prompt or doc_to_text_rag_expert_cot) is not doc_to_text_rag_cot
        doc["rag_system"] = authors_system_message(doc, expert) if style == "authors" else ""

    save_path = setting(metadata, "rag_save_retrievals")
    if save_path:
        written = save_task_retrievals(
            Path(save_path), header, ((i, d["rag_chunks"]) for i, d in zip(ids, docs) if not d["rag_missing"])
        )
        log.info(
            "medeval: wrote the retrievals of %d items of %s to %s (reuse with rag_retrievals)",
            len(docs),
            task or "the task",
            written,
        )

    with_entry = [d for d in docs if not d["rag_missing"]]
    counts = [len(d["rag_chunks"]) for d in with_entry]
    none = sum(1 for n in counts if n == 0)
    shown_record = {
        "mode": settings.mode,
        "k": settings.k,
        "prompt": style,
        "items": len(with_entry),
        "documents_per_item": {
            "mean": round(sum(counts) / len(counts), 3) if counts else 0.0,
            "min": min(counts, default=0),
            "max": max(counts, default=0),
        },
        "no_documents": {"items": none, "share": round(none / len(with_entry), 4) if with_entry else 0.0},
    }
    if none:
        log.warning(
            "medeval: %s: %d of %d items (%.1f%%) got no documents (mode %s, k %d); the metric no_documents "
            "is their share",
            task or "EMSQA RAG",
            none,
            len(with_entry),
            100 * none / len(with_entry),
            settings.mode,
            settings.k,
        )
    record = {
        "chunks_version": index.version,
        "corpus_version": header["knowledge"],
        "settings": settings.record(),
        "areas": areas_setting,
        "retrievals": {k: v for k, v in header.items() if k != "chunks_version"},
        "shown": shown_record,
        "knowledge": origin,
        "files": {f.source: f.sha256 for f in files},
        "missing_files": missing_files,
        "retrievals_from": str(precomputed_path) if precomputed_path else None,
        "retrievals_saved_to": str(save_path) if save_path else None,
        "index_from_cache": not index.built,
        "prompt_length": "counted when each item is scored (prompt_too_long)",
        "seconds": {
            "index": round(index.seconds, 3),
            "retrieval": round(retrieve_seconds, 3),
            "total": round(time.perf_counter() - started, 3),
        },
    }
    _COUNTERS[counter_key] = {
        "task": task,
        "metadata": dict(metadata),
        "max_gen_toks": int(max_gen_toks),
        "cache_root": cache_root,
        "prompt": prompt or doc_to_text_rag_expert_cot,
        "fit": None,
        "record": record,
    }
    return record


def retrieval_header(
    task: str,
    settings: RetrievalSettings,
    files: Sequence[CorpusFile],
    index: Any,
    areas_setting: str,
    areas: Sequence[Sequence[str]] | None,
) -> dict[str, Any]:
    """How the task's documents are retrieved: what a retrievals file must match to be given back."""
    retriever = index.retriever if index.retriever is not None else settings.make_retriever()
    if areas is None:
        areas_used = "not used (global retrieval)"
    else:
        digest = hashlib.sha256(json.dumps([list(a) for a in areas]).encode()).hexdigest()[:16]
        areas_used = f"{'gold' if areas_setting == 'gold' else 'predicted'} (items' areas sha256 {digest})"
    mode = (
        settings.mode if settings.mode != "retrieve_then_filter" else f"{settings.mode} (pool {settings.pool_factor}k)"
    )
    return {
        "task": task,
        "mode": mode,
        "k": settings.k,
        "areas": areas_used,
        "retriever": retriever.spec,
        "knowledge": corpus_version(files),
        "chunking": settings.chunking(),
        "chunks_version": index.version,
    }


def precomputed_retrievals(
    path: Path, header: Mapping[str, Any], ids: Sequence[str], index: Any
) -> dict[str, list[dict[str, Any]]]:
    """The task's retrievals from a file of a previous run: its own section, else one made the same way;
    refused with the first difference when none was (another mode, k, areas, retriever, knowledge, chunking)."""
    sections = read_sections(path)
    task = header["task"]
    own = [s for s in sections if s.task == task]
    candidates = own or sections
    chosen = next((s for s in candidates if header_difference(s.header, header) is None), None)
    if chosen is None:
        first = candidates[0]
        holds = "" if own else f" (the file holds {', '.join(sorted({str(s.task) for s in sections}))})"
        raise MedevalDataError(
            f"{path}: refused for {task or 'this task'}: its retrievals were made another way, "
            f"{header_difference(first.header, header)}{holds}. Give the file a run with these settings saved, or "
            "retrieve again without rag_retrievals."
        )
    known_ids = set(ids)
    unknown = [i for i in chosen.items if i not in known_ids]
    if unknown:
        raise MedevalDataError(
            f"{path}: item id {unknown[0]!r} is not in the evaluated set ({len(unknown)} such ids): "
            "the file comes from another data set. Use the file of a run over the same items."
        )
    for item_id, chunks in chosen.items.items():
        if len(chunks) > header["k"]:
            raise MedevalDataError(
                f"{path}: item {item_id!r} has {len(chunks)} chunks, more than k {header['k']}: the "
                "file was changed after it was written. Save it again (rag_save_retrievals)."
            )
        for chunk in chunks:
            if chunk["id"] not in index.position_of:
                raise MedevalDataError(
                    f"{path}: item {item_id!r}: chunk {chunk['id']!r} is not in {_WHAT} as chunked now. "
                    "Use the same knowledge files and rag_chunk_* settings as the run that wrote the file."
                )
    return chosen.items
