"""emrQA ``data-ql.csv``: question / logical-form rows, read through the upstream writer's quirks."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa.text import normalise_lf, template_pattern

QL_HEADER = ("question", "logical form", "qtemplate", "ltemplate")
MAX_FIELDS = 64  # upstream rows have 4 fields plus the unquoted commas of one logical form (a handful)
MAX_TEMPLATE_CHARS = 10_000  # a template becomes one regex; upstream's are under 1,000 characters


def read_ql_csv(
    path: Path, stats: Counter | None = None, progress: Callable[[int], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Rows of data-ql.csv as dicts, tolerating its writer's quirks.

    Quirks handled: a byte-order mark, CRLF, blank lines, repeated header lines, a trailing empty
    field, and unquoted commas inside logical forms and templates: the first field is the question,
    and the rest is split into logical form, question template and logical-form template at the
    commas where the logical form fits the structure of its template. ``progress``, if given, is
    called now and then with the number of bytes read so far.
    """
    stats = stats if stats is not None else Counter()
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read the emrQA data-ql.csv ({exc.strerror}).") from exc
    with handle:
        header_seen = False
        read = 0
        # Decoded line by line: a text-mode file decodes ahead in chunks, so a bad byte would surface
        # from the iterator itself, as a bare UnicodeDecodeError with no line number.
        for line_number, raw in enumerate(handle, start=1):
            read += len(raw)
            if progress is not None and line_number % 4096 == 0:
                progress(read)
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
        if progress is not None:
            progress(read)


def _split_ql_fields(path: Path, line_number: int, fields: list[str], stats: Counter) -> dict[str, Any]:
    if len(fields) < 4:
        raise MedevalDataError(
            f"{path}: line {line_number}: expected 4 columns (question, logical form, question template, "
            f"logical-form template), found {len(fields)}."
        )
    question, rest = fields[0].strip(), [f.strip() for f in fields[1:]]
    if len(rest) > MAX_FIELDS:  # finding the logical form's end tries every pair of commas: bounded work
        raise MedevalDataError(
            f"{path}: line {line_number}: {len(fields)} comma-separated fields, more than any emrQA row has "
            f"(at most {MAX_FIELDS + 1} are read). Quote the fields or regenerate data-ql.csv."
        )
    if len(rest[-1]) > MAX_TEMPLATE_CHARS:
        raise MedevalDataError(
            f"{path}: line {line_number}: the logical-form template is {len(rest[-1]):,} characters long "
            f"(emrQA's are a few hundred; at most {MAX_TEMPLATE_CHARS:,} are read). Regenerate data-ql.csv."
        )
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
