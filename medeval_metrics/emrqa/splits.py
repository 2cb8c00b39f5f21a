"""emrQA preparation: read the user's files once, validate, and write the seeded splits to a folder.

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

import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError, file_sha256
from medeval_metrics.emrqa.jsonstream import iter_notes
from medeval_metrics.emrqa.ql_csv import read_ql_csv
from medeval_metrics.emrqa.records import SUBSETS, Checks, fail, note_text, qa_record
from medeval_metrics.emrqa.seeding import DEFAULT_SEED, TEST_FRACTION, is_test, stable_fraction
from medeval_metrics.emrqa.sources import CACHE_DIR_KEY

PREP_VERSION = 2  # 2: evidence placed on its own numbered line; upstream's trailing newlines kept

_logger = logging.getLogger(__name__)


def _dump(handle: Any, record: dict[str, Any]) -> None:
    handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")


_WORK_PREFIX = ".prep-"
_LEGACY_WORK_AGE_S = 6 * 3600  # work folders named before they carried host and pid: removed when this old


def _work_prefix() -> str:
    return f"{_WORK_PREFIX}{socket.gethostname()}-{os.getpid()}-"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_work_folders(parent: Path) -> list[Path]:
    """Remove the partial folders that killed preparations left in ``parent``; returns what was removed.

    A work folder is named ``.prep-<host>-<pid>-<random>``: one from this host whose process is gone
    is stale; a live process's folder (a preparation running now) is left alone.
    """
    removed = []
    host = socket.gethostname()
    try:
        entries = list(Path(parent).iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(_WORK_PREFIX) or not entry.is_dir():
            continue
        owner, _, rest = entry.name[len(_WORK_PREFIX) :].rpartition("-")
        owner_host, _, pid = owner.rpartition("-")
        if owner_host and pid.isdigit():
            stale = owner_host == host and not _process_alive(int(pid))
        else:
            try:
                stale = time.time() - entry.stat().st_mtime > _LEGACY_WORK_AGE_S
            except OSError:
                continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _bar(total: int, desc: str, enabled: bool | None) -> Any:
    """A tqdm bar in bytes (tqdm comes with lm-eval and datasets); ``None`` shows it only on a terminal."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total, desc=desc, unit="B", unit_scale=True, leave=False, disable=None if enabled is None else not enabled
    )


def _size(path: Path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0  # the reader says what is wrong with the file


def _advance(bar: Any) -> Any:
    return lambda done: bar.update(max(0, min(done, bar.total) - bar.n))


def prepare(
    data_json: Path,
    data_ql: Path,
    out_dir: Path,
    seed: int = DEFAULT_SEED,
    log: Any = None,
    progress: bool | None = None,
    details: bool = False,
) -> dict[str, Any]:
    """Read both inputs, validate, and write every split to ``out_dir`` (atomically). Returns the manifest.

    Nothing partial is left behind: the work folder is removed on any failure, and folders left by a
    killed preparation are removed when the next one starts. ``progress``: progress bars on stderr
    (``None``: only on a terminal). ``details``: the split sizes and data checks through ``log`` too (else at
    DEBUG level), before the one summary line.
    """
    log = log or (lambda message: print(message, file=sys.stderr))
    started = time.time()
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        for stale in remove_stale_work_folders(out_dir.parent):
            log(f"emrQA: removed {stale.name}, left by an interrupted preparation")
        work = Path(tempfile.mkdtemp(prefix=_work_prefix(), dir=out_dir.parent))
    except OSError as exc:
        raise MedevalDataError(
            f"cannot write the emrQA cache under {out_dir.parent} ({exc.strerror}). Choose another folder with "
            f'--metadata \'{{"{CACHE_DIR_KEY}": "/path"}}\' or MEDEVAL_EMRQA_CACHE_DIR.'
        ) from exc
    try:
        stats = Checks()
        manifest: dict[str, Any] = {"prep_version": PREP_VERSION, "seed": seed, "test_fraction": TEST_FRACTION}
        problems = []  # both files are read whatever is wrong with the first: every problem is reported at once
        for key, read, path, label in (
            ("qa", _prepare_qa, data_json, "emrQA data.json"),
            ("emrql", _prepare_emrql, data_ql, "emrQA data-ql.csv"),
        ):
            with _bar(_size(path), label, progress) as bar:
                try:
                    manifest[key] = read(Path(path), work, seed, stats, _advance(bar))
                except MedevalDataError as exc:
                    problems += getattr(exc, "problems", None) or [str(exc)]
        if problems:
            error = MedevalDataError(" ".join(problems))
            error.problems = problems
            raise error
        manifest["inputs"] = {
            "data_json_sha256": file_sha256(Path(data_json)),
            "data_ql_csv_sha256": file_sha256(Path(data_ql)),
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
    for line in describe(manifest):  # the split sizes and data checks: on request (`medeval emrqa-prepare`)
        (log if details else _logger.debug)(line)
    questions = sum(manifest["qa"]["sizes"].values())
    forms = sum(manifest["emrql"]["sizes"].values())
    log(
        f"emrQA prepared in {time.time() - started:.1f} s: {questions:,} questions, {forms:,} logical-form "
        f"items (seed {seed}) in {out_dir}" + ("" if details else "; --verbosity DEBUG lists the splits")
    )
    return manifest


def _prepare_qa(path: Path, work: Path, seed: int, stats: Counter, progress: Any = None) -> dict[str, Any]:
    handles: dict[str, Any] = {}
    sizes: Counter = Counter()
    template_counts: dict[str, Counter] = defaultdict(Counter)
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)  # (subset, LF template) -> class labels
    list_templates: dict[str, set[str]] = defaultdict(set)
    notes_per_split: Counter = Counter()
    seen_notes: set[str] = set()
    try:
        with open(work / "notes.jsonl", "w", encoding="utf-8") as notes:
            for title, note_number, note in iter_notes(path, progress):
                subset = SUBSETS.get(title.strip().lower())
                if subset is None:
                    raise MedevalDataError(
                        f"{path}: subset title {title!r} is not an emrQA subset "
                        f"({', '.join(sorted(set(SUBSETS)))}). Use data.json as the emrQA scripts write it."
                    )
                if not isinstance(note, dict):
                    raise fail(path, f"{subset} note {note_number}", "the note entry is not an object")
                note_id = note.get("note_id")
                if note_id is None or str(note_id).strip() == "":
                    raise fail(path, f"{subset} note {note_number}", "it has no 'note_id'")
                split_key = note_key = f"{subset}/{str(note_id).strip()}"
                if note_key in seen_notes:
                    # Upstream's smoking and obesity scripts write one paragraph per (question, note):
                    # kept apart under a new key, on the same side of the split, and counted.
                    stats["repeated_note_ids_renamed"] += 1
                    note_key = f"{note_key}~{note_number}"
                seen_notes.add(note_key)
                if "context" not in note or not isinstance(note.get("qas"), list):
                    raise fail(path, f"note {note_key}", "it needs 'context' and a 'qas' list")
                text, line_offsets = note_text(note["context"], path, f"note {note_key}")
                split = "test" if is_test(seed, "qa-note", split_key) else "train"
                notes_per_split[f"{subset}_{split}"] += 1
                _dump(notes, {"note_key": note_key, "subset": subset, "split": split, "text": text})
                name = f"qa_{subset}_{split}"
                if name not in handles:
                    handles[name] = open(work / f"{name}.jsonl", "w", encoding="utf-8")
                for qa_number, qa in enumerate(note["qas"]):
                    record = qa_record(subset, note_key, qa_number, qa, text, line_offsets, path, seed, stats)
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


def _prepare_emrql(path: Path, work: Path, seed: int, stats: Counter, progress: Any = None) -> dict[str, Any]:
    sizes: Counter = Counter()
    template_counts: dict[str, Counter] = {"emrql_1": Counter(), "emrql_2": Counter()}
    fewshot: dict[str, dict[str, tuple[float, dict[str, Any]]]] = {"emrql_1": {}, "emrql_2": {}}
    names = [f"{v}_{s}" for v in ("emrql_1", "emrql_2") for s in ("train", "test")]
    handles = {name: open(work / f"{name}.jsonl", "w", encoding="utf-8") for name in names}
    try:
        for row in read_ql_csv(path, stats, progress):
            pair_key = row["question"] + "\x1f" + row["logical_form"]
            splits = {
                "emrql_1": "test" if is_test(seed, "emrql-1", pair_key) else "train",
                "emrql_2": "test" if is_test(seed, "emrql-2", row["question_template"]) else "train",
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
    lines = [
        f"emrQA splits (seeded reconstruction, seed {manifest['seed']}, test fraction {manifest['test_fraction']}):"
    ]
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
