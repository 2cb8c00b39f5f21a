"""Bad data that cannot pass: one matrix of malformed inputs over every loader.

Each case writes a broken input file, calls the loader as lm-eval would, and requires a
``MedevalDataError`` naming the file, the record and a fix (any other exception type fails the
test, as does a silently smaller data set). emrQA messages must never carry note text. Cases the
per-benchmark tests already cover in depth are only repeated here where the loader differs
(EMSQA public vs private, the three MedicationQA formats, emrQA through ``prepare``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from medeval_metrics import emsqa
from medeval_metrics import medicationqa as mqa
from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa.prepare import prepare
from medeval_metrics.emrqa.tasks import load_evidence

SECRET = "ZEBRA-PATIENT-TEXT"  # planted in every emrQA note: must never reach an error message

# --------------------------------------------------------------------------- EMSQA

GOOD_ITEM = {"question": "Which drug?", "choices": ["a. aspirin", "b. oxygen"], "answer": "a",
             "level": ["emt"], "category": ["pharmacology"]}


def _emsqa_records(*changes: dict[str, Any]) -> list[dict[str, Any]]:
    """Three good records, then the changed ones (a value of None removes the field)."""
    records = [dict(GOOD_ITEM, question=f"Which drug {n}?") for n in range(3)]
    for change in changes:
        record = dict(GOOD_ITEM)
        for key, value in change.items():
            if value is None:
                record.pop(key, None)
            else:
                record[key] = value
        records.append(record)
    return records


def _load_emsqa(variant: str, path: Path):
    if variant == "public":
        return emsqa.load_public(emsqa_public_path=str(path))
    return emsqa.load_private(emsqa_private_path=str(path))


EMSQA_FILE_CASES = {
    # name: (file bytes or None for "no file", regex the message must match)
    "missing file": (None, r"does not exist"),
    "empty file": (b"", r"is empty\. Point the pack at the full file"),
    "wrong encoding": ('[{"question": "Qu\u00e9 droga?"}]'.encode("latin-1"), r"not UTF-8 text \(byte \d+\)\. Re-save"),
    "truncated JSON": (json.dumps(_emsqa_records()).encode()[:-25], r"not valid JSON .*truncated; download it again"),
    "object without a list": (b'{"items": 3}', r"expected a list of records"),
}

EMSQA_RECORD_CASES = {
    # name: (changed record appended as record 3, regex naming record 3 and the fix)
    "misspelled field": ({"answer": None, "anwser": "a"}, r"record 3 .*has no 'answer' field \(it has \[.*'anwser'.*check the field names' spelling"),
    "question is a number": ({"question": 7}, r"record 3: 'question' is a int, not text\. Fix the record"),
    "choices is a string": ({"choices": "a. x, b. y"}, r"record 3 .*'choices' must be a list of at least 2 strings"),
    "level is a number": ({"level": 5}, r"record 3 .*'level' is 5; it must be a string or a list of strings"),
    "category holds a dict": ({"category": [{"x": 1}]}, r"record 3 .*'category' .* must be a string or a list of strings"),
    "answer outside the choices": ({"answer": ["a", "d"]}, r"record 3 .*answer \['d'\] is not among the item's choices \['a', 'b'\]\. Fix the answer"),
    "answer is a number": ({"answer": 0}, r"record 3 .*'answer' must be a letter or a non-empty list of letters"),
}


@pytest.mark.parametrize("variant", ["public", "private"])
@pytest.mark.parametrize("case", sorted(EMSQA_FILE_CASES))
def test_emsqa_bad_files(tmp_path, variant, case):
    content, pattern = EMSQA_FILE_CASES[case]
    path = tmp_path / "test_open.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        _load_emsqa(variant, path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("variant", ["public", "private"])
@pytest.mark.parametrize("case", sorted(EMSQA_RECORD_CASES))
def test_emsqa_bad_records(tmp_path, variant, case):
    change, pattern = EMSQA_RECORD_CASES[case]
    path = tmp_path / "test_open.json"
    path.write_text(json.dumps(_emsqa_records(change)), encoding="utf-8")
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        _load_emsqa(variant, path)
    assert f"{path}: record 3" in str(caught.value)


@pytest.mark.parametrize("variant", ["public", "private"])
def test_emsqa_duplicate_ids_name_both_records(tmp_path, variant):
    records = [dict(r, id=f"q{n}") for n, r in enumerate(_emsqa_records())]
    records[2]["id"] = "q0"
    path = tmp_path / "test_open.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(MedevalDataError, match=r"records 0 and 2 of .* share the id 'q0'\. Give every record its own id"):
        _load_emsqa(variant, path)


def test_emsqa_records_without_ids_are_numbered_and_all_kept(tmp_path):
    """Control for the id check: the real data has no 'id' field; every record loads, none merged."""
    path = tmp_path / "private.json"
    path.write_text(json.dumps(_emsqa_records()), encoding="utf-8")
    test = _load_emsqa("private", path)["test"]
    assert test["id"] == ["0", "1", "2"]


# --------------------------------------------------------------------------- MedicationQA

MQA_HEADER = ["Question", "Focus (Drug)", "Question Type", "Answer", "Section Title", "URL"]
MQA_ROWS = [
    ["how much ibuprofen can i take", "ibuprofen", "Dose", "Adults: 200-400 mg.", "", ""],
    ["what is lisinopril for", "lisinopril", "Indication", "High blood pressure.", "", ""],
    ["how much ibuprofen can i take", "ibuprofen", "Dose", "Up to 1200 mg a day.", "", ""],
]


def _write_mqa(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    if path.suffix == ".xlsx":
        import openpyxl

        workbook = openpyxl.Workbook()
        sheet = workbook.active
        sheet.title = mqa.SHEET
        sheet.append(header)
        for row in rows:
            sheet.append(row)
        workbook.save(path)
    elif path.suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
    else:
        path.write_text(json.dumps([dict(zip(header, row)) for row in rows]), encoding="utf-8")
    return path


MQA_FILE_CASES = {
    # (suffix, case): (file bytes or None, regex)
    (".xlsx", "missing file"): (None, r"does not exist"),
    (".json", "missing file"): (None, r"does not exist"),
    (".csv", "missing file"): (None, r"does not exist"),
    (".xlsx", "empty file"): (b"", r"not a readable \.xlsx workbook .*Download it again"),
    (".json", "empty file"): (b"", r"is empty\. Point the pack at the full file"),
    (".csv", "empty file"): (b"", r"no MedicationQA rows\. Download"),
    (".csv", "header only"): (b"Question,Answer\n", r"no MedicationQA rows\. Download"),
    (".json", "wrong encoding"): ('[{"Question": "\u00bfQu\u00e9?"}]'.encode("latin-1"), r"not UTF-8 text .*Re-save the file as UTF-8"),
    (".csv", "wrong encoding"): ("Question,Answer\n\u00bfQu\u00e9?,x\n".encode("latin-1"), r"not UTF-8 text .*Re-save the CSV as UTF-8"),
    (".json", "truncated JSON"): (b'[{"Question": "q", "Answer": "a"}, {"Quest', r"not valid JSON .*download it again"),
}

MQA_ROW_CASES = {
    # case: (header, rows, regex naming the row or column and the fix)
    "misspelled column": (["Qestion"] + MQA_HEADER[1:], MQA_ROWS, r"column\(s\) \['Question'\] not found \(found \[.*'Qestion'.*The file needs"),
    "missing answer column": (MQA_HEADER[:3], [r[:3] for r in MQA_ROWS], r"column\(s\) \['Answer'\] not found"),
    "empty answer": (MQA_HEADER, MQA_ROWS[:1] + [MQA_ROWS[1][:3] + ["  "] + MQA_ROWS[1][4:]], r"row 2 has an empty 'Answer'.*fix or remove that row"),
}


@pytest.mark.parametrize("suffix, case", sorted(MQA_FILE_CASES))
def test_medicationqa_bad_files(tmp_path, suffix, case):
    content, pattern = MQA_FILE_CASES[(suffix, case)]
    path = tmp_path / f"medicationqa{suffix}"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        mqa.load_rows({"medicationqa_path": str(path)})
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("suffix", [".xlsx", ".json", ".csv"])
@pytest.mark.parametrize("case", sorted(MQA_ROW_CASES))
def test_medicationqa_bad_rows(tmp_path, suffix, case):
    header, rows, pattern = MQA_ROW_CASES[case]
    path = _write_mqa(tmp_path / f"medicationqa{suffix}", header, rows)
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        mqa.load_rows({"medicationqa_path": str(path)})
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    "value, kind",
    [({"text": "how much ibuprofen"}, "dict"), (["how much", "ibuprofen"], "list")],
)
def test_medicationqa_json_cell_of_the_wrong_type(tmp_path, value, kind):
    """str() of an object would pass as a question; it must not."""
    records = [dict(zip(MQA_HEADER, row)) for row in MQA_ROWS]
    records[1]["Question"] = value
    path = tmp_path / "medicationqa.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(MedevalDataError, match=rf"row 2: 'Question' is a JSON {kind}, not text\. Export each column"):
        mqa.load_rows({"medicationqa_path": str(path)})


@pytest.mark.parametrize("suffix", [".xlsx", ".json", ".csv"])
def test_medicationqa_duplicate_questions_are_legitimate_and_all_kept(tmp_path, suffix):
    """The real spreadsheet repeats questions (690 rows, 651 distinct): no error, no row dropped."""
    path = _write_mqa(tmp_path / f"medicationqa{suffix}", MQA_HEADER, MQA_ROWS)
    rows = mqa.load_rows({"medicationqa_path": str(path)})
    assert [r["answer"] for r in rows] == ["Adults: 200-400 mg.", "High blood pressure.", "Up to 1200 mg a day."]


# --------------------------------------------------------------------------- emrQA

GOOD_QL = "Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n"
GOOD_QA = {
    "question": ["What is the dosage of aspirin"],
    "id": [[["What is the dosage of aspirin", "What is the dosage of |medication|"]], "MedicationEvent (|medication|) [dosage=x]"],
    "answers": [{"text": "81 mg", "answer_start": [1, 2], "evidence": f"{SECRET} aspirin 81 mg", "evidence_start": 1,
                 "answer_entity_type": "single"}],
}


def _data_json(notes: list[dict[str, Any]], title: str = "medication") -> str:
    return json.dumps({"data": [{"title": title, "paragraphs": notes}]})


def _note(note_id: Any = "777", **changes: Any) -> dict[str, Any]:
    note = {"note_id": note_id, "context": [f"{SECRET} line one", f"{SECRET} aspirin 81 mg"], "qas": [GOOD_QA]}
    for key, value in changes.items():
        if value is None:
            note.pop(key)
        else:
            note[key] = value
    return note


def _answer(**changes: Any) -> dict[str, Any]:
    return {**GOOD_QA, "answers": [{**GOOD_QA["answers"][0], **changes}]}


EMRQA_JSON_CASES = {
    # case: (data.json text or None for "no file", regex naming the note/question and the problem)
    "missing file": (None, r"does not exist"),
    "empty file": ("", r"malformed at character 0: expected '\{'.*download or generate it again"),
    "wrong encoding": (_data_json([_note()]).replace(SECRET, "Jos\u00e9 " + SECRET), r"not UTF-8 text .*Use the file exactly as downloaded"),
    "truncated JSON": (_data_json([_note()])[:-40], r"malformed at character"),
    "misspelled qas": (_data_json([_note(qas=None, qa=[GOOD_QA])]), r"note medication/777: it needs 'context' and a 'qas' list"),
    "missing note id": (_data_json([_note(note_id=None, note_ID="1")]), r"medication note 0: it has no 'note_id'"),
    "answers is a string": (_data_json([_note(qas=[{**GOOD_QA, "answers": "81 mg"}])]),
                            r"note medication/777, question 0 \('What is the dosage of aspirin'\): 'answers' is missing or empty"),
    "evidence is a number": (_data_json([_note(qas=[_answer(evidence=81)])]), r"question 0 .*answer 0: 'evidence' is not text"),
    "qas entry is a list": (_data_json([_note(qas=[["What is the dosage"]])]), r"note medication/777, question 0: the question entry is not an object"),
    "evidence line outside the note": (_data_json([_note(qas=[_answer(evidence="ketorolac 30 mg", evidence_start=40)])]),
                                       r"question 0 .*answer 0: evidence_start 40 is outside the note \(2 lines\) .*Fix the offset"),
    "risk evidence offset outside the note": (
        _data_json([_note(qas=[_answer(evidence="ketorolac 30 mg", evidence_start=9000, answer_start=[9000, 9005])])], title="risk"),
        r"note risk/777, question 0 .*answer 0: evidence_start 9000 is outside the note \(\d+ characters\)"),
}

EMRQA_QL_CASES = {
    "missing file": (None, r"cannot read the emrQA data-ql\.csv"),
    "empty file": ("", r"data-ql\.csv holds no question/logical-form rows"),
    "wrong encoding": ("Question, Logical Form, QTemplate, LTemplate\nJos\u00e9?, A (x), t, A (|y|)\n", r"not UTF-8 text \(line 2, byte 3\)\. Re-save it as UTF-8"),
    "misspelled header": ("Question, Logical Form, QTemplate, LTemplat\nq, A (x), t, A (|y|)\n", r"line 1: data-ql\.csv must start with the header"),
    "missing column": ("Question, Logical Form, QTemplate, LTemplate\nq, A (x)\n", r"line 2: expected 4 columns"),
    "empty question": ("Question, Logical Form, QTemplate, LTemplate\n\"\", A (x), t, A (|y|)\n", r"line 2: the question, logical form or its template is empty"),
}


def _write_text(path: Path, text: str | None, case: str) -> None:
    if text is None:
        return
    path.write_bytes(text.encode("latin-1" if case == "wrong encoding" else "utf-8"))


@pytest.mark.parametrize("case", sorted(EMRQA_JSON_CASES))
def test_emrqa_bad_data_json(tmp_path, case):
    text, pattern = EMRQA_JSON_CASES[case]
    data_json, ql = tmp_path / "data.json", tmp_path / "data-ql.csv"
    _write_text(data_json, text, case)
    ql.write_text(GOOD_QL, encoding="utf-8")
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        # through the task loader, as lm-eval calls it (prepare runs inside, into a fresh cache)
        load_evidence("medication", emrqa_data_json=str(data_json), emrqa_data_ql_csv=str(ql), emrqa_cache_dir=str(tmp_path / "cache"))
    message = str(caught.value)
    assert str(data_json) in message
    assert SECRET not in message and "aspirin 81" not in message
    assert not list(tmp_path.glob("cache/*/manifest.json"))  # no prepared cache left behind to reuse


@pytest.mark.parametrize("case", sorted(EMRQA_QL_CASES))
def test_emrqa_bad_data_ql_csv(tmp_path, case):
    text, pattern = EMRQA_QL_CASES[case]
    data_json, ql = tmp_path / "data.json", tmp_path / "data-ql.csv"
    data_json.write_text(_data_json([_note()]), encoding="utf-8")
    _write_text(ql, text, case)
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    message = str(caught.value)
    assert str(ql) in message and SECRET not in message
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_emrqa_offset_inside_the_note_with_unlocatable_evidence_is_counted_not_fatal(tmp_path):
    """Control for the offset check: an in-range hint whose evidence is elsewhere is a counted quirk."""
    data_json, ql = tmp_path / "data.json", tmp_path / "data-ql.csv"
    data_json.write_text(_data_json([_note(qas=[_answer(evidence="ketorolac 30 mg", evidence_start=0)])]), encoding="utf-8")
    ql.write_text(GOOD_QL, encoding="utf-8")
    manifest = prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    assert manifest["quirks_and_checks"]["evidence_not_in_note"] == 1
    assert sum(manifest["qa"]["sizes"].values()) == 1  # the question is kept, not silently dropped
