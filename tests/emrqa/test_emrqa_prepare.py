"""emrQA preparation: streaming reader, tolerant CSV, validation errors without note text, splits, cache."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import SHARED_DATA, run_medeval

from medeval_metrics.context_fit import PromptCounter
from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa import jsonstream
from medeval_metrics.emrqa.prepare import ensure_prepared, prepare, read_ql_csv
from medeval_metrics.emrqa.synthetic import load_templates, write_synthetic
from medeval_metrics.emrqa.tasks import fits_context, load_classification, load_evidence, sample_size, window_doc

TEMPLATES = SHARED_DATA / "emrqa" / "templates-all.csv"
SECRET = "ZEBRA-PATIENT-TEXT"  # planted in notes: must never appear in an error message


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return write_synthetic(
        tmp_path_factory.mktemp("emrqa-data"), templates_csv=TEMPLATES if TEMPLATES.exists() else None
    )


@pytest.fixture(scope="module")
def prepared(synthetic, tmp_path_factory):
    out = tmp_path_factory.mktemp("emrqa-prep") / "a"
    manifest = prepare(synthetic.data_json, synthetic.data_ql_csv, out, log=lambda _: None)
    return out, manifest


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_preparing_twice_is_byte_identical(synthetic, prepared, tmp_path):
    first, _ = prepared
    second = tmp_path / "b"
    prepare(synthetic.data_json, synthetic.data_ql_csv, second, log=lambda _: None)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir()) and "manifest.json" in names
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_sizes_cover_every_subset_and_answer_form(synthetic, prepared):
    folder, manifest = prepared
    sizes = manifest["qa"]["sizes"]
    for subset, total in synthetic.questions.items():
        assert sizes[f"qa_{subset}_train"] + sizes[f"qa_{subset}_test"] == total
        assert sizes[f"qa_{subset}_test"] > 0, subset
    checks = manifest["quirks_and_checks"]
    assert checks["answers_single"] and checks["answers_empty"] and checks["answers_complex"]
    assert "evidence_not_in_note" not in checks  # every synthetic evidence is located
    assert checks["repeated_header_lines"] == 1 and checks["rows_with_unquoted_commas"] > 0
    assert manifest["qa"]["labels"]["smoking"] and set(manifest["qa"]["labels"]["smoking"]) <= {
        "CURRENT SMOKER",
        "NON-SMOKER",
        "PAST SMOKER",
        "UNKNOWN",
    }


def test_splits_have_the_documented_properties(prepared):
    folder, manifest = prepared
    # QA: by note, no note on both sides.
    for subset in ("medication", "relations", "risk", "smoking", "obesity"):
        train = {r["note_key"] for r in _jsonl(folder / f"qa_{subset}_train.jsonl")}
        test = {r["note_key"] for r in _jsonl(folder / f"qa_{subset}_test.jsonl")}
        assert train and test and not train & test
    # emrQL-2: question templates held out.
    train2 = {r["question_template"] for r in _jsonl(folder / "emrql_2_train.jsonl")}
    test2 = {r["question_template"] for r in _jsonl(folder / "emrql_2_test.jsonl")}
    assert test2 and not train2 & test2
    # emrQL-1: random over pairs, so test templates are seen in training.
    train1 = {r["question_template"] for r in _jsonl(folder / "emrql_1_train.jsonl")}
    test1 = {r["question_template"] for r in _jsonl(folder / "emrql_1_test.jsonl")}
    assert len(test1 & train1) > len(test1) / 2
    assert (
        manifest["emrql"]["sizes"]["emrql_1_train"] + manifest["emrql"]["sizes"]["emrql_1_test"]
        == manifest["emrql"]["sizes"]["emrql_2_train"] + manifest["emrql"]["sizes"]["emrql_2_test"]
    )
    # Few-shot pool: one training row per logical-form template.
    pool = _jsonl(folder / "emrql_1_fewshot.jsonl")
    assert len({r["lf_template"] for r in pool}) == len(pool)


def test_gold_evidence_positions_point_into_the_note(prepared):
    folder, _ = prepared
    notes = {r["note_key"]: r["text"] for r in _jsonl(folder / "notes.jsonl")}
    multi_line = 0
    for subset in ("medication", "relations", "risk"):
        for record in _jsonl(folder / f"qa_{subset}_test.jsonl") + _jsonl(folder / f"qa_{subset}_train.jsonl"):
            for answer in record["answers"]:
                note = notes[record["note_key"]]
                start = answer["evidence_start"]
                assert note[start : start + len(answer["evidence"])] == answer["evidence"]
                multi_line += "\n" in answer["evidence"]
    assert multi_line > 0  # risk notes have two-line evidence


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_streaming_reader_matches_json_load(synthetic, monkeypatch, chunk):
    monkeypatch.setattr(jsonstream, "_CHUNK", chunk)
    whole = json.loads(synthetic.data_json.read_text(encoding="utf-8"))
    expected = [(s["title"], i, note) for s in whole["data"] for i, note in enumerate(s["paragraphs"])]
    # medication and smoking put "title" after "paragraphs" in the synthetic file: spooled, same result.
    assert list(jsonstream.iter_notes(synthetic.data_json)) == expected


def test_ql_csv_quirks(tmp_path):
    path = tmp_path / "data-ql.csv"
    path.write_bytes(
        "\ufeffQuestion, Logical Form, QTemplate, LTemplate\r\n"
        "What were the results of INR on 2091-01-02, LabEvent (INR) [date=2091-01-02, result=x], "
        "What were the results of |test| on |date|, LabEvent (|test|) [date=|date|, result=x],\r\n"
        "\r\n"
        "Question, Logical Form, QTemplate, LTemplate\r\n"
        '"Is INR high","LabEvent (INR) [date=x, (result=x)>lab.refhigh]","Is |test| high",'
        '"LabEvent (|test|) [date=x, (result=x)>lab.refhigh]"\r\n'.encode("utf-8")
    )
    stats = Counter()
    rows = list(read_ql_csv(path, stats))
    assert [r["logical_form"] for r in rows] == [
        "LabEvent (INR) [date=2091-01-02, result=x]",
        "LabEvent (INR) [date=x, (result=x)>lab.refhigh]",
    ]
    assert rows[0]["question_template"] == "What were the results of |test| on |date|"
    assert rows[0]["lf_template"] == "LabEvent (|test|) [date=|date|, result=x]"
    assert stats == Counter({"rows_with_unquoted_commas": 1, "repeated_header_lines": 1})


@pytest.mark.parametrize(
    "text, message",
    [
        ("Question, Logical Form, QTemplate, LTemplate\nonly, two\n", "line 2: expected 4 columns"),
        ("Question, Logical Form, QTemplate, LTemplate\nq, A (x) [a=1, b=2], t, B (|y|) [c=x]\n", "line 2"),
        ("q, lf, qt, lt\n", "must start with the header"),
        # Bounded work on adversarial rows (issue 15): a clear refusal, not a quadratic search or a huge regex.
        ("Question, Logical Form, QTemplate, LTemplate\nq" + ", x" * 70 + "\n", "line 2: 71 comma-separated fields"),
        (
            "Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (" + "|" * 20_000 + ")\n",
            "line 2: the logical-form template is 20,004 characters long",
        ),
    ],
)
def test_ql_csv_bad_rows(tmp_path, text, message):
    path = tmp_path / "data-ql.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MedevalDataError, match=message):
        list(read_ql_csv(path))


def _one_note_file(tmp_path: Path, qa: dict, title: str = "medication", context=None) -> Path:
    note = {"note_id": "777", "context": context or [f"{SECRET} line one", f"{SECRET} aspirin 81 mg"], "qas": [qa]}
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"data": [{"title": title, "paragraphs": [note]}]}), encoding="utf-8")
    return path


GOOD_QA = {
    "question": ["What is the dosage of aspirin"],
    "id": [
        [["What is the dosage of aspirin", "What is the dosage of |medication|"]],
        "MedicationEvent (|medication|) [dosage=x]",
    ],
    "answers": [
        {
            "text": "81 mg",
            "answer_start": [1, 2],
            "evidence": f"{SECRET} aspirin 81 mg",
            "evidence_start": 1,
            "answer_entity_type": "single",
        }
    ],
}


@pytest.mark.parametrize(
    "qa, title, context, message",
    [
        (
            {**GOOD_QA, "answers": []},
            "medication",
            None,
            r"note medication/777, question 0 \('What is the dosage of aspirin'\).*answers",
        ),
        ({**GOOD_QA, "answers": [{"text": "x"}]}, "medication", None, "answer 0: the answer has no 'evidence'"),
        (
            {**GOOD_QA, "answers": [{**GOOD_QA["answers"][0], "answer_entity_type": "weird"}]},
            "medication",
            None,
            "answer_entity_type 'weird'",
        ),
        (
            {**GOOD_QA, "answers": [{**GOOD_QA["answers"][0], "evidence_start": "one"}]},
            "medication",
            None,
            "evidence_start is str",
        ),
        ({**GOOD_QA, "question": []}, "medication", None, "no question text"),
        (GOOD_QA, "radiology", None, "'radiology' is not an emrQA subset"),
        (GOOD_QA, "medication", {"not": "a note"}, "'context' is neither"),
    ],
)
def test_bad_data_json_names_note_and_question_never_note_text(tmp_path, qa, title, context, message):
    data_json = _one_note_file(tmp_path, qa, title, context)
    ql = tmp_path / "data-ql.csv"
    ql.write_text("Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n", encoding="utf-8")
    with pytest.raises(MedevalDataError, match=message) as caught:
        prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    assert SECRET not in str(caught.value)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_truncated_data_json_error_has_no_note_text(tmp_path):
    path = _one_note_file(tmp_path, GOOD_QA)
    path.write_text(path.read_text(encoding="utf-8")[:-40], encoding="utf-8")
    with pytest.raises(MedevalDataError, match="malformed at character") as caught:
        list(jsonstream.iter_notes(path))
    assert SECRET not in str(caught.value)


def test_malformed_note_stops_reading_at_the_size_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "_CHUNK", 16)
    monkeypatch.setattr(jsonstream, "_MAX_VALUE", 64)
    path = tmp_path / "data.json"
    path.write_text('{"data": [{"title": "risk", "paragraphs": [{"note_id": 1, "context": [' + '"x", ' * 200 + "}]}]}")
    reached_end = []
    original_error = jsonstream._Reader.error
    monkeypatch.setattr(
        jsonstream._Reader,
        "error",
        lambda self, expected: reached_end.append(self.eof) or original_error(self, expected),
    )
    with pytest.raises(MedevalDataError, match="note 0 of data\\[0\\].paragraphs"):
        list(jsonstream.iter_notes(path))
    assert reached_end == [False]  # gave up at the cap, without reading the rest of the file


def test_missing_files_explain_the_n2c2_agreement(monkeypatch):
    monkeypatch.delenv("MEDEVAL_EMRQA_DATA_JSON", raising=False)
    monkeypatch.delenv("MEDEVAL_EMRQA_DATA_QL_CSV", raising=False)
    with pytest.raises(MedevalDataError) as caught:
        load_evidence("medication")
    message = str(caught.value)
    assert "n2c2" in message and "MEDEVAL_EMRQA_DATA_JSON" in message and "emrqa_data_json" in message


def test_cache_is_reused_and_keyed_by_inputs(synthetic, tmp_path):
    meta = {
        "emrqa_data_json": str(synthetic.data_json),
        "emrqa_data_ql_csv": str(synthetic.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path),
    }
    messages: list[str] = []
    folder, _ = ensure_prepared(meta, log=messages.append)
    assert folder.parent == tmp_path and len(messages) == 1 and messages[0].startswith("emrQA prepared in ")
    messages.clear()
    assert ensure_prepared(meta, log=messages.append)[0] == folder and messages == []
    other, _ = ensure_prepared({**meta, "emrqa_seed": 7}, log=messages.append)
    assert other != folder


def test_loader_samples_are_stratified_and_seeded(synthetic, tmp_path):
    meta = {
        "emrqa_data_json": str(synthetic.data_json),
        "emrqa_data_ql_csv": str(synthetic.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path),
        "emrqa_sample_size": 5,
    }
    first = load_evidence("risk", **meta)["test"]
    again = load_evidence("risk", **meta)["test"]
    assert len(first) == 5 and list(first["qa_id"]) == list(again["qa_id"])
    assert len(set(first["lf_template"])) == min(
        5, len(set(load_evidence("risk", **{**meta, "emrqa_sample_size": "all"})["test"]["lf_template"]))
    )
    # counted when an item is scored, not when the task loads (lm-eval's evaluate then runs with the model)
    doc = first[0]
    assert doc["context_check"] == "counted when the item is scored" and doc["prompt_tokens"] is None
    assert fits_context(doc) and doc["context_check"].startswith("estimate") and doc["prompt_tokens"] > 0
    with pytest.raises(MedevalDataError, match="emrqa_sample_size"):
        sample_size({"emrqa_sample_size": "many"})


def test_window_keeps_the_evidence_and_rebases_positions():
    note = "\n".join(f"line {i}" for i in range(40))
    start = note.index("line 30")
    doc = {
        "qa_id": "n#1",
        "note": note,
        "answers_json": json.dumps(
            [
                {"evidence": "line 30", "evidence_start": start, "entity_type": "empty", "entities": []},
                {
                    "evidence": "line 2",
                    "evidence_start": note.index("line 2\n"),
                    "entity_type": "empty",
                    "entities": [],
                },
            ]
        ),
    }
    out = window_doc(doc, seed=1, lines=6)
    kept = json.loads(out["answers_json"])
    assert len(out["note"].split("\n")) == 6 and len(kept) == 1  # the far answer is dropped
    assert out["note"][kept[0]["evidence_start"] :].startswith("line 30") and out["qa_id"] == "n#1@window"


def test_cli_prepare_prints_sizes(synthetic, tmp_path, capsys):
    result = run_medeval(
        [
            "emrqa-prepare",
            "--data-json",
            str(synthetic.data_json),
            "--data-ql-csv",
            str(synthetic.data_ql_csv),
            "--cache-dir",
            str(tmp_path),
        ],
        capsys,
    )
    assert result.returncode == 0, result.stderr
    assert "emrql_2_test" in result.stdout and "qa_risk_test" in result.stdout
    again = run_medeval(
        [
            "emrqa-prepare",
            "--data-json",
            str(synthetic.data_json),
            "--data-ql-csv",
            str(synthetic.data_ql_csv),
            "--cache-dir",
            str(tmp_path),
        ],
        capsys,
    )
    assert again.returncode == 0 and "already prepared" in again.stdout


def test_synthetic_questions_come_from_the_public_templates(shared_data):
    templates = load_templates(shared_data / "emrqa" / "templates-all.csv")
    assert sum(len(v) for v in templates.values()) == 142
    assert any("|medication|" in question for question, _ in templates["medication"])


def test_evidence_with_other_spacing_is_located_and_repeated_note_ids_are_kept_apart(tmp_path):
    from medeval_metrics.emrqa.prepare import DEFAULT_SEED, _is_test

    # An id whose renamed copy would fall on the other side of the split if it were split by its own key.
    note_id = next(
        str(n)
        for n in range(700, 800)
        if _is_test(DEFAULT_SEED, "qa-note", f"medication/{n}")
        != _is_test(DEFAULT_SEED, "qa-note", f"medication/{n}~1")
    )
    qa = {
        **GOOD_QA,
        "answers": [{**GOOD_QA["answers"][0], "evidence": f"{SECRET}   ASPIRIN 81 mg", "evidence_start": 5}],
    }
    note = {"note_id": note_id, "context": ["first line", f"{SECRET} aspirin 81 mg"], "qas": [qa]}
    data_json = tmp_path / "data.json"
    data_json.write_text(json.dumps({"data": [{"title": "medication", "paragraphs": [note, note]}]}), encoding="utf-8")
    ql = tmp_path / "data-ql.csv"
    ql.write_text("Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n", encoding="utf-8")
    manifest = prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    checks = manifest["quirks_and_checks"]
    assert checks["evidence_located_ignoring_case_and_spacing"] == 2 and checks["repeated_note_ids_renamed"] == 1
    records = [
        json.loads(line)
        for name in ("qa_medication_train.jsonl", "qa_medication_test.jsonl")
        for line in (tmp_path / "out" / name).read_text(encoding="utf-8").splitlines()
    ]
    assert sorted(r["note_key"] for r in records) == [f"medication/{note_id}", f"medication/{note_id}~1"]
    notes = [json.loads(line) for line in (tmp_path / "out" / "notes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert notes[0]["split"] == notes[1]["split"]  # the same note stays on one side of the split
    assert all(
        r["answers"][0]
        == {"evidence": f"{SECRET} aspirin 81 mg", "evidence_start": 11, "entity_type": "single", "entities": ["81 mg"]}
        for r in records
    )


def test_run_without_data_says_where_to_get_it(capsys, monkeypatch):
    # the pre-flight check stops the run before lm-eval starts: no evaluation, so in this process
    env = {"MEDEVAL_EMRQA_DATA_JSON": "", "MEDEVAL_EMRQA_DATA_QL_CSV": ""}
    proc = run_medeval(["run", "--tasks", "emrqa_risk", "--model", "medeval-scripted"], capsys, monkeypatch, env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "medeval: error:" in proc.stderr and "n2c2" in proc.stderr and "Traceback" not in proc.stderr


def _checked(settings, docs):
    """Docs marked as a loader marks them, then each checked as its item is scored."""
    from medeval_metrics.emrqa.prompts import evidence_prompt
    from medeval_metrics.emrqa.tasks import ContextCheck

    ContextCheck(settings).annotate(docs, evidence_prompt)
    return [fits_context(doc) for doc in docs]


@pytest.mark.e2e  # loads the tiny model's tokenizer
def test_context_check_uses_the_model_tokenizer_and_limit(tiny_model, tmp_path, monkeypatch):
    from medeval_metrics import context_fit
    from medeval_metrics.emrqa.prompts import evidence_prompt

    def fresh():
        return [
            {"note": "aspirin daily\n" * 400, "question": "What is the dosage of aspirin"},
            {"note": "aspirin daily", "question": "What is the dosage of aspirin"},
        ]

    model = {"pretrained": str(tiny_model), "emrqa_cache_dir": str(tmp_path / "cache")}
    docs = fresh()
    assert _checked(model, docs) == [False, True] and docs[0]["context_check"].startswith("tokenizer")
    assert docs[0]["context_limit"] == 1024  # the tiny GPT-2's n_positions
    counts = [d["prompt_tokens"] for d in docs]
    # kept in the emrQA cache folder (digests and numbers, no note text): a later run tokenizes nothing
    context_fit.flush_counts()
    stored = next((tmp_path / "cache" / "token_counts").glob("*.json")).read_text()
    assert "aspirin" not in stored and sorted(json.loads(stored).values()) == sorted(counts)
    context_fit._KNOWN.clear()  # as in a new process
    monkeypatch.setattr(context_fit.ContextFit, "_tokenize", lambda self, texts: pytest.fail("counted again"))
    docs = fresh()
    _checked(model, docs)
    assert [d["prompt_tokens"] for d in docs] == counts
    monkeypatch.undo()
    assert _checked({**model, "max_length": 100000}, fresh()) == [True, True]
    docs = fresh()
    _checked({"pretrained": str(tiny_model), "max_model_len": 4096}, docs)
    assert docs[0]["context_limit"] == 4096  # vLLM's name
    docs = fresh()
    # 4 characters per token against 300 - 256 = 44 tokens: the short prompt (189 characters, 48 tokens) does not fit either.
    assert _checked({"max_length": "300"}, docs) == [False, False]
    assert len(evidence_prompt(docs[1])) == 189 and docs[1]["prompt_tokens"] == 48
    assert "estimate" in docs[0]["context_check"] and "from model_args" in docs[0]["context_check"]


def test_only_the_prompts_lm_eval_renders_are_counted_in_one_call_when_the_first_is_scored(monkeypatch, caplog):
    """A --limit run renders a few of the task's prompts (its doc_to_text notes them); the first item scored
    counts them in one call, the others are lookups, and items never rendered are not counted at all."""
    from medeval_metrics import context_fit
    from medeval_metrics.emrqa import tasks

    calls = []
    monkeypatch.setattr(
        context_fit.ContextFit, "_tokenize", lambda self, texts: calls.append(len(texts)) or [50] * len(texts)
    )
    monkeypatch.setattr(context_fit.ContextFit, "__init__", _fake_fit_init)
    docs = [{"note": f"note {i}\nline", "question": f"Question {i}?", "qa_id": f"q{i}"} for i in range(6)]
    tasks.ContextCheck({}).annotate(docs, tasks._prompts.evidence_prompt)
    for doc in docs[:3]:
        tasks.evidence_prompt(doc)  # what lm-eval does while it builds the requests
    assert calls == []
    assert [fits_context(doc, {"max_gen_toks": 40}) for doc in docs[:3]] == [True, True, True]
    assert calls == [3] and [d["prompt_tokens"] for d in docs[:3]] == [50, 50, 50]
    assert fits_context(docs[4], {"max_gen_toks": 60}) is False  # scored without being rendered: on its own
    assert calls == [3, 1] and docs[5]["prompt_tokens"] is None
    lines = [r.getMessage() for r in caplog.records if "exceed the model's context" in r.getMessage()]
    assert len(lines) == 1 and "question q4's prompt (50 tokens" in lines[0] and "note 4" not in lines[0]


def _fake_fit_init(self, settings, max_gen_toks, cache_dir=None, model=None, encoded=None):
    """A ContextFit with a 100-token context whose 'tokenizer' is the patched _tokenize; no cache file."""
    self.max_gen_toks, self.limit, self.tokenizer, self.method = int(max_gen_toks), 100, object(), "fake"
    self.encoded = {}
    self.cache_file, self._counted = None, {}


def test_upstream_layout_variants(tmp_path):
    """Bare top-level list, title after paragraphs, a string question, evidence given as "question
    line + answer line" (not in the note: the 1-based line number rules), one evidence with two lines."""
    lines = ["Admission note", "Plan: aspirin 81 mg daily", "Continue metoprolol", "Follow up"]
    qas = [
        {
            "question": "Why is the patient on aspirin",
            "id": "uuid-1",
            "answers": [
                {
                    "text": "aspirin",
                    "answer_start": [2, 1],
                    "evidence": "why aspirin? Plan: aspirin 81 mg daily",
                    "evidence_start": 2,
                    "answer_entity_type": "single",
                }
            ],
        },
        {
            "question": "What medications",
            "id": "uuid-2",
            "answers": [
                {
                    "text": ["aspirin", "metoprolol"],
                    "answer_start": [[2, 1], [3, 1]],
                    "evidence": "joined",
                    "evidence_start": [2, 3],
                    "answer_entity_type": "complex",
                }
            ],
        },
    ]
    data_json = tmp_path / "data.json"
    data_json.write_text(
        json.dumps([{"paragraphs": [{"note_id": 5, "context": lines, "qas": qas}], "title": "medications"}]),
        encoding="utf-8",
    )
    ql = tmp_path / "data-ql.csv"
    ql.write_text("Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n", encoding="utf-8")
    manifest = prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    records = [
        json.loads(line)
        for name in ("qa_medication_train.jsonl", "qa_medication_test.jsonl")
        for line in (tmp_path / "out" / name).read_text(encoding="utf-8").splitlines()
    ]
    by_question = {r["question"]: r for r in records}
    assert by_question["Why is the patient on aspirin"]["answers"] == [
        {
            "evidence": "Plan: aspirin 81 mg daily",
            "evidence_start": 15,
            "entity_type": "single",
            "entities": ["aspirin"],
        }
    ]
    assert [a["evidence"] for a in by_question["What medications"]["answers"]] == [
        "Plan: aspirin 81 mg daily",
        "Continue metoprolol",
    ]
    assert by_question["What medications"]["lf_template"] == "(none)"  # a uuid id carries no template
    checks = manifest["quirks_and_checks"]
    assert checks["evidence_taken_from_its_line_number"] == 1 and checks["answers_split_into_their_evidence_lines"] == 1


def test_pretty_printed_crlf_file_with_title_last(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "_CHUNK", 5)
    data = {
        "data": [
            {
                "paragraphs": [
                    {"note_id": "1", "context": ["a\r\nb", "c"], "qas": []},
                    {"note_id": "2", "context": "x\ny", "qas": []},
                ],
                "title": "risk-dataset",
            }
        ]
    }
    path = tmp_path / "data.json"
    path.write_bytes(json.dumps(data, indent=2).replace("\n", "\r\n").encode("utf-8"))
    assert list(jsonstream.iter_notes(path)) == [
        ("risk-dataset", 0, data["data"][0]["paragraphs"][0]),
        ("risk-dataset", 1, data["data"][0]["paragraphs"][1]),
    ]


def test_obesity_list_answer_questions_are_not_classification(tmp_path):
    yes_no = {
        "question": ["Does the patient have asthma"],
        "id": [[["Does the patient have asthma", "t1"]], "Status (|problem|)"],
        "answers": [{"text": "yes", "answer_start": "", "evidence": "", "evidence_start": ""}],
    }
    comorbid = {
        "question": ["Comorbidities of obesity"],
        "id": [[["Comorbidities of obesity", "t2"]], "Relates (|problem|)"],
        "answers": [
            {"text": "Asthma", "answer_start": "", "evidence": "", "evidence_start": ""},
            {"text": "GERD", "answer_start": "", "evidence": "", "evidence_start": ""},
        ],
    }
    notes = [{"note_id": str(n), "context": f"{SECRET} note {n}", "qas": [yes_no, comorbid]} for n in range(12)]
    data_json = tmp_path / "data.json"
    data_json.write_text(json.dumps({"data": [{"title": "obesity", "paragraphs": notes}]}), encoding="utf-8")
    ql = tmp_path / "data-ql.csv"
    ql.write_text("Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n", encoding="utf-8")
    meta = {"emrqa_data_json": str(data_json), "emrqa_data_ql_csv": str(ql), "emrqa_cache_dir": str(tmp_path / "c")}
    folder, manifest = ensure_prepared(meta, log=lambda _: None)
    assert manifest["qa"]["labels"] == {"obesity": ["yes"]}
    assert manifest["qa"]["list_answer_templates_not_evaluated"] == {"obesity": ["Relates (|problem|)"]}
    tests = manifest["qa"]["sizes"]["qa_obesity_test"] // 2
    assert manifest["quirks_and_checks"]["obesity_list_answer_questions_not_evaluated"] == tests
    docs = load_classification("obesity", **meta)["test"]
    assert len(docs) == tests and set(docs["label"]) == {"yes"} and set(docs["lf_template"]) == {"Status (|problem|)"}


def test_unwritable_cache_is_a_clear_error(synthetic, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    meta = {
        "emrqa_data_json": str(synthetic.data_json),
        "emrqa_data_ql_csv": str(synthetic.data_ql_csv),
        "emrqa_cache_dir": str(blocker / "cache"),
    }
    with pytest.raises(MedevalDataError, match="cannot write the emrQA cache"):
        ensure_prepared(meta, log=lambda _: None)


def test_seed_comes_from_metadata_then_the_environment(synthetic, tmp_path, monkeypatch):
    from medeval_metrics.emrqa.sources import split_seed

    meta = {
        "emrqa_data_json": str(synthetic.data_json),
        "emrqa_data_ql_csv": str(synthetic.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path),
    }
    monkeypatch.delenv("MEDEVAL_EMRQA_SEED", raising=False)
    assert split_seed({}) == 1234
    monkeypatch.setenv("MEDEVAL_EMRQA_SEED", "7")
    assert split_seed({}) == 7 and split_seed({"emrqa_seed": 9}) == 9  # metadata wins
    from_env, manifest = ensure_prepared(meta, log=lambda _: None)
    assert manifest["seed"] == 7
    monkeypatch.delenv("MEDEVAL_EMRQA_SEED")
    assert ensure_prepared({**meta, "emrqa_seed": 7}, log=lambda _: None)[0] == from_env
    monkeypatch.setenv("MEDEVAL_EMRQA_SEED", "seven")
    with pytest.raises(MedevalDataError, match="emrqa_seed is 'seven'.*MEDEVAL_EMRQA_SEED"):
        split_seed({})


def _limit_fit_init(self, settings, max_gen_toks, cache_dir=None):
    """A ContextFit whose context is the ``max_length`` the task's metadata holds; no cache file."""
    self.max_gen_toks, self.tokenizer, self.cache_file, self._counted = int(max_gen_toks), object(), None, {}
    self.limit = int(settings["max_length"])
    self.method = f"limit {self.limit}, incl. {max_gen_toks} generated"


class _LmTask:
    """Stands in for the lm-eval task being built (``loading_task``): its config's name, metadata and budget."""

    def __init__(self, name, metadata, max_gen_toks):
        from types import SimpleNamespace

        self.config = SimpleNamespace(task=name, metadata=metadata, generation_kwargs={"max_gen_toks": max_gen_toks})


def test_a_task_evaluated_again_with_other_model_settings_counts_and_warns_for_them(monkeypatch, caplog):
    """A task object evaluated again after the model settings in its metadata changed (what lm-eval's command
    line merges ``--model_args`` into: a 60-token max_length, then 1,000, then 60): each item is checked against
    the settings the task holds when it is scored, and each change to a model too small gets its own warning."""
    from medeval_metrics import context_fit
    from medeval_metrics.emrqa import context, tasks

    monkeypatch.setattr(context_fit.ContextFit, "__init__", _limit_fit_init)
    monkeypatch.setattr(context_fit.ContextFit, "_tokenize", lambda self, texts: [50] * len(texts))
    lm_task = _LmTask("emrqa_reeval_test", {"max_length": 60}, 20)
    monkeypatch.setattr(context, "loading_task", lambda: lm_task)
    docs = [{"note": f"note {i}", "question": f"Question {i}?", "qa_id": f"q{i}"} for i in range(4)]
    tasks.ContextCheck({}).annotate(docs, tasks._prompts.evidence_prompt)
    assert docs[0]["context_counter"] == "emrqa_reeval_test"
    assert fits_context(docs[0]) is False  # 50 + 20 > 60
    lm_task.config.metadata["max_length"] = 1000
    assert fits_context(docs[1]) is True and docs[1]["context_limit"] == 1000
    lm_task.config.metadata["max_length"] = 60
    assert fits_context(docs[2]) is False and docs[2]["context_limit"] == 60
    lines = [r.getMessage() for r in caplog.records if "exceed the model's context" in r.getMessage()]
    assert len(lines) == 2 and "question q0's" in lines[0] and "question q2's" in lines[1]


def test_the_budget_is_the_one_the_task_holds_when_scored(monkeypatch):
    """``--gen_kwargs max_gen_toks=100`` over the YAML's 256: lm-eval writes it into the task's
    ``generation_kwargs`` after the data set is loaded; the check reads it when the item is scored."""
    from medeval_metrics.emrqa import context
    from medeval_metrics.emrqa.prompts import evidence_prompt
    from medeval_metrics.emrqa.tasks import ContextCheck

    lm_task = _LmTask("emrqa_budget_test", {"max_length": "300"}, 256)
    monkeypatch.setattr(context, "loading_task", lambda: lm_task)
    docs = [{"note": "aspirin daily", "question": "What is the dosage of aspirin", "qa_id": f"q{i}"} for i in (1, 2)]
    ContextCheck({}).annotate(docs, evidence_prompt)
    lm_task.config.generation_kwargs["max_gen_toks"] = 100  # what lm-eval does with --gen_kwargs
    assert fits_context(docs[0]) is True and "incl. 100 generated" in docs[0]["context_check"]  # 48 + 100 <= 300
    lm_task.config.generation_kwargs["max_gen_toks"] = 256
    assert fits_context(docs[1]) is False and "incl. 256 generated" in docs[1]["context_check"]  # 48 + 256 > 300


def test_a_loader_called_directly_counts_with_its_yaml_budget_or_the_callers():
    """Outside lm-eval (no task being built): the task config's 256, or a caller's own budget given to
    ``fits_context`` (100 here); the check and the logged doc's ``context_check`` use it."""
    from medeval_metrics.emrqa.prompts import evidence_prompt
    from medeval_metrics.emrqa.tasks import ContextCheck

    def doc():
        return {"note": "aspirin daily", "question": "What is the dosage of aspirin", "qa_id": "q1"}

    # the prompt is 189 characters: 48 estimated tokens against max_length 300
    config, given = [doc()], [doc()]
    ContextCheck({"max_length": "300"}).annotate(config, evidence_prompt)
    ContextCheck({"max_length": "300"}).annotate(given, evidence_prompt)
    assert config[0]["fits_context"] is None  # logged unscored (predict_only): not a claim that it fits
    assert fits_context(config[0]) is False and "incl. 256 generated" in config[0]["context_check"]  # 48 + 256 > 300
    assert fits_context(given[0], {"max_gen_toks": 100}) is True
    assert given[0]["fits_context"] is True and "incl. 100 generated" in given[0]["context_check"]
    # a doc logged unscored, read back where no task of its name is loaded: nothing to count with
    assert fits_context({"qa_id": "q1", "fits_context": None, "prompt_tokens": None}, {"max_gen_toks": 9}) is True


def test_a_prompt_rendered_many_times_is_noted_once_as_its_doc():
    """lm-eval may render a doc's prompt more than once (few-shot examples, a second pass); the check keeps one
    entry per prompt, and keeps the doc (which lm-eval holds anyway), not a second copy of a long note."""
    from medeval_metrics.emrqa import tasks

    docs = [{"note": f"note {i}\n" * 50, "question": f"Question {i}?", "qa_id": f"q{i}"} for i in range(3)]
    tasks.ContextCheck({}).annotate(docs, tasks._prompts.evidence_prompt)
    for _ in range(4):
        for doc in docs[:2]:
            assert tasks.evidence_prompt(doc) == tasks._prompts.evidence_prompt(doc)
    counter = PromptCounter.of(docs[0], "context_counter")
    assert len(counter.noted) == 2 and all(any(d is doc for doc in docs[:2]) for d in counter.noted)
    fits_context(docs[0])
    assert counter.noted == [] and docs[1]["prompt_tokens"] is None  # counted and looked up when docs[1] is scored


def test_a_doc_names_its_task_whatever_was_loaded_before(synthetic, tmp_path):
    """The doc's ``context_counter`` enters lm-eval's doc hash (and the report's comparison of runs): it is the
    task's name, not a load-order number, and a task loaded again in the process takes over the name."""

    tasks_dir = Path(__file__).resolve().parents[2] / "tasks" / "emrqa"
    meta = {
        "emrqa_data_json": str(synthetic.data_json),
        "emrqa_data_ql_csv": str(synthetic.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path),
        "emrqa_sample_size": 3,
    }
    first = load_evidence("risk", **meta, config_source=str(tasks_dir / "emrqa_risk.yaml"))["test"]
    load_classification("smoking", **meta, config_source=str(tasks_dir / "emrqa_smoking.yaml"))
    again = load_evidence("risk", **meta, config_source=str(tasks_dir / "emrqa_risk.yaml"))["test"]
    assert set(first["context_counter"]) == set(again["context_counter"]) == {"emrqa_risk"}
    assert PromptCounter.of({"context_counter": "emrqa_risk"}, "context_counter").task == "emrqa_risk"
    doc = again[0]  # a Dataset row is a new dict on each access
    assert fits_context(doc) and doc["prompt_tokens"] > 0


def test_a_path_given_as_pretrained_is_kept_for_the_count(tmp_path):
    """Settings given as objects (``simple_evaluate(model_args={...})``): a Path is a tokenizer's folder
    (it was dropped, so the count fell back to the estimate); a model object is never kept."""
    from medeval_metrics.context_fit import count_settings

    assert count_settings({"pretrained": tmp_path, "max_length": 512, "model": object(), "add_bos_token": False}) == {
        "pretrained": str(tmp_path),
        "max_length": 512,
        "add_bos_token": False,
    }
