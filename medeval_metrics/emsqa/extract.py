"""EMSQA answer extraction: the set of option letters a model output commits to."""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence

_THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_LETTER_IN_LIST = r"\s*[\"'`]?\s*([a-zA-Z])\s*[\"'`]?\s*"
_JSON_LIST = re.compile(r"\[((?:" + _LETTER_IN_LIST + r",)*" + _LETTER_IN_LIST + r")?\]")
_ANSWER_FIELD = re.compile(
    r"[\"']?(?:final[_ ])?answers?[\"']?\s*:\s*(\[[^\[\]]{0,200}\]|[\"'][a-zA-Z][\"'])", re.IGNORECASE
)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?([^{}]{1,40}?)\}?\s*\}")
# A letter token in running text: "(b)", "b)", "B", "b." -- a lowercase letter followed by a word
# ("the answer is a fracture") is an article, not an answer.
_TOKEN = (
    r"(?:\(\s*([a-fA-F])\s*\)|(?<![A-Za-z0-9])([A-F])(?![A-Za-z0-9'’-])"
    r"|(?<![A-Za-z0-9])([a-f])(?=\s*(?:$|[.,;:!)\]*]|\band\b|&|\n)))"
)
# The separator gives each space exactly one place to match (", and" as one unit), and the list is
# capped at 16 tokens (options run a-f): an ambiguous or unbounded list made "**A, **A, ..." take
# exponential time (110 characters: 9 s) and 1 MB outputs quadratic time.
_TOKEN_LIST = _TOKEN + r"(?:\s*(?:,(?:\s*(?i:and)\b)?|\b(?i:and)\b|&|/|\+)\s*\**" + _TOKEN + r"){0,15}"
# Keywords are matched case-insensitively, letter tokens case-sensitively (see _TOKEN).
_PHRASE = re.compile(
    r"(?i:(?:(?:correct|right|best|final)\s+)?(?:answers?|options?|choices?|responses?)\s*"
    r"(?:is|are|would be|will be|should be|:|=|-)\s*(?:options?|choices?|letters?)?)\s*[:\-]?\s*\**\s*("
    + _TOKEN_LIST
    + r")"
)
# Inside one bold span the list has no further asterisks, so each "**" start is checked in
# constant time ("**A, **A, ..." over 1 MB: 1.6 s with them, see scripts/bench_hardening.py).
_BOLD = re.compile(r"\*\*\s*(" + _TOKEN_LIST.replace(r"\s*\**", r"\s*") + r")\s*[.):]?\s*\*\*")
_WHOLE = re.compile(r"^\W*(" + _TOKEN_LIST + r")\W*$")
_LEADING = re.compile(r"^\s*(?:\*\*)?\s*\(?([a-fA-F])[.)]\s+\S")
_ANY_LETTER = re.compile(r"[a-zA-Z]")


def strip_reasoning(text: str) -> str:
    """Drop ``<think>...</think>`` blocks (an unclosed one runs to the end) and any text before a
    stray ``</think>`` (chat templates that open the block in the prompt)."""
    if "</think>" in text.lower() and "<think>" not in text.lower():
        # positions from a regex on the text itself: lower() can lengthen it ("İ" -> "i̇")
        last_close = None
        for last_close in _THINK_CLOSE.finditer(text):
            pass
        text = text[last_close.end():] if last_close else text
    return _THINK_BLOCK.sub(" ", text)


def _letters_of(fragment: str) -> list[str]:
    """Letters named in a matched answer fragment ('"a", "c"', '(B) and (D)', 'A, C')."""
    tokens = re.findall(_TOKEN, fragment)
    letters = [next(g for g in groups if g).lower() for groups in tokens]
    if not letters:  # JSON-ish list content: quoted or bare single letters
        letters = [m.lower() for m in re.findall(r"(?<![A-Za-z])([a-zA-Z])(?![A-Za-z])", fragment)]
    return letters


def extract_answer(text: str, valid_letters: Sequence[str]) -> list[str] | None:
    """The set of option letters a model output commits to, sorted; ``None`` if it gives no answer.

    Recognised, the last one in the text winning over earlier drafts: a JSON list of letters
    (``["a", "c"]``), a JSON object's ``answer`` field, ``\\boxed{B}``, phrases such as "the answer is
    (B)" or "correct options are A and C", bold letters (``**B**``), and a bare reply ("B", "A, C",
    "b. oxygen"). Case is ignored. Letters outside ``valid_letters`` are not answers: they are
    dropped, and a candidate left with none is ignored. An explicit empty JSON list is an answer
    (the empty set), distinct from ``None``.
    """
    if not isinstance(text, str) or not text:
        return None
    valid = {letter.lower() for letter in valid_letters}
    body = strip_reasoning(text)
    candidates: list[tuple[int, int, list[str]]] = []  # (end position, priority, letters)

    def consider(end: int, priority: int, letters: Iterable[str], allow_empty: bool = False) -> None:
        raw = list(letters)
        kept = sorted({letter for letter in raw if letter in valid})
        if kept or (allow_empty and not raw):
            candidates.append((end, priority, kept))

    def consider_last(pattern: re.Pattern[str], priority: int, allow_empty: Callable[[str], bool]) -> None:
        # Only the last usable match of a pattern can win (its matches end at increasing
        # positions), so read letters from the end backwards: a 1 MB output with 90,000 JSON
        # lists costs one findall, not 90,000.
        for match in reversed(list(pattern.finditer(body))):
            inner = match.group(1) or ""
            found = len(candidates)
            consider(match.end(), priority, _letters_of(inner), allow_empty=allow_empty(inner))
            if len(candidates) > found:
                return

    consider_last(_ANSWER_FIELD, 5, lambda inner: inner.startswith("[") and not _ANY_LETTER.search(inner))
    consider_last(_JSON_LIST, 4, lambda inner: not inner.strip())
    consider_last(_BOXED, 3, lambda inner: False)
    consider_last(_PHRASE, 2, lambda inner: False)
    consider_last(_BOLD, 1, lambda inner: False)
    if not candidates:
        stripped = body.strip()
        whole = _WHOLE.match(stripped) if len(stripped) <= 40 else None
        if whole:
            consider(whole.end(), 0, _letters_of(whole.group(1)))
        else:
            leading = _LEADING.match(stripped)
            if leading:
                consider(leading.end(), 0, [leading.group(1).lower()])
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], c[1]))[2]


class ExtractAnswerFilter:
    """lm-eval filter: each response becomes the sorted list of letters it answers, or ``None``.

    Instantiated by lm-eval's FilterEnsemble (``function: !function medeval_metrics.emsqa.ExtractAnswerFilter``).
    """

    def __init__(self, **kwargs: Any) -> None:
        pass

    def apply(self, resps: Iterable[Sequence[str]], docs: Iterable[dict[str, Any]]) -> list[list[list[str] | None]]:
        return [[extract_answer(r, doc["letters"]) for r in responses] for responses, doc in zip(resps, docs)]


