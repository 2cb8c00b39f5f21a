"""emrQA scoring: evidence relaxed EM by position, SQuAD-style token F1, strict EM, logical forms.

Evidence (Pampari et al. 2018, section 6): a predicted evidence span scores 1 if it contains the
gold answer entity (where one is known) or if it lies within 20 characters of where the gold
evidence is in the note. The prediction is *located in the note* to get its position; a span of the
right length in the wrong place scores 0 (the seed description compared lengths, which is wrong).

Our reading, stated so it can be checked:
- The model's output is split into non-empty lines; only the first ``MAX_PREDICTIONS`` (10) lines
  count. Lines that sit next to each other in the note are also tried joined, so multi-line gold
  evidence (risk notes) can be matched by a multi-line answer. A line not found in the note as
  written is tried without a leading list marker (``-``, ``*``, ``1.``) and surrounding quotes.
- Position rule: the candidate is found in the note (case-insensitive, whitespace runs collapsed;
  the occurrence nearest the gold evidence is used) and both its start and its end are within 20
  characters of the gold evidence's start and end.
- Entity rule: ``single`` answers: the candidate contains the entity text on token boundaries
  (case-insensitive, whitespace-collapsed: "25 mg" does not contain "5 mg"); ``complex`` answers (a list of entities): it contains every entity;
  ``empty`` answers (yes/no-type, no entity): only the position rule applies.
- Scores are averaged over the gold answers of a question: each gold answer counts 1 if any counted
  candidate matches it.
- Token F1 is SQuAD-style (multiset token counts after lower-casing, removing punctuation and
  English articles), best candidate per gold answer, averaged over gold answers. Set-based F1
  differs when a token repeats; we use counts.
- Strict EM: a candidate equals the gold evidence after whitespace collapsing and lower-casing.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from medeval_metrics.emrqa.text import NoteIndex, collapse, normalise_lf, note_index, template_pattern
from medeval_metrics.stats import bootstrap_stderr as bootstrap

__all__ = [  # the text helpers are re-exported: scorers and tests reach them here too
    "GoldAnswer",
    "NoteIndex",
    "bootstrap_stderr",
    "collapse",
    "contains_entity",
    "first_line",
    "macro_f1",
    "normalise_lf",
    "note_index",
    "parse_label",
    "prediction_lines",
    "score_evidence",
    "score_logical_form",
    "squad_tokens",
    "template_pattern",
    "token_f1",
]

MAX_PREDICTIONS = 10
POSITION_TOLERANCE = 20

_ARTICLES = re.compile(r"\b(a|an|the)\b")


@dataclass(frozen=True)
class GoldAnswer:
    evidence: str
    evidence_start: int  # character offset in the note; -1 when it could not be located
    entity_type: str  # "single", "empty" or "complex"
    entities: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GoldAnswer:
        return cls(
            evidence=str(data["evidence"]),
            evidence_start=int(data["evidence_start"]),
            entity_type=str(data.get("entity_type", "single")),
            entities=tuple(str(e) for e in data.get("entities") or ()),
        )


# --- text normalisation ------------------------------------------------------------------------


_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)


def squad_tokens(text: str) -> list[str]:
    text = text.lower().translate(_DROP_PUNCTUATION)
    return _ARTICLES.sub(" ", text).split()


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD-style F1 over multiset token counts; both empty scores 1."""
    pred, ref = squad_tokens(prediction), squad_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


# --- evidence --------------------------------------------------------------------------------------


def prediction_lines(output: str, limit: int = MAX_PREDICTIONS) -> list[str]:
    """The counted predictions: the first ``limit`` non-empty output lines."""
    lines = [line.strip() for line in str(output).splitlines()]
    return [line for line in lines if line][:limit]


_LIST_MARKER = re.compile(r"""^(?:[-*\u2022]|\d{1,2}[.)])\s+""")
_QUOTES = "\"'`\u201c\u201d"


def _locate_line(line: str, index: NoteIndex, near: int) -> tuple[str, tuple[int, int] | None]:
    """A predicted line and its place in the note; a list marker or quotes the note lacks are dropped."""
    span = index.locate(line, near)
    if span is None:
        bare = _LIST_MARKER.sub("", line).strip().strip(_QUOTES).strip()
        if bare and bare != line:
            bare_span = index.locate(bare, near)
            if bare_span is not None:
                return bare, bare_span
    return line, span


def candidates(lines: Sequence[str], index: NoteIndex, near: int) -> list[tuple[str, tuple[int, int] | None]]:
    """Each line with its location, plus runs of lines that are adjacent in the note, joined."""
    located = [_locate_line(line, index, near) for line in lines]
    out = list(located)
    for first in range(len(located)):
        text, span = located[first]
        if span is None:
            continue
        start, end = span
        for following in range(first + 1, len(located)):
            next_text, next_span = located[following]
            if next_span is None or not _only_space_between(index, end, next_span[0]):
                break
            text, end = text + "\n" + next_text, next_span[1]
            out.append((text, (start, end)))
    return out


def _only_space_between(index: NoteIndex, end: int, start: int) -> bool:
    # Adjacent in the note: the next line starts at most a few whitespace characters later.
    return 0 <= start - end <= 3


@lru_cache(maxsize=4096)
def _entity_pattern(entity: str) -> re.Pattern[str] | None:
    """The collapsed entity as a whole token run: "5 mg" is not in "25 mg" or "2.5 mg", "ekg" not in "ekgs".

    A word character at the entity's edge may not touch another word character, nor a "." or "-"
    that joins one ("2.5", "non-smoker"); an edge that is itself punctuation needs no boundary.
    """
    needle = collapse(entity)
    if not needle:
        return None
    left = r"(?<!\w)(?<!\w[.-])" if re.match(r"\w", needle) else ""
    right = r"(?!\w)(?![.-]\w)" if re.search(r"\w$", needle) else ""
    return re.compile(left + re.escape(needle) + right)


def contains_entity(text: str, entity: str) -> bool:
    """``entity`` in ``text`` on token boundaries, case- and whitespace-insensitive."""
    pattern = _entity_pattern(entity)
    return pattern is not None and pattern.search(collapse(text)) is not None


def _contains_entities(candidate: str, gold: GoldAnswer) -> bool:
    if gold.entity_type == "empty" or not gold.entities:
        return False
    return all(contains_entity(candidate, entity) for entity in gold.entities)


def _within_tolerance(span: tuple[int, int] | None, gold: GoldAnswer) -> bool:
    if span is None or gold.evidence_start < 0:
        return False
    gold_end = gold.evidence_start + len(gold.evidence.strip())
    return abs(span[0] - gold.evidence_start) <= POSITION_TOLERANCE and abs(span[1] - gold_end) <= POSITION_TOLERANCE


def score_evidence(output: str, golds: Iterable[GoldAnswer | dict[str, Any]], note: str) -> dict[str, float]:
    """``relaxed_em``, ``f1`` and ``strict_em`` of one model output against a question's gold answers."""
    gold_list = [g if isinstance(g, GoldAnswer) else GoldAnswer.from_dict(g) for g in golds]
    if not gold_list:
        raise ValueError("score_evidence needs at least one gold answer")
    lines = prediction_lines(output)
    index = note_index(note)
    relaxed = f1 = strict = 0.0
    for gold in gold_list:
        near = max(gold.evidence_start, 0)
        found = candidates(lines, index, near) if lines else []
        gold_collapsed = collapse(gold.evidence)
        relaxed += any(_contains_entities(text, gold) or _within_tolerance(span, gold) for text, span in found)
        strict += any(collapse(text) == gold_collapsed for text, _ in found)
        f1 += max((token_f1(text, gold.evidence) for text, _ in found), default=0.0)
    n = len(gold_list)
    return {"relaxed_em": relaxed / n, "f1": f1 / n, "strict_em": strict / n}


# --- logical forms ---------------------------------------------------------------------------------


def first_line(output: str) -> str:
    for line in str(output).splitlines():
        if line.strip():
            return line.strip()
    return ""


def score_logical_form(output: str, gold_lf: str, gold_template: str) -> dict[str, float]:
    """``lf_acc``: exact logical form; ``template_acc``: the structure of the gold template, any slots."""
    prediction = normalise_lf(first_line(output))
    exact = prediction == normalise_lf(gold_lf)
    # The exact form always has the right structure, even where a gold slot value has brackets.
    return {
        "lf_acc": float(exact),
        "template_acc": float(exact or template_pattern(gold_template).fullmatch(prediction) is not None),
    }


# --- classification --------------------------------------------------------------------------------


def parse_label(output: str, labels: Sequence[str]) -> str | None:
    """The label the output names: the earliest mention, longest label first on ties; None if none."""
    text = collapse(output)
    best: tuple[int, int, str] | None = None
    for label in labels:
        needle = collapse(label)
        if not needle:
            continue
        match = re.search(r"(?<![\w-])" + re.escape(needle) + r"(?![\w-])", text)
        if match:
            key = (match.start(), -len(needle), label)
            if best is None or key < best:
                best = key
    return None if best is None else best[2]


def macro_f1(pairs: Sequence[tuple[str, str | None]], labels: Sequence[str] | None = None) -> float:
    """Macro-F1 over the classes seen as gold or predicted (as scikit-learn), or over ``labels``.

    An unparseable prediction (None) is wrong for its gold class and is no class of its own.
    """
    seen = {gold for gold, _ in pairs} | {pred for _, pred in pairs if pred is not None}
    classes = sorted(set(labels) if labels else seen)
    if not classes:
        return 0.0
    total = 0.0
    for cls in classes:
        tp = sum(1 for gold, pred in pairs if gold == cls and pred == cls)
        fp = sum(1 for gold, pred in pairs if gold != cls and pred == cls)
        fn = sum(1 for gold, pred in pairs if gold == cls and pred != cls)
        total += 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)
    return total / len(classes)


def bootstrap_stderr(pairs: Sequence[tuple[str, str | None]], iterations: int = 1000, seed: int = 1234) -> float:
    """Standard error of macro-F1 by a seeded bootstrap over items (same result every run)."""
    return bootstrap(pairs, macro_f1, iterations=iterations, seed=seed)
