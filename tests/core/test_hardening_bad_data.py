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
from typing import Any

import pytest

from medeval_metrics import emsqa
from medeval_metrics import medicationqa as mqa
from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa.prepare import prepare
from medeval_metrics.emrqa.tasks import load_evidence

SECRET = "ZEBRA-PATIENT-TEXT"  # planted in every emrQA note: must never reach an error message

# --------------------------------------------------------------------------- EMSQA

GOOD_ITEM = {
    "question": "Which drug?",
    "choices": ["a. aspirin", "b. oxygen"],
    "answer": "a",
    "level": ["emt"],
    "category": ["pharmacology"],
}


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
    "misspelled field": (
        {"answer": None, "anwser": "a"},
        r"record 3 .*has no 'answer' field \(it has \[.*'anwser'.*check the field names' spelling",
    ),
    "question is a number": ({"question": 7}, r"record 3: 'question' is a int, not text\. Fix the record"),
    "choices is a string": ({"choices": "a. x, b. y"}, r"record 3 .*'choices' must be a list of at least 2 strings"),
    "level is a number": ({"level": 5}, r"record 3 .*'level' is 5; it must be a string or a list of strings"),
    "category holds a dict": (
        {"category": [{"x": 1}]},
        r"record 3 .*'category' .* must be a string or a list of strings",
    ),
    "answer outside the choices": (
        {"answer": ["a", "d"]},
        r"record 3 .*answer \['d'\] is not among the item's choices \['a', 'b'\]\. Fix the answer",
    ),
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
    with pytest.raises(
        MedevalDataError, match=r"records 0 and 2 of .* share the id 'q0'\. Give every record its own id"
    ):
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
    (".json", "wrong encoding"): (
        '[{"Question": "\u00bfQu\u00e9?"}]'.encode("latin-1"),
        r"not UTF-8 text .*Re-save the file as UTF-8",
    ),
    (".csv", "wrong encoding"): (
        "Question,Answer\n\u00bfQu\u00e9?,x\n".encode("latin-1"),
        r"not UTF-8 text .*Re-save the CSV as UTF-8",
    ),
    (".json", "truncated JSON"): (b'[{"Question": "q", "Answer": "a"}, {"Quest', r"not valid JSON .*download it again"),
}

MQA_ROW_CASES = {
    # case: (header, rows, regex naming the row or column and the fix)
    "misspelled column": (
        ["Qestion"] + MQA_HEADER[1:],
        MQA_ROWS,
        r"column\(s\) \['Question'\] not found \(found \[.*'Qestion'.*The file needs",
    ),
    "missing answer column": (MQA_HEADER[:3], [r[:3] for r in MQA_ROWS], r"column\(s\) \['Answer'\] not found"),
    # the second data row: spreadsheet row 3 (header is row 1), CSV line 3, JSON record 1 (from 0)
    "empty answer": (
        MQA_HEADER,
        MQA_ROWS[:1] + [MQA_ROWS[1][:3] + ["  "] + MQA_ROWS[1][4:]],
        {
            ".xlsx": r"sheet 'DrugQA': row 3 has an empty 'Answer'.*fix or remove that row",
            ".csv": r"csv: line 3 has an empty 'Answer'.*fix or remove that row",
            ".json": r"json: record 1 has an empty 'Answer'.*fix or remove that row",
        },
    ),
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
    pattern = pattern[suffix] if isinstance(pattern, dict) else pattern
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
    with pytest.raises(
        MedevalDataError, match=rf"json: record 1: 'Question' is a JSON {kind}, not text\. Export each column"
    ):
        mqa.load_rows({"medicationqa_path": str(path)})


@pytest.mark.parametrize("suffix", [".xlsx", ".json", ".csv"])
def test_medicationqa_duplicate_questions_are_legitimate_and_all_kept(tmp_path, suffix):
    """The real spreadsheet repeats questions (690 rows, 651 distinct): no error, no row dropped."""
    path = _write_mqa(tmp_path / f"medicationqa{suffix}", MQA_HEADER, MQA_ROWS)
    rows = mqa.load_rows({"medicationqa_path": str(path)})
    assert [r["answer"] for r in rows] == ["Adults: 200-400 mg.", "High blood pressure.", "Up to 1200 mg a day."]


# MedicationQA: what real spreadsheets and exports do wrong (issue 12 item 5, issue 13)

ENCRYPTED_XLSX = Path(__file__).resolve().parents[1] / "fixtures" / "medicationqa_encrypted.xlsx"


@pytest.fixture(scope="module")
def real_workbook_bytes(shared_data) -> bytes:
    path = shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"
    if not path.exists():
        pytest.skip(f"{path} absent")
    return path.read_bytes()


def _real_workbook(workbook_bytes: bytes):
    """The real 690-row workbook, opened for editing (variants are saved under tmp_path)."""
    import io

    import openpyxl

    return openpyxl.load_workbook(io.BytesIO(workbook_bytes))


def test_medicationqa_data_sheet_is_found_by_its_header_not_its_position(tmp_path, real_workbook_bytes):
    workbook = _real_workbook(real_workbook_bytes)
    workbook["DrugQA"].title = "Medications 2019"  # renamed, so its name does not find it
    summary = workbook.create_sheet("Summary", 0)  # first sheet: a one-row summary someone added
    summary.append(["Question Type", "Count"])
    summary.append(["Dose", 66])
    empty = workbook.create_sheet("Notes", 1)
    empty["A1"] = "reviewed 2024"
    path = tmp_path / "with_summary.xlsx"
    workbook.save(path)
    rows = mqa.load_rows({"medicationqa_path": str(path)})
    assert len(rows) == 690
    assert rows[0]["focus_drug"] == "rivastigmine" and rows[-1]["question"]


def test_medicationqa_header_below_title_rows_keeps_spreadsheet_row_numbers(tmp_path):
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["MedicationQA export, March"])
    sheet.append([])
    sheet.append(MQA_HEADER)  # header in row 3
    sheet.append(MQA_ROWS[0])
    sheet.append(MQA_ROWS[1][:3] + [None] + MQA_ROWS[1][4:])  # row 5
    path = tmp_path / "titled.xlsx"
    workbook.save(path)
    with pytest.raises(MedevalDataError, match=r"titled\.xlsx, sheet 'Sheet': row 5 has an empty 'Answer'"):
        mqa.load_rows({"medicationqa_path": str(path)})


@pytest.mark.parametrize(
    "data_row, value, expected",
    [
        # data row 0 is spreadsheet row 2 (the header is row 1)
        (0, "nan", r"sheet 'DrugQA': row 2 has 'nan' as its 'Answer': that is a missing-value marker"),
        (99, "NaN", r"sheet 'DrugQA': row 101 has 'NaN' as its 'Answer'"),
        (689, None, r"sheet 'DrugQA': row 691 has an empty 'Answer'"),
        (300, "None", r"sheet 'DrugQA': row 302 has 'None' as its 'Answer'"),
        (5, "#N/A", r"sheet 'DrugQA': row 7 has '#N/A' as its 'Answer'"),
    ],
)
def test_medicationqa_missing_answers_in_the_real_workbook_name_the_spreadsheet_row(
    tmp_path, real_workbook_bytes, data_row, value, expected
):
    workbook = _real_workbook(real_workbook_bytes)
    workbook["DrugQA"].cell(row=data_row + 2, column=4).value = value
    path = tmp_path / "edited.xlsx"
    workbook.save(path)
    with pytest.raises(MedevalDataError, match=expected) as caught:
        mqa.load_rows({"medicationqa_path": str(path)})
    assert str(path) in str(caught.value)


def test_medicationqa_real_no_answer_markers_are_data_and_kept(shared_data):
    """The spreadsheet's own "No answers" (9 rows) and "n/a" (1 row) are part of the 690: not refused."""
    rows = mqa.load_rows({"medicationqa_path": str(shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx")})
    answers = [r["answer"] for r in rows]
    assert sum(a.lower() == "no answers" for a in answers) == 9 and answers.count("n/a") == 1


def test_medicationqa_second_answer_column_in_the_real_workbook_is_refused(tmp_path, real_workbook_bytes):
    workbook = _real_workbook(real_workbook_bytes)
    sheet = workbook["DrugQA"]
    sheet.cell(row=1, column=7).value = "Answer"  # a reviewer's corrected answers, column G
    for row in range(2, 692):
        sheet.cell(row=row, column=7).value = "see above"
    path = tmp_path / "two_answers.xlsx"
    workbook.save(path)
    with pytest.raises(
        MedevalDataError,
        match=r"sheet 'DrugQA': columns 'Answer' \(column D\) and 'Answer' \(column G\) both hold the 'Answer' field, "
        r"so it is ambiguous which to use\. Keep one",
    ):
        mqa.load_rows({"medicationqa_path": str(path)})


MQA_AMBIGUOUS_CASES = {
    # case: (header, (xlsx regex, csv regex))
    "Answer twice": (
        MQA_HEADER + ["Answer"],
        (r"'Answer' \(column D\) and 'Answer' \(column G\)", r"'Answer' \(column 4\) and 'Answer' \(column 7\)"),
    ),
    "Answer and answer": (
        MQA_HEADER + ["answer"],
        (r"'Answer' \(column D\) and 'answer' \(column G\)", r"'Answer' \(column 4\) and 'answer' \(column 7\)"),
    ),
    "Question and question": (
        ["question"] + MQA_HEADER,
        (
            r"'question' \(column A\) and 'Question' \(column B\)",
            r"'question' \(column 1\) and 'Question' \(column 2\)",
        ),
    ),
    "two focus aliases": (
        MQA_HEADER + ["Focus"],
        (
            r"'Focus \(Drug\)' \(column B\) and 'Focus' \(column G\) both hold the 'Focus \(Drug\)' field",
            r"'Focus \(Drug\)' \(column 2\) and 'Focus' \(column 7\)",
        ),
    ),
}


@pytest.mark.parametrize("suffix", [".xlsx", ".csv"])
@pytest.mark.parametrize("case", sorted(MQA_AMBIGUOUS_CASES))
def test_medicationqa_ambiguous_columns_are_refused(tmp_path, suffix, case):
    header, patterns = MQA_AMBIGUOUS_CASES[case]
    rows = [row + ["x"] if len(header) > len(row) else ["x"] + row for row in MQA_ROWS]
    path = _write_mqa(tmp_path / f"medicationqa{suffix}", header, rows)
    with pytest.raises(MedevalDataError, match=patterns[suffix == ".csv"] + r".*Keep one of them") as caught:
        mqa.load_rows({"medicationqa_path": str(path)})
    assert str(path) in str(caught.value)


def test_medicationqa_json_record_with_answer_twice_is_refused(tmp_path):
    path = tmp_path / "medicationqa.json"
    path.write_text(
        '[{"Question": "q1", "Answer": "a1"}, {"Question": "q2", "Answer": "a2", "Answer": "b2"}]', encoding="utf-8"
    )
    with pytest.raises(MedevalDataError, match=r"json: record 1 of the MedicationQA export has the key 'Answer' twice"):
        mqa.load_rows({"medicationqa_path": str(path)})


@pytest.mark.parametrize(
    "suffix, content, expected",
    [
        # pandas `df.astype(str).to_csv()` writes NaN as "nan"; Python's str(None) is "None"
        (
            ".csv",
            "Question,Answer\nq1,a1\nq2,nan\n",
            r"csv: line 3 has 'nan' as its 'Answer': that is a missing-value marker .*Fill it in or remove that row",
        ),
        (".csv", "Question,Answer\nq1,a1\nNaN,a2\n", r"csv: line 3 has 'NaN' as its 'Question'"),
        (
            ".csv",
            'Question,Answer\nq1,"two\nlines"\nq2,null\n',
            r"csv: line 4 has 'null' as its 'Answer'",
        ),  # quoted cell spans lines 2-3
        (
            ".csv",
            "\ufeffQuestion,Answer\r\nq1,a1\r\n\r\nq2,<NA>\r\n",
            r"csv: line 4 has '<NA>' as its 'Answer'",
        ),  # BOM, CRLF, blank line
        # an unquoted comma: the answer would be cut at "2 tablets" without a word
        (
            ".csv",
            "Question,Answer\nq1,a1\nq2,Take 2 tablets, twice a day\n",
            r"csv: line 3 has 3 cells but the header has 2: a comma inside an unquoted cell",
        ),
        (
            ".json",
            '[{"Question": "q1", "Answer": NaN}]',
            r"json: record 0 has 'nan' as its 'Answer'",
        ),  # Python's json writes NaN
        (
            ".json",
            '[{"Question": "q1", "Answer": "a1"}, {"Question": "q2", "Answer": null}]',
            r"json: record 1 has an empty 'Answer'",
        ),
        (
            ".jsonl",
            '{"Question": "q1", "Answer": "a1"}\n{"Question": "q2", "Answer": "None"}\n',
            r"jsonl: record 1 has 'None' as its 'Answer'",
        ),
    ],
)
def test_medicationqa_export_cells_that_are_not_answers(tmp_path, suffix, content, expected):
    path = tmp_path / f"medicationqa{suffix}"
    path.write_text(content, encoding="utf-8", newline="")
    with pytest.raises(MedevalDataError, match=expected):
        mqa.load_rows({"medicationqa_path": str(path)})


def test_medicationqa_encrypted_workbook_says_so(tmp_path):
    """A real password-protected workbook (made with msoffcrypto-tool 6.1: two synthetic rows,
    password "medeval"): an OLE container, not a ZIP; openpyxl alone reports it as not a zip file."""
    with pytest.raises(
        MedevalDataError,
        match=r"medicationqa_encrypted\.xlsx: the MedicationQA workbook should be the MedInfo2019-QA-Medications\.xlsx "
        r"workbook, or a \.json/\.jsonl/\.csv export of it \(UTF-8\), but this file is a password-protected \(encrypted\) "
        r"Office file\. Open it in Excel, remove the password",
    ) as caught:
        mqa.load_rows({"medicationqa_path": str(ENCRYPTED_XLSX)})
    assert "truncated" not in str(caught.value)


def _ole_container(tmp_path: Path) -> Path:
    """An OLE compound file without encryption streams (what an old .xls starts with)."""
    path = tmp_path / "old.xlsx"
    path.write_bytes(
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504 + "Workbook".encode("utf-16-le") + b"\x00" * 512
    )
    return path


MQA_WRONG_KIND_CASES = {
    # case: (file name, how to make it, regex after "<path>: ")
    "workbook named .json": (
        "medicationqa.json",
        lambda p: _write_mqa(p.with_suffix(".xlsx"), MQA_HEADER, MQA_ROWS).rename(p),
        r"the MedicationQA export should be a JSON array of records.*but this file is an Excel workbook \(\.xlsx\)\.",
    ),
    "CSV named .json": (
        "medicationqa.json",
        lambda p: p.write_text("Question,Answer\nq,a\n"),
        r"should be a JSON array .*but this file is CSV text\.",
    ),
    "CSV named .xlsx": (
        "medicationqa.xlsx",
        lambda p: p.write_text("Question,Answer\nq,a\n"),
        r"the MedicationQA workbook should be the MedInfo2019-QA-Medications\.xlsx workbook.*but this file is CSV text\.",
    ),
    "JSON named .csv": (
        "medicationqa.csv",
        lambda p: p.write_text('[{"Question": "q", "Answer": "a"}]'),
        r"the MedicationQA CSV export should be .*but this file is JSON text\.",
    ),
    "old .xls": (
        "medicationqa.xlsx",
        lambda p: _ole_container(p.parent).rename(p),
        r"but this file is an old-format Office file \(\.xls or \.doc\)\. Open it and save it as \.xlsx",
    ),
    "web page saved": (
        "medicationqa.xlsx",
        lambda p: p.write_text("<!DOCTYPE html>\n<html><title>GitHub</title></html>"),
        r"but this file is an HTML web page",
    ),
    "Git LFS pointer": (
        "medicationqa.json",
        lambda p: p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:4f13\nsize 163497\n"),
        r"but this file is a Git LFS pointer .*git lfs pull",
    ),
    "UTF-16 CSV (Excel's Unicode Text)": (
        "medicationqa.csv",
        lambda p: p.write_text("Question\tAnswer\nq\ta\n", encoding="utf-16"),
        r"the MedicationQA CSV export should be .*but this file is UTF-16 text .*Re-save it as UTF-8\.",
    ),
    "UTF-16 JSON": (
        "medicationqa.json",
        lambda p: p.write_text('[{"Question": "q", "Answer": "a"}]', encoding="utf-16"),
        r"but this file is UTF-16 text",
    ),
    "gzip": (
        "medicationqa.json",
        lambda p: p.write_bytes(__import__("gzip").compress(b"[]")),
        r"but this file is a gzip-compressed file\. Decompress it first",
    ),
    "Parquet with its own suffix": (
        "medicationqa.parquet",
        lambda p: p.write_bytes(b"PAR1\x15\x04" + b"\x00" * 64),
        r"the MedicationQA data set should be .*but this file is a Parquet file\.",
    ),
}


@pytest.mark.parametrize("case", sorted(MQA_WRONG_KIND_CASES))
def test_medicationqa_wrong_file_kind_says_what_it_is_and_should_be(tmp_path, case):
    name, make, pattern = MQA_WRONG_KIND_CASES[case]
    path = tmp_path / name
    make(path)
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        mqa.load_rows({"medicationqa_path": str(path)})
    assert str(caught.value).startswith(f"{path}: ")
    assert "UTF-8. Re-save" not in str(caught.value) and "truncated" not in str(caught.value)


def test_medicationqa_folder_names_the_files_inside(tmp_path):
    folder = tmp_path / "medicationqa"
    folder.mkdir()
    _write_mqa(folder / "MedInfo2019-QA-Medications.xlsx", MQA_HEADER, MQA_ROWS)
    (folder / "README.md").write_text("notes")
    with pytest.raises(
        MedevalDataError,
        match=r"medicationqa: the MedicationQA data set is a folder; point at the file itself \(.*\): it holds "
        r"MedInfo2019-QA-Medications\.xlsx\.$",
    ):
        mqa.load_rows({"medicationqa_path": str(folder)})


def test_medicationqa_two_data_sheets_or_none_are_refused(tmp_path):
    import openpyxl

    workbook = openpyxl.Workbook()
    for title in ("DrugQA", "DrugQA reviewed"):
        sheet = workbook.create_sheet(title)
        sheet.append(MQA_HEADER)
        sheet.append(MQA_ROWS[0])
    workbook.remove(workbook["Sheet"])
    path = tmp_path / "two.xlsx"
    workbook.save(path)
    with pytest.raises(
        MedevalDataError, match=r"two\.xlsx: sheets 'DrugQA' and 'DrugQA reviewed' both have the MedicationQA columns"
    ):
        mqa.load_rows({"medicationqa_path": str(path)})
    for sheet in workbook.worksheets:
        sheet["D1"] = "Reply"
    workbook.save(path)
    with pytest.raises(
        MedevalDataError,
        match=r"no sheet has the MedicationQA columns 'Question' and 'Answer' in its header row \(sheets: 'DrugQA': \['Question', .*'Reply'",
    ):
        mqa.load_rows({"medicationqa_path": str(path)})


# --------------------------------------------------------------------------- generic JSON / JSON Lines reader

from medeval_metrics.data import file_kind, read_json_records

TWO = [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": "b"}]

JSON_LAYOUT_CASES = {
    # case: (file text, expected records)
    "array": (json.dumps(TWO), TWO),
    "array with a BOM": ("\ufeff" + json.dumps(TWO, indent=2), TWO),
    "JSON Lines with a BOM": ("\ufeff" + "\n".join(json.dumps(r) for r in TWO) + "\n", TWO),
    "JSON Lines, CRLF and blank lines": ("\r\n".join([json.dumps(TWO[0]), "", json.dumps(TWO[1]), ""]), TWO),
    "one-record JSON Lines": (json.dumps(TWO[0]) + "\n", TWO[:1]),
    "one record, one list field (EMSQA shape)": (
        json.dumps({"question": "q", "choices": ["a. x", "b. y"]}),
        [{"question": "q", "choices": ["a. x", "b. y"]}],
    ),
    "one record written with indent=0": (json.dumps(TWO[0], indent=0), TWO[:1]),
    "object holding one list, indent=0": (json.dumps({"data": TWO}, indent=0), TWO),
    "array written with indent=0": (json.dumps(TWO, indent=0), TWO),
    "object holding one list and metadata": (json.dumps({"version": "1.0", "data": TWO}), TWO),
}


@pytest.mark.parametrize("case", sorted(JSON_LAYOUT_CASES))
def test_json_reader_finds_the_format_by_parsing(tmp_path, case):
    text, expected = JSON_LAYOUT_CASES[case]
    path = tmp_path / "records.json"
    path.write_bytes(text.encode("utf-8"))
    assert read_json_records(path, "the records", record_fields=("question",)) == expected


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


JSON_BAD_CASES = {
    # case: (file text, regex after "<path>: ")
    "deep nesting": (
        _deep(200_000),
        r"the records nests arrays/objects too deeply to parse .*point the pack at the right file",
    ),
    "deep nesting on a JSON Lines line": (
        json.dumps(TWO[0]) + "\n" + '{"q": ' + _deep(200_000) + "}\n",
        r"the records \(line 2\) nests arrays/objects too deeply",
    ),
    "file concatenated with itself": (
        json.dumps(TWO, indent=2) * 2,
        r"holds more than one JSON document: after the first, more follows from line 10, column 2\. Was it concatenated",
    ),
    "one-line arrays concatenated": (
        json.dumps(TWO) + "\n" + json.dumps(TWO) + "\n",
        r"holds more than one JSON document",
    ),
    "truncated array": (
        json.dumps(TWO, indent=2)[:-30],
        r"is not valid JSON \(line \d+, column \d+: .*\)\. The file may be truncated",
    ),
    "bad JSON Lines line": (
        json.dumps(TWO[0]) + "\n{'question': 'q2'}\n",
        r"line 2 of the records \(JSON Lines\) is not valid JSON .*Fix or remove that line",
    ),
    "key twice in a record": (
        '[{"question": "q1"}, {"question": "q2", "answer": "a", "answer": "b"}]',
        r"record 1 of the records has the key 'answer' twice; .*Rename or remove one",
    ),
    "key twice on a JSON Lines line": (
        '{"question": "q1"}\n\n{"question": "q2", "question": "q3"}\n',
        r"line 3 \(record 1\) of the records has the key 'question' twice",
    ),
    "list twice in the container": (
        '{"data": [{"question": "q1"}], "data": [{"question": "q2"}]}',
        r"the top-level object of the records has the key 'data' twice",
    ),
    "container with two lists": (
        json.dumps({"train": TWO, "test": TWO}),
        r"is a JSON object with 2 lists; expected a list of records .*needs a 'question' field",
    ),
    "a bare number": ("3", r"is a single JSON int; expected a JSON array of records"),
    "a list of strings": (json.dumps(["q1", "q2"]), r"record 0 of the records is a str, not a JSON object"),
    "JSON Lines of arrays": ('["q1"]\n["q2"]\n', r"holds more than one JSON document"),
    "empty array": ("[]", r"the records holds no records"),
    "only whitespace": ("\ufeff \n\n", r"the records is empty"),
}


@pytest.mark.parametrize("case", sorted(JSON_BAD_CASES))
def test_json_reader_bad_files(tmp_path, case):
    text, pattern = JSON_BAD_CASES[case]
    path = tmp_path / "records.json"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(MedevalDataError, match=pattern) as caught:
        read_json_records(path, "the records", record_fields=("question",))
    assert str(caught.value).startswith(f"{path}: ")
    assert len(str(caught.value)) < 600  # a message, not a dump of the file


def test_json_reader_wrong_kinds_and_folders(tmp_path, shared_data):
    """Issue 13: the real workbook, a CSV, an encrypted workbook and a folder given where JSON is expected."""
    real = shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"
    assert file_kind(real) == "xlsx" and file_kind(ENCRYPTED_XLSX) == "encrypted-office"
    assert file_kind(shared_data / "emsqa" / "test_open.json") == "json"
    assert file_kind(shared_data / "emrqa" / "templates-all.csv") == "csv"
    expected = {
        real: r"should be a JSON array of records, .*but this file is an Excel workbook \(\.xlsx\)\.$",
        shared_data / "emrqa" / "templates-all.csv": r"should be a JSON array .*but this file is CSV text\.$",
        ENCRYPTED_XLSX: r"but this file is a password-protected \(encrypted\) Office file\.",
        shared_data
        / "emsqa": r"the records is a folder; point at the file itself \(a JSON array .*\): it holds test_open\.json, val_open\.json\.$",
        shared_data / "emrqa": r"is a folder; .*: it holds no \.json/\.jsonl file\.$",
    }
    for path, pattern in expected.items():
        with pytest.raises(MedevalDataError, match=pattern) as caught:
            read_json_records(path, "the records")
        assert str(caught.value).startswith(f"{path}: ")


def test_json_reader_reads_the_real_emsqa_file_unchanged(shared_data):
    path = shared_data / "emsqa" / "test_open.json"
    assert read_json_records(path, "EMSQA") == json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- emrQA

GOOD_QL = "Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n"
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
    "wrong encoding": (
        _data_json([_note()]).replace(SECRET, "Jos\u00e9 " + SECRET),
        r"not UTF-8 text .*Use the file exactly as downloaded",
    ),
    "truncated JSON": (_data_json([_note()])[:-40], r"malformed at character"),
    "misspelled qas": (
        _data_json([_note(qas=None, qa=[GOOD_QA])]),
        r"note medication/777: it needs 'context' and a 'qas' list",
    ),
    "missing note id": (_data_json([_note(note_id=None, note_ID="1")]), r"medication note 0: it has no 'note_id'"),
    "answers is a string": (
        _data_json([_note(qas=[{**GOOD_QA, "answers": "81 mg"}])]),
        r"note medication/777, question 0 \('What is the dosage of aspirin'\): 'answers' is missing or empty",
    ),
    "evidence is a number": (
        _data_json([_note(qas=[_answer(evidence=81)])]),
        r"question 0 .*answer 0: 'evidence' is not text",
    ),
    "qas entry is a list": (
        _data_json([_note(qas=[["What is the dosage"]])]),
        r"note medication/777, question 0: the question entry is not an object",
    ),
    "evidence line outside the note": (
        _data_json([_note(qas=[_answer(evidence="ketorolac 30 mg", evidence_start=40)])]),
        r"question 0 .*answer 0: evidence_start 40 is outside the note \(2 lines\) .*Fix the offset",
    ),
    "risk evidence offset outside the note": (
        _data_json(
            [_note(qas=[_answer(evidence="ketorolac 30 mg", evidence_start=9000, answer_start=[9000, 9005])])],
            title="risk",
        ),
        r"note risk/777, question 0 .*answer 0: evidence_start 9000 is outside the note \(\d+ characters\)",
    ),
}

EMRQA_QL_CASES = {
    "missing file": (None, r"cannot read the emrQA data-ql\.csv"),
    "empty file": ("", r"data-ql\.csv holds no question/logical-form rows"),
    "wrong encoding": (
        "Question, Logical Form, QTemplate, LTemplate\nJos\u00e9?, A (x), t, A (|y|)\n",
        r"not UTF-8 text \(line 2, byte 3\)\. Re-save it as UTF-8",
    ),
    "misspelled header": (
        "Question, Logical Form, QTemplate, LTemplat\nq, A (x), t, A (|y|)\n",
        r"line 1: data-ql\.csv must start with the header",
    ),
    "missing column": ("Question, Logical Form, QTemplate, LTemplate\nq, A (x)\n", r"line 2: expected 4 columns"),
    "empty question": (
        'Question, Logical Form, QTemplate, LTemplate\n"", A (x), t, A (|y|)\n',
        r"line 2: the question, logical form or its template is empty",
    ),
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
        load_evidence(
            "medication",
            emrqa_data_json=str(data_json),
            emrqa_data_ql_csv=str(ql),
            emrqa_cache_dir=str(tmp_path / "cache"),
        )
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
    data_json.write_text(
        _data_json([_note(qas=[_answer(evidence="ketorolac 30 mg", evidence_start=0)])]), encoding="utf-8"
    )
    ql.write_text(GOOD_QL, encoding="utf-8")
    manifest = prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    assert manifest["quirks_and_checks"]["evidence_not_in_note"] == 1
    assert sum(manifest["qa"]["sizes"].values()) == 1  # the question is kept, not silently dropped


# --------------------------------------------------------------------------- pinned checksums of public files

from medeval_metrics.data import CHECKSUM_ENV, check_known_checksum, known_checksums


def test_manifest_pins_reach_the_checker():
    """If the manifest's layout changes, the checker must not silently lose its pins."""
    pins = known_checksums()
    assert pins["MedInfo2019-QA-Medications.xlsx"].startswith("4f13d0e3")
    assert set(pins) >= {"test_open.json", "val_open.json"}


def test_real_public_files_match_their_pins(shared_data):
    assert check_known_checksum(shared_data / "emsqa" / "test_open.json", mode="warn") == "match"
    assert (
        check_known_checksum(shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx", mode="warn") == "match"
    )
    assert check_known_checksum(shared_data / "emrqa" / "templates-all.csv", mode="warn") == "unpinned"


def test_changed_copy_of_a_pinned_file_warns_once_or_errors_on_request(
    tmp_path, monkeypatch, caplog, real_workbook_bytes
):
    workbook = _real_workbook(real_workbook_bytes)
    workbook["DrugQA"]["D2"] = "An edited reference answer."
    path = tmp_path / "MedInfo2019-QA-Medications.xlsx"
    workbook.save(path)
    monkeypatch.delenv(CHECKSUM_ENV, raising=False)
    with caplog.at_level("WARNING", logger="medeval.data"):
        rows = mqa.load_rows({"medicationqa_path": str(path)})
        mqa.load_rows({"medicationqa_path": str(path)})
    assert rows[0]["answer"] == "An edited reference answer." and len(rows) == 690
    warnings = [r.getMessage() for r in caplog.records if "not the published" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per file, not once per load
    assert (
        str(path) in warnings[0]
        and "expected 4f13d0e3b195bd6a" in warnings[0]
        and f"{CHECKSUM_ENV}=error" in warnings[0]
    )

    monkeypatch.setenv(CHECKSUM_ENV, "error")
    with pytest.raises(
        MedevalDataError,
        match=r"MedInfo2019-QA-Medications\.xlsx: not the published MedInfo2019-QA-Medications\.xlsx "
        r"\(sha256 [0-9a-f]{64}, expected 4f13d0e3.*set MEDEVAL_DATA_CHECKSUMS=warn to use it anyway",
    ):
        mqa.load_rows({"medicationqa_path": str(path)})
    monkeypatch.setenv(CHECKSUM_ENV, "off")
    assert len(mqa.load_rows({"medicationqa_path": str(path)})) == 690
    monkeypatch.setenv(CHECKSUM_ENV, "strict")
    with pytest.raises(
        MedevalDataError, match=r"MEDEVAL_DATA_CHECKSUMS='strict': use 'warn' \(the default\), 'error' or 'off'"
    ):
        mqa.load_rows({"medicationqa_path": str(path)})


def test_emsqa_file_inside_a_folder_is_checked_too(tmp_path, monkeypatch):
    """EMSQA finds test_open.json inside a folder itself: the JSON reader checks it."""
    path = tmp_path / "test_open.json"
    path.write_text(json.dumps(_emsqa_records()), encoding="utf-8")
    monkeypatch.setenv(CHECKSUM_ENV, "error")
    with pytest.raises(MedevalDataError, match=r"test_open\.json: not the published test_open\.json"):
        emsqa.load_public(emsqa_public_path=str(tmp_path))
    monkeypatch.setenv(CHECKSUM_ENV, "warn")
    assert len(emsqa.load_public(emsqa_public_path=str(tmp_path))["test"]) == 3
