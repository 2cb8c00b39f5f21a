"""Prepare emrQA for evaluation: read the user's files once, validate, write seeded splits to a cache.

Inputs (never shipped; n2c2 data-use agreement): ``data.json`` (notes with QA pairs) and
``data-ql.csv`` (question / logical-form pairs). Both are streamed: memory stays bounded by the
largest note, whatever the file size.

The original split files were never published; these splits are a documented reconstruction,
assigned by a seeded hash of a stable key (so they do not depend on file order or memory):

- emrQL-1: each question/logical-form row goes to test with probability 0.2 (key: the row's
  question and logical form, so duplicates land together): test shares templates with training.
- emrQL-2: whole question paraphrase templates (``QTemplate``) are held out with probability 0.2:
  test wording is unseen in training.
- QA: whole notes go to test with probability 0.2 (key: subset and note id).

Output, in ``<cache>/<fingerprint of inputs and settings>/``: ``notes.jsonl``, ``qa_<subset>_<split>.jsonl``,
``emrql_<n>_<split>.jsonl``, ``emrql_<n>_fewshot.jsonl`` (one training item per logical-form template)
and ``manifest.json`` (sizes, per-template counts, label sets, input checksums). Every file is
written in input order with sorted keys, so preparing twice gives byte-identical output.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator, Mapping

from medeval_metrics.data import DataSource, MedevalDataError
from medeval_metrics.emrqa.metrics import normalise_lf, template_pattern

PREP_VERSION = 2  # 2: evidence placed on its own numbered line; upstream's trailing newlines kept
DEFAULT_SEED = 1234
TEST_FRACTION = 0.2

_HOW_TO_GET = (
    "emrQA is distributed only under the n2c2 data-use agreement and is never shipped with this pack: "
    "register and sign the agreement at https://portal.dbmi.hms.harvard.edu/ (n2c2 NLP Research Data Sets, "
    "'Community Annotations Downloads', emrQA), or generate data.json and data-ql.csv from the i2b2/n2c2 "
    "notes with the authors' scripts (https://github.com/panushri25/emrQA)."
)
DATA_JSON = DataSource(key="emrqa_data_json", description="the emrQA data.json", how_to_get=_HOW_TO_GET)
DATA_QL_CSV = DataSource(key="emrqa_data_ql_csv", description="the emrQA data-ql.csv", how_to_get=_HOW_TO_GET)
CACHE_DIR_KEY = "emrqa_cache_dir"  # metadata key; env MEDEVAL_EMRQA_CACHE_DIR

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
QL_HEADER = ("question", "logical form", "qtemplate", "ltemplate")


def stable_fraction(*parts: Any) -> float:
    """A number in [0, 1) fixed by its key: the seeded coin used for every split and sample."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _is_test(seed: int, kind: str, key: str) -> bool:
    return stable_fraction(seed, kind, key) < TEST_FRACTION


# --- data.json ----------------------------------------------------------------------------------


def _fail(path: Path, where: str, problem: str, fix: str = "") -> MedevalDataError:
    return MedevalDataError(f"{path}: {where}: {problem}.{' ' + fix if fix else ''}")


def _note_text(context: Any, path: Path, where: str) -> tuple[str, list[int]]:
    """The note as one string, and the character offset of each line (for line-numbered evidence).

    Upstream's lines keep their own trailing newline: those are not given a second one, so the note
    (and the prompt) has exactly the note's own line breaks.
    """
    if isinstance(context, str):
        lines = context.split("\n")
        text = context
    elif isinstance(context, list) and all(isinstance(line, str) for line in context):
        lines = context
        text = "".join(line if line.endswith("\n") or last else line + "\n"
                       for last, line in ((n == len(context) - 1, line) for n, line in enumerate(context)))
    else:
        raise _fail(path, where, "'context' is neither a string nor a list of lines")
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
    return text[line_offsets[line]:end].rstrip("\n")


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


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _gold_answers(
    subset: str, answers: Any, text: str, line_offsets: list[int], path: Path, where: str, stats: Counter
) -> list[dict[str, Any]]:
    if not isinstance(answers, list) or not answers:
        raise _fail(path, where, "'answers' is missing or empty", "Every question needs at least one answer.")
    golds = []
    for number, answer in enumerate(answers):
        here = f"{where}, answer {number}"
        if not isinstance(answer, dict) or "evidence" not in answer:
            raise _fail(path, here, "the answer has no 'evidence'")
        entity_type = str(answer.get("answer_entity_type") or "single")
        if entity_type not in ENTITY_TYPES:
            raise _fail(path, here, f"answer_entity_type {entity_type!r} is not one of {', '.join(ENTITY_TYPES)}")
        raw_text = answer.get("text", "")
        entities = [str(e) for e in _as_list(raw_text) if str(e).strip()] if entity_type != "empty" else []
        evidences = _as_list(answer["evidence"])
        if not all(isinstance(e, str) for e in evidences):
            raise _fail(path, here, "'evidence' is not text")
        starts = [s[0] if isinstance(s, list) and s else s for s in _as_list(answer.get("evidence_start", -1))]
        answer_start = answer.get("answer_start")
        if subset == "risk" and isinstance(answer_start, list) and answer_start and isinstance(answer_start[0], int):
            starts = [answer_start[0]]  # risk: [char offset of the evidence, char offset of the entity]
        for start in starts:
            if not isinstance(start, int) and start != "":
                raise _fail(path, here, f"evidence_start is {type(start).__name__}, expected an integer")
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
                from medeval_metrics.emrqa.metrics import note_index

                span = note_index(text).locate(stripped, max(hint, 0))
                if span is not None:
                    located, stripped = span[0], text[span[0]:span[1]]
                    stats["evidence_located_ignoring_case_and_spacing"] += 1
            if off_line and located >= 0:
                _count(stats, f"{subset}_evidence_not_on_its_line", here)
            if located < 0 and subset != "risk" and _line_text(text, line_offsets, start - 1).strip():
                # Not in the note as written: upstream's ground truth is the note line it points at.
                line_text = _line_text(text, line_offsets, start - 1)
                located = line_offsets[start - 1] + len(line_text) - len(line_text.lstrip())
                stripped = line_text.strip()
                stats["evidence_taken_from_its_line_number"] += 1
            if not stripped:
                raise _fail(path, here, "'evidence' is empty and no evidence line is given",
                            "Span answers need their evidence text or line.")
            if located < 0:
                # Offsets are only hints; an unlocatable evidence whose offset also points past the note is
                # a broken record, not a quirk to count.
                size, unit = (len(text), "characters") if subset == "risk" else (len(line_offsets), "lines")
                if start != -1 and not 0 <= start <= size:
                    raise _fail(path, here, f"evidence_start {start} is outside the note ({size} {unit}) and the "
                                "evidence text is not in the note", "Fix the offset or the evidence, or drop the answer.")
                stats["evidence_not_in_note"] += 1
            golds.append(
                {"evidence": stripped, "evidence_start": located, "entity_type": entity_type, "entities": entities}
            )
            stats[f"answers_{entity_type}"] += 1
    return golds


def _qa_record(
    subset: str, note_key: str, qa_number: int, qa: Any, text: str, line_offsets: list[int], path: Path,
    seed: int, stats: Counter,
) -> dict[str, Any]:
    where = f"note {note_key}, question {qa_number}"
    if not isinstance(qa, dict):
        raise _fail(path, where, "the question entry is not an object")
    questions = [q for q in _as_list(qa.get("question")) if isinstance(q, str) and q.strip()]
    if not questions:
        raise _fail(path, where, "it has no question text")
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
            raise _fail(path, where, "'answers' is missing or empty", "Classification questions need a label.")
        labels = {str(a.get("text", "")).strip() for a in answers if isinstance(a, dict)}
        label = str(answers[0].get("text", "")).strip()
        if not label:
            raise _fail(path, where, "the answer's class label ('text') is empty")
        record["label"] = label
        record["several_answers"] = len(labels) > 1  # a list of entities, not a class (dropped before writing)
    else:
        record["answers"] = _gold_answers(subset, answers, text, line_offsets, path, where, stats)
    return record


# --- data-ql.csv --------------------------------------------------------------------------------


def read_ql_csv(path: Path, stats: Counter | None = None) -> Iterator[dict[str, Any]]:
    """Rows of data-ql.csv as dicts, tolerating its writer's quirks.

    Quirks handled: a byte-order mark, CRLF, blank lines, repeated header lines, a trailing empty
    field, and unquoted commas inside logical forms and templates: the first field is the question,
    and the rest is split into logical form, question template and logical-form template at the
    commas where the logical form fits the structure of its template.
    """
    stats = stats if stats is not None else Counter()
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read the emrQA data-ql.csv ({exc.strerror}).") from exc
    with handle:
        header_seen = False
        # Decoded line by line: a text-mode file decodes ahead in chunks, so a bad byte would surface
        # from the iterator itself, as a bare UnicodeDecodeError with no line number.
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise MedevalDataError(
                    f"{path}: data-ql.csv is not UTF-8 text (line {line_number}, byte {exc.start}). Re-save it as UTF-8."
                ) from exc
            if not line.strip():
                continue
            fields = next(csv.reader([line.rstrip("\r\n")], skipinitialspace=True))
            while fields and not fields[-1].strip():
                fields.pop()
            if tuple(f.strip().lower() for f in fields) == QL_HEADER:
                if header_seen:
                    stats["repeated_header_lines"] += 1
                header_seen = True
                continue
            if not header_seen:
                raise MedevalDataError(
                    f"{path}: line {line_number}: data-ql.csv must start with the header "
                    "'Question, Logical Form, QTemplate, LTemplate'."
                )
            yield _split_ql_fields(path, line_number, fields, stats)


def _split_ql_fields(path: Path, line_number: int, fields: list[str], stats: Counter) -> dict[str, Any]:
    if len(fields) < 4:
        raise MedevalDataError(
            f"{path}: line {line_number}: expected 4 columns (question, logical form, question template, "
            f"logical-form template), found {len(fields)}."
        )
    question, rest = fields[0].strip(), [f.strip() for f in fields[1:]]
    if len(rest) == 3 and template_pattern(rest[2], True).fullmatch(normalise_lf(rest[0])):
        lf, qt, lt = rest
    else:
        found = None
        for any_slot_value in (False, True):  # the strict reading first: slot values without brackets
            for i in range(1, len(rest) - 1):
                for j in range(i + 1, len(rest)):
                    lf, qt, lt = ", ".join(rest[:i]), ", ".join(rest[i:j]), ", ".join(rest[j:])
                    if template_pattern(lt, any_slot_value).fullmatch(normalise_lf(lf)):
                        found = (lf, qt, lt)
                        break
                if found:
                    break
            if found:
                break
        if found is None:
            if len(rest) == 3:  # well-formed row whose logical form does not fit its template
                stats["logical_form_does_not_fit_template"] += 1
                found = tuple(rest)
            else:
                raise MedevalDataError(
                    f"{path}: line {line_number} (question {question!r}): cannot tell where the logical form "
                    "ends: no split of the row's commas gives a logical form that fits its template. "
                    "Quote the logical-form fields or regenerate data-ql.csv."
                )
        else:
            stats["rows_with_unquoted_commas"] += int(len(rest) > 3)
        lf, qt, lt = found
    if not question or not lf or not lt:
        raise MedevalDataError(f"{path}: line {line_number}: the question, logical form or its template is empty.")
    return {"line": line_number, "question": question, "logical_form": lf, "question_template": qt, "lf_template": lt}


# --- the cache ----------------------------------------------------------------------------------


def _fingerprint(path: Path) -> dict[str, Any]:
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_root(metadata: Mapping[str, Any] | None = None) -> Path:
    value = (metadata or {}).get(CACHE_DIR_KEY) or os.environ.get("MEDEVAL_EMRQA_CACHE_DIR")
    if value:
        return Path(str(value)).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medeval" / "emrqa"


def resolve_inputs(metadata: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    data_json = DATA_JSON.local_path(metadata)
    data_ql = DATA_QL_CSV.local_path(metadata)
    missing = [s for s, p in ((DATA_JSON, data_json), (DATA_QL_CSV, data_ql)) if p is None]
    if missing:
        raise missing[0].missing("no local copy is configured (it is never downloaded)")
    return data_json, data_ql  # type: ignore[return-value]


def cache_dir_for(data_json: Path, data_ql: Path, seed: int, root: Path) -> Path:
    key = json.dumps(
        {"v": PREP_VERSION, "seed": seed, "json": _fingerprint(data_json), "ql": _fingerprint(data_ql)}, sort_keys=True
    )
    return root / hashlib.sha256(key.encode()).hexdigest()[:16]


def _dump(handle: Any, record: dict[str, Any]) -> None:
    handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")


def prepare(
    data_json: Path, data_ql: Path, out_dir: Path, seed: int = DEFAULT_SEED, log: Any = None
) -> dict[str, Any]:
    """Read both inputs, validate, and write every split to ``out_dir`` (atomically). Returns the manifest."""
    log = log or (lambda message: print(message, file=sys.stderr))
    started = time.time()
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".prep-", dir=out_dir.parent))
    except OSError as exc:
        raise MedevalDataError(
            f"cannot write the emrQA cache under {out_dir.parent} ({exc.strerror}). Choose another folder with "
            f"--metadata '{{\"{CACHE_DIR_KEY}\": \"/path\"}}' or MEDEVAL_EMRQA_CACHE_DIR."
        ) from exc
    try:
        stats = Checks()
        manifest: dict[str, Any] = {"prep_version": PREP_VERSION, "seed": seed, "test_fraction": TEST_FRACTION}
        manifest["qa"] = _prepare_qa(Path(data_json), work, seed, stats)
        manifest["emrql"] = _prepare_emrql(Path(data_ql), work, seed, stats)
        manifest["inputs"] = {
            "data_json_sha256": _sha256(Path(data_json)),
            "data_ql_csv_sha256": _sha256(Path(data_ql)),
        }
        manifest["quirks_and_checks"] = dict(sorted(stats.items()))
        manifest["check_examples"] = dict(sorted(stats.examples.items()))
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        try:
            os.replace(work, out_dir)
        except OSError:
            # Another process prepared the same inputs meanwhile: its output is identical, keep it.
            if not (out_dir / "manifest.json").exists():
                raise
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    for line in describe(manifest):
        log(line)
    log(f"emrQA prepared in {time.time() - started:.1f} s: {out_dir}")
    return manifest


def _prepare_qa(path: Path, work: Path, seed: int, stats: Counter) -> dict[str, Any]:
    from medeval_metrics.emrqa.jsonstream import iter_notes

    handles: dict[str, Any] = {}
    sizes: Counter = Counter()
    template_counts: dict[str, Counter] = defaultdict(Counter)
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)  # (subset, LF template) -> class labels
    list_templates: dict[str, set[str]] = defaultdict(set)
    notes_per_split: Counter = Counter()
    seen_notes: set[str] = set()
    try:
        with open(work / "notes.jsonl", "w", encoding="utf-8") as notes:
            for title, note_number, note in iter_notes(path):
                subset = SUBSETS.get(title.strip().lower())
                if subset is None:
                    raise MedevalDataError(
                        f"{path}: subset title {title!r} is not an emrQA subset "
                        f"({', '.join(sorted(set(SUBSETS)))}). Use data.json as the emrQA scripts write it."
                    )
                if not isinstance(note, dict):
                    raise _fail(path, f"{subset} note {note_number}", "the note entry is not an object")
                note_id = note.get("note_id")
                if note_id is None or str(note_id).strip() == "":
                    raise _fail(path, f"{subset} note {note_number}", "it has no 'note_id'")
                split_key = note_key = f"{subset}/{str(note_id).strip()}"
                if note_key in seen_notes:
                    # Upstream's smoking and obesity scripts write one paragraph per (question, note):
                    # kept apart under a new key, on the same side of the split, and counted.
                    stats["repeated_note_ids_renamed"] += 1
                    note_key = f"{note_key}~{note_number}"
                seen_notes.add(note_key)
                if "context" not in note or not isinstance(note.get("qas"), list):
                    raise _fail(path, f"note {note_key}", "it needs 'context' and a 'qas' list")
                text, line_offsets = _note_text(note["context"], path, f"note {note_key}")
                split = "test" if _is_test(seed, "qa-note", split_key) else "train"
                notes_per_split[f"{subset}_{split}"] += 1
                _dump(notes, {"note_key": note_key, "subset": subset, "split": split, "text": text})
                name = f"qa_{subset}_{split}"
                if name not in handles:
                    handles[name] = open(work / f"{name}.jsonl", "w", encoding="utf-8")
                for qa_number, qa in enumerate(note["qas"]):
                    record = _qa_record(subset, note_key, qa_number, qa, text, line_offsets, path, seed, stats)
                    if "label" in record:
                        labels[(subset, record["lf_template"])].add(record["label"])
                        if record.pop("several_answers"):
                            list_templates[subset].add(record["lf_template"])
                    _dump(handles[name], record)
                    sizes[name] += 1
                    if split == "test":
                        template_counts[subset][record["lf_template"]] += 1
    finally:
        for handle in handles.values():
            handle.close()
    for subset in set(SUBSETS.values()):  # every task finds its files, even for a subset the file lacks
        for split in ("train", "test"):
            (work / f"qa_{subset}_{split}.jsonl").touch()
    # Questions of a class subset that answer with a list of entities (upstream's obesity
    # "comorbidities of |problem|") are not classification: their templates are left out of the
    # class tasks' samples and label sets, and reported.
    class_labels: dict[str, set[str]] = defaultdict(set)
    for (subset, template), found in labels.items():
        if template in list_templates[subset]:
            stats[f"{subset}_list_answer_questions_not_evaluated"] += template_counts[subset].pop(template, 0)
        else:
            class_labels[subset] |= found
    return {
        "sizes": dict(sorted(sizes.items())),
        "notes": dict(sorted(notes_per_split.items())),
        "test_lf_template_counts": {s: dict(sorted(c.items())) for s, c in sorted(template_counts.items())},
        "labels": {s: sorted(v) for s, v in sorted(class_labels.items())},
        "list_answer_templates_not_evaluated": {s: sorted(v) for s, v in sorted(list_templates.items()) if v},
    }


def _prepare_emrql(path: Path, work: Path, seed: int, stats: Counter) -> dict[str, Any]:
    sizes: Counter = Counter()
    template_counts: dict[str, Counter] = {"emrql_1": Counter(), "emrql_2": Counter()}
    fewshot: dict[str, dict[str, tuple[float, dict[str, Any]]]] = {"emrql_1": {}, "emrql_2": {}}
    names = [f"{v}_{s}" for v in ("emrql_1", "emrql_2") for s in ("train", "test")]
    handles = {name: open(work / f"{name}.jsonl", "w", encoding="utf-8") for name in names}
    try:
        for row in read_ql_csv(path, stats):
            pair_key = row["question"] + "\x1f" + row["logical_form"]
            splits = {
                "emrql_1": "test" if _is_test(seed, "emrql-1", pair_key) else "train",
                "emrql_2": "test" if _is_test(seed, "emrql-2", row["question_template"]) else "train",
            }
            for variant, split in splits.items():
                _dump(handles[f"{variant}_{split}"], row)
                sizes[f"{variant}_{split}"] += 1
                if split == "test":
                    template_counts[variant][row["lf_template"]] += 1
                else:  # few-shot pool: the train row with the smallest seeded key per logical-form template
                    rank = stable_fraction(seed, "fewshot", variant, row["line"])
                    current = fewshot[variant].get(row["lf_template"])
                    if current is None or rank < current[0]:
                        fewshot[variant][row["lf_template"]] = (rank, row)
    finally:
        for handle in handles.values():
            handle.close()
    if not sizes:
        raise MedevalDataError(f"{path}: data-ql.csv holds no question/logical-form rows.")
    for variant, pool in fewshot.items():
        with open(work / f"{variant}_fewshot.jsonl", "w", encoding="utf-8") as handle:
            for _, row in sorted(pool.values(), key=lambda item: item[1]["line"]):
                _dump(handle, row)
        sizes[f"{variant}_fewshot"] = len(pool)
    return {
        "sizes": dict(sorted(sizes.items())),
        "test_lf_template_counts": {v: dict(sorted(c.items())) for v, c in template_counts.items()},
    }


def describe(manifest: Mapping[str, Any]) -> list[str]:
    """Printable split sizes (the splits are a seeded reconstruction; the originals were never published)."""
    lines = [f"emrQA splits (seeded reconstruction, seed {manifest['seed']}, test fraction {manifest['test_fraction']}):"]
    for name, size in manifest["emrql"]["sizes"].items():
        lines.append(f"  {name}: {size:,}")
    for name, size in manifest["qa"]["sizes"].items():
        lines.append(f"  {name}: {size:,} questions")
    for name, size in manifest["qa"]["notes"].items():
        lines.append(f"  notes {name}: {size:,}")
    examples = manifest.get("check_examples", {})
    for name, count in manifest.get("quirks_and_checks", {}).items():
        lines.append(f"  check {name}: {count:,}")
        for where in examples.get(name, []):
            lines.append(f"    e.g. {where}")
    return lines


def ensure_prepared(metadata: Mapping[str, Any] | None = None, log: Any = None) -> tuple[Path, dict[str, Any]]:
    """The prepared cache folder for the configured inputs, preparing it first if needed."""
    metadata = metadata or {}
    data_json, data_ql = resolve_inputs(metadata)
    seed = int(metadata.get("emrqa_seed", DEFAULT_SEED))
    folder = cache_dir_for(data_json, data_ql, seed, cache_root(metadata))
    manifest_path = folder / "manifest.json"
    if not manifest_path.exists():
        (log or (lambda m: print(m, file=sys.stderr)))(
            f"emrQA: preparing {data_json.name} and {data_ql.name} (first use; later runs reuse {folder})"
        )
        prepare(data_json, data_ql, folder, seed=seed, log=log)
    return folder, json.loads(manifest_path.read_text(encoding="utf-8"))


# --- CLI ----------------------------------------------------------------------------------------


def _cmd_prepare(args: Any) -> int:
    metadata: dict[str, Any] = {}
    if args.data_json:
        metadata[DATA_JSON.key] = args.data_json
    if args.data_ql_csv:
        metadata[DATA_QL_CSV.key] = args.data_ql_csv
    if args.cache_dir:
        metadata[CACHE_DIR_KEY] = args.cache_dir
    metadata["emrqa_seed"] = args.seed
    data_json, data_ql = resolve_inputs(metadata)
    folder = cache_dir_for(data_json, data_ql, args.seed, cache_root(metadata))
    if args.force or not (folder / "manifest.json").exists():
        prepare(data_json, data_ql, folder, seed=args.seed, log=print)
    else:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        for line in describe(manifest):
            print(line)
        print(f"already prepared: {folder} (use --force to redo)")
    return 0


def register_cli(sub: Any) -> None:
    p = sub.add_parser(
        "emrqa-prepare",
        help="read your emrQA data.json and data-ql.csv once and cache the evaluation splits",
        description="Validate emrQA's data.json and data-ql.csv and write seeded splits to the cache. "
        f"Files default to ${DATA_JSON.env_var} and ${DATA_QL_CSV.env_var}.",
    )
    p.add_argument("--data-json", help="path to data.json")
    p.add_argument("--data-ql-csv", help="path to data-ql.csv")
    p.add_argument("--cache-dir", help="cache root (default ~/.cache/medeval/emrqa or $MEDEVAL_EMRQA_CACHE_DIR)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="split seed (default %(default)s)")
    p.add_argument("--force", action="store_true", help="prepare again even if the cache exists")
    p.set_defaults(func=_cmd_prepare)
