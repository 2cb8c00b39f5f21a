"""A retrievals file made by another retriever (issue 31, "your own retriever"): accepted when its header names
the retriever as external and carries the knowledge digest and chunking the pack prints, its documents shown
exactly as given (order, text); refused in one line naming the file, the record and the fix otherwise."""

from __future__ import annotations

import json
import logging

import pytest
from test_emsqa_rag import SYNTHETIC, make_kb

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa import rag
from medeval_metrics.emsqa.data import load_docs
from medeval_metrics.emsqa.rag import add_retrieval, doc_to_text_rag_cot, doc_to_text_rag_expert_cot
from medeval_metrics.emsqa.retrieval.precomputed import read_sections

NAME = "my-colbert v2 (lab build 7)"


@pytest.fixture
def items():
    return json.loads(SYNTHETIC.read_text())


@pytest.fixture
def metadata(tmp_path, items):
    kb = make_kb(tmp_path / "kb", items)
    return {"emsqa_knowledge_path": str(kb), "rag_cache_dir": str(tmp_path / "cache"), "rag_k": 3}


@pytest.fixture
def chunks(metadata, tmp_path):
    """The chunks as the pack cuts them, read from the file the pack writes for another retriever."""
    path = tmp_path / "chunks.jsonl"
    rag.write_chunks(metadata, path)
    return {c["id"]: c for c in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def fact(chunks, index):
    return next(c for c in chunks.values() if c["title"] == f"Fact {index}")


def choice(chunks, index):
    """What "the other retriever" gives item i: another item's planted fact, then a filler section, then the
    item's own fact: an order and a pick that bm25 would not make."""
    other = fact(chunks, (index + 1) % 12)
    filler = next(c for c in chunks.values() if c["title"] == "Documentation" and c["source"] == "trauma")
    return [other, filler, fact(chunks, index)]


def external_file(path, metadata, chunks, drop=(), **header_changes):
    header = rag.external_header(metadata, NAME) | header_changes
    lines = [json.dumps(header)]
    for index in range(12):
        if str(index) in drop:
            continue
        picked = choice(chunks, index)
        documents = [{"id": picked[0]["id"], "score": 17.5}, {"id": picked[1]["id"]}, {"id": picked[2]["id"]}]
        documents[2] |= {"title": picked[2]["title"], "text": picked[2]["text"]}  # text given: checked
        lines.append(json.dumps({"id": str(index), "chunks": documents}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def fresh():
    return load_docs(SYNTHETIC, "the synthetic set")


def no_retrieval(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("retrieved although an external retrievals file was given")

    for method in ("prepare", "load", "build"):
        monkeypatch.setattr(f"medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.{method}", refuse)


@pytest.mark.parametrize(
    "task, mode, prompt",
    [
        ("emsqa_public_rag", "global", doc_to_text_rag_cot),
        # a filtered task: the other retriever's choice is shown as given, other areas' chunks included
        ("emsqa_public_expertrag_ftr", "filter_then_retrieve", doc_to_text_rag_expert_cot),
    ],
)
def test_an_external_file_is_shown_exactly_as_given(task, mode, prompt, metadata, chunks, tmp_path, monkeypatch):
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    no_retrieval(monkeypatch)
    docs = fresh()
    record = add_retrieval(docs, {**metadata, "rag_mode": mode, "rag_retrievals": str(path)}, prompt=prompt, task=task)
    for index, doc in enumerate(docs):
        picked = choice(chunks, index)
        block = "Relevant documents:\n" + "\n".join(f"- {c['title']}: {c['text']}" for c in picked)
        assert doc["rag_context"] == block
        assert block in prompt(doc)
        assert doc["rag_chunks"] == [
            {"id": picked[0]["id"], "source": picked[0]["source"], "score": 17.5},
            {"id": picked[1]["id"], "source": "trauma", "score": None},  # no score given: none recorded
            {"id": picked[2]["id"], "source": picked[2]["source"], "score": None},
        ]
        assert doc["rag_header"]["retriever"] == {"external": NAME} and doc["rag_header"]["task"] == task
    assert record["external_retriever"] == NAME and record["settings"]["retriever"] == "external"
    assert record["retrievals"]["retriever"] == {"external": NAME}
    assert record["retrievals"]["knowledge"] == rag.external_header(metadata, NAME)["knowledge"]
    assert record["shown"]["retriever"] == f"external: {NAME}" and record["retrievals_from"] == str(path)
    assert record["shown"]["documents_per_item"] == {"mean": 3.0, "min": 3, "max": 3}


def test_the_pack_s_own_runs_say_which_retriever_they_used(metadata):
    record = add_retrieval(fresh(), {**metadata, "rag_mode": "global"}, task="emsqa_public_rag")
    assert record["external_retriever"] is None and record["shown"]["retriever"] == "bm25"


def test_the_retriever_s_own_details_are_kept_and_the_console_names_it(metadata, chunks, tmp_path, caplog):
    own = {"external": NAME, "version": "7", "index": "flat, 128 dims"}
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks, retriever=own)
    with caplog.at_level(logging.WARNING, logger="medeval_metrics.emsqa"):
        record = add_retrieval(fresh(), {**metadata, "rag_retrievals": str(path)}, task="emsqa_public_rag")
    assert record["retrievals"]["retriever"] == own and record["external_retriever"] == NAME
    assert [r.getMessage() for r in caplog.records if "external" in r.getMessage()] == [
        f"medeval: emsqa_public_rag: the documents come from the external retriever {NAME!r} ({path}), "
        "shown in its order"
    ]


def test_the_authors_prompt_shows_them_as_given_too(metadata, chunks, tmp_path):
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    docs = fresh()
    add_retrieval(docs, {**metadata, "rag_retrievals": str(path), "rag_prompt": "authors"}, task="emsqa_public_rag")
    picked = choice(chunks, 4)
    expected = "EMS Knowledge:\n" + "\n".join(f"- {c['title']}: {c['text']}" for c in picked)
    assert doc_to_text_rag_cot(docs[4]).startswith(f"Relevant Documents: {expected}\n\nQuestion: ")


def header_command(argv):
    """``medeval emsqa-retrievals-header ARGV``, in this process."""
    from medeval_metrics.cli import main

    return main(["emsqa-retrievals-header", *argv])


def test_the_header_the_pack_prints_is_the_one_it_checks(metadata, chunks, tmp_path, capsys):
    assert (
        header_command(["--name", NAME, "--metadata", json.dumps(metadata), "--chunks", str(tmp_path / "c.jsonl")]) == 0
    )
    out, err = capsys.readouterr()
    header = json.loads(out)
    from medeval_metrics.emsqa.rag import TaskRetrieval

    own = TaskRetrieval(fresh(), {**metadata, "rag_mode": "global"}, task="emsqa_public_rag").header
    assert header == {
        "medeval_retrievals": 2,
        "retriever": {"external": NAME},
        "knowledge": own["knowledge"],
        "chunking": {"tokens": 512, "overlap": 128, "tokenizer": "basic", "text": "title. chunk"},
    }
    assert own["chunking"] == header["chunking"] and len(header["knowledge"]) == 64
    written = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert {c["id"] for c in written} == set(chunks) and f"wrote the {len(chunks)} chunks" in err
    assert set(written[0]) == {"id", "source", "title", "text"}
    # other chunking settings print another chunking
    assert header_command(["--name", NAME, "--metadata", json.dumps({**metadata, "rag_chunk_tokens": 256})]) == 0
    assert json.loads(capsys.readouterr().out)["chunking"]["tokens"] == 256


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--name", "  "], "--name must name your retriever"),
        (["--name", "x", "--metadata", "{bad"], "--metadata is not valid JSON"),
        (["--name", "x", "--metadata", "[1]"], "--metadata must be a JSON object"),
        (["--name", "x", "--metadata", '{"rag_chunk_tokens": "many"}'], "rag_chunk_tokens='many' is not a whole"),
    ],
)
def test_the_header_command_s_errors_are_one_line(argv, message, capsys):
    assert header_command(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err


def test_saved_again_or_logged_it_stays_external_and_gives_the_same_prompts(metadata, chunks, tmp_path):
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    saved = tmp_path / "saved.jsonl"
    docs = fresh()
    add_retrieval(docs, {**metadata, "rag_retrievals": str(path), "rag_save_retrievals": str(saved)}, task="t")
    (section,) = read_sections(saved)
    expected = {k: v for k, v in rag.external_header(metadata, NAME).items() if k != "medeval_retrievals"}
    assert section.header == expected | {"task": "t"}  # the file's own header, for this task
    samples = tmp_path / "samples_t_2026.jsonl"
    samples.write_text("\n".join(json.dumps({"doc_id": n, "doc": d}) for n, d in enumerate(docs)))
    for again_from in (saved, samples):
        again = fresh()
        record = add_retrieval(again, {**metadata, "rag_retrievals": str(again_from)}, task="t")
        assert [doc_to_text_rag_cot(d) for d in again] == [doc_to_text_rag_cot(d) for d in docs]
        assert record["external_retriever"] == NAME


def test_an_item_the_file_lacks_stops_the_run_when_reached(metadata, chunks, tmp_path):
    """Documented behaviour: only the items a run reaches need a line (a --limit run); an item reached without one
    is an error naming it and the file when its prompt is built, before the model is asked anything."""
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks, drop={"2"})
    docs = fresh()
    add_retrieval(docs, {**metadata, "rag_retrievals": str(path)}, task="emsqa_public_rag")
    assert "Fact 1" in doc_to_text_rag_cot(docs[0])
    with pytest.raises(MedevalDataError) as caught:
        doc_to_text_rag_cot(docs[2])
    message = str(caught.value)
    assert "\n" not in message and f"item '2' has no entry in the precomputed-retrievals file ({path})" in message
    assert "an empty chunk list shows none" in message


# lines[0] is the header (file line 1), lines[n] item n - 1 (file line n + 1)
def header_line(**changes):
    def change(lines):
        header = json.loads(lines[0]) | changes
        lines[0] = json.dumps({k: v for k, v in header.items() if v is not None})

    return change


def item_line(number, **changes):
    def change(lines):
        record = json.loads(lines[number])
        record.update(changes)
        lines[number] = json.dumps(record)

    return change


def chunk_of(number, position, **changes):
    def change(lines):
        record = json.loads(lines[number])
        record["chunks"][position] |= changes
        lines[number] = json.dumps(record)

    return change


def another_item_s_chunks(lines):
    record = json.loads(lines[1])
    record["chunks"].append(json.loads(lines[5])["chunks"][2])  # a fourth chunk, k is 3
    lines[1] = json.dumps(record)


def repeated_chunk(lines):
    record = json.loads(lines[1])
    record["chunks"][1] = record["chunks"][0]
    lines[1] = json.dumps(record)


FIX = '"retriever": {"external": "<name>"}'  # the fix of a malformed header or record: the documented layout


@pytest.mark.parametrize(
    "change, line, message",
    [
        (header_line(medeval_retrievals=3), 1, "'medeval_retrievals' is 3; this version reads 2"),
        (header_line(k=32), 1, "it has the field(s) k, which an external file does not take"),
        (header_line(retriever={"external": " "}), 1, "'retriever' must name your retriever as text"),
        (header_line(retriever={"external": 7}), 1, "'retriever' must name your retriever as text"),
        (header_line(knowledge="abc"), 1, "'knowledge' must be the knowledge base's digest the pack prints"),
        (header_line(chunking=None), 1, "'chunking' must be the object the pack prints"),
        (header_line(task=5), 1, "'task', when given, must be the name of the task"),
        (chunk_of(2, 0, score="high"), 3, "chunk 0: 'score', when given, must be a number (got \"high\")"),
        (chunk_of(2, 1, id=None), 3, "chunk 1: each chunk is an object with the chunk's 'id'"),
        (chunk_of(2, 2, text=["list"]), 3, "chunk 2: 'text', when given, must be text"),
        (item_line(3, chunks="trauma_0_0"), 4, "has no item id and chunk list"),
        (item_line(3, id=["3"]), 4, "the item id is a list"),
        (repeated_chunk, 2, "is listed twice for item '0'"),
        (lambda lines: lines.append(lines[4]), 14, "item '3' was given already (line 5)"),
        (lambda lines: lines.insert(2, "[1, 2]"), 3, "line 3 is not a JSON object"),
        (lambda lines: lines.insert(2, '{"id": "1", '), 3, "line 3 is not valid JSON"),
    ],
    ids=[
        "format",
        "unknown-field",
        "blank-name",
        "name-not-text",
        "knowledge-not-digest",
        "no-chunking",
        "task-not-text",
        "score-text",
        "chunk-without-id",
        "text-not-text",
        "chunks-not-list",
        "item-id-list",
        "chunk-twice",
        "item-twice",
        "line-not-object",
        "bad-json",
    ],
)
def test_a_malformed_file_is_one_line_naming_the_file_the_line_and_the_fix(
    change, line, message, metadata, chunks, tmp_path
):
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    lines = path.read_text().splitlines()
    change(lines)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MedevalDataError) as caught:
        add_retrieval(fresh(), {**metadata, "rag_retrievals": str(path)}, task="emsqa_public_rag")
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{path}: line {line}"), text
    assert message in text, text
    if "chunk" in message and "twice" not in message or line == 1:
        assert FIX in text, text  # the layout to follow


@pytest.mark.parametrize(
    "change, extra, message",
    [
        # the file claims another knowledge base or chunking than the run's
        (
            header_line(knowledge="0" * 64),
            {},
            f"the external retriever '{NAME}' searched another knowledge base or chunking than this run's, "
            "knowledge: the file's is \"0000",
        ),
        (None, {"rag_chunk_tokens": 256}, "chunking: the file's is tokens 512, this run's is tokens 256"),
        # it matches its claim in the header, not in its records
        (chunk_of(1, 0, id="trauma_99_0"), {}, "item '0': chunk 'trauma_99_0' is not in the EMSQA knowledge base"),
        (chunk_of(1, 2, text="a paraphrase"), {}, "item '0', chunk 2 ("),
        (chunk_of(1, 2, title="Another title"), {}, "its title is not that chunk's"),
        (chunk_of(1, 1, source="medical"), {}, "its source is not that chunk's"),
        # items and k
        (item_line(1, id="q-77"), {}, "item id 'q-77' is not in the evaluated set (1 such ids)"),
        (
            another_item_s_chunks,
            {},
            "item '0' has 4 chunks, more than k 3: give at most rag_k documents per item, or set rag_k to 4 or more",
        ),
    ],
    ids=["knowledge", "chunking", "unknown-chunk", "other-text", "other-title", "other-source", "unknown-item", "k"],
)
def test_a_file_that_does_not_match_what_it_claims_is_refused(change, extra, message, metadata, chunks, tmp_path):
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    if change is not None:
        lines = path.read_text().splitlines()
        change(lines)
        path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MedevalDataError) as caught:
        add_retrieval(fresh(), {**metadata, **extra, "rag_retrievals": str(path)}, task="emsqa_public_rag")
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{path}: "), text
    assert message in text, text
    if "other" in message or "this run's" in message:
        assert "medeval emsqa-retrievals-header --name NAME --chunks chunks.jsonl" in text


def test_the_text_check_names_the_fix(metadata, chunks, tmp_path):
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    lines = path.read_text().splitlines()
    chunk_of(1, 2, text="a paraphrase")(lines)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MedevalDataError, match=r"its text is not that chunk's .* leave title and text out\.$"):
        add_retrieval(fresh(), {**metadata, "rag_retrievals": str(path)}, task="emsqa_public_rag")


def test_a_section_for_another_task_is_not_taken_for_this_one_when_its_own_is_there(metadata, chunks, tmp_path):
    """A file with a section per task (header "task"): each task takes its own."""
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks, task="emsqa_public_rag")
    other = tmp_path / "other.jsonl"
    lines = path.read_text().splitlines()
    second = json.loads(lines[0]) | {"task": "emsqa_public_expertrag_ftr"}
    reversed_items = [json.loads(line) for line in lines[1:]]
    for record in reversed_items:
        record["chunks"] = record["chunks"][::-1]
    other.write_text("\n".join([*lines, json.dumps(second), *map(json.dumps, reversed_items)]) + "\n")
    mine, theirs = fresh(), fresh()
    add_retrieval(mine, {**metadata, "rag_retrievals": str(other)}, task="emsqa_public_rag")
    add_retrieval(
        theirs,
        {**metadata, "rag_retrievals": str(other), "rag_mode": "filter_then_retrieve"},
        task="emsqa_public_expertrag_ftr",
    )
    assert [c["id"] for c in mine[0]["rag_chunks"]] == [c["id"] for c in choice(chunks, 0)]
    assert [c["id"] for c in theirs[0]["rag_chunks"]] == [c["id"] for c in choice(chunks, 0)][::-1]


def test_what_can_be_told_before_a_model_loads(metadata, chunks, tmp_path):
    """rag.retrievals_file_problems: for `medeval run`'s checks, before the model loads (one line each)."""
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks)
    given = {**metadata, "rag_retrievals": str(path)}
    assert rag.retrievals_file_problems(given) == []
    assert rag.retrievals_file_problems(metadata) == []  # no file given
    assert rag.retrievals_file_problems({**metadata, "rag_retrievals": str(tmp_path / "none.jsonl")}) == []
    (problem,) = rag.retrievals_file_problems({**given, "rag_chunk_overlap": 64})
    assert problem.startswith(f"{path}: refused: the external retriever {NAME!r} searched another knowledge base")
    # the RAG tasks' pre-run check (medeval run, before the model loads) says the same
    from medeval_metrics.emsqa.spec import check_knowledge

    check_knowledge(given)
    with pytest.raises(MedevalDataError) as caught:
        check_knowledge({**given, "rag_chunk_overlap": 64})
    assert caught.value.problems == [problem]
    assert "chunking: the file's is overlap 128, this run's is overlap 64. Search this run's chunks" in problem
    lines = path.read_text().splitlines()
    item_line(3, id=["3"])(lines)
    path.write_text("\n".join(lines) + "\n")
    (problem,) = rag.retrievals_file_problems(given)
    assert problem.startswith(f"{path}: line 4: the item id is a list") and "\n" not in problem
    # a file of the pack's own is left to each task (its mode, k and areas are the task's)
    saved = tmp_path / "saved.jsonl"
    add_retrieval(fresh(), {**metadata, "rag_save_retrievals": str(saved)}, task="emsqa_public_rag")
    assert rag.retrievals_file_problems({**metadata, "rag_k": 5, "rag_retrievals": str(saved)}) == []


def test_a_hand_made_file_without_the_external_header_is_pointed_to_it(metadata, chunks, tmp_path):
    """A header that names its retriever some other way reads as the pack's own, made another way: the refusal
    says how to name an external one."""
    path = external_file(tmp_path / "theirs.jsonl", metadata, chunks, retriever="colbert")
    with pytest.raises(MedevalDataError) as caught:  # its chunks have no score: the pack's own files always do
        add_retrieval(fresh(), {**metadata, "rag_retrievals": str(path)}, task="emsqa_public_rag")
    assert f"{path}: line 2: each chunk needs 'id' and 'score'." in str(caught.value)
    assert FIX in str(caught.value)
    lines = path.read_text().splitlines()
    lines[1:] = [
        json.dumps({"id": str(i), "chunks": [{"id": chunks_id, "score": 1.0}]})
        for i, chunks_id in enumerate([next(iter(chunks))] * 12)
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MedevalDataError) as caught:
        add_retrieval(fresh(), {**metadata, "rag_retrievals": str(path)}, task="emsqa_public_rag")
    assert "does not record how its retrievals were made" in str(caught.value) and FIX in str(caught.value)
