"""emrQA gold evidence: placed on its own numbered line, the note's own line breaks (issue 10, defects 1 and 3).

Offsets below are hand-computed from the note layouts written out in each table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.emrqa.metrics import score_evidence
from medeval_metrics.emrqa.prepare import describe, prepare

SECRET = "ZEBRA-PATIENT-TEXT"  # planted in every note: never in a message or the summary
QL = "Question, Logical Form, QTemplate, LTemplate\nq, A (x), t, A (|y|)\n"

# A discharge list repeats earlier lines. Line starts (0-based index: offset):
# 0: 0, 1: 34, 2: 54, 3: 75, 4: 98, 5: 118, 6: 139
REPEATING = [
    f"{SECRET} admission note",  # 0  (33 characters)
    "Aspirin 81 mg daily",  # 1
    "Metoprolol 25 mg bid",  # 2
    "Discharge medications:",  # 3
    "Aspirin 81 mg daily",  # 4  (a copy of line 1)
    "Metoprolol 25 mg bid",  # 5  (a copy of line 2)
    "Follow up",  # 6
]


def test_repeating_note_layout_is_what_the_table_assumes():
    text = "\n".join(REPEATING)
    starts = [0]
    for line in REPEATING[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    assert starts == [0, 34, 54, 75, 98, 118, 139]
    assert text.index("Aspirin 81 mg daily") == 34 and text.rindex("Aspirin 81 mg daily") == 98


def _qa(number: int, evidence: str, start: int) -> dict:
    question = f"What is the dose, question {number}"
    return {
        "question": [question],
        "id": [[[question, "What is the dose of |medication|"]], "MedicationEvent (|medication|) [dosage=x]"],
        "answers": [
            {
                "text": "",
                "answer_start": [start, 0],
                "evidence": evidence,
                "evidence_start": start,
                "answer_entity_type": "empty",
            }
        ],
    }


def _prepare(tmp_path: Path, subsets: dict[str, list[dict]]) -> tuple[dict, dict[str, list[dict]], dict[str, str]]:
    data = {"data": [{"title": title, "paragraphs": notes} for title, notes in subsets.items()]}
    data_json, ql = tmp_path / "data.json", tmp_path / "data-ql.csv"
    data_json.write_text(json.dumps(data), encoding="utf-8")
    ql.write_text(QL, encoding="utf-8")
    manifest = prepare(data_json, ql, tmp_path / "out", log=lambda _: None)
    records: dict[str, list[dict]] = {}
    for path in sorted((tmp_path / "out").glob("qa_*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            records.setdefault(record["subset"], []).append(record)
    for found in records.values():
        found.sort(key=lambda r: int(r["qa_id"].split("#")[1]))
    notes = {
        json.loads(line)["note_key"]: json.loads(line)["text"]
        for line in (tmp_path / "out" / "notes.jsonl").read_text(encoding="utf-8").splitlines()
    }
    return manifest, records, notes


# (evidence, evidence_start as upstream gives it, expected character offset, counted as not on its line)
PLACEMENT = [
    # 1-based line 2 is "Aspirin 81 mg daily": placed there, not on its copy (line 5). The old reader took the
    # number as 0-based, found the text anywhere after line index 2 and placed it on the copy (98).
    ("Aspirin 81 mg daily", 2, 34, False),
    ("Aspirin 81 mg daily", 5, 98, False),  # the copy's own 1-based line number: the copy
    ("Metoprolol 25 mg bid", 3, 54, False),  # old reader: 118
    ("Metoprolol 25 mg bid", 6, 118, False),
    # 1-based line 1 is the admission line; 0-based line 1 holds the text: a 0-based writer.
    ("Aspirin 81 mg daily", 1, 34, False),
    # Part of a line starts on that line: "81 mg" is 8 characters into line 1 (1-based 2).
    ("81 mg", 2, 42, False),
    # On neither line 7 (1-based: "Follow up") nor 0-based 7 (past the end): the copy nearest line 7's start
    # (139): 118, not 54. Counted.
    ("Metoprolol 25 mg bid", 7, 118, True),
    # On neither 1-based line 1 nor 0-based line 1 ("Aspirin ..."): nearest to offset 0 is 54. Counted.
    ("Metoprolol 25 mg bid", 1, 54, True),
    # A line number past the note (no line to be near): the first copy, not counted as off its line.
    ("Aspirin 81 mg daily", 40, 34, False),
]


def test_gold_evidence_is_placed_on_its_numbered_line_when_lines_recur(tmp_path):
    note = {"note_id": "901", "context": REPEATING, "qas": [_qa(n, e, s) for n, (e, s, _, _) in enumerate(PLACEMENT)]}
    relations_note = {"note_id": "902", "context": REPEATING, "qas": [_qa(0, "Metoprolol 25 mg bid", 7)]}
    manifest, records, notes = _prepare(tmp_path, {"medication": [note], "relations": [relations_note]})
    placed = [r["answers"][0]["evidence_start"] for r in records["medication"]]
    assert placed == [expected for _, _, expected, _ in PLACEMENT]
    text = notes["medication/901"]
    for record in records["medication"]:
        answer = record["answers"][0]
        assert text[answer["evidence_start"] :].startswith(answer["evidence"])
    checks = manifest["quirks_and_checks"]
    assert checks["medication_evidence_not_on_its_line"] == sum(counted for *_, counted in PLACEMENT) == 2
    assert checks["relations_evidence_not_on_its_line"] == 1  # counted by subset
    assert records["relations"][0]["answers"][0]["evidence_start"] == 118
    # The summary names note id and question, never note text.
    examples = manifest["check_examples"]["medication_evidence_not_on_its_line"]
    assert examples == [
        "note medication/901, question 6 ('What is the dose, question 6'), answer 0",
        "note medication/901, question 7 ('What is the dose, question 7'), answer 0",
    ]
    summary = "\n".join(describe(manifest))
    assert (
        "check medication_evidence_not_on_its_line: 2" in summary and "e.g. note medication/901, question 6" in summary
    )
    assert SECRET not in summary and SECRET not in json.dumps(manifest)


def test_a_correct_prediction_of_a_recurring_line_scores_by_position(tmp_path):
    """The regression the issue measured: a model that copies the right line scored 0 by position.

    Line starts: 0, 34 ("Aspirin 81 mg daily"), 54, 75, 98 ("Aspirin 81 mg stopped at discharge").
    """
    lines = REPEATING[:4] + ["Aspirin 81 mg stopped at discharge"]
    note = {"note_id": "903", "context": lines, "qas": [_qa(0, "Aspirin 81 mg", 2)]}
    _, records, notes = _prepare(tmp_path, {"medication": [note]})
    text = notes["medication/903"]
    golds = records["medication"][0]["answers"]
    assert golds[0]["evidence_start"] == 34  # the old reader placed it at 98, in the later line
    # The model copies line 2 whole: starts at 34 (0 off), ends at 53 (6 past the gold's end at 47).
    assert score_evidence("Aspirin 81 mg daily", golds, text) == pytest.approx(
        {"relaxed_em": 1.0, "f1": 2 * 0.75 / 1.75, "strict_em": 0.0}
    )
    misplaced = [{**golds[0], "evidence_start": 98}]
    assert score_evidence("Aspirin 81 mg daily", misplaced, text)["relaxed_em"] == 0.0


# Upstream lines keep their trailing newline. Joined with no extra break:
# "Visit one\n" (0), "BP 150/90 noted\n" (10), "Plan: start lisinopril\n" (26), "Follow up" (49)
TRAILING = ["Visit one\n", "BP 150/90 noted\n", "Plan: start lisinopril\n", "Follow up"]
TRAILING_TEXT = "Visit one\nBP 150/90 noted\nPlan: start lisinopril\nFollow up"


def test_note_lines_keep_exactly_their_own_line_breaks(tmp_path):
    medication = {"note_id": "904", "context": TRAILING, "qas": [_qa(0, "Plan: start lisinopril", 3)]}
    mixed = {
        "note_id": "905",
        "context": ["Visit one\n", "BP 150/90 noted", "Follow up\n"],
        "qas": [_qa(0, "Follow up", 3)],
    }
    # Risk: evidence located from its character offset in the joined note (answer_start[0]).
    risk_qa = {
        "question": ["Is the blood pressure high"],
        "id": "r1",
        "answers": [
            {
                "text": "",
                "answer_start": [10, 10],
                "evidence": "BP 150/90 noted\nPlan: start lisinopril",
                "evidence_start": 10,
                "answer_entity_type": "empty",
            }
        ],
    }
    risk = {"note_id": "906", "context": TRAILING, "qas": [risk_qa]}
    manifest, records, notes = _prepare(tmp_path, {"medication": [medication, mixed], "risk-dataset": [risk]})
    assert notes["medication/904"] == TRAILING_TEXT and "\n\n" not in notes["medication/904"]
    assert notes["medication/905"] == "Visit one\nBP 150/90 noted\nFollow up\n"
    by_note = {r["note_key"]: r["answers"][0] for r in records["medication"]}
    assert by_note["medication/904"]["evidence_start"] == 26  # 1-based line 3, not shifted by doubled breaks
    assert by_note["medication/905"]["evidence_start"] == 26
    assert records["risk"][0]["answers"][0]["evidence_start"] == 10  # the offset is right as given: no drift
    assert "medication_evidence_not_on_its_line" not in manifest["quirks_and_checks"]


def _until(template: str) -> list[str]:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    path = Path(__file__).resolve().parents[2] / "tasks" / "emrqa" / template
    return yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)["generation_kwargs"]["until"]


def _cut(output: str, until: list[str]) -> str:
    """What lm-eval keeps of a generation: the text before the first stop sequence."""
    for stop in until:
        output = output.split(stop)[0]
    return output


def test_stop_sequences_do_not_cut_a_copy_of_adjacent_note_lines(tmp_path):
    from medeval_metrics.emrqa.tasks import evidence_prompt

    until = _until("_evidence_template_yaml")
    assert until == ["\n\n"]
    qa = {
        "question": ["Why lisinopril"],
        "id": "r2",
        "answers": [
            {
                "text": "",
                "answer_start": [10, 10],
                "evidence": "BP 150/90 noted\nPlan: start lisinopril",
                "evidence_start": 10,
                "answer_entity_type": "empty",
            }
        ],
    }
    _, records, notes = _prepare(tmp_path, {"risk-dataset": [{"note_id": "907", "context": TRAILING, "qas": [qa]}]})
    note = notes["risk/907"]
    prompt = evidence_prompt({"note": note, "question": "Why lisinopril"})
    # The model copies two adjacent lines as the prompt shows them: one line break between them.
    shown = prompt[prompt.index("BP 150/90") : prompt.index("Follow up")].rstrip("\n")
    assert shown == "BP 150/90 noted\nPlan: start lisinopril"
    kept = _cut(shown + "\n\nThese lines show the plan.", until)
    assert kept == shown
    assert score_evidence(kept, records["risk"][0]["answers"], note) == {"relaxed_em": 1.0, "f1": 1.0, "strict_em": 1.0}
    # With every break doubled (the old join), the same copy was cut after its first line.
    doubled = "\n\n".join(line.rstrip("\n") for line in TRAILING)
    old_copy = doubled[doubled.index("BP") : doubled.index("Follow")].rstrip("\n")
    assert _cut(old_copy, until) == "BP 150/90 noted"


def test_every_counted_evidence_quirk_names_its_records_without_note_text(tmp_path):
    qas = [
        _qa(0, f"{SECRET}   ADMISSION note", 1),  # other spacing and case: located loosely
        _qa(1, "not in this note at all", -1),  # no line number, not in the note: counted, kept
        _qa(2, "why? Aspirin 81 mg daily", 2),  # not in the note: its 1-based line is the ground truth
    ]
    manifest, records, _ = _prepare(tmp_path, {"relations": [{"note_id": "908", "context": REPEATING, "qas": qas}]})
    examples = manifest["check_examples"]
    assert examples["evidence_located_ignoring_case_and_spacing"] == [
        "note relations/908, question 0 ('What is the dose, question 0'), answer 0"
    ]
    assert examples["evidence_not_in_note"] == [
        "note relations/908, question 1 ('What is the dose, question 1'), answer 0"
    ]
    assert examples["evidence_taken_from_its_line_number"] == [
        "note relations/908, question 2 ('What is the dose, question 2'), answer 0"
    ]
    assert [r["answers"][0]["evidence_start"] for r in records["relations"]] == [0, -1, 34]
    assert SECRET not in json.dumps(examples) and SECRET not in "\n".join(describe(manifest))
