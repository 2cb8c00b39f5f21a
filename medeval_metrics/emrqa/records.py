"""emrQA ``data.json`` records: validation, the note text, and where each gold evidence is in the note.

Errors and counted checks name the note id and question, never note text.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa.seeding import stable_fraction
from medeval_metrics.emrqa.text import as_list, note_index

# data.json subset titles -> our subset names
SUBSETS = {
    "medication": "medication",
    "medications": "medication",
    "relations": "relations",
    "risk-dataset": "risk",
    "risk": "risk",
    "smoking": "smoking",
    "obesity": "obesity",
}
EVIDENCE_SUBSETS = ("medication", "relations", "risk")
CLASS_SUBSETS = ("smoking", "obesity")
ENTITY_TYPES = ("single", "empty", "complex")


def fail(path: Path, where: str, problem: str, fix: str = "") -> MedevalDataError:
    return MedevalDataError(f"{path}: {where}: {problem}.{' ' + fix if fix else ''}")


def note_text(context: Any, path: Path, where: str) -> tuple[str, list[int]]:
    """The note as one string, and the character offset of each line (for line-numbered evidence).

    Upstream's lines keep their own trailing newline: those are not given a second one, so the note
    (and the prompt) has exactly the note's own line breaks.
    """
    if isinstance(context, str):
        lines = context.split("\n")
        text = context
    elif isinstance(context, list) and all(isinstance(line, str) for line in context):
        lines = context
        text = "".join(
            line if line.endswith("\n") or last else line + "\n"
            for last, line in ((n == len(context) - 1, line) for n, line in enumerate(context))
        )
    else:
        raise fail(path, where, "'context' is neither a string nor a list of lines")
    offsets, offset = [], 0
    for line in lines:
        offsets.append(offset)
        offset += len(line) + (0 if line.endswith("\n") else 1)
    return text, offsets


def _locate_evidence(text: str, evidence: str, hint: int) -> int:
    """Character offset of ``evidence`` in the note: at ``hint`` if it is there, else the nearest copy."""
    if hint >= 0 and text.startswith(evidence, hint):
        return hint
    best, position = -1, text.find(evidence)
    while position != -1:
        if best < 0 or abs(position - hint) < abs(best - hint):
            best = position
        if position > hint:
            break
        position = text.find(evidence, position + 1)
    return best


def _line_text(text: str, line_offsets: list[int], line: int) -> str:
    """Line ``line`` (0-based) of the note without its line break, or "" when out of range."""
    if not 0 <= line < len(line_offsets):
        return ""
    end = line_offsets[line + 1] - 1 if line + 1 < len(line_offsets) else len(text)
    return text[line_offsets[line] : end].rstrip("\n")


def _on_line(text: str, line_offsets: list[int], evidence: str, line: int) -> int:
    """Offset of ``evidence`` where it starts on line ``line`` (0-based), or -1 if it does not start there."""
    if not 0 <= line < len(line_offsets):
        return -1
    position = text.find(evidence, line_offsets[line])
    next_line = line_offsets[line + 1] if line + 1 < len(line_offsets) else len(text) + 1
    return position if 0 <= position < next_line else -1


MAX_EXAMPLES = 3  # records named per counted check in the summary


class Checks(Counter):
    """Counted quirks and checks, with the first few records of each (note id and question, never note text)."""

    def __init__(self) -> None:
        super().__init__()
        self.examples: dict[str, list[str]] = {}


def _count(stats: Counter, name: str, where: str) -> None:
    stats[name] += 1
    examples = getattr(stats, "examples", None)
    if examples is not None and len(examples.setdefault(name, [])) < MAX_EXAMPLES:
        examples[name].append(where)


def _gold_answers(
    subset: str, answers: Any, text: str, line_offsets: list[int], path: Path, where: str, stats: Counter
) -> list[dict[str, Any]]:
    if not isinstance(answers, list) or not answers:
        raise fail(path, where, "'answers' is missing or empty", "Every question needs at least one answer.")
    golds = []
    for number, answer in enumerate(answers):
        here = f"{where}, answer {number}"
        if not isinstance(answer, dict) or "evidence" not in answer:
            raise fail(path, here, "the answer has no 'evidence'")
        entity_type = str(answer.get("answer_entity_type") or "single")
        if entity_type not in ENTITY_TYPES:
            raise fail(path, here, f"answer_entity_type {entity_type!r} is not one of {', '.join(ENTITY_TYPES)}")
        raw_text = answer.get("text", "")
        entities = [str(e) for e in as_list(raw_text) if str(e).strip()] if entity_type != "empty" else []
        evidences = as_list(answer["evidence"])
        if not all(isinstance(e, str) for e in evidences):
            raise fail(path, here, "'evidence' is not text")
        starts = [s[0] if isinstance(s, list) and s else s for s in as_list(answer.get("evidence_start", -1))]
        answer_start = answer.get("answer_start")
        if subset == "risk" and isinstance(answer_start, list) and answer_start and isinstance(answer_start[0], int):
            starts = [answer_start[0]]  # risk: [char offset of the evidence, char offset of the entity]
        for start in starts:
            if not isinstance(start, int) and start != "":
                raise fail(path, here, f"evidence_start is {type(start).__name__}, expected an integer")
        starts = [s if isinstance(s, int) else -1 for s in starts] or [-1]
        if subset != "risk" and len(evidences) == 1 and len(set(starts)) > 1:
            # One evidence string, several evidence lines: one gold answer per line, the note's own line
            # (1-based, as upstream's SQuAD converter reads them).
            starts = list(dict.fromkeys(starts))
            evidences = [_line_text(text, line_offsets, start - 1) for start in starts]
            stats["answers_split_into_their_evidence_lines"] += 1
        for piece_number, evidence in enumerate(evidences):
            start = starts[piece_number] if piece_number < len(starts) else starts[-1]
            stripped = evidence.strip()
            lead = len(evidence) - len(evidence.lstrip())
            off_line = False
            if subset == "risk":
                hint = start + lead
            else:
                # A line number: upstream's are 1-based, some writers' 0-based. The evidence must start
                # *on* that line (a repeated line elsewhere is another place); where it is on neither,
                # the copy nearest the line is taken and the record counted.
                hint = -1
                for line in (start - 1, start):
                    hint = _on_line(text, line_offsets, stripped, line) if stripped else -1
                    if hint >= 0:
                        break
                if hint < 0:
                    line = start - 1 if 0 <= start - 1 < len(line_offsets) else start
                    if 0 <= line < len(line_offsets):
                        hint, off_line = line_offsets[line], True
            located = _locate_evidence(text, stripped, hint) if stripped else -1
            if located < 0 and stripped:  # spacing or case differs from the note: find it loosely
                span = note_index(text).locate(stripped, max(hint, 0))
                if span is not None:
                    located, stripped = span[0], text[span[0] : span[1]]
                    _count(stats, "evidence_located_ignoring_case_and_spacing", here)
            if off_line and located >= 0:
                _count(stats, f"{subset}_evidence_not_on_its_line", here)
            if located < 0 and subset != "risk" and _line_text(text, line_offsets, start - 1).strip():
                # Not in the note as written: upstream's ground truth is the note line it points at.
                line_text = _line_text(text, line_offsets, start - 1)
                located = line_offsets[start - 1] + len(line_text) - len(line_text.lstrip())
                stripped = line_text.strip()
                _count(stats, "evidence_taken_from_its_line_number", here)
            if not stripped:
                raise fail(
                    path,
                    here,
                    "'evidence' is empty and no evidence line is given",
                    "Span answers need their evidence text or line.",
                )
            if located < 0:
                # Offsets are only hints; an unlocatable evidence whose offset also points past the note is
                # a broken record, not a quirk to count.
                size, unit = (len(text), "characters") if subset == "risk" else (len(line_offsets), "lines")
                if start != -1 and not 0 <= start <= size:
                    raise fail(
                        path,
                        here,
                        f"evidence_start {start} is outside the note ({size} {unit}) and the "
                        "evidence text is not in the note",
                        "Fix the offset or the evidence, or drop the answer.",
                    )
                _count(stats, "evidence_not_in_note", here)
            golds.append(
                {"evidence": stripped, "evidence_start": located, "entity_type": entity_type, "entities": entities}
            )
            stats[f"answers_{entity_type}"] += 1
    return golds


def qa_record(
    subset: str,
    note_key: str,
    qa_number: int,
    qa: Any,
    text: str,
    line_offsets: list[int],
    path: Path,
    seed: int,
    stats: Counter,
) -> dict[str, Any]:
    where = f"note {note_key}, question {qa_number}"
    if not isinstance(qa, dict):
        raise fail(path, where, "the question entry is not an object")
    questions = [q for q in as_list(qa.get("question")) if isinstance(q, str) and q.strip()]
    if not questions:
        raise fail(path, where, "it has no question text")
    where = f"note {note_key}, question {qa_number} ({questions[0]!r})"
    question_templates: list[str] = []
    lf_template = ""
    qa_id = qa.get("id")
    if isinstance(qa_id, list) and len(qa_id) == 2:
        pairs, lf_template = qa_id
        if isinstance(pairs, list):
            question_templates = [p[1] if isinstance(p, list) and len(p) > 1 else "" for p in pairs]
        lf_template = lf_template if isinstance(lf_template, str) else ""
    choice = int(stable_fraction(seed, "paraphrase", note_key, qa_number) * len(questions))
    record: dict[str, Any] = {
        "qa_id": f"{note_key}#{qa_number}",
        "subset": subset,
        "note_key": note_key,
        "question": questions[choice].strip(),
        "question_template": str(question_templates[choice]) if choice < len(question_templates) else "",
        "lf_template": lf_template.strip() or "(none)",
    }
    answers = qa.get("answers")
    if subset in CLASS_SUBSETS:
        if not isinstance(answers, list) or not answers or not isinstance(answers[0], dict):
            raise fail(path, where, "'answers' is missing or empty", "Classification questions need a label.")
        labels = {str(a.get("text", "")).strip() for a in answers if isinstance(a, dict)}
        label = str(answers[0].get("text", "")).strip()
        if not label:
            raise fail(path, where, "the answer's class label ('text') is empty")
        record["label"] = label
        record["several_answers"] = len(labels) > 1  # a list of entities, not a class (dropped before writing)
    else:
        record["answers"] = _gold_answers(subset, answers, text, line_offsets, path, where, stats)
    return record
