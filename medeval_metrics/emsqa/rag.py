"""EMSQA with retrieval: the paper's knowledge-base RAG (global) and ExpertRAG (filtered by the item's
subject areas) settings.

The loaders retrieve once per item when the dataset is built and store in each doc what it got:
``rag_chunks`` (chunk ids, source files and scores: visible in ``--log_samples``), ``rag_context``
(the documents block the prompt shows) and the prompt length. Settings come from ``--metadata``
(or ``MEDEVAL_<KEY>``), first match wins; the task YAML sets ``rag_mode``:

- ``emsqa_knowledge_path``: folder of the knowledge files (default: the Hub dataset EMS-Knowledge);
- ``rag_retriever``: ``bm25`` (default) or ``medcpt`` (dense; ``rag_query_encoder`` /
  ``rag_article_encoder`` name other encoders); ``rag_k`` (32), ``rag_chunk_tokens`` (512),
  ``rag_chunk_overlap`` (128) (the removed settings: ``knowledge.RAG_REMOVED``);
- ``rag_areas``: ``gold`` (the items' own subject areas, the paper's "GT" rows) or a file of
  predicted areas per item id (the "Filter" rows);
- ``rag_save_retrievals``: write the retrievals to this file; ``rag_retrievals``: read them from
  such a file (or a run's samples_*.jsonl) instead of retrieving;
- ``rag_cache_dir``: where built indexes are kept (default ~/.cache/medeval/retrieval).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from medeval_metrics.context_fit import ContextFit
from medeval_metrics.data import MedevalDataError, download_hub_file, setting
from medeval_metrics.emsqa.data import EmsqaSplits, load_private, load_public
from medeval_metrics.emsqa.knowledge import AREA_FILES, KNOWLEDGE_FILES, KNOWLEDGE_SOURCE, RAG_REMOVED
from medeval_metrics.emsqa.prompts import doc_to_text_cot, doc_to_text_expert_cot
from medeval_metrics.emsqa.scoring import process_results
from medeval_metrics.emsqa.retrieval import (
    MODES,
    CorpusFile,
    RetrievalSettings,
    cached_build,
    corpus_version,
    default_cache_root,
    file_sha256,
    open_index,
    read_retrievals,
    write_retrievals,
)
from medeval_metrics.settings import refuse_removed
from medeval_metrics.files import unwritable_reason
from medeval_metrics.task_yaml import own_task_config, task_set_metadata
from medeval_metrics.lm_eval_compat import loading_task_config, pass_generation_kwargs_to_process_results

log = logging.getLogger("medeval_metrics.emsqa")

_WHAT = "the EMSQA knowledge base"
_FIX = f"Replace it with the published file. {KNOWLEDGE_SOURCE.how_to_get}"
_noticed: set[str] = set()  # warnings already given in this process
_SETTINGS = {  # metadata key -> (RetrievalSettings field, type)
    "rag_retriever": ("retriever", str), "rag_mode": ("mode", str), "rag_k": ("k", int),
    "rag_chunk_tokens": ("chunk_tokens", int), "rag_chunk_overlap": ("chunk_overlap", int),
    "rag_query_encoder": ("query_encoder", str), "rag_article_encoder": ("article_encoder", str),
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
        files = [CorpusFile(stem, present[stem], file_sha256(present[stem])) for stem in KNOWLEDGE_FILES if stem in present]
        if not files:
            raise MedevalDataError(f"{local}: none of the knowledge files ({', '.join(KNOWLEDGE_FILES)}) is here. {KNOWLEDGE_SOURCE.how_to_get}")
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
    from medeval_metrics.retrieval.precomputed import checked_loads, checked_text

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
                        raise MedevalDataError(f"{path}: line {number} of {description} is a "
                                               f"{type(record).__name__}, not an object. {fix}")
                    entries.append((record.get("id"), record.get("areas", record.get("category"))))
    except json.JSONDecodeError as exc:
        raise MedevalDataError(f"{path}: the predicted-areas file is not valid JSON (line {exc.lineno}: {exc.msg}). {fix}") from exc
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


_NO_DOCUMENTS = "Relevant documents: none were retrieved for this question."
_DOCUMENTS_HEADER = "Relevant documents:"


def document_line(chunk: Mapping[str, Any]) -> str:
    return f"- {chunk['title']}: {chunk['text']}"


def documents_block(chunks: Sequence[Mapping[str, Any]]) -> str:
    """The documents as the prompt lists them: "title: text" entries (the authors' format)."""
    if not chunks:
        return _NO_DOCUMENTS
    return _DOCUMENTS_HEADER + "\n" + "\n".join(document_line(c) for c in chunks)


def _documents(doc: Mapping[str, Any]) -> str | None:
    if doc.get("rag_missing"):
        raise MedevalDataError(
            f"EMSQA item {doc['id']!r} has no entry in the precomputed-retrievals file ({doc['rag_missing']}). "
            "Use the file of a run over the same items, or retrieve again without rag_retrievals."
        )
    return doc.get("rag_context")


def doc_to_text_rag_cot(doc: dict[str, Any]) -> str:
    """KB + CoT: the retrieved documents, then the CoT prompt (plain variants show them first)."""
    documents = _documents(doc)
    body = doc_to_text_cot(doc)
    return body if documents is None else f"{documents}\n\n{body}"


def doc_to_text_rag_expert_cot(doc: dict[str, Any]) -> str:
    """Expert-CoT with documents after the choices (the expertise variants' order), before the instruction."""
    documents = _documents(doc)
    body = doc_to_text_expert_cot(doc)
    if documents is None:
        return body
    last_choice = f"{doc['letters'][-1].upper()}. {doc['options'][-1]}\n"
    cut = body.rfind(last_choice)
    if cut < 0:  # the base prompt no longer lists choices that way: documents last, still shown
        return f"{body}\n{documents}\n"
    cut += len(last_choice)
    return f"{body[:cut]}\n{documents}\n\n{body[cut:]}"


# --- scoring -------------------------------------------------------------------------------------


def process_results_rag(doc: dict[str, Any], results: Sequence[Any],
                        generation_kwargs: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The set metrics plus retrieval diagnostics: ``retrieved_own_area`` (share of the item's chunks
    from its own subject-area files; none retrieved counts 0), ``retrieved_documents`` (chunks shown)
    and ``prompt_too_long`` (the prompt and the generation budget exceed the model's context).

    ``generation_kwargs``: the settings lm-eval generated with (``--gen_kwargs`` included), where the
    pack's lm-eval compat layer passes them; else the budget known when the dataset was built."""
    metrics = process_results(doc, results)
    budget = (generation_kwargs or {}).get("max_gen_toks")
    chunks = doc.get("rag_chunks") or []
    own = set(doc.get("rag_own_sources") or [])
    metrics["retrieved_own_area"] = sum(c["source"] in own for c in chunks) / len(chunks) if chunks else 0.0
    metrics["retrieved_documents"] = float(len(chunks))
    if budget is not None and doc.get("context_limit"):
        metrics["prompt_too_long"] = float(doc["prompt_tokens"] + int(budget) > doc["context_limit"])
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
    record = add_retrieval(docs, metadata, max_gen_toks, prompt if callable(prompt) else doc_to_text_rag_expert_cot)
    if task_config is not None:
        task_config.metadata = {**(task_config.metadata or {}), "rag": record}
    import datasets

    # the other splits as they came (the public validation pool stays unread until examples are drawn)
    return EmsqaSplits({**dataset, "test": datasets.Dataset.from_list(docs)})


def _cached_retrieval(index: Any, ids: Sequence[str], questions: Sequence[str], sources: Sequence[Sequence[str]] | None,
                      cache_root: Path) -> dict[str, list[dict[str, Any]]]:
    """Retrieve for every item, or read what an identical earlier run retrieved (same chunks, retriever,
    settings, items and areas): lm-eval runs of one task on many models retrieve once."""
    settings = index.settings
    queries = json.dumps([ids, questions, sources], ensure_ascii=False)
    spec = {"kind": "retrievals", "chunks": index.version, "retriever": index.retriever.spec, "mode": settings.mode,
            "k": settings.k, "pool_factor": settings.pool_factor, "queries": hashlib.sha256(queries.encode()).hexdigest()}

    def retrieve(folder: Path) -> None:
        hits = index.retrieve(questions, sources)
        items = ((i, [{"id": index.chunks[p].id, "source": index.chunks[p].source, "score": s} for p, s in item_hits])
                 for i, item_hits in zip(ids, hits))
        write_retrievals(folder / "retrievals.jsonl", {"chunks_version": index.version}, items)

    folder, _ = cached_build(cache_root, spec, retrieve)
    return read_retrievals(folder / "retrievals.jsonl", index.version)


def check_writable_settings(metadata: Mapping[str, Any]) -> Path:
    """The index cache folder (``rag_cache_dir``), after checking that it and ``rag_save_retrievals``'s folder can
    be written: a one-line error naming the path and the setting, before anything is built."""
    cache_root = Path(setting(metadata, "rag_cache_dir", "") or default_cache_root()).expanduser()
    save_path = setting(metadata, "rag_save_retrievals")
    for key, folder in (("rag_cache_dir", cache_root), ("rag_save_retrievals", save_path and Path(save_path).expanduser().parent)):
        reason = folder is not None and folder != "" and unwritable_reason(folder)
        if reason:
            shown = cache_root if key == "rag_cache_dir" else save_path
            raise MedevalDataError(f"{key}: {shown} cannot be written ({reason}). Set {key} (--metadata or "
                                   f"MEDEVAL_{key.upper()}) to a path in a folder you can write to.")
    return cache_root


def add_retrieval(docs: list[dict[str, Any]], metadata: Mapping[str, Any], max_gen_toks: int = _DEFAULT_MAX_GEN_TOKS,
                  prompt: Any = None) -> dict[str, Any]:
    """Retrieve for every doc (or read the precomputed retrievals) and store the result in it.

    Returns what the results' config records: settings, retriever, corpus version, files, timings.
    """
    started = time.perf_counter()
    settings = retrieval_settings(metadata)
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
            + (f"{affected} of {len(ids)} items have a subject area whose file is missing; in mode {settings.mode} "
               f"they get documents only from their other areas' files, and the {only} with no other area get "
               "none. " if filtered else "global retrieval searches the files present. ")
            + f"Add the missing file(s) to the folder to retrieve as the paper did ({KNOWLEDGE_SOURCE.how_to_get})"
        )
        if message not in _noticed:  # once per run, not once per RAG task of a group
            _noticed.add(message)
            log.warning("medeval: %s", message)

    cache_root = check_writable_settings(metadata)
    precomputed_path = setting(metadata, "rag_retrievals")
    index = open_index(files, settings, cache_root, _WHAT, _FIX, with_retriever=precomputed_path is None)
    retrieve_started = time.perf_counter()
    if precomputed_path is None:
        retrieved = _cached_retrieval(index, ids, [doc["question"] for doc in docs], sources if filtered else None, cache_root)
    else:
        retrieved = read_retrievals(Path(precomputed_path), index.version)
        known_ids = set(ids)
        unknown = [i for i in retrieved if i not in known_ids]
        if unknown:
            raise MedevalDataError(
                f"{precomputed_path}: item id {unknown[0]!r} is not in the evaluated set ({len(unknown)} such ids): "
                "the file comes from another data set. Use the file of a run over the same items."
            )
        for item_id, chunks in retrieved.items():
            for chunk in chunks:
                if chunk["id"] not in index.position_of:
                    raise MedevalDataError(
                        f"{precomputed_path}: item {item_id!r}: chunk {chunk['id']!r} is not in {_WHAT} as chunked now. "
                        "Use the same knowledge files and rag_chunk_* settings as the run that wrote the file."
                    )
    retrieve_seconds = time.perf_counter() - retrieve_started

    lines: dict[str, list[str]] = {}  # the document lines each item shows, for counting prompt length
    for item_id, doc, item_sources in zip(ids, docs, sources):
        doc["rag_own_sources"] = sorted({AREA_FILES[a] for a in doc["category"] if a in AREA_FILES})
        doc["rag_sources"] = sorted(set(item_sources)) if filtered else []
        doc["rag_chunks_version"] = index.version
        chunks = retrieved.get(item_id)
        if chunks is None:
            doc["rag_missing"] = str(precomputed_path)
            doc["rag_chunks"], doc["rag_context"] = [], None
            continue
        doc["rag_missing"] = ""
        doc["rag_chunks"] = [{"id": c["id"], "source": c.get("source", index.chunks[index.position_of[c["id"]]].source),
                              "score": float(c["score"])} for c in chunks]
        shown = [{"title": c.title, "text": c.text} for c in (index.chunks[index.position_of[c["id"]]] for c in chunks)]
        doc["rag_context"] = documents_block(shown)
        lines[item_id] = [document_line(c) for c in shown]

    save_path = setting(metadata, "rag_save_retrievals")
    header = {"chunks_version": index.version, "corpus_version": corpus_version(files),
              "settings": settings.record(), "areas": areas_setting}
    if save_path:
        written = write_retrievals(Path(save_path), header, ((i, d["rag_chunks"]) for i, d in zip(ids, docs) if not d["rag_missing"]))
        log.info("medeval: wrote the retrievals of %d items to %s (reuse with rag_retrievals)", len(docs), written)

    fit = ContextFit(metadata, max_gen_toks, cache_root)
    prompt = prompt or doc_to_text_rag_expert_cot  # the task's own prompt when lm-eval loads it
    shown = [(doc, lines[i]) for i, doc in zip(ids, docs) if not doc["rag_missing"]]
    counted = iter(fit.count_with_documents(
        [prompt({**doc, "rag_context": None}) for doc, _ in shown],
        [_DOCUMENTS_HEADER if item_lines else _NO_DOCUMENTS for _, item_lines in shown],
        [item_lines for _, item_lines in shown],
    ))
    for doc in docs:
        doc["prompt_tokens"] = next(counted) if not doc["rag_missing"] else 0
        doc["fits_context"] = doc["rag_missing"] != "" or fit.fits(doc["prompt_tokens"])
        doc["context_limit"] = fit.limit
    too_long = sum(not doc["fits_context"] for doc in docs)
    if too_long:
        # --gen_kwargs is applied after the data set is built: the budget here is the task's own, and
        # prompt_too_long recounts with the one the run used
        log.warning("medeval: %d of %d EMSQA prompts with %d document%s do not fit the model's context with the "
                    "task's generation budget (%s); lm-eval will cut their start. A smaller --gen_kwargs "
                    "max_gen_toks leaves more room (the metric prompt_too_long counts with the budget the run "
                    "used); or lower rag_k (see tasks/emsqa/README.md, 'k vs prompt length').",
                    too_long, len(docs), settings.k, "" if settings.k == 1 else "s", fit.method)
    return {
        **header,
        "knowledge": origin,
        "files": {f.source: f.sha256 for f in files},
        "missing_files": missing_files,
        "retrievals_from": str(precomputed_path) if precomputed_path else None,
        "retrievals_saved_to": str(save_path) if save_path else None,
        "index_from_cache": not index.built,
        "prompt_length": fit.method,
        "seconds": {"index": round(index.seconds, 3), "retrieval": round(retrieve_seconds, 3),
                    "total": round(time.perf_counter() - started, 3)},
    }
