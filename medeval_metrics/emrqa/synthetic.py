"""Synthetic emrQA files in the exact ``data.json`` and ``data-ql.csv`` layouts, for tests and benchmarks.

Every note, name and number here is invented for this project (no patient data). Questions and
logical forms come from emrQA's public templates (``templates-all.csv``) when a path to it is
given, else from a few built-in templates in the same style. The files cover every subset and
answer form: line/token answer starts (0-based lines in medication, 1-based in relations),
character offsets and two-line evidence in risk notes, ``empty`` and ``complex`` answers,
questions with two gold answers, class labels for smoking and obesity (and obesity's list-answer
comorbidity questions where the templates have them); and the upstream CSV
writer's quirks: BOM, CRLF, a blank line, a repeated header, trailing commas and unquoted commas
inside logical forms. ``title`` comes after ``paragraphs`` in some subsets, as key order varies.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SLOT = re.compile(r"\|([^|]*)\|")

MEDICATIONS = [
    "lisinopril",
    "metformin",
    "atorvastatin",
    "warfarin",
    "furosemide",
    "insulin glargine",
    "metoprolol",
    "amlodipine",
    "omeprazole",
    "levothyroxine",
    "aspirin",
    "heparin",
]
PROBLEMS = [
    "hypertension",
    "type 2 diabetes",
    "atrial fibrillation",
    "chest pain",
    "pneumonia",
    "congestive heart failure",
    "hyperlipidemia",
    "renal insufficiency",
    "anemia",
    "obesity",
]
TESTS = [
    "hemoglobin A1c",
    "creatinine",
    "potassium",
    "LDL",
    "blood pressure",
    "chest x-ray",
    "echocardiogram",
    "troponin",
    "INR",
    "glucose",
]
TREATMENTS = ["cardiac catheterization", "physical therapy", "dialysis", "CABG", "stent placement"]
SMOKING_LABELS = ["CURRENT SMOKER", "NON-SMOKER", "PAST SMOKER", "UNKNOWN"]
OBESITY_LABELS = ["Absent", "Present", "Questionable", "Unmentioned"]

_BUILTIN_TEMPLATES = {
    "medication": [
        (
            "What is the dosage of |medication|##How much |medication| does the patient take",
            "MedicationEvent (|medication|) [dosage=x]",
        ),
        (
            "Has the patient ever been on |medication|##Has this patient ever been prescribed |medication|",
            "MedicationEvent (|medication|) OR {MedicationEvent (|medication|) [enddate=x]}",
        ),
        (
            "What medications is the patient on for |problem|",
            "{MedicationEvent (x) [startdate=x, enddate=x]} given {ConditionEvent (|problem|) OR SymptomEvent (|problem|)}",
        ),
    ],
    "relations": [
        (
            "Why is the patient on |medication|##What is |medication| prescribed for",
            "MedicationEvent (|medication|) given {ConditionEvent (x) OR SymptomEvent (x)}",
        ),
        (
            "What treatment has the patient had for |problem|",
            "{TreatmentEvent (x) OR ProcedureEvent (x)} improves {ConditionEvent (|problem|) OR SymptomEvent (|problem|)}",
        ),
    ],
    "risk": [
        (
            "What were the results of |test| on |date|",
            "LabEvent (|test|) [date=|date|, result=x] OR ProcedureEvent (|test|) [date=|date|, result=x]",
        ),
        ("Is |test| value high", "LabEvent (|test|) [date=x, (result=x)>lab.refhigh]"),
    ],
    "smoking": [("Does the patient smoke##Does the patient currently smoke", "SmokingUseEvent (x) [IsTobaccoUser=x]")],
    "obesity": [
        (
            "Does the patient have |problem|##Does this patient have |problem|",
            "ConditionEvent (|problem|) [status=x] OR SymptomEvent (|problem|) [status=x]",
        )
    ],
}
_TEMPLATE_DATASETS = {
    "medication": "medication",
    "medications": "medication",
    "relations": "relations",
    "risk": "risk",
    "smoking": "smoking",
    "obesity": "obesity",
}


def load_templates(templates_csv: Path | None) -> dict[str, list[tuple[str, str]]]:
    """(question paraphrases joined by ##, logical-form template) per subset."""
    if templates_csv is None or not Path(templates_csv).exists():
        return {k: list(v) for k, v in _BUILTIN_TEMPLATES.items()}
    out: dict[str, list[tuple[str, str]]] = {k: [] for k in _BUILTIN_TEMPLATES}
    with open(templates_csv, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            subset = _TEMPLATE_DATASETS.get((row.get("dataset") or "").strip().lower())
            question, lf = (row.get("Question") or "").strip(), " ".join((row.get("Logical Forms") or "").split())
            if subset and question and lf:
                out[subset].append((question, lf))
    return {k: v or list(_BUILTIN_TEMPLATES[k]) for k, v in out.items()}


def _slot_value(name: str, rng: random.Random) -> str:
    name = name.strip().lower()
    if "medic" in name:
        return rng.choice(MEDICATIONS)
    if "test" in name:
        return rng.choice(TESTS)
    if "treat" in name:
        return rng.choice(TREATMENTS)
    if "date" in name:
        return f"{rng.randint(2090, 2099)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if "time" in name:
        return f"{rng.randint(2, 11)} months"
    if "value" in name:
        return str(rng.randint(5, 300))
    return rng.choice(PROBLEMS)


def fill(template: str, values: dict[str, str]) -> str:
    return _SLOT.sub(lambda m: values.get(m.group(1).strip().lower(), m.group(0)), template)


def _slots(*templates: str) -> list[str]:
    return sorted({m.strip().lower() for t in templates for m in _SLOT.findall(t)})


def _line(rng: random.Random, entity: str) -> str:
    shapes = [
        "{e} {d} mg by mouth daily, started {y}.",
        "Continue {e} as before; no changes were made by the team.",
        "Patient reports good adherence to {e} {d} mg twice daily.",
        "Assessment: {e} stable, will follow up in {m} weeks.",
        "{e} was discussed with the patient and family at length.",
    ]
    return rng.choice(shapes).format(
        e=entity, d=rng.randint(1, 99) * 5, y=rng.randint(2090, 2099), m=rng.randint(1, 12)
    )


def _filler(rng: random.Random) -> str:
    return (
        rng.choice(
            [
                "Vital signs stable overnight, afebrile.",
                "No acute events.",
                "Lungs clear to auscultation bilaterally.",
                "Heart regular rate and rhythm, no murmurs.",
                "Abdomen soft, non-tender.",
                "Plan discussed with attending.",
                "Social history: lives with spouse, retired teacher.",
                "Family history noncontributory.",
                "Extremities without edema.",
                "Neurologic exam nonfocal.",
            ]
        )
        + f" ({rng.randint(1, 999)})"
    )


@dataclass
class SyntheticInfo:
    data_json: Path
    data_ql_csv: Path
    notes: dict[str, int] = field(default_factory=dict)
    questions: dict[str, int] = field(default_factory=dict)
    ql_rows: int = 0


def _span_note(
    subset: str,
    note_number: int,
    rng: random.Random,
    templates: list[tuple[str, str]],
    lines_per_note: int,
    questions_per_note: int,
    ql_rows: list[tuple[str, str, str, str]],
) -> dict[str, Any]:
    lines = [f"Record {subset}-{note_number}: admission note"] + [_filler(rng) for _ in range(lines_per_note - 1)]
    free = list(range(1, len(lines) - 1))
    rng.shuffle(free)
    qas, planned = [], []
    for q_number in range(questions_per_note):
        question_tpl, lf_tpl = templates[q_number % len(templates)]
        paraphrases = [p.strip() for p in question_tpl.split("##") if p.strip()]
        values = {name: _slot_value(name, rng) for name in _slots(question_tpl, lf_tpl)}
        entity = next(iter(values.values()), rng.choice(MEDICATIONS))
        form = ("single", "empty", "complex")[q_number % 3]
        plan = []
        for _ in range(2 if q_number % 5 == 4 else 1):  # some questions have two gold answers
            line_number = free.pop() if free else rng.randrange(1, len(lines) - 1)
            if form == "complex":
                other = rng.choice([m for m in MEDICATIONS if m != entity])
                lines[line_number] = f"{entity} and {other} were both continued for {rng.choice(PROBLEMS)}."
                entities = [entity, other]
            else:
                lines[line_number] = _line(rng, entity)
                entities = [] if form == "empty" else [entity]
            multi = subset == "risk" and q_number % 4 == 1  # risk evidence can span two lines
            plan.append((line_number, multi, form, entities))
        filled = [fill(p, values) for p in paraphrases]
        qas.append({"question": filled, "id": [[[q, p] for q, p in zip(filled, paraphrases)], lf_tpl]})
        planned.append(plan)
        lf = fill(lf_tpl, values)
        for q, p in zip(filled, paraphrases):
            ql_rows.append((q, lf, p, lf_tpl))
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for qa, plan in zip(qas, planned):  # evidence as the lines finally read
        answers = []
        for line_number, multi, form, entities in plan:
            evidence = lines[line_number] + ("\n" + lines[line_number + 1] if multi else "")
            if not all(e in evidence for e in entities):  # a later question reused the line
                form, entities = "empty", []
            text: Any = entities if form == "complex" else (entities[0] if entities else "")
            if subset == "risk":
                entity_offset = offsets[line_number] + (evidence.find(entities[0]) if entities else 0)
                answer_start: Any = [offsets[line_number], entity_offset]
                evidence_start = offsets[line_number]
            else:
                words = evidence.split()
                token = words.index(entities[0].split()[0]) if entities and entities[0].split()[0] in words else 0
                evidence_start = line_number + (1 if subset == "relations" else 0)  # 1-based in relations
                answer_start = [evidence_start, token]
            answers.append(
                {
                    "text": text,
                    "answer_start": answer_start,
                    "evidence": evidence,
                    "evidence_start": evidence_start,
                    "answer_entity_type": form,
                }
            )
        qa["answers"] = answers
    return {"note_id": f"{100 + note_number}", "context": lines, "qas": qas}


def _class_note(
    subset: str,
    note_number: int,
    rng: random.Random,
    templates: list[tuple[str, str]],
    questions_per_note: int,
    ql_rows: list[tuple[str, str, str, str]],
) -> dict[str, Any]:
    labels = SMOKING_LABELS if subset == "smoking" else OBESITY_LABELS
    label = labels[note_number % len(labels)]
    text = "\n".join(_filler(rng) for _ in range(8)) + f"\nSocial history reviewed ({label.lower()} documented)."
    qas = []
    for q_number in range(questions_per_note):
        question_tpl, lf_tpl = templates[q_number % len(templates)]
        paraphrases = [p.strip() for p in question_tpl.split("##") if p.strip()]
        values = {name: _slot_value(name, rng) for name in _slots(question_tpl, lf_tpl)}
        filled = [fill(p, values) for p in paraphrases]
        if " relates " in lf_tpl:  # upstream's obesity comorbidity questions answer with a list of problems
            texts = rng.sample([p for p in PROBLEMS if p not in values.values()], 2)
        else:
            texts = [label]
        qas.append(
            {
                "question": filled,
                "id": [[[q, p] for q, p in zip(filled, paraphrases)], lf_tpl],
                "answers": [
                    {
                        "text": text,
                        "answer_start": "",
                        "evidence": "",
                        "evidence_start": "",
                        "answer_entity_type": "single",
                    }
                    for text in texts
                ],
            }
        )
        for q, p in zip(filled, paraphrases):
            ql_rows.append((q, fill(lf_tpl, values), p, lf_tpl))
    return {"note_id": f"{500 + note_number}", "context": text, "qas": qas}


def _iter_subset_notes(
    subset: str,
    count: int,
    rng: random.Random,
    templates: list[tuple[str, str]],
    lines_per_note: int,
    questions_per_note: int,
    ql_rows: list,
) -> Iterator[dict[str, Any]]:
    for note_number in range(count):
        if subset in ("smoking", "obesity"):
            yield _class_note(subset, note_number, rng, templates, max(1, questions_per_note // 4), ql_rows)
        else:
            lines = lines_per_note * (4 if subset == "risk" else 1)  # risk notes join several visits
            yield _span_note(subset, note_number, rng, templates, lines, questions_per_note, ql_rows)


def _write_ql_csv(path: Path, rows: list[tuple[str, str, str, str]], max_rows: int | None) -> int:
    """data-ql.csv with the upstream writer's quirks."""
    out = io.StringIO()
    out.write("\ufeffQuestion, Logical Form, QTemplate, LTemplate\r\n")
    writer = csv.writer(out, lineterminator="\r\n")
    written = 0
    for number, row in enumerate(rows[:max_rows] if max_rows else rows):
        if number % 3 == 0:  # unquoted commas inside the logical form, as upstream writes them
            out.write(", ".join(row) + ",\r\n")
        else:
            writer.writerow(row)
        if number == 2:
            out.write("\r\n")  # a blank line
        if number == 5:
            out.write("Question, Logical Form, QTemplate, LTemplate\r\n")  # a repeated header
        written += 1
    path.write_text(out.getvalue(), encoding="utf-8", newline="")
    return written


def write_synthetic(
    out_dir: Path,
    notes_per_subset: int = 12,
    questions_per_note: int = 10,
    lines_per_note: int = 30,
    templates_csv: Path | None = None,
    seed: int = 0,
    max_ql_rows: int | None = 20000,
) -> SyntheticInfo:
    """Write ``data.json`` and ``data-ql.csv`` under ``out_dir``; notes are streamed to disk one at a time."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    templates = load_templates(templates_csv)
    rng = random.Random(seed)
    info = SyntheticInfo(out_dir / "data.json", out_dir / "data-ql.csv")
    ql_rows: list[tuple[str, str, str, str]] = []
    titles = {
        "medication": "medication",
        "relations": "relations",
        "risk": "risk-dataset",
        "smoking": "smoking",
        "obesity": "obesity",
    }
    with open(info.data_json, "w", encoding="utf-8") as handle:
        handle.write('{"data": [')
        for subset_number, (subset, title) in enumerate(titles.items()):
            title_last = subset in ("medication", "smoking")  # key order varies between writers
            handle.write(", " if subset_number else "")
            handle.write("{" + ("" if title_last else f'"title": {json.dumps(title)}, ') + '"paragraphs": [')
            count = questions = 0
            for note in _iter_subset_notes(
                subset,
                notes_per_subset,
                rng,
                templates[subset],
                lines_per_note,
                questions_per_note,
                ql_rows if len(ql_rows) < (max_ql_rows or 10**12) else [],
            ):
                handle.write((", " if count else "") + json.dumps(note))
                count += 1
                questions += len(note["qas"])
            handle.write("]" + (f', "title": {json.dumps(title)}' if title_last else "") + "}")
            info.notes[subset], info.questions[subset] = count, questions
        handle.write('], "version": "1.0"}')
    info.ql_rows = _write_ql_csv(info.data_ql_csv, ql_rows, max_ql_rows)
    return info


def gold_evidence_output(doc: dict[str, Any]) -> str:
    """What a perfect model answers for an evidence doc: each gold evidence, one per line."""
    answers = json.loads(doc["answers_json"])
    return "\n".join(dict.fromkeys(a["evidence"] for a in answers))
