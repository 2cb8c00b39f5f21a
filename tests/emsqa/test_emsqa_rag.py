"""EMSQA with retrieval, without lm-eval: area -> file mapping, knowledge source errors, predicted
areas, prompts with documents, diagnostics, precomputed retrievals (on a synthetic knowledge base
in the authors' layout, with one planted section per item)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import FIXTURES

from medeval_metrics.context_fit import PromptCounter
from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.data import SUBJECT_AREAS, load_docs
from medeval_metrics.emsqa.rag import (
    AREA_FILES,
    KNOWLEDGE_FILES,
    add_retrieval,
    doc_to_text_rag_cot,
    doc_to_text_rag_expert_cot,
    process_results_rag,
    read_predicted_areas,
    retrieval_settings,
)

SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
FILLER = {
    "Scene safety": "assess the scene for hazards before approaching any patient and call for resources",
    "Documentation": "write the patient care report promptly and accurately after every call",
}


def planted_text(index):
    return f"PLANTED-{index}"


def make_kb(folder, items, plant=True, skip=(), wrong_area_for=()):
    """One file per knowledge subject; item i's first area file holds a section repeating its question
    plus the marker PLANTED-i (in ``wrong_area_for`` items: the terminology file instead)."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = {stem: [dict(FILLER)] for stem in KNOWLEDGE_FILES}
    for index, item in enumerate(items):
        if plant:
            stem = "terminology" if index in wrong_area_for else AREA_FILES[item["category"][0]]
            pages[stem].append({f"Fact {index}": f"{item['question']} {planted_text(index)}"})
    for stem, content in pages.items():
        if stem not in skip:
            (folder / f"{stem}.json").write_text(json.dumps(content), encoding="utf-8")
    return folder


@pytest.fixture
def items():
    return json.loads(SYNTHETIC.read_text())


@pytest.fixture
def docs():
    return load_docs(SYNTHETIC, "the synthetic set")


@pytest.fixture
def metadata(tmp_path, items):
    return {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", items)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 3,
    }


def test_every_subject_area_has_a_file_and_terminology_belongs_to_none():
    assert set(AREA_FILES) == set(SUBJECT_AREAS)
    assert AREA_FILES["cardiology_and_resuscitation"] == "cardiovascular"
    assert AREA_FILES["medical_and_obstetrics_gynecology"] == "medical"
    assert AREA_FILES["airway_respiration_and_ventilation"] == "airway, respiratory, ventilation"
    assert "terminology" in KNOWLEDGE_FILES and "terminology" not in AREA_FILES.values()
    assert len(KNOWLEDGE_FILES) == 11


@pytest.mark.parametrize("mode", ["global", "filter_then_retrieve", "retrieve_then_filter"])
def test_each_item_gets_its_planted_section(docs, metadata, mode):
    record = add_retrieval(docs, {**metadata, "rag_mode": mode})
    for index, doc in enumerate(docs):
        assert doc["rag_chunks"][0]["id"].startswith(AREA_FILES[doc["category"][0]] + "_"), index
        assert planted_text(index) in doc["rag_context"].splitlines()[1]  # the best document is listed first
        assert len(doc["rag_chunks"]) <= 3
        assert doc["rag_chunks_version"] == record["chunks_version"]
    assert record["settings"]["mode"] == mode and record["settings"]["retriever"] == "bm25"
    assert record["missing_files"] == [] and len(record["files"]) == 11


def test_filtered_modes_do_not_reach_a_section_in_another_file(docs, metadata, tmp_path, items):
    folder = make_kb(tmp_path / "kb2", items, wrong_area_for={5})  # item 5 (trauma): its fact is in terminology
    base = {**metadata, "emsqa_knowledge_path": str(folder)}
    add_retrieval(docs, {**base, "rag_mode": "filter_then_retrieve"})
    assert planted_text(5) not in docs[5]["rag_context"]
    assert all(c["source"] == "trauma" for c in docs[5]["rag_chunks"])
    add_retrieval(docs, {**base, "rag_mode": "global"})
    assert planted_text(5) in docs[5]["rag_context"]


def test_prompts_place_the_documents_like_the_paper(docs, metadata):
    add_retrieval(docs, {**metadata, "rag_mode": "global"})
    doc = docs[1]
    cot = doc_to_text_rag_cot(doc)
    assert cot.startswith("Relevant documents:\n- Fact 1: ")
    assert cot.index("Relevant documents") < cot.index("Question:") < cot.index("Think step by step")
    expert = doc_to_text_rag_expert_cot(doc)
    last_choice = f"{doc['letters'][-1].upper()}. {doc['options'][-1]}"
    assert expert.startswith("You are a certified Emergency Medical Technician (EMT)")
    assert (
        expert.index("Question:")
        < expert.index(last_choice)
        < expert.index("Relevant documents:")
        < expert.index("One or more options may be correct")
    )
    assert expert.count("\n- ") == len(doc["rag_chunks"])


def test_an_item_without_documents_says_so(docs):
    doc = {**docs[0], "rag_context": None, "rag_missing": ""}
    assert "Relevant documents" not in doc_to_text_rag_cot(doc)  # e.g. a few-shot example from validation
    from medeval_metrics.emsqa.rag import documents_block

    assert documents_block([]) == "Relevant documents: none were retrieved for this question."


def test_diagnostics_are_hand_computed(docs):
    doc = {
        **docs[1],
        "rag_own_sources": ["cardiovascular", "trauma"],
        "fits_context": False,
        "rag_chunks": [
            {"id": "a", "source": "trauma", "score": 3.0},
            {"id": "b", "source": "medical", "score": 2.0},
            {"id": "c", "source": "cardiovascular", "score": 1.0},
            {"id": "d", "source": "others", "score": 0.5},
        ],
    }
    metrics = process_results_rag(doc, [["a", "b", "d"]])
    assert metrics == {
        "acc": 1.0,
        "f1": 1.0,
        "unparseable": 0.0,
        "invalid_letter": 0.0,
        "requested_format": 0.0,
        "extracted_by_model": 0.0,
        "retrieved_own_area": 0.5,
        "retrieved_documents": 4.0,
        "no_documents": 0.0,
        "prompt_too_long": 1.0,
    }
    # With the generation settings lm-eval used (--gen_kwargs included): prompt + budget vs the context.
    sized = {**doc, "prompt_tokens": 1000, "context_limit": 2048}
    assert process_results_rag(sized, [["a"]], generation_kwargs={"max_gen_toks": 1024})["prompt_too_long"] == 0.0
    assert process_results_rag(sized, [["a"]], generation_kwargs={"max_gen_toks": 1049})["prompt_too_long"] == 1.0
    empty = process_results_rag({**doc, "rag_chunks": [], "fits_context": True}, [None])
    assert empty["retrieved_own_area"] == 0.0 and empty["retrieved_documents"] == 0.0 and empty["unparseable"] == 1.0
    assert empty["no_documents"] == 1.0


def test_the_missing_file_line_counts_the_items_affected_and_those_left_without_documents(
    docs, metadata, tmp_path, items, caplog
):
    folder = make_kb(tmp_path / "kb9", items, skip={"ems_operations"})
    areas = {0: ["ems_operations"], 1: ["ems_operations", "trauma"], 2: ["ems_operations"]}
    changed = [{**doc, "category": areas.get(n, ["trauma"])} for n, doc in enumerate(docs)]
    base = {**metadata, "emsqa_knowledge_path": str(folder), "rag_mode": "filter_then_retrieve", "rag_k": 1}
    with caplog.at_level(logging.WARNING):
        add_retrieval(changed, base)
    assert f"3 of {len(docs)} items have a subject area whose file is missing" in caplog.text
    assert "and the 2 with no other area get none." in caplog.text


def test_missing_file_warns_names_the_file_and_can_be_required(docs, metadata, tmp_path, items, caplog):
    folder = make_kb(tmp_path / "kb10", items, skip={"ems_operations"})
    base = {**metadata, "emsqa_knowledge_path": str(folder), "rag_mode": "filter_then_retrieve"}
    with caplog.at_level(logging.WARNING):
        record = add_retrieval(docs, base)
    assert (
        "lacks ems_operations.json: 1 of 12 items have a subject area whose file is missing; in mode "
        "filter_then_retrieve they get documents only from their other areas' files, and the 1 with no other "
        "area get none."
    ) in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        add_retrieval(docs, base)  # the next RAG task of the same run: said once
    assert "lacks ems_operations.json" not in caplog.text
    assert record["missing_files"] == ["ems_operations"]
    assert docs[7]["rag_chunks"] == [] and docs[7]["rag_sources"] == []  # its only area has no file
    # the switch that made it an error is gone: given, it says what replaced it
    with pytest.raises(
        MedevalDataError,
        match="--metadata rag_require_all_files: the setting rag_require_all_files "
        "was removed; a knowledge base that lacks files is named in a warning",
    ):
        add_retrieval(docs, {**base, "rag_require_all_files": True})


def test_an_area_with_no_file_is_an_error(docs, metadata):
    docs[3]["category"] = ["cardiology"]
    with pytest.raises(
        MedevalDataError, match=r"EMSQA item '3': subject area 'cardiology' has no knowledge file\. Known areas"
    ):
        add_retrieval(docs, metadata)


def test_k_larger_than_the_corpus(docs, metadata):
    with pytest.raises(MedevalDataError, match=r"rag_k=500 is larger than the corpus \(34 chunks\)"):
        add_retrieval(docs, {**metadata, "rag_k": 500})


def test_malformed_knowledge_file_names_file_page_and_fix(docs, metadata, tmp_path, items):
    folder = make_kb(tmp_path / "bad", items)
    (folder / "trauma.json").write_text(json.dumps([{"A": "x"}, {"B": ["not", "text"]}]))
    with pytest.raises(
        MedevalDataError,
        match=r"trauma\.json: page 1, section 'B' of the EMSQA knowledge base holds a list"
        r".*Replace it with the published file\. Download the folder knowledge/",
    ):
        add_retrieval(docs, {**metadata, "emsqa_knowledge_path": str(folder)})
    (folder / "trauma.json").write_text('[{"A": "x"')
    with pytest.raises(MedevalDataError, match=r"trauma\.json: the EMSQA knowledge base is not valid JSON \(line 1"):
        add_retrieval(docs, {**metadata, "emsqa_knowledge_path": str(folder), "rag_cache_dir": str(tmp_path / "c2")})


@pytest.mark.parametrize(
    "where, message",
    [
        ("missing", "emsqa_knowledge_path points at .*missing, which does not exist"),
        ("file", "is a file; emsqa_knowledge_path must name the folder"),
        ("empty", "none of the knowledge files"),
    ],
)
def test_knowledge_path_errors(docs, tmp_path, where, message):
    target = tmp_path / where
    if where == "file":
        target.write_text("[]")
    elif where == "empty":
        target.mkdir()
        (target / "notes.json").write_text("[]")
    with pytest.raises(MedevalDataError, match=message):
        add_retrieval(docs, {"emsqa_knowledge_path": str(target), "rag_cache_dir": str(tmp_path / "c")})


def test_no_knowledge_path_offline_says_how_to_point_at_one(docs, tmp_path, monkeypatch):
    monkeypatch.delenv("MEDEVAL_EMSQA_KNOWLEDGE_PATH", raising=False)
    with pytest.raises(
        MedevalDataError, match=r"EMSQA knowledge base is not available: the Hub is disabled.*emsqa_knowledge_path"
    ):
        add_retrieval(docs, {"rag_cache_dir": str(tmp_path / "c")})


def test_predicted_areas_file(docs, metadata, tmp_path):
    ids = [d["id"] for d in docs]
    path = tmp_path / "areas.json"
    path.write_text(json.dumps({i: ["trauma"] for i in ids}))
    add_retrieval(docs, {**metadata, "rag_mode": "filter_then_retrieve", "rag_areas": str(path)})
    assert all(c["source"] == "trauma" for d in docs for c in d["rag_chunks"])
    assert docs[0]["rag_own_sources"] == ["assessment"]  # the diagnostic still uses the gold areas
    lines = tmp_path / "areas.jsonl"
    lines.write_text("\n".join(json.dumps({"id": i, "areas": "pediatrics"}) for i in ids))
    assert read_predicted_areas(lines, ids)["4"] == ["pediatrics"]


@pytest.mark.parametrize(
    "content, message",
    [
        ({"0": ["trauma"], "99": ["trauma"]}, r"item id '99' is not in the evaluated set"),
        ({"0": ["cardio"]}, r"item '0': subject area 'cardio' has no knowledge file"),
        ({"0": ["trauma"]}, r"11 items have no predicted areas \(first: \['1', '2'"),
        ({"0": 3}, "the areas must be a list"),
    ],
)
def test_bad_predicted_areas_files(tmp_path, docs, content, message):
    path = tmp_path / "areas.json"
    path.write_text(json.dumps(content))
    with pytest.raises(MedevalDataError, match=message):
        read_predicted_areas(path, [d["id"] for d in docs])


def test_precomputed_retrievals_reproduce_without_retrieving(docs, metadata, tmp_path, monkeypatch):
    saved = tmp_path / "retrievals.jsonl"
    add_retrieval(docs, {**metadata, "rag_mode": "retrieve_then_filter", "rag_save_retrievals": str(saved)})
    expected = [(d["rag_chunks"], d["rag_context"]) for d in docs]

    def no_retrieval(*args, **kwargs):
        raise AssertionError("retrieved although precomputed retrievals were given")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.prepare", no_retrieval)
    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.load", no_retrieval)
    fresh = load_docs(SYNTHETIC, "again")
    record = add_retrieval(
        fresh,
        {
            **metadata,
            "rag_mode": "retrieve_then_filter",
            "rag_retrievals": str(saved),
            "rag_cache_dir": str(tmp_path / "fresh-cache"),
        },
    )  # no cached retrievals to fall back on
    assert [(d["rag_chunks"], d["rag_context"]) for d in fresh] == expected
    assert record["retrievals_from"] == str(saved)


def test_the_split_retrieves_only_the_items_lm_eval_reaches(docs, metadata, tmp_path, monkeypatch):
    import itertools

    from medeval_metrics.emsqa.rag import RetrievedSplit, TaskRetrieval
    from medeval_metrics.emsqa.retrieval.retrievers import BM25Retriever

    eager = load_docs(SYNTHETIC, "eager")
    add_retrieval(eager, {**metadata, "rag_mode": "filter_then_retrieve"})
    queries = []
    real_prepare = BM25Retriever.prepare
    monkeypatch.setattr(
        "medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.prepare",
        lambda self, q: queries.extend(q) or real_prepare(self, q),
    )
    saved = tmp_path / "saved.jsonl"
    lazy_metadata = {**metadata, "rag_mode": "filter_then_retrieve", "rag_save_retrievals": str(saved)}
    retrieval = TaskRetrieval(docs, lazy_metadata, task="t")
    split = RetrievedSplit(docs, ["id", "question"], retrieval)
    assert len(split) == 12 and queries == [] and "rag_context" in split.features and "question" in split.features
    assert split[0]["rag_chunks"] == eager[0]["rag_chunks"]  # lm-eval's test of one doc
    # as lm-eval's --limit 5 iterates: islice over enumerate(split); the iteration's end saves and reports
    reached = [doc for _, doc in itertools.islice(enumerate(split), 0, 5)]
    assert [d["rag_chunks"] for d in reached] == [d["rag_chunks"] for d in eager[:5]]
    assert queries == [d["question"] for d in docs[:5]]  # item 0 once: it was filled when first indexed
    assert all("rag_chunks" not in d for d in docs[5:])
    assert retrieval.record["shown"]["items"] == 5
    del reached
    lines = saved.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines[1:]] == [d["id"] for d in docs[:5]]


def test_precomputed_file_problems(docs, metadata, tmp_path):
    saved = tmp_path / "r.jsonl"
    add_retrieval(docs, {**metadata, "rag_save_retrievals": str(saved)})
    lines = saved.read_text().splitlines()
    partial = tmp_path / "partial.jsonl"
    partial.write_text("\n".join(lines[:3]))  # header + items 0 and 1
    fresh = load_docs(SYNTHETIC, "again")
    add_retrieval(fresh, {**metadata, "rag_retrievals": str(partial)})
    assert fresh[1]["rag_chunks"] == docs[1]["rag_chunks"]
    with pytest.raises(MedevalDataError, match=r"item '2' has no entry in the precomputed-retrievals file"):
        doc_to_text_rag_cot(fresh[2])  # only an item that is actually evaluated needs one
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text(lines[0] + "\n" + json.dumps({"id": "q-77", "chunks": []}))
    with pytest.raises(MedevalDataError, match=r"item id 'q-77' is not in the evaluated set"):
        add_retrieval(load_docs(SYNTHETIC, "again"), {**metadata, "rag_retrievals": str(foreign)})
    unknown_chunk = tmp_path / "chunk.jsonl"
    unknown_chunk.write_text(lines[0] + "\n" + json.dumps({"id": "0", "chunks": [{"id": "trauma_99_0", "score": 1.0}]}))
    with pytest.raises(
        MedevalDataError, match=r"chunk 'trauma_99_0' is not in the EMSQA knowledge base as chunked now"
    ):
        add_retrieval(load_docs(SYNTHETIC, "again"), {**metadata, "rag_retrievals": str(unknown_chunk)})


def test_settings_from_metadata_then_environment(monkeypatch):
    monkeypatch.setenv("MEDEVAL_RAG_K", "8")
    monkeypatch.setenv("MEDEVAL_RAG_RETRIEVER", "dense")
    settings = retrieval_settings({"rag_mode": "filter_then_retrieve"})
    assert (settings.k, settings.mode, settings.retriever) == (8, "filter_then_retrieve", "medcpt")
    assert retrieval_settings({"rag_k": "16"}).k == 16
    with pytest.raises(MedevalDataError, match=r"rag_k='many' is not a whole number"):
        retrieval_settings({"rag_k": "many"})


def test_prompt_length_is_counted_against_the_model_context(docs, metadata):
    add_retrieval(docs, {**metadata, "max_length": 1030}, max_gen_toks=1024)  # 6 tokens left for the prompt
    assert all(d["prompt_tokens"] is None for d in docs)  # counted when an item is scored, not when built
    assert all(process_results_rag(d, [["a"]])["prompt_too_long"] == 1.0 for d in docs)
    assert all(d["fits_context"] is False and d["context_limit"] == 1030 for d in docs)  # the logged doc says so
    add_retrieval(docs, {**metadata, "max_length": 32768}, max_gen_toks=1024)
    assert all(process_results_rag(d, [["a"]])["prompt_too_long"] == 0.0 for d in docs)
    for d in docs:  # the labelled estimate (characters / 4) of the whole prompt
        assert d["prompt_tokens"] == (len(doc_to_text_rag_expert_cot(d)) + 3) // 4


def test_only_the_items_scored_are_counted(docs, metadata, monkeypatch):
    """A --limit run scores a few items: only their prompts are tokenized (the first run with a model
    used to count all 3,721); a prompt counted once is not counted again."""
    from medeval_metrics.context_fit import ContextFit

    counted = []
    monkeypatch.setattr(ContextFit, "_tokenize", lambda self, prompts: counted.extend(prompts) or [7] * len(prompts))
    monkeypatch.setattr(ContextFit, "__init__", fake_fit_init)
    add_retrieval(docs, metadata, max_gen_toks=8)
    assert counted == []
    for doc in docs[:2]:
        process_results_rag(doc, [["a"]])
    assert counted == [doc_to_text_rag_expert_cot(d) for d in docs[:2]]
    process_results_rag(docs[0], [["a"]])
    again = load_docs(SYNTHETIC, "again")
    add_retrieval(again, metadata, max_gen_toks=8)
    process_results_rag(again[1], [["a"]])
    assert len(counted) == 2 and again[1]["prompt_tokens"] == 7


def test_the_prompts_lm_eval_rendered_are_counted_in_one_call_when_the_first_is_scored(docs, metadata, monkeypatch):
    """lm-eval renders the prompt of each item it will score when it builds the requests; the first item
    scored counts all of them in one tokenizer call (a batch runs in parallel), the others are lookups.
    An item retrieved for but not rendered (``--samples`` iterates past it) is not counted."""
    from medeval_metrics.context_fit import ContextFit

    calls = []
    monkeypatch.setattr(
        ContextFit, "_tokenize", lambda self, prompts: calls.append(list(prompts)) or [7] * len(prompts)
    )
    monkeypatch.setattr(ContextFit, "__init__", fake_fit_init)
    add_retrieval(docs, metadata, max_gen_toks=8)  # all retrieved for, as a --samples run iterates them all
    rendered = [doc_to_text_rag_expert_cot(doc) for doc in (docs[0], docs[2], docs[3])]
    assert calls == []
    scores = [process_results_rag(doc, [["a"]]) for doc in (docs[0], docs[2], docs[3])]
    assert len(calls) == 1 and sorted(calls[0]) == sorted(rendered)  # one call, the three rendered prompts
    assert [s["prompt_too_long"] for s in scores] == [0.0, 0.0, 0.0] and docs[3]["prompt_tokens"] == 7
    process_results_rag(docs[1], [["a"]])  # scored without being rendered first: counted on its own
    assert calls[1:] == [[doc_to_text_rag_expert_cot(docs[1])]]


def test_a_task_prompt_wrapping_the_pack_s_renders_each_prompt_once_when_counted(docs, metadata, monkeypatch):
    """A user's doc_to_text that adds a line to the pack's RAG prompt: counting renders through it, and those
    renders must not be noted again (each scored item re-rendered the whole batch: N squared)."""
    from medeval_metrics.context_fit import ContextFit
    from medeval_metrics.emsqa import rag

    renders, calls = [], []
    real = rag._rag_cot
    monkeypatch.setattr(rag, "_rag_cot", lambda d: renders.append(1) or real(d))
    monkeypatch.setattr(ContextFit, "_tokenize", lambda self, p: calls.append(len(p)) or [7] * len(p))
    monkeypatch.setattr(ContextFit, "__init__", fake_fit_init)

    def wrapped(doc):
        return "Answer as a paramedic.\n" + rag.doc_to_text_rag_cot(doc)

    add_retrieval(docs, metadata, max_gen_toks=8, prompt=wrapped)
    for doc in docs:
        wrapped(doc)  # lm-eval builds the requests
    renders.clear()
    for doc in docs:
        process_results_rag(doc, [["a"]])
    assert len(renders) <= 2 * len(docs) and calls == [len(docs)]  # one render to count, one per item's lookup
    assert PromptCounter.of(docs[0], "rag_counter").noted == []


def test_a_process_docs_filter_dropping_its_split_keeps_the_batch(docs, metadata, monkeypatch):
    """lm-eval runs a task's process_docs on each access to its docs; with a filter each access makes a split
    over the same retrieval, dropped after use. Dropping one must not drop the prompts noted for counting."""
    import gc

    from medeval_metrics.context_fit import ContextFit
    from medeval_metrics.emsqa.rag import RetrievedSplit, TaskRetrieval

    calls = []
    monkeypatch.setattr(ContextFit, "_tokenize", lambda self, p: calls.append(len(p)) or [7] * len(p))
    monkeypatch.setattr(ContextFit, "__init__", fake_fit_init)
    whole = RetrievedSplit(docs, list(docs[0]), TaskRetrieval(docs, metadata, 8, doc_to_text_rag_expert_cot, "t"))
    for doc in whole.filter(lambda d: True):  # lm-eval building the requests on a filtered view
        doc_to_text_rag_expert_cot(doc)
    gc.collect()
    for doc in whole.filter(lambda d: True):
        process_results_rag(doc, [["a"]])
    assert calls == [len(docs)]


def test_a_task_evaluated_again_with_other_settings_counts_and_warns_for_them(docs, metadata, monkeypatch, caplog):
    """The same retrieval (task object) scored with a 36-token max_length in its task's metadata (where lm-eval's
    command line merges --model_args), then 10,000, then 36 again: each item is checked against the settings the
    task holds when it is scored, the record names the latest fit, and each change to a model too small gets its
    own warning. The budget is the task's generation_kwargs' (--gen_kwargs applied), read when scored too."""
    from types import SimpleNamespace

    from medeval_metrics.context_fit import ContextFit
    from medeval_metrics.emsqa import rag

    class LmTask:  # what the counter reads of lm-eval's task: its config
        config = SimpleNamespace(metadata={**metadata, "max_length": 36}, generation_kwargs={"max_gen_toks": 8})

    def init(self, settings, max_gen_toks, cache_dir=None):
        self.max_gen_toks, self.tokenizer, self.cache_file, self._counted = int(max_gen_toks), object(), None, {}
        self.limit, self.method = int(settings["max_length"]), f"limit {settings['max_length']}"

    monkeypatch.setattr(ContextFit, "__init__", init)
    monkeypatch.setattr(ContextFit, "_tokenize", lambda self, p: [30] * len(p))
    lm_task = LmTask()
    retrieval = rag.TaskRetrieval(docs, metadata, 1024, None, "emsqa_public_rag", lm_task)
    retrieval.fill(docs)
    record = retrieval.record
    # the split keeps its docs: each evaluation scores the same dicts, which hold the last run's count
    assert process_results_rag(docs[0], [["a"]])["prompt_too_long"] == 1.0  # 30 + 8 > 36
    lm_task.config.metadata["max_length"] = 10_000
    doc_to_text_rag_expert_cot(docs[1])  # lm-eval builds the second run's requests
    assert process_results_rag(docs[0], [["a"]])["prompt_too_long"] == 0.0 and docs[0]["context_limit"] == 10_000
    assert process_results_rag(docs[1], [["a"]])["prompt_too_long"] == 0.0 and docs[1]["prompt_tokens"] == 30
    assert record["prompt_length"] == "limit 10000"
    lm_task.config.metadata["max_length"] = 36
    assert process_results_rag(docs[0], [["a"]])["prompt_too_long"] == 1.0 and docs[0]["context_limit"] == 36
    assert docs[0]["fits_context"] is False
    lm_task.config.generation_kwargs["max_gen_toks"] = 6  # --gen_kwargs max_gen_toks=6: 30 + 6 fits 36
    assert process_results_rag(docs[0], [["a"]])["prompt_too_long"] == 0.0
    lines = [r.getMessage() for r in caplog.records if "exceed the model's context" in r.getMessage()]
    assert len(lines) == 2 and all(f"item {docs[0]['id']}'s" in line for line in lines)
    assert "rag_max_gen_toks" not in docs[0]  # the budget is the task's, not stamped on the documents


def test_a_doc_names_its_task_whatever_was_loaded_before(docs, metadata):
    """``rag_counter`` enters lm-eval's doc hash (and the report's comparison of runs): the task's name, not
    a load-order number; a task loaded again in the process takes over the name, and the old one's release
    leaves the new one's noted prompts alone."""
    import gc

    from medeval_metrics.emsqa import rag

    add_retrieval(load_docs(SYNTHETIC, "other"), metadata, max_gen_toks=8, task="emsqa_public_rag_ftr")
    first = rag.TaskRetrieval(docs, metadata, 8, None, "emsqa_public_rag")
    first.fill(docs)
    again = load_docs(SYNTHETIC, "again")
    second = rag.TaskRetrieval(again, metadata, 8, None, "emsqa_public_rag")
    second.fill(again)
    assert {d["rag_counter"] for d in docs + again} == {"emsqa_public_rag"}
    doc_to_text_rag_expert_cot(again[0])
    first.splits = 1
    first.release()
    del first
    gc.collect()
    assert PromptCounter.of({"rag_counter": "emsqa_public_rag"}, "rag_counter").noted == [again[0]]


def fake_fit_init(self, model_args, max_gen_toks, cache_dir=None):
    """A ContextFit with a 'tokenizer' (counted by the patched _tokenize) and the on-disk cache."""
    self.max_gen_toks, self.limit, self.tokenizer, self.method = int(max_gen_toks), 100, object(), "fake"
    self.cache_file = Path(cache_dir) / "token_counts" / "fake.json"


def test_every_retrieval_setting_the_loaders_read_is_a_known_metadata_key():
    """`medeval run` rejects unknown pack keys (`rag_kk`): every key rag.py reads must be declared."""
    import re

    from medeval_metrics import preflight
    from medeval_metrics.emsqa import rag

    source = Path(rag.__file__).read_text(encoding="utf-8")
    doc_fields = {
        "rag_chunks",
        "rag_chunks_version",
        "rag_context",
        "rag_missing",
        "rag_own_sources",
        "rag_sources",
        "rag_header",
        "rag_system",
        "rag_counter",
    }
    read = set(re.findall(r'"((?:rag|emsqa)_[a-z_]+)"', source)) - doc_fields
    assert read <= set(preflight.known_metadata_keys())
    assert "rag_" in preflight.pack_key_prefixes()
    with pytest.raises(MedevalDataError, match="rag_kk.*rag_k"):
        preflight.raise_problems(preflight.metadata_key_problems({"rag_kk": 4}))


# --- a task owns its retrieval mode; zero-shot runs never read the few-shot pool --------------------


def _task_yaml(name):
    from medeval_metrics import tasks_path

    return str(Path(tasks_path()) / "emsqa" / f"{name}.yaml")


@pytest.mark.parametrize(
    "task, given, instead",
    [
        (
            "emsqa_public_rag",
            "filter_then_retrieve",
            "run emsqa_private_expertrag_ftr or emsqa_public_expertrag_ftr instead",
        ),
        (
            "emsqa_private_expertrag_ftr",
            "retrieve_then_filter",
            "run emsqa_private_expertrag_rtf or emsqa_public_expertrag_rtf instead",
        ),
        ("emsqa_public_expertrag_rtf", "global", "emsqa_public_rag"),
        ("emsqa_public_rag", "nearest", "the modes are global, filter_then_retrieve, retrieve_then_filter"),
    ],
)
def test_metadata_cannot_run_another_mode_under_a_tasks_name(task, given, instead):
    from medeval_metrics.emsqa.rag import check_task_owns_its_mode

    with pytest.raises(MedevalDataError) as info:
        check_task_owns_its_mode({"config_source": _task_yaml(task), "rag_mode": given})
    text = str(info.value)
    assert f"--metadata rag_mode={given!r}" in text and f"({task} is " in text and instead in text
    assert "drop rag_mode from --metadata" in text


def test_the_tasks_own_mode_and_loaders_outside_lm_eval_pass():
    from medeval_metrics.emsqa.rag import check_task_owns_its_mode

    check_task_owns_its_mode(
        {"config_source": _task_yaml("emsqa_public_expertrag_ftr"), "rag_mode": "filter_then_retrieve"}
    )
    check_task_owns_its_mode({"rag_mode": "retrieve_then_filter"})  # no task YAML: a loader called directly
    check_task_owns_its_mode({"config_source": "inline", "rag_mode": "global"})


def test_the_own_task_config_follows_includes():
    from medeval_metrics.task_yaml import own_task_config

    config = own_task_config(_task_yaml("emsqa_public_rag"))
    assert config["task"] == "emsqa_public_rag" and config["metadata"]["rag_mode"] == "global"
    assert config["generation_kwargs"]["max_gen_toks"] > 0  # from the CoT template, two includes up
    assert config["custom_dataset"] == "medeval_metrics.emsqa.rag.load_public_rag"  # !function kept as text


@pytest.mark.e2e
def test_a_zero_shot_rag_run_never_reads_the_validation_file(tmp_path, items, caplog):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.emsqa import data as emsqa_data
    from medeval_metrics.testing.scripted import ScriptedLM

    folder = tmp_path / "public"
    folder.mkdir()
    (folder / "test_open.json").write_text(json.dumps(items))
    broken = [{"question": "unreadable pool item", "choices": ["a. x", "b. "], "answer": "a"}]
    (folder / "val_open.json").write_text(json.dumps(items[:2] + broken))
    metadata = {
        "emsqa_public_path": str(folder),
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", items)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 2,
    }
    emsqa_data._read_pool.cache_clear()
    model = ScriptedLM({"key": "question", "generate": {}, "choose": {}, "default": '["a"]'})
    with caplog.at_level(logging.WARNING):
        lm_eval.simple_evaluate(
            model=model,
            tasks=["emsqa_public_rag"],
            limit=2,
            task_manager=TaskManager(include_defaults=False, include_path=tasks_path(), metadata=metadata),
        )
    assert emsqa_data._read_pool.cache_info().misses == 0
    assert "val_open.json" not in caplog.text and "few-shot example" not in caplog.text


def test_saving_a_limited_run_keeps_a_full_section_made_the_same_way(docs, metadata, tmp_path):
    import itertools

    from medeval_metrics.emsqa.rag import RetrievedSplit, TaskRetrieval

    saved = tmp_path / "saved.jsonl"
    add_retrieval(docs, {**metadata, "rag_save_retrievals": str(saved), "rag_mode": "filter_then_retrieve"}, task="t")
    fresh = load_docs(SYNTHETIC, "again")
    split = RetrievedSplit(fresh, [], TaskRetrieval(fresh, {**metadata, "rag_save_retrievals": str(saved)}, task="t"))
    list(itertools.islice(split, 2))  # the same task, another mode: its section is replaced
    assert len(saved.read_text().splitlines()) == 1 + 2
    again = load_docs(SYNTHETIC, "again")
    split = RetrievedSplit(again, [], TaskRetrieval(again, {**metadata, "rag_save_retrievals": str(saved)}, task="t"))
    split[4]  # made the same way: item 4 is added to items 0 and 1
    split.retrieval.finish()
    assert [json.loads(line)["id"] for line in saved.read_text().splitlines()[1:]] == ["0", "1", "4"]


@pytest.mark.parametrize(
    "content, reason",
    [
        ('[{"question": "q", "choices": ["a. x"], "answer": "a"}]', "line 1 is not a JSON object"),
        ('{"id": "0", "chunks": []}', "holds retrievals it did not save"),
    ],
    ids=["a data set", "a sample log"],
)
def test_saving_over_a_file_that_is_not_a_retrievals_file_is_refused(docs, metadata, tmp_path, content, reason):
    target = tmp_path / "test_open.json"
    target.write_text(content)
    with pytest.raises(MedevalDataError, match=rf"rag_save_retrievals: {target}.*{reason}.*Name a new file"):
        add_retrieval(docs, {**metadata, "rag_save_retrievals": str(target)})
    assert target.read_text() == content  # untouched


def test_a_failed_save_at_the_end_of_an_iteration_is_one_error_line_and_the_run_goes_on(
    docs, metadata, tmp_path, monkeypatch, caplog
):
    from medeval_metrics.emsqa.rag import RetrievedSplit, TaskRetrieval

    saved = tmp_path / "saved.jsonl"
    split = RetrievedSplit(docs, [], TaskRetrieval(docs, {**metadata, "rag_save_retrievals": str(saved)}, task="t"))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("medeval_metrics.emsqa.rag.save_task_retrievals", full_disk)
    with caplog.at_level(logging.ERROR, logger="medeval_metrics.emsqa"):
        assert len(list(split)) == 12  # the iteration ends normally
        split.retrieval.finish_or_report()  # at exit: not tried again
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and f"the retrievals were not saved to {saved}" in errors[0]
    assert "No space left on device" in errors[0] and "rag_retrievals" in errors[0]
    assert not saved.exists()


def test_a_public_test_file_without_a_validation_file_runs_zero_shot_and_refuses_few_shot(tmp_path):
    from medeval_metrics.emsqa.data import fewshot_pool, load_public

    (tmp_path / "test_open.json").write_text(SYNTHETIC.read_text())
    splits = load_public(emsqa_public_path=str(tmp_path))
    assert len(splits["test"]) == 12
    pool = fewshot_pool(splits["validation"])  # what lm-eval lists at task build: nothing read yet
    with pytest.raises(MedevalDataError, match=r"test_open.json: no EMSQA validation file .*\(--num_fewshot 0\)"):
        list(pool[0])  # drawing examples: the test items would show their own answers


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"id": "0", "areas": ["trauma"]}\n', {"0": ["trauma"]}),  # one JSON Lines record, not an object of ids
        ('{"0": ["trauma"]}', {"0": ["trauma"]}),
        ('{"id": "0", "areas": ["trauma"]}\n{"id": "1", "areas": []}\n{"id": 2,,}\n', "line 3 of .* is not valid JSON"),
        ('{"areas": ["trauma"]}\n{"id": "1", "areas": ["trauma"]}\n', "line 1 of .* has no 'id'"),
    ],
    ids=["one record", "object", "bad line 3", "no id"],
)
def test_predicted_areas_files_read_or_name_the_line(tmp_path, text, expected):
    path = tmp_path / "areas.jsonl"
    path.write_text(text)
    if isinstance(expected, dict):
        assert read_predicted_areas(path, ["0"]) == expected
    else:
        with pytest.raises(MedevalDataError, match=expected):
            read_predicted_areas(path, ["0", "1", "2"])


@pytest.mark.parametrize("value", [3.9, True, "abc", "4.0"])
def test_rag_k_must_be_a_whole_number(value):
    with pytest.raises(MedevalDataError, match=rf"rag_k={value!r} is not a whole number"):
        retrieval_settings({"rag_k": value})
    assert retrieval_settings({"rag_k": " 8 "}).k == 8


def test_every_bad_retrieval_setting_is_named_at_once():
    """Two typos in one command: both in the one error, each with the default as its example."""
    with pytest.raises(MedevalDataError) as caught:
        retrieval_settings({"rag_k": "3.9", "rag_chunk_tokens": "many"})
    assert "rag_k='3.9' is not a whole number; e.g. rag_k=32" in str(caught.value)
    assert "rag_chunk_tokens='many' is not a whole number; e.g. rag_chunk_tokens=512" in str(caught.value)
    with pytest.raises(MedevalDataError) as caught:
        retrieval_settings({"rag_k": 0, "rag_retriever": "bm26"})
    assert "rag_retriever 'bm26' is not one of" in str(caught.value) and "rag_k must be" in str(caught.value)


def test_a_user_s_process_docs_can_filter_map_and_read_columns_of_the_split(docs, metadata):
    from medeval_metrics.emsqa.rag import RetrievedSplit, TaskRetrieval

    split = RetrievedSplit(docs, ["id", "question"], TaskRetrieval(docs, metadata, task="t"))
    first_two = split.filter(lambda doc: doc["id"] in ("0", "1"))  # e.g. keep one certification level
    assert isinstance(first_two, RetrievedSplit) and len(first_two) == 2 and "rag_chunks" not in docs[0]
    assert [d["id"] for d in first_two] == ["0", "1"] and all(d["rag_chunks"] is not None for d in first_two)
    assert "rag_chunks" not in docs[2]  # still retrieved for only the items reached
    assert split["id"] == [d["id"] for d in docs]  # a column
    mapped = split.map(lambda doc: {"question": doc["question"].upper()})  # a Dataset method: the whole split
    assert mapped[3]["question"] == docs[3]["question"].upper() and mapped[3]["rag_context"] == docs[3]["rag_context"]


def test_a_dropped_split_saves_what_was_reached_and_frees_its_index(docs, metadata, tmp_path):
    import gc
    import weakref

    from medeval_metrics.emsqa.rag import RetrievedSplit, TaskRetrieval

    saved = tmp_path / "saved.jsonl"
    retrieval = TaskRetrieval(docs, {**metadata, "rag_save_retrievals": str(saved)}, task="t")
    alive = weakref.ref(retrieval)
    split = RetrievedSplit(docs, [], retrieval)
    del retrieval
    split[3]  # indexed only (lm-eval's test of one doc), no iteration that would save
    del split
    gc.collect()
    assert alive() is None  # a long-lived process does not keep every task's index
    assert [json.loads(line)["id"] for line in saved.read_text().splitlines()[1:]] == ["3"]
