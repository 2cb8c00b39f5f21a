"""EMSQA with retrieval: the paper's knowledge-base RAG (global) and ExpertRAG (filtered by the item's
subject areas) settings.

The loaders retrieve for an item when lm-eval first reaches it (``RetrievedSplit``: a ``--limit 40`` run
retrieves for 40 items) and store in each doc what it got:
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
  knowledge or chunking; or from a file of another retriever (an external section: its header names the
  retriever and the knowledge digest and chunking, which ``medeval emsqa-retrievals-header --name NAME``
  prints), whose documents are shown as given;
- ``rag_cache_dir``: where built indexes are kept (default ~/.cache/medeval/retrieval).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import weakref
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from medeval_metrics.context_fit import PromptCounter, TaskFit, task_prompt
from medeval_metrics.data import MedevalDataError, download_hub_file, setting
from medeval_metrics.emsqa.data import EmsqaSplits, load_private, load_public
from medeval_metrics.emsqa.knowledge import AREA_FILES, KNOWLEDGE_FILES, KNOWLEDGE_SOURCE, RAG_REMOVED
from medeval_metrics.emsqa.prompts import doc_to_text_cot, doc_to_text_expert_cot
from medeval_metrics.emsqa.retrieval import (
    MODES,
    CorpusFile,
    RetrievalSettings,
    corpus_version,
    default_cache_root,
    file_sha256,
    open_index,
)
from medeval_metrics.emsqa.retrieval.precomputed import (
    EXTERNAL_FIELDS,
    FORMAT,
    Section,
    check_save_target,
    external_name,
    read_sections,
    save_task_retrievals,
    section_difference,
)
from medeval_metrics.emsqa.scoring import process_results
from medeval_metrics.files import unwritable_reason
from medeval_metrics.lm_eval_compat import loading_task
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
    problems = []  # all of them at once: a run refused for one typo should not be refused again for the next
    for key, (name, kind) in _SETTINGS.items():
        value = setting(metadata, key)
        if value is None:
            continue
        whole = kind is not int or (not isinstance(value, bool) and re.fullmatch(r"\s*-?\d+\s*", str(value)))
        try:
            if not whole:  # int(3.9) is 3 and int(True) is 1: a typo must not run another k
                raise ValueError(value)
            values[name] = kind(value)
        except (TypeError, ValueError):
            what = "a whole number" if kind is int else "text"
            example = getattr(RetrievalSettings(), name)  # the default, e.g. rag_chunk_tokens=512
            problems.append(f"{key}={value!r} is not {what}; e.g. {key}={example} (see tasks/emsqa/README.md).")
    if problems:
        raise MedevalDataError(" ".join(problems))
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
        raw = None
        if text.lstrip().startswith("{") and "\n{" not in text.strip():
            raw = checked_loads(text, path, description)
        if isinstance(raw, dict) and not ("id" in raw and ("areas" in raw or "category" in raw)):
            entries = list(raw.items())  # {id: [areas]}; one {"id", "areas"} line is JSON Lines
        elif raw is not None and not isinstance(raw, dict):
            entries = None
        else:
            entries = []
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        record = checked_loads(line, path, description, f" (line {number})")
                    except json.JSONDecodeError as exc:  # its line number counts within this one line
                        raise MedevalDataError(
                            f"{path}: line {number} of {description} is not valid JSON ({exc.msg}). {fix}"
                        ) from exc
                    if not isinstance(record, dict):
                        raise MedevalDataError(
                            f"{path}: line {number} of {description} is a {type(record).__name__}, not an object. {fix}"
                        )
                    if record.get("id") is None:
                        raise MedevalDataError(f"{path}: line {number} of {description} has no 'id'. {fix}")
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
            "Give every item the run reaches a line (an empty chunk list shows none): use the file of a run over the "
            "same items, or retrieve again without rag_retrievals."
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
    return _to_be_counted(doc, _rag_cot(doc))


def doc_to_text_rag_expert_cot(doc: dict[str, Any]) -> str:
    """Expert-CoT with documents after the choices (the expertise variants' order), before the instruction."""
    return _to_be_counted(doc, _rag_expert_cot(doc))


def _rag_cot(doc: Mapping[str, Any]) -> str:
    documents = _documents(doc)
    if doc.get("rag_prompt") == "authors" and documents is not None:
        return _authors_cot(doc, documents)
    body = doc_to_text_cot(doc)
    return body if documents is None else f"{documents}\n\n{body}"


def _rag_expert_cot(doc: Mapping[str, Any]) -> str:
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

# TaskRetrieval registers how its docs' prompts are counted (context_fit.PromptCounter); the first item scored
# counts the prompts lm-eval rendered, with the tokenizer the task's metadata names (lm-eval merges --model_args
# into it; else a labelled estimate) and the budget its generation_kwargs hold: a --limit 40 run counts 40 prompts.
_FIELD = "rag_counter"  # the doc's field naming its task's counter (the task's name)


class _RagCounter(PromptCounter):
    """A RAG task's counter, with the results' record it reports the count's method and seconds in."""

    def __init__(self, record: dict[str, Any], *args: Any) -> None:
        super().__init__(*args)
        self.record = record


def _registered(doc: Mapping[str, Any]) -> _RagCounter | None:
    counter = PromptCounter.of(doc, _FIELD)
    return counter if isinstance(counter, _RagCounter) else None


def _to_be_counted(doc: Mapping[str, Any], prompt: str) -> str:
    # lm-eval renders the prompt of each item it will score when it builds the requests (and of no other:
    # not those --samples skips); the first item scored counts them all in one call
    counter = _registered(doc)
    if counter is not None and not doc.get("rag_missing"):
        counter.note(doc, prompt)
    return prompt


def prompt_tokens(doc: Mapping[str, Any], max_gen_toks: int | None = None) -> tuple[int, int] | None:
    """(tokens of the item's prompt, system message included, few-shot examples not; the model's context limit), or None
    for a doc no loader of this process registered. Counts are cached per tokenizer by content.

    ``max_gen_toks``: a budget to reserve instead of the one the task's ``generation_kwargs`` hold when scored
    (``--gen_kwargs`` included)."""
    started = time.perf_counter()
    counter = _registered(doc)
    if counter is None:
        return None
    if counter.use(max_gen_toks):  # the first count, or the task scored again with other settings
        counter.record["prompt_length"] = counter.fit.method
    if doc.get("rag_missing"):  # no retrievals for the item: nothing shown to count
        return None
    count = counter.count(doc)  # with every prompt noted: a batch is tokenized in parallel (40 in half the time)
    seconds = counter.record["seconds"]  # the results' config shows the counting's share of the run
    seconds["prompt_length"] = round(seconds.get("prompt_length", 0.0) + time.perf_counter() - started, 4)
    return count, counter.fit.limit


# --- scoring -------------------------------------------------------------------------------------


def process_results_rag(
    doc: dict[str, Any], results: Sequence[Any], generation_kwargs: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """The set metrics plus retrieval diagnostics: ``retrieved_own_area`` (share of the item's chunks
    from its own subject-area files; none retrieved counts 0), ``retrieved_documents`` (chunks shown),
    ``no_documents`` (1 when none were shown) and ``prompt_too_long`` (the prompt and the generation
    budget exceed the model's context).

    The budget is the one the task's ``generation_kwargs`` hold when the item is scored (``--gen_kwargs``
    included; lm-eval calls this with the doc and results only). ``generation_kwargs``: a caller's own (a
    logged doc scored again, whose count it keeps)."""
    metrics = process_results(doc, results)
    chunks = doc.get("rag_chunks") or []
    own = set(doc.get("rag_own_sources") or [])
    metrics["retrieved_own_area"] = sum(c["source"] in own for c in chunks) / len(chunks) if chunks else 0.0
    metrics["retrieved_documents"] = float(len(chunks))
    metrics["no_documents"] = float(not chunks)
    given = (generation_kwargs or {}).get("max_gen_toks")
    # counted (a lookup once its batch is) with the settings the task holds now, even if the doc holds an earlier
    # run's count: the split keeps its docs, and a task object evaluated again must not keep the first run's
    counted = prompt_tokens(doc, None if given is None else int(given))
    counter = _registered(doc)
    budget = counter.fit.max_gen_toks if counted is not None and counter is not None and counter.fit else given
    if counted is None and doc.get("prompt_tokens") is not None:  # a logged doc read back where no task counts
        counted = (doc["prompt_tokens"], doc.get("context_limit"))
    if counted is not None and counted[1] and budget is not None:
        doc["prompt_tokens"], doc["context_limit"] = counted  # the logged sample shows them
        metrics["prompt_too_long"] = float(counted[0] + int(budget) > counted[1])
        doc["fits_context"] = not metrics["prompt_too_long"]
        if metrics["prompt_too_long"] and counter is not None and not counter.warned:
            counter.warned = True  # once per task and model: the metric counts them all
            log.warning(
                "medeval: %s: item %s's prompt (%d tokens) and the generation budget (%d) exceed the model's "
                "context (%d); lm-eval cuts the prompt's start. The metric prompt_too_long gives the share; a "
                "smaller --gen_kwargs max_gen_toks or rag_k leaves more room (tasks/emsqa/README.md, 'k vs prompt length').",
                counter.task or "EMSQA RAG",
                doc["id"],
                counted[0],
                int(budget),
                counted[1],
            )
    else:
        metrics["prompt_too_long"] = float(doc.get("fits_context") is False)  # None: not counted (no retrievals)
    return metrics


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
    # the task lm-eval builds: its name, what renders its prompts, and (read when scored) its metadata and budget
    lm_task = loading_task()
    task_config = getattr(lm_task, "config", None)
    max_gen_toks = _DEFAULT_MAX_GEN_TOKS
    if task_config is not None and isinstance(getattr(task_config, "generation_kwargs", None), dict):
        max_gen_toks = int(task_config.generation_kwargs.get("max_gen_toks", max_gen_toks))
    prompt = getattr(task_config, "doc_to_text", None)
    test = dataset["test"]
    docs = test.to_list()
    task = str(getattr(task_config, "task", "") or "")
    retrieval = TaskRetrieval(docs, metadata, max_gen_toks, prompt if callable(prompt) else None, task, lm_task)
    if task_config is not None:
        task_config.metadata = {**(task_config.metadata or {}), "rag": retrieval.record}
    # the other splits as they came (the public validation pool stays unread until examples are drawn)
    return EmsqaSplits({**dataset, "test": RetrievedSplit(docs, list(test.features), retrieval)})


class RetrievedSplit(Sequence):
    """A RAG task's test split whose items are retrieved for when lm-eval first reaches them: a
    ``--limit 40`` run retrieves 40 items, not 3,721 (lm-eval slices the split's iterator). lm-eval's
    ``--samples`` and multi-process runs iterate past the items they keep, so those retrieve for all.

    lm-eval needs of a split only ``features`` (names), ``len``, indexing and iteration. When an
    iteration ends (or the split is dropped, or at exit) the task's retrievals are saved and its
    no-documents line logged.
    """

    def __init__(self, docs: list[dict[str, Any]], features: Sequence[str], retrieval: TaskRetrieval) -> None:
        self._docs, self.retrieval = docs, retrieval
        retrieval.splits += 1
        self.features = {name: None for name in [*features, *_RAG_FIELDS]}
        # when the split goes (the task is dropped) or at exit: the last items reached are saved, then the
        # index is freed (an atexit hook would keep every task's index of a long-lived process)
        weakref.finalize(self, retrieval.release)

    def example_docs(self) -> list[dict[str, Any]]:
        """The items as few-shot examples (a private task draws them from its own set): without documents,
        like the public tasks' validation examples, and without retrieving for the whole set."""
        return [{k: v for k, v in doc.items() if k not in _RAG_FIELDS} for doc in self._docs]

    def __len__(self) -> int:
        return len(self._docs)

    def filter(self, function: Any, **kwargs: Any) -> RetrievedSplit:
        """Like ``datasets.Dataset.filter`` (a user's ``process_docs`` keeping some items): still lazy."""
        kept = [doc for doc in self._docs if function({k: v for k, v in doc.items() if k not in _RAG_FIELDS})]
        return RetrievedSplit(kept, [k for k in self.features if k not in _RAG_FIELDS], self.retrieval)

    def __getattr__(self, name: str) -> Any:
        # anything else a datasets.Dataset offers (.map, .select, ...): on the whole split, retrieved
        if name.startswith("_") or name in ("retrieval", "features"):
            raise AttributeError(name)
        import datasets

        return getattr(datasets.Dataset.from_list([self[i] for i in range(len(self))]), name)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, str):  # a column, as a Dataset gives it
            return [self[i][index] for i in range(len(self._docs))]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._docs)))]
        doc = self._docs[index]
        if "rag_chunks" not in doc:
            self.retrieval.fill([doc])
        # a copy, as a Dataset row is: what scoring writes in it (the count, for the logged sample) stays with
        # that run's sample, not rewritten by the task object's next evaluation
        return dict(doc)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for index in range(len(self._docs)):
                yield self[index]
        finally:  # also when lm-eval stops at --limit: the generator is closed when dropped
            self.retrieval.finish_or_report()


# what each doc gets (besides its own fields)
_RAG_FIELDS = (
    "rag_own_sources",
    "rag_sources",
    "rag_chunks_version",
    "rag_header",
    "rag_prompt",
    "rag_counter",
    "prompt_tokens",
    "context_limit",
    "fits_context",
    "rag_missing",
    "rag_chunks",
    "rag_context",
    "rag_system",
)


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
    retrieval = TaskRetrieval(docs, metadata, max_gen_toks, prompt, task)
    retrieval.fill(docs)
    retrieval.finish()
    return retrieval.record


class TaskRetrieval:
    """One RAG task's retrieval. Made once per task, over all its items: settings, knowledge files, index,
    the header a retrievals file must match, and the results' record. ``fill`` retrieves for the docs
    given (stored in each doc); ``record["shown"]`` counts the docs filled so far; ``finish`` saves the
    retrievals (``rag_save_retrievals``) and logs the items that got no document."""

    def __init__(
        self,
        docs: Sequence[Mapping[str, Any]],
        metadata: Mapping[str, Any],
        max_gen_toks: int = _DEFAULT_MAX_GEN_TOKS,
        prompt: Any = None,
        task: str = "",
        lm_task: Any = None,
    ) -> None:
        started = time.perf_counter()
        self.task, self.metadata = task, metadata
        self.settings = settings = retrieval_settings(metadata)
        self.style = prompt_style(metadata)
        files, origin = knowledge_files(metadata)
        self.present = present = {f.source for f in files}
        missing_files = [stem for stem in KNOWLEDGE_FILES if stem not in present]
        ids = [str(doc["id"]) for doc in docs]

        areas_setting = str(setting(metadata, "rag_areas", "gold"))
        if areas_setting == "gold":
            if {a for doc in docs for a in doc["category"]} - AREA_FILES.keys():  # one pass; then the item named
                for i, doc in zip(ids, docs):
                    _check_areas(doc["category"], f"EMSQA item {i!r}")
            self.areas = {i: list(doc["category"]) for i, doc in zip(ids, docs)}
        else:
            self.areas = read_predicted_areas(Path(areas_setting), ids)
        areas = self.areas
        self.filtered = filtered = settings.mode != "global"
        if missing_files:
            needed = {stem for stem in missing_files if stem != "terminology"}
            kinds = Counter(tuple(areas[i]) for i in ids) if filtered else Counter()  # a few dozen area sets
            affected = sum(n for k, n in kinds.items() if any(AREA_FILES[a] in needed for a in k))
            only = sum(n for k, n in kinds.items() if k and all(AREA_FILES[a] in needed for a in k))
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
        self.index = index = open_index(
            files, settings, cache_root, _WHAT, _FIX, with_retriever=precomputed_path is None
        )
        self.header = retrieval_header(
            task, settings, files, index, areas_setting, [areas[i] for i in ids] if filtered else None
        )
        self.precomputed_path = precomputed_path
        section = (
            None if precomputed_path is None else precomputed_section(Path(precomputed_path), self.header, ids, index)
        )
        self.precomputed = None if section is None else section.items
        # the header the documents shown were made under: an external retriever's (its samples and a file saved
        # again say so, and give it back as external), else how this run retrieves
        self.external = external_name(section.header) if section is not None else None
        self.made_under = self.header
        if self.external is not None and section is not None and section.header is not None:
            self.made_under = {k: v for k, v in section.header.items() if k in EXTERNAL_FIELDS} | {"task": task}
            log.warning(  # on the console: these scores are not the pack's retrieval's
                "medeval: %s: the documents come from the external retriever %r (%s), shown in its order",
                task or "EMSQA RAG",
                self.external,
                precomputed_path,
            )
        self.save_path = setting(metadata, "rag_save_retrievals")
        if self.save_path:
            check_save_target(Path(self.save_path))  # a file that is not ours is refused now, not at the end
        self._save_failed = False
        self.splits = 0  # the RetrievedSplits alive over this task's items (release)
        self.expert = (prompt or doc_to_text_rag_expert_cot) is not doc_to_text_rag_cot
        self.max_gen_toks = int(max_gen_toks)
        self.saved: dict[str, list[dict[str, Any]]] = {}  # what rag_save_retrievals writes
        self._written = self._reported = -1  # how many items the file / the log line had
        # items per number of documents shown: the record is updated on every fill (per item under --limit), so
        # a list of all items' counts, summed each time, made a full run's 3,721 fills quadratic
        self._counts: Counter[int] = Counter()
        self.record = {
            "chunks_version": index.version,
            "corpus_version": self.header["knowledge"],
            "settings": settings.record() | ({"retriever": "external"} if self.external is not None else {}),
            "areas": areas_setting,
            "retrievals": {k: v for k, v in self.made_under.items() if k != "chunks_version"},
            "external_retriever": self.external,  # the name an external file's header gives, else None
            "shown": {},
            "knowledge": origin,
            "files": {f.source: f.sha256 for f in files},
            "missing_files": missing_files,
            "retrievals_from": str(precomputed_path) if precomputed_path else None,
            "retrievals_saved_to": str(self.save_path) if self.save_path else None,
            "index_from_cache": not index.built,
            "prompt_length": "counted when each item is scored (prompt_too_long)",
            "seconds": {"index": round(index.seconds, 3), "retrieval": 0.0, "total": 0.0},
        }
        self._update_shown()
        # what lm-eval renders as the task's doc_to_text (a user's override too), else the pack's prompt
        render = task_prompt(lm_task, prompt or doc_to_text_rag_expert_cot)
        self.counter = _RagCounter(
            self.record,
            task,
            "emsqa",
            lambda d: (d.get("rag_system") or "") + render(dict(d)),
            TaskFit(metadata, cache_root),
            self.max_gen_toks,
            lm_task,
        )
        self._add_seconds("total", time.perf_counter() - started)

    def _add_seconds(self, key: str, seconds: float) -> None:
        timings = self.record["seconds"]
        timings[key] = round(timings[key] + seconds, 4)

    def fill(self, docs: Sequence[dict[str, Any]]) -> None:
        """Retrieve for ``docs`` (or take their precomputed retrievals) and store what each got in it."""
        started = time.perf_counter()
        index, filtered = self.index, self.filtered
        ids = [str(doc["id"]) for doc in docs]
        sources = [[AREA_FILES[a] for a in self.areas[i] if AREA_FILES[a] in self.present] for i in ids]
        if self.precomputed is None:
            hits = index.retrieve([doc["question"] for doc in docs], sources if filtered else None)
            retrieved = {
                item_id: [{"id": index.chunk_ids[p], "source": index.chunk_sources[p], "score": s} for p, s in item]
                for item_id, item in zip(ids, hits)
            }
            positions = {item_id: [p for p, _ in item] for item_id, item in zip(ids, hits)}
        else:
            retrieved, positions = self.precomputed, {}
        self._add_seconds("retrieval", time.perf_counter() - started)
        for item_id, doc, item_sources in zip(ids, docs, sources):
            doc["rag_own_sources"] = sorted({AREA_FILES[a] for a in doc["category"] if a in AREA_FILES})
            doc["rag_sources"] = sorted(set(item_sources)) if filtered else []
            doc["rag_chunks_version"] = index.version
            doc["rag_header"] = self.made_under  # a sample log given back as rag_retrievals is checked against it
            doc["rag_prompt"] = self.style
            doc["rag_counter"] = self.counter.key  # the task's name: its counter holds the settings, not the doc
            doc["prompt_tokens"] = doc["context_limit"] = doc["fits_context"] = None  # set when scored
            chunks = retrieved.get(item_id)
            if chunks is None:
                doc["rag_missing"] = str(self.precomputed_path)
                doc["rag_chunks"], doc["rag_context"], doc["rag_system"] = [], None, ""
                continue
            doc["rag_missing"] = ""
            at = positions.get(item_id) or [index.position_of[c["id"]] for c in chunks]
            stored = [index.chunks[p] for p in at]
            doc["rag_chunks"] = [  # an external retriever's score is optional: None when it gave none
                {
                    "id": c["id"],
                    "source": c.get("source", chunk.source),
                    "score": None if c.get("score") is None else float(c["score"]),
                }
                for c, chunk in zip(chunks, stored)
            ]
            doc["rag_context"] = documents_block([{"title": c.title, "text": c.text} for c in stored], self.style)
            doc["rag_system"] = authors_system_message(doc, self.expert) if self.style == "authors" else ""
            self.saved[item_id] = doc["rag_chunks"]
            self._counts[len(doc["rag_chunks"])] += 1
        self._update_shown()
        self._add_seconds("total", time.perf_counter() - started)

    def _update_shown(self) -> None:
        counts, settings = self._counts, self.settings
        items, none = sum(counts.values()), counts[0]
        self.record["shown"].update(
            {
                "retriever": settings.retriever if self.external is None else f"external: {self.external}",
                "mode": settings.mode,
                "k": settings.k,
                "prompt": self.style,
                "items": items,
                "documents_per_item": {
                    "mean": round(sum(n * c for n, c in counts.items()) / items, 3) if items else 0.0,
                    "min": min((n for n, c in counts.items() if c), default=0),
                    "max": max((n for n, c in counts.items() if c), default=0),
                },
                "no_documents": {"items": none, "share": round(none / items, 4) if items else 0.0},
            }
        )

    def finish_or_report(self) -> None:
        """``finish`` where an exception would be lost (a generator being closed, exit): a failed save is
        one error line and the run goes on; its sample log holds the same retrievals."""
        try:
            self.finish()
        except (OSError, MedevalDataError) as exc:
            self._save_failed = True
            log.error(
                "medeval: %s: the retrievals were not saved to %s (%s). The run goes on; a --log_samples run's "
                "samples_<task>_*.jsonl holds the same retrievals (give it as rag_retrievals).",
                self.task or "EMSQA RAG",
                self.save_path,
                exc,
            )

    def release(self) -> None:
        """A split is gone: save what is left to save. When the last split of the task goes (a user's
        ``process_docs`` filter makes one per access), items rendered and never scored need no count."""
        self.finish_or_report()
        self.splits -= 1
        if self.splits <= 0:
            self.counter.release()

    def finish(self) -> None:
        """Save the retrievals made so far and log how many items got no document (each once per count)."""
        if self.save_path and len(self.saved) != self._written and not self._save_failed:
            written = save_task_retrievals(Path(self.save_path), self.made_under, self.saved.items())
            self._written = len(self.saved)
            log.info(
                "medeval: wrote the retrievals of %d items of %s to %s (reuse with rag_retrievals)",
                len(self.saved),
                self.task or "the task",
                written,
            )
        shown = self.record["shown"]
        none = shown["no_documents"]["items"]
        if none and shown["items"] != self._reported:
            self._reported = shown["items"]
            log.warning(
                "medeval: %s: %d of %d items (%.1f%%) got no documents (mode %s, k %d); the metric no_documents "
                "is their share",
                self.task or "EMSQA RAG",
                none,
                shown["items"],
                100 * none / shown["items"],
                self.settings.mode,
                self.settings.k,
            )


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


def _other_chunks(
    path: Path, task: str | None, theirs: Mapping[str, Any] | None, ours: Mapping[str, Any], holds: str = ""
) -> str:
    return (
        f"{path}: refused{f' for {task}' if task else ''}: the external retriever {external_name(theirs)!r} "
        f"searched another knowledge base or chunking than this run's, {section_difference(theirs, ours)}{holds}. "
        "Search this run's chunks (`medeval emsqa-retrievals-header --name NAME --chunks chunks.jsonl` prints "
        "its header and writes them), or give the emsqa_knowledge_path and rag_chunk_* settings the file was made with."
    )


def retrievals_file_problems(metadata: Mapping[str, Any]) -> list[str]:
    """What can be told of a ``rag_retrievals`` file before a model loads (one line each): a malformed line, or
    an external retriever's file none of whose sections was made on this run's knowledge base and chunking.
    The rest (item and chunk ids, a pack section's mode, k and areas) each task checks when it loads."""
    value = setting(metadata, "rag_retrievals")
    path = Path(str(value)).expanduser() if value is not None else None
    if path is None or not path.is_file():  # none given, or a missing file (the spec's check names it)
        return []
    try:
        sections = read_sections(path)
        if not sections or any(external_name(s.header) is None for s in sections):
            return []
        ours = _made_on(metadata)
        if all(section_difference(s.header, ours) for s in sections):
            return [_other_chunks(path, None, sections[0].header, ours)]
    except MedevalDataError as exc:
        return [str(exc)]
    return []


def precomputed_section(path: Path, header: Mapping[str, Any], ids: Sequence[str], index: Any) -> Section:
    """The task's retrievals from a file of a previous run: its own section, else one made the same way;
    refused with the first difference when none was (another mode, k, areas, retriever, knowledge, chunking).
    An external retriever's section is taken when made on this run's knowledge base and chunking."""
    sections = read_sections(path)
    task = header["task"]
    own = [s for s in sections if s.task == task]
    candidates = own or sections
    chosen = next((s for s in candidates if section_difference(s.header, header) is None), None)
    if chosen is None:
        first = candidates[0]
        holds = "" if own else f" (the file holds {', '.join(sorted({str(s.task) for s in sections}))})"
        if external_name(first.header) is not None:
            raise MedevalDataError(_other_chunks(path, task or "this task", first.header, header, holds))
        raise MedevalDataError(
            f"{path}: refused for {task or 'this task'}: its retrievals were made another way, "
            f"{section_difference(first.header, header)}{holds}. Give the file a run with these settings saved, or "
            "retrieve again without rag_retrievals."
        )
    external = external_name(chosen.header) is not None
    known_ids = set(ids)
    unknown = [i for i in chosen.items if i not in known_ids]
    if unknown:
        raise MedevalDataError(
            f"{path}: item id {unknown[0]!r} is not in the evaluated set ({len(unknown)} such ids): "
            "the file comes from another data set. "
            + (
                f"Ids are the items' 'id' field, or their position from 0 when the set has none (e.g. "
                f"{sorted(known_ids)[:3]})."
                if external
                else "Use the file of a run over the same items."
            )
        )
    for item_id, chunks in chosen.items.items():
        if len(chunks) > header["k"]:
            raise MedevalDataError(
                f"{path}: item {item_id!r} has {len(chunks)} chunks, more than k {header['k']}: "
                + (
                    f"give at most rag_k documents per item, or set rag_k to {len(chunks)} or more."
                    if external
                    else "the file was changed after it was written. Save it again (rag_save_retrievals)."
                )
            )
        for number, chunk in enumerate(chunks):
            position = index.position_of.get(chunk["id"])
            if position is None:
                raise MedevalDataError(
                    f"{path}: item {item_id!r}: chunk {chunk['id']!r} is not in {_WHAT} as chunked now. "
                    + (
                        "Give the ids of the chunks the pack cut (`medeval emsqa-retrievals-header --name NAME "
                        "--chunks chunks.jsonl` writes them)."
                        if external
                        else "Use the same knowledge files and rag_chunk_* settings as the run that wrote the file."
                    )
                )
            # the text the file says it shows must be the text the prompt will show (the source from the ids'
            # list: a saved file gives every chunk's, and reading each chunk's text costs a full run seconds)
            source = index.chunk_sources[position]
            wrong = "source" if chunk.get("source", source) != source else None
            if wrong is None and ("title" in chunk or "text" in chunk):
                stored = index.chunks[position]
                wrong = next((n for n in ("title", "text") if n in chunk and chunk[n] != getattr(stored, n)), None)
            if wrong is not None:
                raise MedevalDataError(
                    f"{path}: item {item_id!r}, chunk {number} ({chunk['id']!r}): its {wrong} is not that "
                    f"chunk's in {_WHAT} as chunked now, so the file was made on other chunks. Give each "
                    "chunk's id with the text the pack cut, or leave title and text out."
                )
    return chosen


# --- what another retriever's file is made on: `medeval emsqa-retrievals-header --name NAME` ------------


def external_header(metadata: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The first line of a retrievals file made by another retriever (``name``) on the knowledge base and
    chunking these settings give: what ``rag_retrievals`` checks such a file against."""
    return {"medeval_retrievals": FORMAT, "retriever": {"external": name}, **_made_on(metadata)}


def _made_on(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The knowledge base's digest and the chunking these settings give: what an external file must be made on."""
    chunking = retrieval_settings(metadata).chunking()  # a bad setting is named before a missing knowledge base
    files, _ = knowledge_files(metadata)
    return {"knowledge": corpus_version(files), "chunking": chunking}


def write_chunks(metadata: Mapping[str, Any], path: Path) -> int:
    """The chunks as the pack cuts them, one JSON line each (``id``, ``source``, ``title``, ``text``), for
    another retriever to search; returns how many."""
    from medeval_metrics.safe_files import atomic_open

    settings = retrieval_settings(metadata)
    files, _ = knowledge_files(metadata)
    index = open_index(files, settings, check_writable_settings(metadata), _WHAT, _FIX, with_retriever=False)
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as handle:
        for chunk in index.chunks:
            record = {"id": chunk.id, "source": chunk.source, "title": chunk.title, "text": chunk.text}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(index.chunks)


def print_header(name: str, metadata_text: str, chunks: str | None) -> int:
    """``medeval emsqa-retrievals-header`` (emsqa/cli.py): print the header line of a retrievals file made by
    another retriever; with ``chunks`` also write the chunks it must search. Settings as a run reads them:
    ``metadata_text`` (the run's --metadata JSON), else ``MEDEVAL_<KEY>``."""
    import sys

    try:
        try:
            metadata = json.loads(metadata_text)
        except json.JSONDecodeError as exc:
            raise MedevalDataError(f"--metadata is not valid JSON ({exc.msg}); e.g. '{{\"rag_chunk_tokens\": 512}}'.")
        if not isinstance(metadata, dict):
            raise MedevalDataError("--metadata must be a JSON object; e.g. '{\"rag_chunk_tokens\": 512}'.")
        if not name.strip():
            raise MedevalDataError("--name must name your retriever; the results show it.")
        header = external_header(metadata, name.strip())
        if chunks:
            count = write_chunks(metadata, Path(chunks))
            print(f"medeval: wrote the {count:,} chunks to {chunks}", file=sys.stderr)
    except (MedevalDataError, OSError) as exc:
        print(f"medeval: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(header, sort_keys=True))
    return 0
