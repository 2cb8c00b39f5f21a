"""Reading a judge's reply as a verdict: the parser behind ``Rubric.parse`` (``VerdictReader``).

What counts as a verdict: an object with every dimension and an in-range integer score for each,
in any of the shapes judges write: ``{dim: {"score": 4, "reason": ...}}``, HELM's
``{dim: {"score": 4, "explanation": ...}}``, ``{dim: 4}``, the same inside one wrapper
(``{"scores": {dim: 4}, "reasons": {...}}``); keys in any case (``"Accuracy": {"Score": 4}``) and
``"Accuracy Score"`` / ``accuracy_score`` for a dimension. A score may be a numeric string ("4"), an
integral float (4.0) or a fraction of the rubric's maximum ("4/5", "4 out of 5"), never a fraction
of another scale ("8/10"), a non-integer or a value off the scale (not rescaled, rounded or
clamped). JSON is read, and a Python-literal dict (single quotes, a trailing comma) where no JSON
verdict counts; a Markdown table or score lines in prose are refused with a reason naming the
format (the re-ask asks for JSON): nothing but an object carries the defences below. A dimension
given twice with different scores (``accuracy`` and ``Accuracy``, a repeated key, two wrappers) is
ambiguous and refused. An ``answer_id`` is optional (``require_answer_id`` makes it mandatory); one
that is present must be the fenced answer's id. Where the protection lies: a verdict-shaped object
that also occurs in the judged answer (a forgery the judge quoted) never counts, nor one that occurs
elsewhere in the prompt (the example verdict, which the default prompt writes with placeholders,
not scores), whether it is the whole object or the wrapped one. Reasoning in ``<think>`` blocks is
ignored; the last counting verdict in a reply wins.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
# A JSON object starts with "{" then a key or "}": other braces are not tried (1 MB of "{" took 190 s).
_OBJECT_START = re.compile(r"\{\s*[\"}]")
# A verdict is a few hundred characters; a longer reply is read from its end (the last verdict
# wins anyway). Bounds the cost of failed decodes, each of which is linear in its offset.
MAX_REPLY_CHARS = 32_768
# Objects in a judged answer or prompt are looked for in its first and last this-many characters.
MAX_SHOWN_SCAN = 8_192
_INTEGRAL = re.compile(r"^[+-]?\d+(?:\.0*)?$")
_SCORE_FIELDS = ("score", "rating", "grade")
_REASON_FIELDS = ("reason", "explanation", "rationale", "justification", "comment")
_REASON_KEY = re.compile(r"^(.+)_(?:" + "|".join(_REASON_FIELDS) + r")$")  # "accuracy_reason"
_REASON_BLOCKS = ("reasons", "explanations", "rationales", "rationale", "justifications", "comments", "reasoning")
# "4/5", "4 out of 5": a score with the scale's maximum written after it
_FRACTION = re.compile(r"^([+-]?\d+(?:\.0*)?)\s*(?:/|out\s+of)\s*(\d+)$", re.IGNORECASE)
# Python-literal objects ({'accuracy': 4}, a trailing comma): a few of the last starts, each a bounded scan
_LITERAL_START = re.compile(r"\{\s*['\"]")
_LITERAL_STARTS = 16
_LITERAL_CHARS = 4_000
_ANSWER_LITERAL_STARTS = 64


def _strip_think(text: str) -> str:
    """Drop closed ``<think>...</think>`` blocks, then everything from an unclosed ``<think>`` on.

    A scan with find-next rather than a lazy regex: ``<think>.*?</think>`` retries from every
    unclosed ``<think>`` to the end of the text (quadratic: 1 MB of them took minutes).
    """
    kept, position = [], 0
    while True:
        opening = _THINK_OPEN.search(text, position)
        if opening is None:
            kept.append(text[position:])
            return "".join(kept)
        kept.append(text[position:opening.start()])
        closing = _THINK_CLOSE.search(text, opening.end())
        if closing is None:
            return "".join(kept)
        position = closing.end()


@dataclass(frozen=True)
class ParsedVerdict:
    """Either ``scores`` (dimension -> int) with ``reasons``, or ``error`` saying why not.

    ``id_echoed``: whether the counted verdict carried the answer id (None when nothing counted).
    """

    scores: dict[str, int] | None
    reasons: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    id_echoed: bool | None = None

    @property
    def ok(self) -> bool:
        return self.scores is not None


def answer_id(answer: str) -> str:
    return hashlib.sha256(answer.encode("utf-8")).hexdigest()[:12]


class _Object(dict):
    """A decoded JSON object that remembers keys it was given twice with different values."""

    conflicts: frozenset[str] = frozenset()


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) < len(pairs):
        seen: dict[str, str] = {}
        conflicts = set()
        for key, value in pairs:
            text = _canonical(value)
            if seen.setdefault(key, text) != text:
                conflicts.add(key)
        obj.conflicts = frozenset(conflicts)
    return obj


def _json_spans(text: str, with_positions: bool = False) -> list[Any]:
    """Every top-level JSON object that decodes somewhere in ``text``, with its source text, in order
    (``with_positions``: also its start, and repeated keys remembered)."""
    decoder = json.JSONDecoder()
    found, position = [], 0
    while True:
        match = _OBJECT_START.search(text, position)
        if match is None:
            return found
        start = match.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # deep nesting raises RecursionError
            position = start + 1
            continue
        source = text[start:end]
        if with_positions:  # decoded again with the hook (only what decoded: failures stay cheap)
            try:
                value = json.loads(source, object_pairs_hook=_object_from_pairs)
            except RecursionError:
                pass
            found.append((start, value, source))
        else:
            found.append((value, source))
        position = end


def _balanced_end(text: str, start: int) -> int | None:
    """Where the brace opened at ``start`` closes (quotes respected), within ``_LITERAL_CHARS``."""
    depth, quote, index = 0, "", start
    stop = min(len(text), start + _LITERAL_CHARS)
    while index < stop:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _literal_spans(text: str, starts: int, json_spans: list[tuple[int, Any, str]] = ()
                   ) -> list[tuple[int, dict[str, Any], str]]:
    """Python-literal dicts (``{'accuracy': 4}``, a trailing comma) among the last ``starts`` openings
    outside the JSON objects already read (``json_spans``), outermost only, in order."""
    if "{" not in text:
        return []
    lows = [start for start, _, _ in json_spans]  # in order, not overlapping
    highs = [start + len(source) for start, _, source in json_spans]

    def inside_json(position: int) -> bool:
        at = bisect.bisect_right(lows, position) - 1
        return at >= 0 and position < highs[at]

    openings = [m.start() for m in _LITERAL_START.finditer(text) if not inside_json(m.start())][-starts:]
    found: list[tuple[int, dict[str, Any], str]] = []
    covered = -1
    for start in openings:
        if start < covered:
            continue
        end = _balanced_end(text, start)
        if end is None:
            continue
        try:
            value = ast.literal_eval(text[start:end])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict) and _json_like(value):
            found.append((start, value, text[start:end]))
            covered = end
    return found


def _json_like(value: Any, depth: int = 0) -> bool:
    """Only what JSON could have said: text keys; text, number, bool, None, list and dict values."""
    if depth > 20:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_like(v, depth + 1) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def _json_objects(text: str) -> list[Any]:
    return [value for value, _ in _json_spans(text)]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _all_dicts(value: Any, depth: int = 0) -> Iterable[dict[str, Any]]:
    """``value`` and every object nested in it (a forgery may sit inside a larger object)."""
    if depth > 20:
        return
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _all_dicts(inner, depth + 1)
    elif isinstance(value, list):
        for inner in value:
            yield from _all_dicts(inner, depth + 1)


@dataclass(frozen=True)
class ShownObjects:
    """The JSON objects the judge was shown: in the judged answer, and elsewhere in the prompt, each
    as written and with its keys normalised (``_key_form``), so that a judge re-casing a forgery's
    keys ("Accuracy" -> "accuracy") still repeats it."""

    answer_text: str
    in_answer: frozenset[str]
    in_prompt: frozenset[str]
    _written: dict = field(default_factory=dict, compare=False, repr=False)  # dimensions -> scores the answer writes

    def written_scores(self, dimensions: Iterable[str]) -> dict[str, frozenset[int]]:
        """Per dimension, the scores the answer writes as JSON-like pairs ("Accuracy": 5, 'clarity':
        {"score": "5"}), any spacing, case or quoting: one pass per dimension, once per answer."""
        key = tuple(dimensions)
        if key not in self._written:
            compact = re.sub(r"\s+", "", self.answer_text).lower().replace("'", '"')
            found = {}
            for dim in key:
                name = re.escape(dim.lower()).replace("_", "[_ ]?")
                pair = re.compile(r'"' + name + r'(?:[_ ]?score)?"?:(?:\{"?(?:score|rating|grade)"?:)?"?(\d{1,3})'
                                  r'(?:\.0*)?(?:/\d+)?"?(?![0-9])')
                found[dim] = frozenset(int(m.group(1)) for m in pair.finditer(compact))
            self._written[key] = found
        return self._written[key]

    @classmethod
    def of(cls, messages: list[dict[str, str]] | None, answer: str) -> ShownObjects:
        def canon(text: str) -> frozenset[str]:
            values = []
            for part in _scanned_parts(text):
                values += _json_objects(part) + [value for _, value, _ in _literal_spans(part, _ANSWER_LITERAL_STARTS)]
            return frozenset(form for value in values for d in _all_dicts(value) for form in _forms(d))

        prompt_text = "\n".join(str(m.get("content", "")) for m in (messages or []))
        in_answer = canon(answer)
        # The prompt's own objects (its example, the reference's) without the answer it quotes.
        around_answer = prompt_text.replace(answer, "\n") if answer else prompt_text
        return cls(answer, in_answer, canon(around_answer) - in_answer)


def _scanned_parts(text: str) -> list[str]:
    """The parts of a shown text searched with the decoder that tries every opening brace: all of it,
    or for a text longer than ``2 * MAX_SHOWN_SCAN`` its start and its end (every failed decode costs
    time linear in its offset: a 1 MB answer of '{"' took minutes). In the middle of a longer answer a
    verdict copied verbatim is caught by the substring check, and one re-formatted by the judge by
    ``Rubric._scores_written_in`` (its scores written as JSON-like pairs in the answer)."""
    if len(text) <= 2 * MAX_SHOWN_SCAN:
        return [text]
    return [text[:MAX_SHOWN_SCAN], text[-MAX_SHOWN_SCAN:]]


def _key_form(value: Any, depth: int = 0) -> Any:
    """``value`` with every key as the dimension name it would be read as ("Accuracy Score" -> "accuracy")."""
    if depth > 20:
        return value
    if isinstance(value, dict):
        return {_key_names(key)[1] or str(key): _key_form(inner, depth + 1) for key, inner in value.items()}
    if isinstance(value, list):
        return [_key_form(inner, depth + 1) for inner in value]
    return value


def _forms(obj: dict[str, Any]) -> set[str]:
    """An object's canonical text as written and with normalised keys: what counts as "the same object"."""
    return {_canonical(obj), "keys:" + _canonical(_key_form(obj))}


def _score_of(value: Any, scale_max: int) -> tuple[int | None, str | None]:
    """A score as an int, or why it is not one. Integral floats, numeric strings and fractions of
    the scale's maximum ("4/5") are scores; a fraction of another scale is not rescaled."""
    if isinstance(value, bool) or value is None:
        return None, f"is not an integer ({json.dumps(value)})"
    if isinstance(value, int):
        return value, None
    if isinstance(value, float):
        if value.is_integer():
            return int(value), None
        return None, f"is not an integer ({json.dumps(value)[:20]})"
    if isinstance(value, str) and _INTEGRAL.match(value.strip()):
        return int(float(value.strip())), None
    fraction = _FRACTION.match(value.strip()) if isinstance(value, str) else None
    if fraction:
        if int(fraction.group(2)) != scale_max:
            return None, f"is out of {fraction.group(2)} ({json.dumps(value)[:20]}), not {scale_max}: not rescaled"
        return int(float(fraction.group(1))), None
    return None, f"is not an integer ({json.dumps(value, default=repr)[:20]})"


def _key_names(key: Any) -> tuple[str, str]:
    """A key as a dimension name, as written and without a "score" suffix: "Accuracy Score" ->
    ("accuracy_score", "accuracy"); "Accuracy (1-5)" -> ("accuracy", "accuracy")."""
    if not isinstance(key, str):
        return "", ""
    name = re.sub(r"\([^()]{0,20}\)", " ", key.strip().lower())
    name = re.sub(r"[\s-]+", "_", name.strip()).strip("_:")
    return name, re.sub(r"_(?:score|rating|grade)$", "", name)


def _dimension_key(key: Any, dimensions: Iterable[str]) -> str | None:
    """The dimension ``key`` names: the name as written first (a dimension may end in "_score")."""
    as_written, stem = _key_names(key)
    dimensions = set(dimensions)
    return as_written if as_written in dimensions else stem if stem in dimensions else None


def _fields(obj: dict[str, Any], names: tuple[str, ...]) -> list[tuple[str, Any]]:
    """The (key, value) pairs of ``obj`` whose key is one of ``names`` in any case."""
    return [(key, value) for key, value in obj.items() if isinstance(key, str) and key.strip().lower() in names]


def _one(pairs: list[tuple[str, Any]], repeated: Iterable[str] = ()) -> tuple[bool, Any]:
    """(True, the value) where the pairs agree on one value (None where there are none); (False,
    None) where they disagree or a key among them was repeated with different values (``repeated``)."""
    if not pairs:
        return True, None
    if len({_canonical(value) for _, value in pairs}) > 1 or any(key in set(repeated) for key, _ in pairs):
        return False, None
    return True, pairs[0][1]



@functools.lru_cache(maxsize=64)
def verdict_reader(dimensions: tuple[str, ...], scale_min: int, scale_max: int) -> VerdictReader:
    return VerdictReader(dimensions, scale_min, scale_max)


@dataclass(frozen=True)
class VerdictReader:
    """Reads replies for one rubric's dimensions and scale."""

    dimensions: tuple[str, ...]
    scale_min: int = 1
    scale_max: int = 5

    def _entries(self, obj: dict[str, Any]) -> dict[str, list[tuple[str, Any]]]:
        """For each dimension, the keys of ``obj`` that name it and their values."""
        found: dict[str, list[tuple[str, Any]]] = {dim: [] for dim in self.dimensions}
        for key, value in obj.items():
            dim = _dimension_key(key, found)
            if dim is not None:
                found[dim].append((key, value))
        return found

    def _scores_object(self, obj: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The object holding the dimensions: ``obj`` itself, or the one wrapper inside it (``{"scores":
        {...}}``, up to two levels down); an error where two wrappers disagree."""
        if any(self._entries(obj).values()):
            return obj, None
        wrapped: list[tuple[str, dict[str, Any]]] = []
        for key, value in obj.items():
            if not isinstance(value, dict) or (isinstance(key, str) and key.strip().lower() in _REASON_BLOCKS):
                continue  # {"reasons": {dim: ...}} names the dimensions too, without scores
            if any(self._entries(value).values()):
                wrapped.append((str(key), value))
                continue
            wrapped += [(f"{key}.{inner_key}", inner) for inner_key, inner in value.items()
                        if isinstance(inner, dict) and any(self._entries(inner).values())]
        if not wrapped:
            return obj, None
        if len({_canonical(value) for _, value in wrapped}) > 1:
            where = ", ".join(json.dumps(name) for name, _ in wrapped)[:120]
            return None, f"ambiguous verdict: scores given in more than one place ({where})"
        return wrapped[0][1], None

    def _reason(self, entry: Any, dim: str, holders: tuple[dict[str, Any], ...]) -> str:
        if isinstance(entry, dict):
            found = _fields(entry, _REASON_FIELDS)
            if found:
                return str(found[0][1])[:500]
        for holder in holders:  # {"scores": {...}, "reasons": {dim: ...}} or {"accuracy_reason": ...}
            for key, value in holder.items():
                named = _REASON_KEY.match(_key_names(key)[0])
                if named and named.group(1) == dim and isinstance(value, str):
                    return value[:500]
            for _, block in _fields(holder, _REASON_BLOCKS):
                if isinstance(block, dict):
                    for key, value in block.items():
                        if _dimension_key(key, self.dimensions) == dim and not isinstance(value, (dict, list)):
                            return str(value)[:500]
        return ""

    def _check(self, obj: Any, expected_id: str | None, require_answer_id: bool) -> ParsedVerdict:
        """``obj`` read as a verdict; ``expected_id`` None: any answer id (only the scores are wanted)."""
        if not isinstance(obj, dict):
            return ParsedVerdict(None, error="verdict is not a JSON object")
        holder, problem = self._scores_object(obj)
        if holder is None:
            return ParsedVerdict(None, error=problem)
        found = self._entries(holder)
        missing = [d for d in self.dimensions if not found[d]]
        if missing:
            return ParsedVerdict(None, error=f"missing dimension(s): {', '.join(missing)}")
        entries = {}
        for dim, pairs in found.items():
            agreed, entry = _one(pairs, getattr(holder, "conflicts", ()))
            if not agreed:
                keys = ", ".join(json.dumps(key) for key, _ in pairs)[:80]
                return ParsedVerdict(None, error=f"ambiguous verdict: {dim} is given more than once, differently ({keys})")
            entries[dim] = entry
        ids = _fields(obj, ("answer_id",)) + (_fields(holder, ("answer_id",)) if holder is not obj else [])
        ids = [str(value).strip() for _, value in ids if value not in (None, "")]  # null or "" is no id
        echoed = bool(ids)
        if expected_id is not None and any(the_id != expected_id for the_id in ids):
            return ParsedVerdict(None, error="answer_id is not the judged answer's id")
        if not echoed and require_answer_id:
            return ParsedVerdict(None, error="answer_id missing (require_answer_id is set)")
        scores, reasons = {}, {}
        for dim, entry in entries.items():
            raw = entry
            if isinstance(entry, dict):
                agreed, raw = _one(_fields(entry, _SCORE_FIELDS), getattr(entry, "conflicts", ()))
                if not agreed:
                    return ParsedVerdict(None, error=f"ambiguous verdict: {dim} has more than one score")
            score, problem = _score_of(raw, self.scale_max)
            if problem:
                return ParsedVerdict(None, error=f"{dim} score {problem}")
            if not self.scale_min <= score <= self.scale_max:
                return ParsedVerdict(None, error=f"{dim} score {score} is outside {self.scale_min}-{self.scale_max}")
            scores[dim] = score
            reasons[dim] = self._reason(entry, dim, (holder, obj))
        return ParsedVerdict(scores, reasons, id_echoed=echoed)

    def _scores_written_in(self, value: Any, shown: ShownObjects) -> bool:
        """Whether ``answer`` writes every score of the verdict ``value`` as a JSON-like pair ("Accuracy":5,
        'accuracy_score': "5", "clarity": {"score": 5 ...), however spaced, quoted or cased: catches a
        forgery the judge re-formatted or gave an ``answer_id``, also in the part of a long answer that is
        not searched for whole objects. One pass per dimension."""
        scores = self._check(value, None, False).scores
        if not scores:
            return False
        written = shown.written_scores(self.dimensions)
        return all(score in written.get(dim, ()) for dim, score in scores.items())

    def _origin(self, value: Any, source: str, shown: ShownObjects) -> ParsedVerdict | None:
        """Why an object the judge wrote does not count as its own verdict, or None if it may."""
        if not isinstance(value, dict):
            return None
        holder, _ = self._scores_object(value)
        candidates = _forms(value) | (_forms(holder) if holder is not None else set())
        if (candidates & shown.in_answer or (len(source) > 2 and source in shown.answer_text)
                or self._scores_written_in(value, shown)):
            return ParsedVerdict(None, error="verdict quoted from the judged answer (a forgery), not counted")
        if candidates & shown.in_prompt:
            return ParsedVerdict(None, error="verdict copied from the prompt's example, not counted")
        return None

    def parse(self, reply: str | None, answer: str, shown: ShownObjects | None = None,
              require_answer_id: bool = False) -> ParsedVerdict:
        """The last counting verdict in ``reply`` (``<think>`` blocks ignored), or the reason there is none.

        ``shown``: the objects the judge was shown (``ShownObjects.of(messages, answer)``); without it
        only the judged answer's objects are known.
        """
        if reply is None or not str(reply).strip():
            return ParsedVerdict(None, error="empty reply")
        text = _strip_think(str(reply))[-MAX_REPLY_CHARS:]
        shown = shown if shown is not None else ShownObjects.of(None, answer)
        expected = answer_id(answer)

        def read(spans: list[tuple[int, Any, str]]) -> list[tuple[int, ParsedVerdict]]:
            return [(start, self._origin(value, source, shown) or self._check(value, expected, require_answer_id))
                    for start, value, source in spans]

        json_spans = _json_spans(text, with_positions=True)
        checked = read(json_spans)
        if not any(parsed.ok for _, parsed in checked):
            # no JSON verdict counts: a Python-literal dict ({'accuracy': 4}, a trailing comma) may
            literal = _literal_spans(text, _LITERAL_STARTS, json_spans)
            checked = sorted(checked + read(literal), key=lambda pair: pair[0])
        if not checked:
            return ParsedVerdict(None, error=self._no_object_reason(text))
        valid = [parsed for _, parsed in checked if parsed.ok]
        # no counting verdict: report what was wrong with the last one offered
        return valid[-1] if valid else checked[-1][1]

    def _no_object_reason(self, text: str) -> str:
        """Why a reply holds no verdict, naming the format where the judge wrote scores another way."""
        names = re.compile(r"\b(?:" + "|".join(re.escape(dim).replace("_", "[ _]") for dim in self.dimensions) + r")\b",
                           re.IGNORECASE)
        # line by line, each test linear: the reply is the judge's, of any shape
        lines = text.split("\n")
        if any(line.lstrip().startswith("|") and line.count("|") >= 2 and names.search(line)
               and re.search(r"\d", line) for line in lines):
            return "no JSON object in reply (the scores are a Markdown table, not the JSON object asked for)"
        label = re.compile(r"[ \t*#>-]{0,8}" + names.pattern + r"[^\n]{0,20}?[:=][ \t*]{0,4}\d", re.IGNORECASE)
        if any(label.match(line) for line in lines):
            return "no JSON object in reply (the scores are written as text, not the JSON object asked for)"
        return "no JSON object in reply (truncated or not JSON)"
