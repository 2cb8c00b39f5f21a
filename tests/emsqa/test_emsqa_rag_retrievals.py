"""Saved retrievals per task: the tasks of one run share a file, each gets its own prompts back, and a
file made another way (mode, k, areas, retriever, knowledge, chunking) is refused in one line naming
the difference. Also what the results record about what the prompts showed."""

from __future__ import annotations

import json
import logging

import pytest
from test_emsqa_rag import SYNTHETIC, make_kb

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.data import load_docs
from medeval_metrics.emsqa.rag import add_retrieval, doc_to_text_rag_cot, doc_to_text_rag_expert_cot
from medeval_metrics.emsqa.retrieval.precomputed import read_sections

# The four public RAG tasks: name, mode, prompt (as their YAMLs set them).
PUBLIC_RAG = [
    ("emsqa_public_rag", "global", doc_to_text_rag_cot),
    ("emsqa_public_rag_expert_cot", "global", doc_to_text_rag_expert_cot),
    ("emsqa_public_expertrag_ftr", "filter_then_retrieve", doc_to_text_rag_expert_cot),
    ("emsqa_public_expertrag_rtf", "retrieve_then_filter", doc_to_text_rag_expert_cot),
]


@pytest.fixture
def items():
    return json.loads(SYNTHETIC.read_text())


@pytest.fixture
def metadata(tmp_path, items):
    # item 5's planted fact sits in terminology: global and filtered retrieval show it different documents
    kb = make_kb(tmp_path / "kb", items, wrong_area_for={5})
    return {"emsqa_knowledge_path": str(kb), "rag_cache_dir": str(tmp_path / "cache"), "rag_k": 3}


def fresh():
    return load_docs(SYNTHETIC, "the synthetic set")


def run_task(task, mode, prompt, metadata, **extra):
    docs = fresh()
    record = add_retrieval(docs, {**metadata, "rag_mode": mode, **extra}, prompt=prompt, task=task)
    return docs, record


def no_retrieval(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("retrieved although precomputed retrievals were given")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.prepare", refuse)


def test_the_four_public_rag_tasks_share_one_file_and_each_gets_its_prompts_back(metadata, tmp_path, monkeypatch):
    saved = tmp_path / "retrievals.jsonl"
    first = {}
    for task, mode, prompt in PUBLIC_RAG:
        docs, _ = run_task(task, mode, prompt, metadata, rag_save_retrievals=str(saved))
        first[task] = [prompt(d) for d in docs]
    assert first["emsqa_public_rag_expert_cot"] != first["emsqa_public_expertrag_ftr"]  # the modes differ
    assert sorted(s.task for s in read_sections(saved)) == sorted(t for t, _, _ in PUBLIC_RAG)
    no_retrieval(monkeypatch)
    for task, mode, prompt in PUBLIC_RAG:
        docs, record = run_task(
            task, mode, prompt, {**metadata, "rag_cache_dir": str(tmp_path / "cold")}, rag_retrievals=str(saved)
        )
        assert [prompt(d) for d in docs] == first[task], task
        assert record["retrievals_from"] == str(saved) and record["shown"]["mode"] == mode


def test_saving_a_task_again_replaces_only_its_own_section(metadata, tmp_path):
    saved = tmp_path / "retrievals.jsonl"
    for task, mode, prompt in PUBLIC_RAG[:2]:
        run_task(task, mode, prompt, metadata, rag_save_retrievals=str(saved))
    run_task(*PUBLIC_RAG[0], {**metadata, "rag_k": 2}, rag_save_retrievals=str(saved))
    sections = {s.task: s for s in read_sections(saved)}
    assert set(sections) == {"emsqa_public_rag", "emsqa_public_rag_expert_cot"}
    assert sections["emsqa_public_rag"].header["k"] == 2 and sections["emsqa_public_rag_expert_cot"].header["k"] == 3
    assert all(len(c) <= 2 for c in sections["emsqa_public_rag"].items.values())


def test_a_task_without_a_section_uses_one_made_the_same_way(metadata, tmp_path, monkeypatch):
    saved = tmp_path / "retrievals.jsonl"
    docs, _ = run_task(*PUBLIC_RAG[0], metadata, rag_save_retrievals=str(saved))  # global, k 3
    no_retrieval(monkeypatch)
    again, _ = run_task(
        *PUBLIC_RAG[1], {**metadata, "rag_cache_dir": str(tmp_path / "cold")}, rag_retrievals=str(saved)
    )
    assert [d["rag_chunks"] for d in again] == [d["rag_chunks"] for d in docs]


def write_areas(path, items, change):
    areas = {str(i): item["category"] for i, item in enumerate(items)}
    areas["0"] = [change]
    path.write_text(json.dumps(areas))
    return str(path)


@pytest.mark.parametrize("field", ["mode", "k", "areas", "retriever", "knowledge", "chunking"])
def test_a_file_made_another_way_is_refused_in_one_line_naming_the_difference(
    field, metadata, items, tmp_path, monkeypatch
):
    saved = tmp_path / "retrievals.jsonl"
    task, mode, prompt = PUBLIC_RAG[2]  # filter_then_retrieve: areas matter
    run_task(task, mode, prompt, metadata, rag_save_retrievals=str(saved))
    again = {**metadata, "rag_retrievals": str(saved)}
    if field == "mode":
        mode = "retrieve_then_filter"
    elif field == "k":
        again["rag_k"] = 2
    elif field == "areas":
        again["rag_areas"] = write_areas(tmp_path / "areas.json", items, "trauma")  # item 0: trauma, not assessment
    elif field == "retriever":  # e.g. another bm25s version or parameters
        from medeval_metrics.emsqa.retrieval.retrievers import BM25Retriever

        spec = BM25Retriever().spec
        monkeypatch.setattr(BM25Retriever, "spec", property(lambda self: {**spec, "k1": 1.2}))
    elif field == "knowledge":  # the same chunk ids, one file's text changed
        kb = make_kb(tmp_path / "kb-edited", items, wrong_area_for={5})
        (kb / "others.json").write_text(json.dumps([{"Scene safety": "changed"}]))
        again["emsqa_knowledge_path"] = str(kb)
    else:
        again["rag_chunk_tokens"] = 256
    with pytest.raises(MedevalDataError) as caught:
        add_retrieval(fresh(), {**again, "rag_mode": mode}, prompt=prompt, task=task)
    message = str(caught.value)
    assert "\n" not in message and f"refused for {task}" in message and str(saved) in message
    assert f"made another way, {field}: the file's is " in message, message
    expected = {
        "mode": '"filter_then_retrieve", this run\'s is "retrieve_then_filter (pool 10k)"',
        "k": "3, this run's is 2",
        "retriever": "k1 1.5, this run's is k1 1.2",
        "chunking": "tokens 512, this run's is tokens 256",
    }
    if field in expected:
        assert f"the file's is {expected[field]}" in message, message
    if field == "areas":
        assert "gold (items' areas sha256" in message and "predicted (items' areas sha256" in message


def test_the_same_settings_are_not_refused_and_the_file_is_read_again(metadata, items, tmp_path):
    saved = tmp_path / "retrievals.jsonl"
    task, mode, prompt = PUBLIC_RAG[2]
    docs, _ = run_task(task, mode, prompt, metadata, rag_save_retrievals=str(saved))
    # predicted areas equal to the gold ones select the same files: still a different setting, refused
    same = write_areas(tmp_path / "areas.json", items, items[0]["category"][0])
    with pytest.raises(MedevalDataError, match="areas: "):
        run_task(task, mode, prompt, metadata, rag_retrievals=str(saved), rag_areas=same)
    again, _ = run_task(task, mode, prompt, metadata, rag_retrievals=str(saved))
    assert [d["rag_context"] for d in again] == [d["rag_context"] for d in docs]


def test_a_sample_log_is_checked_like_a_file(metadata, tmp_path):
    task, mode, prompt = PUBLIC_RAG[3]
    docs, _ = run_task(task, mode, prompt, metadata)
    samples = tmp_path / f"samples_{task}_2026.jsonl"
    samples.write_text("\n".join(json.dumps({"doc_id": n, "doc": d}) for n, d in enumerate(docs)))
    again, _ = run_task(task, mode, prompt, metadata, rag_retrievals=str(samples))
    assert [prompt(d) for d in again] == [prompt(d) for d in docs]
    with pytest.raises(MedevalDataError, match=r"made another way, k: the file's is 3, this run's is 4\."):
        run_task(task, mode, prompt, {**metadata, "rag_k": 4}, rag_retrievals=str(samples))
    old = tmp_path / "old.jsonl"  # a file of an earlier version: no record of how it was made
    old.write_text(
        json.dumps({"medeval_retrievals": 1, "chunks_version": "x"})
        + "\n"
        + json.dumps({"id": "0", "chunks": []})
        + "\n"
    )
    with pytest.raises(MedevalDataError, match="does not record how its retrievals were made"):
        run_task(task, mode, prompt, metadata, rag_retrievals=str(old))


def test_a_file_with_more_chunks_than_k_is_refused(metadata, tmp_path):
    saved = tmp_path / "retrievals.jsonl"
    task, mode, prompt = PUBLIC_RAG[0]
    run_task(task, mode, prompt, metadata, rag_save_retrievals=str(saved))
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    others = {c["id"]: c for line in lines[2:] for c in line["chunks"]}  # other items' chunks: 3 more, distinct
    lines[1]["chunks"] += [c for i, c in others.items() if i not in {x["id"] for x in lines[1]["chunks"]}][:3]
    saved.write_text("\n".join(json.dumps(line) for line in lines))
    with pytest.raises(MedevalDataError, match=r"has 6 chunks, more than k 3"):
        run_task(task, mode, prompt, metadata, rag_retrievals=str(saved))


def test_the_record_of_items_filled_one_at_a_time_equals_one_fill(metadata, items, tmp_path):
    """lm-eval reaches items one by one (each fill updates the record): the same record as filling all at once."""
    from medeval_metrics.emsqa.rag import TaskRetrieval

    kb = make_kb(tmp_path / "kb-short", items, skip={"ems_operations"})  # item 7 then gets no documents
    task, mode, prompt = PUBLIC_RAG[2]
    settings = {**metadata, "emsqa_knowledge_path": str(kb), "rag_mode": mode}
    docs, whole = fresh(), fresh()
    one_by_one = TaskRetrieval(docs, settings, prompt=prompt, task=task)
    at_once = TaskRetrieval(whole, settings, prompt=prompt, task=task)
    for doc in docs:
        one_by_one.fill([doc])
    at_once.fill(whole)
    assert one_by_one.record["shown"] == at_once.record["shown"]
    assert one_by_one.record["shown"]["no_documents"]["items"] == 1 and one_by_one.record["shown"]["items"] == 12


def test_the_results_record_what_the_prompts_showed(metadata, items, tmp_path, caplog):
    # without the ems_operations file, item 7 (its only area) gets no documents when filtering
    kb = make_kb(tmp_path / "kb-short", items, skip={"ems_operations"})
    task, mode, prompt = PUBLIC_RAG[2]
    with caplog.at_level(logging.WARNING, logger="medeval_metrics.emsqa"):
        docs, record = run_task(task, mode, prompt, {**metadata, "emsqa_knowledge_path": str(kb)})
    counts = [len(d["rag_chunks"]) for d in docs]
    assert counts[7] == 0 and sum(n == 0 for n in counts) == 1
    shown = record["shown"]
    assert (shown["mode"], shown["k"], shown["prompt"], shown["items"]) == ("filter_then_retrieve", 3, "pack", 12)
    assert shown["documents_per_item"] == {"mean": round(sum(counts) / 12, 3), "min": 0, "max": max(counts)}
    assert shown["no_documents"] == {"items": 1, "share": round(1 / 12, 4)}
    assert record["retrievals"]["task"] == task and record["retrievals"]["k"] == 3
    lines = [r.getMessage() for r in caplog.records if "got no documents" in r.getMessage()]
    assert lines == [
        (
            f"medeval: {task}: 1 of 12 items (8.3%) got no documents (mode filter_then_retrieve, k 3); "
            "the metric no_documents is their share"
        )
    ]
    _, global_record = run_task(*PUBLIC_RAG[0], {**metadata, "emsqa_knowledge_path": str(kb)})
    assert global_record["shown"]["no_documents"] == {"items": 0, "share": 0.0}


# --- rag_prompt: authors --------------------------------------------------------------------------


def test_the_authors_prompt_follows_their_templates_part_for_part(metadata):
    """prompts/rag_cot.txt and prompts/rag_cot_attr.txt of the authors' code/EMSRAG, with their system
    messages (ems_rag.py, methods "cot" and "cot_attr"): labels, order, instruction, documents block."""
    docs, record = run_task(*PUBLIC_RAG[0], {**metadata, "rag_prompt": "authors"})
    doc = docs[1]  # trauma + cardiology, EMT
    assert record["shown"]["prompt"] == "authors"
    chunks = doc["rag_context"].split("\n")
    assert chunks[0] == "EMS Knowledge:" and chunks[1].startswith("- Fact 1: ")
    cot = doc_to_text_rag_cot(doc)
    choices = "\n".join(f"{letter}. {text}" for letter, text in zip(doc["letters"], doc["options"]))
    assert cot == (
        f"Relevant Documents: {doc['rag_context']}\n\nQuestion: {doc['question']}\n\nChoices: {choices}\n\n"
        "Please think step-by-step and and then choose the answer from the provided options, organize "
        "your output in a json formatted as (only Letters e.g.: A/B/C/D) with explanation as "
        'Dict{"step_by_step_thinking": Str(explanation), "answer": List(A, B) or List([C])}'
    )
    assert doc["rag_system"].startswith(
        "You are a helpful EMS expert, and your task is to answer a multi-choice "
        "ems question using the relevant documents."
    )
    assert doc["rag_system"].endswith("Respond ONLY in the JSON schema provided.\n\n")

    docs, _ = run_task(*PUBLIC_RAG[2], {**metadata, "rag_prompt": "authors"})
    doc = docs[1]
    expert = doc_to_text_rag_expert_cot(doc)
    areas = str(doc["category"])  # the record's list as the authors' template prints it
    assert areas == "['trauma', 'cardiology_and_resuscitation']"
    assert expert.startswith(f"Certification Level: {doc['level']!s}\n\nCategory: {areas}\n\nQuestion: ")
    order = [
        "Certification Level:",
        "Category:",
        "Question:",
        "Choices:",
        "Relevant Documents: EMS Knowledge:",
        f"Based on the relevant documents, think step by step from the standpoint of {areas}, choose",
    ]
    assert [expert.index(part) for part in order] == sorted(expert.index(part) for part in order)
    assert expert.endswith('Return your final answer as a lowercase letter in strict JSON format, like: ["a"]')
    assert f"from the standpoint of {areas} and then choose the answer" in doc["rag_system"]
    assert "at the requested certification depth using the relevant documents" in doc["rag_system"]


def test_the_pack_prompt_is_the_default_and_has_no_system_message(metadata):
    docs, record = run_task(*PUBLIC_RAG[0], metadata)
    assert record["shown"]["prompt"] == "pack" and all(d["rag_system"] == "" for d in docs)
    assert doc_to_text_rag_cot(docs[1]).startswith("Relevant documents:\n- Fact 1: ")
    with pytest.raises(MedevalDataError, match="rag_prompt='paper' is not one of pack, authors"):
        run_task(*PUBLIC_RAG[0], {**metadata, "rag_prompt": "paper"})


def test_an_item_without_documents_in_the_authors_prompt_keeps_their_empty_block(metadata, items, tmp_path):
    kb = make_kb(tmp_path / "kb-short", items, skip={"ems_operations"})
    docs, _ = run_task(*PUBLIC_RAG[2], {**metadata, "emsqa_knowledge_path": str(kb), "rag_prompt": "authors"})
    assert "\n\nRelevant Documents: EMS Knowledge:\n\n\nBased on the relevant documents" in doc_to_text_rag_expert_cot(
        docs[7]
    )


@pytest.mark.parametrize(
    "reply, letters",
    [
        # the answer formats the authors' templates ask for, as models write them
        ('{"step_by_step_thinking": "Moderate burns are 2-10% full thickness.", "answer": ["A", "C"]}', ["a", "c"]),
        ('```json\n{"step_by_step_thinking": "Aspirin first.", "answer": "B"}\n```', ["b"]),
        # the template's own List(...) form, copied (read by version 3, not by 4; version 5 again)
        ('Dict{"step_by_step_thinking": "copying the template", "answer": List([C])}', ["c"]),
        ('{"step_by_step_thinking": "Both apply.", "answer": List(A, C)}', ["a", "c"]),
        ('{"step_by_step_thinking": "For example, a child.", "answer": List([B])}', ["b"]),
        # the format line echoed is no answer, and a real answer after it is read
        ('Dict{"step_by_step_thinking": Str(explanation), "answer": List(A, B) or List([C])}', None),
        (
            'Dict{"step_by_step_thinking": Str(explanation), "answer": List(A, B) or List([C])}\n{"answer": ["d"]}',
            ["d"],
        ),
        # a JSON answer given as an example stays no answer
        ('Write it like {"step_by_step_thinking": "...", "answer": ["b"]}', None),
        ('Based on the relevant documents, from the standpoint of trauma the splint comes first.\n["d"]', ["d"]),
        ('<think>Document 2 says oxygen.</think>\n["b", "c"]', ["b", "c"]),
    ],
)
def test_replies_in_the_authors_answer_formats_are_read(reply, letters):
    from medeval_metrics.emsqa.extract import extract_answer

    assert extract_answer(reply, ["a", "b", "c", "d"]) == letters


def test_the_report_shows_the_share_of_items_without_documents():
    from medeval_metrics.report.tables import ScoreRow, results_table

    row = ScoreRow(
        "emsqa_public_expertrag_ftr", "emsqa", 2, "flexible-extract", "no_documents", 712 / 3721, 0.0064, 0, 3721, 3721
    )
    assert "| Items shown no retrieved document (`no_documents`) | 0.1913 |" in results_table([row])


BURNS = [
    "full-thickness burns involving 5% to 15% of body surface area (bsa)",
    "full-thickness burns involving 2% to 10% of bsa (excluding hands, feet, face, genitalia, and upper airway)",
    "partial-thickness burns covering 15% to 30% of bsa",
    "superficial burns covering more than 50% of bsa",
]
CHILD_FACE = ["narrow airways", "rounded cheeks", "smaller head", "flat nose and face"]


@pytest.mark.parametrize(
    "reply, options, letters",
    [
        # SmolLM2-135M-Instruct on emsqa_public_expertrag_ftr / _rag with rag_prompt authors, k 2, chat
        # template, 2026-12-01 (labels by hand): it never writes the authors' JSON
        (
            "1. A bag valve mask is a nonrebreathing mask that delivers up to 95% oxygen and allows the patient to "
            "exhale carbon dioxide without rebreathing it.\n2. The correct answer is: A bag valve mask is a "
            "nonrebreathing mask that delivers up to 95% oxygen",
            CHILD_FACE,
            None,  # "A bag valve mask": the article, and no option's text (was read as a)
        ),
        ('1.\n\nThe correct answer is: "a".', CHILD_FACE, ["a"]),
        (
            "d. partial-thickness burns covering 15% to 30% of bsa\n\nThe answer is: d. partial-thickness burns "
            "covering 15% to 30% of bsa",
            BURNS,
            None,  # letter d with option c's text
        ),
        (
            "1. The answer is a. narrow airways\n\nThe answer is a. narrow airways\n\nThe other options are b. "
            "rounded cheeks and c. smaller head",
            CHILD_FACE,
            ["a"],
        ),
        ("A. Full-thickness Burns\n\nThe correct answer is: A. Full-thickness Burns", BURNS, ["a"]),
        # a capital A that goes on with the answer stays the letter
        ("The answer is A because the airways are narrow.", CHILD_FACE, ["a"]),
        ("A is the correct answer.", CHILD_FACE, ["a"]),
        ("I choose A since it fits.", CHILD_FACE, ["a"]),
        ("The answer is A not B.", CHILD_FACE, ["a"]),
        ("The answer is: A small child has narrow airways.", CHILD_FACE, None),
    ],
)
def test_real_replies_to_the_authors_prompt_are_read_as_a_grader_reads_them(reply, options, letters):
    from medeval_metrics.emsqa.extract import extract_answer

    letters_of = ["a", "b", "c", "d"]
    assert extract_answer(reply, letters_of, dict(zip(letters_of, options))) == letters
