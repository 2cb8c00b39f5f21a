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
    [
        "how much ibuprofen can i take",
        "ibuprofen",
        "Dose",
        "Adults: 200-400 mg every 4-6 hours.",
        "Dosage",
        "https://x/1",
    ],
    [
        "does metformin cause b12 deficiency",
        "metformin",
        "Side effects",
        "Long-term use can lower B12.",
        None,
        "https://x/2",
    ],
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
    with pytest.raises(
        MedevalDataError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
    ) as info:
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
    with pytest.raises(
        MedevalDataError, match=r"loading the Hub dataset truehealth/medicationqa failed \(ConnectionError\)"
    ):
        mqa.load_rows({})


# --------------------------------------------------------------------------- ROUGE-L: rouge-score's floats, faster


def _rouge_score_reference(target: str, prediction: str) -> float:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(target, prediction)["rougeL"].fmeasure


def _model_like(index: int, rows: list[dict[str, str]]) -> str:
    """An output in the style of a real model family, built from real text (another row's answer)."""
    row, other = rows[index], rows[(index + 7) % len(rows)]
    sentences = [s for s in other["answer"].replace("\n", " ").split(". ") if s]
    style = index % 5
    if style == 0:  # chatty instruction-tuned model
        return (
            f"Great question! Here's what you should know about {row['focus_drug'] or 'this medicine'}:\n\n"
            f"{'. '.join(sentences[:2])}.\n\nHowever, always talk to your doctor or pharmacist before changing "
            "how you take any medication. Let me know if you have other questions! 😊"
        )
    if style == 1:  # reasoning model: thinking block, then the answer
        return (
            f"<think>\nThe user asks: {row['question']}. I recall that {sentences[0].lower()}... "
            "Let me make sure about the dose.\n</think>\n\n" + " ".join(reversed(sentences))
        )
    if style == 2:  # format-ignoring: markdown bullets, unicode punctuation
        return "**Answer:**\n" + "\n".join(f"• {s.strip()} — see label (200–400 mg/day, ≤3×)" for s in sentences[:4])
    if style == 3:  # base model running on into the next question
        return f" {other['answer'][:400]}\n\nQuestion: {rows[(index + 1) % len(rows)]['question']}\nAnswer: Yes"
    return other["answer"].upper()[: 20 + index % 200]  # truncated, shouting


def test_rouge_l_matches_rouge_score_exactly_on_all_real_references(shared_data):
    """Every one of the 690 real references as the target, against another real reference (even rows)
    or a model-like output (odd rows): the same float as rouge-score, to the last bit."""
    path = shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"
    if not path.exists():
        pytest.skip(f"{path} absent")
    from medeval_metrics.medicationqa.rouge import rouge_l_f

    rows = mqa.load_rows({"medicationqa_path": str(path)})
    assert len(rows) == 690
    mismatches, nonzero, values = [], 0, set()
    for index, row in enumerate(rows):
        prediction = rows[(index + 1) % 690]["answer"] if index % 2 == 0 else _model_like(index, rows)
        expected = _rouge_score_reference(row["answer"], prediction)
        got = rouge_l_f(row["answer"], prediction)
        nonzero += expected > 0
        values.add(expected)
        if got != expected or type(got) is not float:
            mismatches.append((index, got, expected))
    assert mismatches == []
    assert nonzero > 500 and len(values) > 400  # the pairs overlap: not 0 == 0 (or one value) throughout


@pytest.mark.parametrize(
    "target, prediction",
    [
        ("Take this medicine with food.", "take it with food"),
        ("", "anything"),
        ("Take 2 tablets", ""),
        ("!!! ... ???", "— • —"),  # no tokens on either side
        (
            "Ibuprofen İbuprofen ÍBUPROFEN straße",
            "ibuprofen i̇buprofen straße strasse",
        ),  # lower() of İ adds a combining dot
        ("the the the the", "the"),  # repeated tokens
        ("a b c d e f g h", "h g f e d c b a"),  # reversed: LCS 1
        ("running runs ran runner", "run running runs"),  # stems meet
        ("generously generalization relational", "generous general relate"),  # Porter edge cases
        ("abc123 x9 10mg 200-400mg", "ABC123 X9 10 mg 200 400mg"),
        ("word " * 700, "word " * 3 + "other " * 500),  # longer than one machine word of bits
    ],
)
def test_rouge_l_edge_cases_match_rouge_score(target, prediction):
    from medeval_metrics.medicationqa.rouge import rouge_l_f

    assert rouge_l_f(target, prediction) == _rouge_score_reference(target, prediction)


def test_bit_parallel_lcs_equals_the_table():
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from rouge_score.rouge_scorer import _lcs_table

    from medeval_metrics.medicationqa.rouge import lcs_length

    tokens = st.lists(st.sampled_from(["a", "b", "c", "dd"]), max_size=50).map(tuple)

    @settings(max_examples=100, deadline=None)
    @given(tokens, tokens)
    def check(a, b):
        expected = _lcs_table(a, b)[-1][-1] if a and b else 0
        assert lcs_length(a, b) == expected == lcs_length(b, a)

    check()
