"""MedicationQA loader, prompt and reference-overlap metrics."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from medeval_metrics import medicationqa as mqa
from medeval_metrics.data import MedevalDataError

HEADER = ["Question", "Focus (Drug)", "Question Type", "Answer", "Section Title", "URL"]
ROWS = [
    ["how much ibuprofen can i take", "ibuprofen", "Dose", "Adults: 200-400 mg every 4-6 hours.", "Dosage", "https://x/1"],
    ["does metformin cause b12 deficiency", "metformin", "Side effects", "Long-term use can lower B12.", None, "https://x/2"],
]


def _write_xlsx(path, header, rows, sheet="DrugQA"):
    import openpyxl

    workbook = openpyxl.Workbook()
    ws = workbook.active
    ws.title = sheet
    ws.append(header)
    for row in rows:
        ws.append(row)
    workbook.save(path)
    return path


def test_real_spreadsheet_has_690_rows_37_types(shared_data):
    path = shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"
    if not path.exists():
        pytest.skip(f"{path} absent")
    rows = mqa.load_rows({"medicationqa_path": str(path)})
    assert len(rows) == 690
    assert len({r["question"] for r in rows}) == 651
    types = Counter(r["question_type"] for r in rows)
    assert len(types) == 37
    assert types["Information"] == 112 and types["Dose"] == 66 and types["Interaction"] == 51
    assert rows[0]["focus_drug"] == "rivastigmine"
    assert rows[0]["url"] == "https://medlineplus.gov/druginfo/meds/a602009.html"
    # two rows have no section title: kept, as an empty string
    assert sum(1 for r in rows if r["section_title"] == "") == 2
    assert set(rows[0]) == {"question", "focus_drug", "question_type", "answer", "section_title", "url"}


def test_custom_dataset_returns_test_split(tmp_path):
    path = _write_xlsx(tmp_path / "m.xlsx", HEADER, ROWS)
    dataset = mqa.load_medicationqa(medicationqa_path=str(path), version=1, config_source="x.yaml")
    assert list(dataset) == ["test"]
    assert dataset["test"][1]["question_type"] == "Side effects"
    assert dataset["test"][1]["section_title"] == ""


def test_env_var_points_at_local_copy(tmp_path, monkeypatch):
    path = _write_xlsx(tmp_path / "m.xlsx", HEADER, ROWS)
    monkeypatch.setenv("MEDEVAL_MEDICATIONQA_PATH", str(path))
    assert [r["focus_drug"] for r in mqa.load_rows()] == ["ibuprofen", "metformin"]


def test_json_and_csv_exports_with_snake_case_columns(tmp_path):
    snake = ["question", "focus_drug", "question_type", "answer", "section_title", "url"]
    records = [dict(zip(snake, row)) for row in ROWS]
    (tmp_path / "m.json").write_text(json.dumps(records))
    with (tmp_path / "m.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows([["" if c is None else c for c in row] for row in ROWS])
    from_json = mqa.read_local(tmp_path / "m.json")
    from_csv = mqa.read_local(tmp_path / "m.csv")
    assert from_json == from_csv
    assert from_json[0]["answer"] == "Adults: 200-400 mg every 4-6 hours."


@pytest.mark.parametrize(
    "header, rows, message",
    [
        (["Question", "Focus (Drug)"], [["q", "d"]], "column(s) ['Answer'] not found"),
        # spreadsheet rows as Excel shows them: the header is row 1, the first data row is row 2
        (HEADER, [ROWS[0], ["q2", "d", "Dose", "   ", "", ""]], "sheet 'DrugQA': row 3 has an empty 'Answer'"),
        (HEADER, [["", "d", "Dose", "a", "", ""]], "sheet 'DrugQA': row 2 has an empty 'Question'"),
    ],
)
def test_bad_rows_are_named(tmp_path, header, rows, message):
    path = _write_xlsx(tmp_path / "bad.xlsx", header, rows)
    with pytest.raises(MedevalDataError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")) as info:
        mqa.read_local(path)
    assert str(path) in str(info.value)


def test_truncated_workbook_and_unknown_suffix_and_missing_file(tmp_path):
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(MedevalDataError, match="not a readable .xlsx"):
        mqa.read_local(broken)
    odd = tmp_path / "m.parquet"
    odd.write_bytes(b"x")
    with pytest.raises(MedevalDataError, match="unsupported file type '.parquet'"):
        mqa.read_local(odd)
    with pytest.raises(MedevalDataError, match="does not exist"):
        mqa.load_rows({"medicationqa_path": str(tmp_path / "nope.xlsx")})


def test_offline_without_local_copy_says_what_to_do(monkeypatch):
    monkeypatch.delenv("MEDEVAL_MEDICATIONQA_PATH", raising=False)
    with pytest.raises(MedevalDataError) as info:
        mqa.load_rows({})
    text = str(info.value)
    assert "Medication_QA_MedInfo2019" in text and "MEDEVAL_MEDICATIONQA_PATH" in text and "medicationqa_path" in text


def test_prompt_is_a_plain_consumer_instruction():
    text = mqa.doc_to_text({"question": "can i take tylenol with advil"})
    assert text.endswith("Question: can i take tylenol with advil\nAnswer:")
    assert text.startswith("Answer the following question about a medication for a patient or caregiver.")


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        # LCS "take with food" (3) of 4 / 5 stemmed tokens: P=3/4, R=3/5, F=2PR/(P+R)=2/3
        ("take it with food", "Take this medicine with food.", 2 / 3),
        ("Take this medicine with food.", "Take this medicine with food.", 1.0),
        ("", "Take this medicine with food.", 0.0),
        ("aspirin", "Take this medicine with food.", 0.0),
        # Porter stemming: "tablets" -> "tablet", "taking" -> "take"
        ("taking tablets", "take tablet", 1.0),
    ],
)
def test_rouge_l(prediction, reference, expected):
    assert mqa.rouge_l(prediction, reference) == pytest.approx(expected)


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        ("Take this medicine with food .", "Take this medicine with food .", 100.0),
        ("", "Take this medicine with food.", 0.0),
        # 3 of 4 unigrams match and no 4-gram does: smoothed sentence BLEU is small but positive
        ("take it with food", "Take this medicine with food.", None),
    ],
)
def test_bleu(prediction, reference, expected):
    value = mqa.bleu(prediction, reference)
    if expected is None:
        assert 0.0 < value < 30.0
    else:
        assert value == pytest.approx(expected)


def test_process_results_without_judges_reports_overlap_only():
    doc = {"question": "q", "answer": "Take this medicine with food."}
    out = mqa.process_results(doc, [{"answer": "take it with food", "verdicts": None, "judges": None}])
    assert out["judge_computed"] == 0.0
    assert out["rougeL"] == pytest.approx(2 / 3)
    assert not any(k.startswith("judge_") and k != "judge_computed" for k in out)


def test_hub_mirror_is_the_default_source(monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(path, split=None, **kwargs):
        calls.append((path, split))
        return [dict(zip(HEADER, row)) for row in ROWS]  # the mirror keeps the spreadsheet's column names

    monkeypatch.delenv("MEDEVAL_MEDICATIONQA_PATH", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    rows = mqa.load_rows({})
    assert calls == [("truehealth/medicationqa", "train")]
    assert [r["question_type"] for r in rows] == ["Dose", "Side effects"]

    def unreachable(path, split=None, **kwargs):
        raise ConnectionError("no route")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(MedevalDataError, match=r"loading the Hub dataset truehealth/medicationqa failed \(ConnectionError\)"):
        mqa.load_rows({})
