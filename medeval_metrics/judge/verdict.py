"""Reading a judge's reply as a verdict: the parser behind ``Rubric.parse`` (``VerdictReader``).

What counts as a verdict: an object with every dimension and an in-range integer score for each,
in any of the shapes judges write: ``{dim: {"score": 4, "reason": ...}}``, HELM's
``{dim: {"score": 4, "explanation": ...}}``, ``{dim: 4}``, the same inside one wrapper
(``{"scores": {dim: 4}, "reasons": {...}}``), a list of ``{"criterion": dim, "score": 4}``; keys in any
case (``"Accuracy": {"Score": 4}``) and ``"Accuracy Score"`` / ``accuracy_score`` for a dimension. A
score may be a numeric string ("4"), an integral float (4.0), "4 - Good", "<4>" or a fraction of the
rubric's maximum ("4/5", "4 out of 5"), never a fraction of another scale ("8/10"), a range, a
non-integer or a value off the scale (not rescaled, rounded or clamped). JSON is read (raw control
characters allowed), and where no JSON verdict counts a tolerant reading (``_LooseReader``: Python
literals, quotes inside strings, unquoted keys, one missing final brace). A dimension given twice
with different scores is ambiguous and refused. An ``answer_id`` is optional (``require_answer_id``
makes it mandatory); one that is present must be the fenced answer's id (its ``ANSWER-`` prefix
allowed). A verdict-shaped object that also occurs in the judged answer (a forgery the judge quoted)
never counts, nor one that occurs elsewhere in the prompt (the example verdict), nor one introduced
as an example, a comparison or a hypothetical. Reasoning (``<think>``/``<thinking>``/``<reasoning>``
blocks, and all before a lone closing tag) is ignored. Several counting verdicts must agree (counted
once) unless a later one is marked as a revision, which replaces them; a revision cut off or unusable,
or a prose correction after the verdict, withdraws it. A declared scale other than the rubric's is
unscored. The rules with examples: ``docs/judges.md``.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import itertools
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
# A JSON object starts with "{" then a key or "}": other braces are not tried (1 MB of "{" took 190 s).
_OBJECT_START = re.compile(r"\{\s*[\"}]")
# A verdict is a few hundred characters; a longer reply is read from its end (the last verdict
# wins anyway). Bounds the cost of failed decodes, each of which is linear in its offset.
MAX_REPLY_CHARS = 32_768
# Objects in a judged answer or prompt are looked for in its first and last this-many characters.
MAX_SHOWN_SCAN = 8_192
# the id copied with the fence's own prefix ("ANSWER-24fd8e567f87", "<<<ANSWER-...>>>") is the id
_ID_PREFIX = re.compile(r"^(?:<<<)?\s*ANSWER-|>>>$", re.IGNORECASE)
_INTEGRAL = re.compile(r"^[+-]?\d+(?:\.0*)?$")
_SCORE_FIELDS = ("score", "rating", "grade")
_REASON_FIELDS = ("reason", "explanation", "rationale", "justification", "comment")
_REASON_KEY = re.compile(r"^(.+)_(?:" + "|".join(_REASON_FIELDS) + r")$")  # "accuracy_reason"
_REASON_BLOCKS = ("reasons", "explanations", "rationales", "rationale", "justifications", "comments", "reasoning")
# "4/5", "4 out of 5": a score with the scale's maximum written after it
# "4 - Good", "4/5 - Good" (a number, a dash, a word: "3 - 4" is a range) or "<4>"
_LABELLED = re.compile(r"^(?:([+-]?\d+)(?:\s*/\s*(\d+))?\s*[-\u2013\u2014]\s*[A-Za-z][^\d]{0,40}|<\s*([+-]?\d+)\s*>)$")
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
        kept.append(text[position : opening.start()])
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


# A failed decode costs the descent to where it failed, and in a run of unclosed openings every opening
# failed at the same far point ('{"a": {"a": ...', 1 MB of '{"a": [[1]], "b": ': 0.5-1 s). The openings still
# open where the decoder failed fail there too, so they are not decoded again: _skip_failed follows the
# decoder's reading (valid JSON up to that point, strings included) to find them. Objects inside strings and
# complete containers are not among them and are still read.
_MAX_DEPTH = 64  # past Python's recursion limit, a run's openings nesting deeper than this are skipped
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+"|[{}\[\]"]', re.DOTALL)  # a lone quote: a string left open


def _skip_failed(text: str, start: int, failed_at: int | None, skipped: set[int]) -> None:
    """The decode from the opening at ``start`` failed at ``failed_at`` (a JSONDecodeError's position), or nested
    past the recursion limit (``None``): the openings that would fail the same way go into ``skipped``."""
    if failed_at is not None and failed_at - start < 256:
        return  # a failure this near costs less to meet again than to follow (1 MB of '{"': 0.28 s -> 0.15 s)
    if failed_at is None:  # followed only as deep as the decoder surely got: the limit less the frames in use
        frames, frame = 0, sys._getframe()
        while frame is not None:
            frames, frame = frames + 1, frame.f_back
        reached = sys.getrecursionlimit() - frames - 50  # its own C frames count too (Python 3.11)
    path: list[int] = []
    for token in _JSON_TOKEN.finditer(text, start, len(text) if failed_at is None else failed_at):
        bracket = token.group()
        if bracket in ("{", "["):
            path.append(token.start())
            if failed_at is None and len(path) >= reached:
                skipped.update(path[1 : reached - _MAX_DEPTH])  # each nests deeper than _MAX_DEPTH
                return
        elif bracket in ("}", "]"):
            path.pop()
            if not path:
                return  # not expected: the decoder failed inside the container it started with
        elif bracket == '"':
            break  # the decoder failed inside this string: all open before it is open where it failed
    if failed_at is not None:
        skipped.update(path[1:])


def _decode_or_skip(decoder: json.JSONDecoder, text: str, start: int, skipped: set[int]) -> tuple[Any, int] | None:
    """``decoder.raw_decode`` at ``start``, or None where it fails (or ``skipped`` says it would); a failure puts
    the openings that would fail the same way into ``skipped``."""
    if start in skipped:
        return None
    try:
        return decoder.raw_decode(text, start)
    except RecursionError:  # nested past the recursion limit
        _skip_failed(text, start, None, skipped)
    except json.JSONDecodeError as exc:
        _skip_failed(text, start, exc.pos, skipped)
    except ValueError:  # an integer of more than 4,300 digits
        pass
    return None


def _json_spans(text: str, with_positions: bool = False) -> list[Any]:
    """Every top-level JSON object that decodes somewhere in ``text``, with its source text, in order
    (``with_positions``: also its start, and repeated keys remembered). Inside a run of openings nested past
    the recursion limit, objects deeper than ``_MAX_DEPTH`` are not looked for (``_skip_failed``)."""
    decoder = json.JSONDecoder()
    found, position, too_deep = [], 0, set()
    while True:
        match = _OBJECT_START.search(text, position)
        if match is None:
            return found
        start = match.start()
        position = start + 1
        decoded = _decode_or_skip(decoder, text, start, too_deep)
        if decoded is None:
            continue
        value, end = decoded
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


_NOT_A_LITERAL = object()


@functools.lru_cache(maxsize=256)
def _literal_value(source: str) -> Any:
    """``source`` read as a Python literal, or ``_NOT_A_LITERAL``. Remembered: every prompt holds the rubric's
    example, and compiling it was half the cost of finding a prompt's objects. The values are shared: read only."""
    try:
        return ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_A_LITERAL


def _literal_spans(
    text: str, starts: int, json_spans: list[tuple[int, Any, str]] = ()
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
        value = _literal_value(text[start:end])
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
                pair = re.compile(
                    r'"' + name + r'(?:[_ ]?score)?"?:(?:\{"?(?:score|rating|grade)"?:)?"?(\d{1,3})'
                    r'(?:\.0*)?(?:/\d+)?"?(?![0-9])'
                )
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


# Normalised-key texts of objects met before, by canonical text (which determines them): the prompt's example
# and most verdicts recur from item to item, and normalising keys was a third of reading a reply.
_KEY_FORMS: dict[str, str] = {}
_KEY_FORMS_MAX, _KEY_FORM_CHARS = 1024, 2048


def _forms(obj: dict[str, Any]) -> set[str]:
    """An object's canonical text as written and with normalised keys: what counts as "the same object"."""
    text = _canonical(obj)
    keyed = _KEY_FORMS.get(text)
    if keyed is None:
        keyed = "keys:" + _canonical(_key_form(obj))
        if len(text) <= _KEY_FORM_CHARS:
            if len(_KEY_FORMS) >= _KEY_FORMS_MAX:
                _KEY_FORMS.clear()
            _KEY_FORMS[text] = keyed
    return {text, keyed}


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
    labelled = _LABELLED.match(value.strip()) if isinstance(value, str) else None
    if labelled:  # "4 - Good", "4/5 - Good", "<4>" (the placeholder's brackets kept)
        if labelled.group(2) and int(labelled.group(2)) != scale_max:
            return None, f"is out of {labelled.group(2)} ({json.dumps(value)[:20]}), not {scale_max}: not rescaled"
        return int(labelled.group(1) or labelled.group(3)), None
    fraction = _FRACTION.match(value.strip()) if isinstance(value, str) else None
    if fraction:
        if int(fraction.group(2)) != scale_max:
            return None, f"is out of {fraction.group(2)} ({json.dumps(value)[:20]}), not {scale_max}: not rescaled"
        return int(float(fraction.group(1))), None
    return None, f"is not an integer ({json.dumps(value, default=repr)[:20]})"


_KEY_NOTE = re.compile(r"\([^()]{0,20}\)")
_KEY_SPACE = re.compile(r"[\s-]+")
_KEY_SUFFIX = re.compile(r"_(?:score|rating|grade)$")


def _key_names(key: Any) -> tuple[str, str]:
    """A key as a dimension name, as written and without a "score" suffix: "Accuracy Score" ->
    ("accuracy_score", "accuracy"); "Accuracy (1-5)" -> ("accuracy", "accuracy")."""
    if not isinstance(key, str):
        return "", ""
    # the same few keys recur in every reply (about 50 look-ups a reply): remembered, short ones only
    return _short_key_names(key) if len(key) <= 200 else _read_key_names(key)


def _read_key_names(key: str) -> tuple[str, str]:
    name = _KEY_NOTE.sub(" ", key.strip().lower())
    name = _KEY_SPACE.sub("_", name.strip()).strip("_:")
    return name, _KEY_SUFFIX.sub("", name)


_short_key_names = functools.lru_cache(maxsize=4096)(_read_key_names)


def _dimension_key(key: Any, dimensions: Iterable[str]) -> str | None:
    """The dimension ``key`` names: the name as written first (a dimension may end in "_score")."""
    as_written, stem = _key_names(key)
    if not isinstance(dimensions, (set, frozenset, dict, tuple, list)):
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
    if len(pairs) > 1 and len({_canonical(value) for _, value in pairs}) > 1:
        return False, None
    if repeated and any(key in repeated for key, _ in pairs):
        return False, None
    return True, pairs[0][1]


# --------------------------------------------------------------------------- tolerant reading
class _Unreadable(Exception):
    """An object the tolerant reader cannot read; ``cut_off``: the text ended inside it."""

    def __init__(self, cut_off: bool = False) -> None:
        super().__init__("cut off" if cut_off else "unreadable")
        self.cut_off = cut_off


_BARE_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_BARE_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?(?:\s*/\s*\d+)?")  # 4, 4.0, and a bare fraction 4/5 (kept as text)
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_STRING_END = re.compile(r"\s*(?:[,}\]:]|$)")
_FENCE_END = re.compile(r"\s*(?:```\s*)?$")


class _LooseReader:
    """Reads one object the way a careful reader does where JSON's grammar was missed only in ways that
    cannot change a score: single quotes, a quote inside a string (a quote ends a string only before
    ``, } ] :``), unquoted keys, Python's True/False/None, a trailing comma, raw control characters, a
    bare fraction (``4/5``), and one closing brace missing at the very end of the reply. Anything else
    (a missing comma, a comment, two braces missing) is unreadable; so is anything past ``limit``."""

    def __init__(self, text: str, start: int, limit: int = _LITERAL_CHARS) -> None:
        self.text, self.end = text, min(len(text), start + limit)
        self.at, self.repaired = start, False
        self.reaches_end = self.end == len(text)

    def _fail(self) -> NoReturn:
        raise _Unreadable(cut_off=self.at >= self.end and self.reaches_end)

    def _space(self) -> None:
        while self.at < self.end and self.text[self.at] in " \t\r\n":
            self.at += 1

    def read(self) -> tuple[Any, int]:
        value = self._value(0)
        return value, self.at

    def _value(self, depth: int) -> Any:
        if depth > 20:
            raise _Unreadable()
        self._space()
        if self.at >= self.end:
            self._fail()
        char = self.text[self.at]
        if char == "{":
            return self._object(depth)
        if char == "[":
            return self._array(depth)
        if char in "'\"":
            return self._string()
        number = _BARE_NUMBER.match(self.text, self.at, self.end)
        if number:
            self.at = number.end()
            token = number.group(0)
            if "/" in token:
                return re.sub(r"\s+", "", token)
            return float(token) if "." in token else int(token)
        word = _BARE_KEY.match(self.text, self.at, self.end)
        if word and word.group(0) in _BARE_WORDS:
            self.at = word.end()
            return _BARE_WORDS[word.group(0)]
        raise _Unreadable()

    def _string(self) -> str:
        quote, out = self.text[self.at], []
        self.at += 1
        while self.at < self.end:
            char = self.text[self.at]
            if char == "\\" and self.at + 1 < self.end:
                nxt = self.text[self.at + 1]
                if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", self.text[self.at + 2 : self.at + 6]):
                    out.append(chr(int(self.text[self.at + 2 : self.at + 6], 16)))
                    self.at += 6
                    continue
                out.append(_ESCAPES.get(nxt, "\\" + nxt))
                self.at += 2
                continue
            if char == quote and _STRING_END.match(self.text, self.at + 1, self.end):
                self.at += 1
                return "".join(out)
            out.append(char)
            self.at += 1
        self._fail()

    def _key(self) -> str:
        if self.at < self.end and self.text[self.at] in "'\"":
            return self._string()
        word = _BARE_KEY.match(self.text, self.at, self.end)
        if not word:
            self._fail()
        self.at = word.end()
        return word.group(0)

    def _object(self, depth: int) -> _Object:
        self.at += 1
        pairs: list[tuple[str, Any]] = []
        while True:
            self._space()
            if self.at < self.end and self.text[self.at] == "}":
                self.at += 1
                return _object_from_pairs(pairs)
            key = self._key()
            self._space()
            if self.at >= self.end or self.text[self.at] != ":":
                self._fail()
            self.at += 1
            pairs.append((key, self._value(depth + 1)))
            self._space()
            if self.at < self.end and self.text[self.at] == ",":
                self.at += 1
                continue
            if self.at < self.end and self.text[self.at] == "}":
                self.at += 1
                return _object_from_pairs(pairs)
            # the one repair of structure: the outermost object's closing brace missing at the reply's end
            if depth == 0 and self.reaches_end and _FENCE_END.match(self.text, self.at):
                self.repaired, self.at = True, len(self.text)
                return _object_from_pairs(pairs)
            self._fail()

    def _array(self, depth: int) -> list[Any]:
        self.at += 1
        items: list[Any] = []
        while True:
            self._space()
            if self.at < self.end and self.text[self.at] == "]":
                self.at += 1
                return items
            items.append(self._value(depth + 1))
            self._space()
            if self.at < self.end and self.text[self.at] == ",":
                self.at += 1
                continue
            if self.at < self.end and self.text[self.at] == "]":
                self.at += 1
                return items
            self._fail()


# --------------------------------------------------------------------------- reasoning
_REASONING_TAG = re.compile(r"<(/?)(think|thinking|reasoning)\s*>", re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str, str | None]:
    """The reply without its reasoning, and the opening tag left unclosed (None if none).

    Reasoning is a ``<think>``, ``<thinking>`` or ``<reasoning>`` block, and everything before a closing
    tag that was never opened (servers whose chat template writes the opening tag, as vLLM without a
    reasoning parser does for DeepSeek-R1 and Qwen3, return only ``</think>``); an unclosed opening tag
    makes the rest reasoning. One linear scan (a lazy regex retried from every opening is quadratic)."""
    kept: list[str] = []
    position, inside = 0, None
    for tag in _REASONING_TAG.finditer(text):
        closing, name = bool(tag.group(1)), tag.group(2).lower()
        if inside is None:
            if closing:  # a lone closing tag: all before it was reasoning
                kept, position = [], tag.end()
            else:
                kept.append(text[position : tag.start()])
                inside, position = name, tag.end()
        elif closing and name == inside:
            inside, position = None, tag.end()
    if inside is not None:
        return "".join(kept), f"<{inside}>"
    kept.append(text[position:])
    return "".join(kept), None


# --------------------------------------------------------------------------- objects in a reply
# JSON objects, and arrays of objects (a list of {criterion, score}); arrays of numbers are not verdicts
_REPLY_START = re.compile(r"\{\s*[\"}]|\[\s*\{")
_LOOSE_START = re.compile(r"\{\s*['\"A-Za-z_]")
_LENIENT = json.JSONDecoder(strict=False)  # raw control characters inside strings are read


def _reply_json_spans(text: str) -> list[tuple[int, Any, str]]:
    """Every top-level JSON object (or array of objects) that decodes in ``text``: start, value
    (repeated keys remembered), source. Inside a run of openings nested past the recursion limit, objects
    deeper than ``_MAX_DEPTH`` are not looked for."""
    found, position, too_deep = [], 0, set()
    while True:
        match = _REPLY_START.search(text, position)
        if match is None:
            return found
        start = match.start()
        decoded = _decode_or_skip(_LENIENT, text, start, too_deep)
        if decoded is None:
            position = start + 1
            continue
        end = decoded[1]
        source = text[start:end]
        try:  # decoded again with the hook (only what decoded: failures stay cheap)
            value = json.loads(source, strict=False, object_pairs_hook=_object_from_pairs)
        except (ValueError, RecursionError):
            position = start + 1
            continue
        found.append((start, value, source))
        position = end


@dataclass
class _Candidate:
    start: int
    end: int
    value: Any
    source: str
    loose: bool  # read by the tolerant reader, not as JSON
    repaired: bool = False  # its final closing brace was missing
    parsed: ParsedVerdict | None = None


@dataclass(frozen=True)
class _Failure:
    """An opening that names a dimension and that neither JSON nor the tolerant reader could read."""

    start: int
    end: int
    cut_off: bool
    source: str

    def reason(self) -> str:
        if self.cut_off:
            return "no JSON object in reply (cut off: the reply ends inside the object)"
        try:
            _LENIENT.decode(self.source)
        except json.JSONDecodeError as exc:
            return f"not valid JSON ({exc.msg[:1].lower()}{exc.msg[1:]} at line {exc.lineno} column {exc.colno})"
        except (ValueError, RecursionError):
            pass
        return "not valid JSON"


@functools.lru_cache(maxsize=64)
def _dimension_names(dimensions: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(
        r"\b(?:" + "|".join(re.escape(dim).replace("_", "[ _]") for dim in dimensions) + r")\b", re.IGNORECASE
    )


def _masked(text: str, start: int, end: int, candidates: list[_Candidate]) -> str:
    """``text[start:end]`` with the objects in it blanked: the prose between and after them.
    ``candidates`` are in order and do not overlap; only those in the range are visited."""
    first = (
        bisect.bisect_left([c.start for c in candidates], start)
        if len(candidates) < 64
        else bisect.bisect_left(_Starts(candidates), start)
    )
    parts, position = [], start
    for c in candidates[first:]:
        if c.end > end:
            break
        parts += [text[position : c.start], " " * (c.end - c.start)]
        position = c.end
    parts.append(text[position:end])
    return "".join(parts)


class _Starts:
    """The candidates' starts as a sequence for bisect, without building a list per call."""

    def __init__(self, candidates: list[_Candidate]) -> None:
        self.candidates = candidates

    def __len__(self) -> int:
        return len(self.candidates)

    def __getitem__(self, index: int) -> int:
        return self.candidates[index].start


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def _last_sentence(lead: str) -> str:
    """The sentence that introduces an object: the last line with words before it, its last sentence."""
    lines = [
        line for line in lead.replace("```json", "").replace("```", "").split("\n") if re.search(r"[A-Za-z]", line)
    ]
    if not lines:
        return ""
    line = re.sub(r"\be\.g\.", "e_g_", lines[-1], flags=re.IGNORECASE)
    return re.split(r"(?<=[.!?])\s+", line.strip())[-1]


# An object introduced by one of these, in the sentence before it, is not the judge's verdict.
_FRAMING = re.compile(
    r"\b(?:for (?:example|instance|comparison)|as an example|by comparison|in comparison|compared (?:to|with)|e_g_"
    r"|hypothetical(?:ly)?|would (?:score|get|receive|earn|look like|be (?:scored|rated)|have (?:scored|got|gotten|"
    r"received))|if (?:the|an|this|that) (?:answer|response)|if it had|had (?:the|this) (?:answer|response)"
    r"|an? (?:perfect|ideal|model|reference-quality|better|worse) (?:answer|response))",
    re.IGNORECASE,
)
# Between two verdicts these mark the later one as the judge's revision of the earlier one.
_REVISION = re.compile(
    r"\b(?:revis(?:ed|ion|ing|e)|correct(?:ed|ion|ing)|updated?|on (?:second|further) thoughts?|on reflection"
    r"|actually|final (?:verdict|answer|scores?|evaluation|assessment|grades?)|let me (?:re-?consider|revise|correct"
    r"|adjust|re-?evaluate)|re-?consider(?:ing|ed)?|re-?read(?:ing)?|re-?evaluat(?:e|ed|ing|ion)|wait\b|scratch that"
    r"|I take (?:that|it) back|instead)",
    re.IGNORECASE,
)
# In prose after the verdict, with a dimension and a number, these change one of its scores.
_CORRECTION = re.compile(
    r"\b(?:should (?:be|have been|get|receive|instead be) (?:an? )?\d|on (?:second|further) thoughts?"
    r"|on reflection|correction|let me (?:revise|correct|adjust|reconsider)|I (?:was|am|'m) too (?:generous|harsh"
    r"|strict|lenient)|scratch that|revis(?:e|ed|ing) (?:the|my|it|that)|(?:lower|raise|change)[sd]? (?:it|the|that|"
    r"my) [a-z ]{0,20}to (?:an? )?\d)",
    re.IGNORECASE,
)
_PROSE_SCALE = re.compile(
    r"\bscale\s+(?:of|from)\s+(\d{1,3})\s*(?:-|\u2013|to)\s*(\d{1,3})\b"
    r"|\b(\d{1,3})\s*(?:-|\u2013|to)\s*(\d{1,3})[- ](?:point\s+)?scale\b",
    re.IGNORECASE,
)
_KEY_SCALE = re.compile(r"\((\d{1,3})\s*(?:-|\u2013|to)\s*(\d{1,3})\)")
_RANGE = re.compile(r"(\d{1,3})\s*(?:-|\u2013|to)\s*(\d{1,3})")
_SCALE_FIELDS = {"scale", "rating_scale", "score_range", "scoring_scale", "score_scale", "range"}
_SCALE_MAX_FIELDS = {"max_score", "scale_max", "out_of", "maximum_score", "max"}
# a list of {criterion: accuracy, score: 4} objects: the field that names the dimension
_LIST_NAME_FIELDS = ("criterion", "dimension", "name", "aspect", "metric", "category")


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
            wrapped += [
                (f"{key}.{inner_key}", inner)
                for inner_key, inner in value.items()
                if isinstance(inner, dict) and any(self._entries(inner).values())
            ]
        if not wrapped:  # a list of {criterion: accuracy, score: 4}: inside a wrapper
            wrapped = [
                (str(key), listed) for key, value in obj.items() if (listed := self._from_list(value)) is not None
            ]
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

    def _from_list(self, value: Any) -> _Object | None:
        """``[{"criterion": "Accuracy", "score": 4}, ...]`` as ``{"Accuracy": {...}, ...}`` (a name given
        twice with different entries is remembered as a conflict), or None for any other value."""
        if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
            return None
        pairs = []
        for item in value:
            named = [v for _, v in _fields(item, _LIST_NAME_FIELDS) if isinstance(v, str)]
            if len(named) != 1 or _dimension_key(named[0], self.dimensions) is None:
                return None
            pairs.append((named[0], item))
        return _object_from_pairs(pairs)

    def _check(self, obj: Any, expected_id: str | None, require_answer_id: bool) -> ParsedVerdict:
        """``obj`` read as a verdict; ``expected_id`` None: any answer id (only the scores are wanted)."""
        listed = self._from_list(obj)
        obj = listed if listed is not None else obj
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
                return ParsedVerdict(
                    None, error=f"ambiguous verdict: {dim} is given more than once, differently ({keys})"
                )
            entries[dim] = entry
        ids = _fields(obj, ("answer_id",)) + (_fields(holder, ("answer_id",)) if holder is not obj else [])
        ids = [
            _ID_PREFIX.sub("", str(value).strip()) for _, value in ids if value not in (None, "")
        ]  # null or "" is no id
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
        written = shown.written_scores(self.dimensions)
        if not all(written.get(dim) for dim in self.dimensions):
            return False  # a verdict holds every dimension: one the answer writes no score for is not copied
        scores = self._check(value, None, False).scores
        if not scores:
            return False
        return all(score in written.get(dim, ()) for dim, score in scores.items())

    def _origin(self, value: Any, source: str, shown: ShownObjects) -> ParsedVerdict | None:
        """Why an object the judge wrote does not count as its own verdict, or None if it may."""
        items = value if isinstance(value, list) else []
        value = self._from_list(value) if isinstance(value, list) else value
        if not isinstance(value, dict):
            return None
        if items and all(_forms(item) & shown.in_answer for item in items if isinstance(item, dict)):
            return ParsedVerdict(None, error="verdict quoted from the judged answer (a forgery), not counted")
        holder, _ = self._scores_object(value)
        candidates = _forms(value) | (_forms(holder) if holder is not None and holder is not value else set())
        if (
            candidates & shown.in_answer
            or (len(source) > 2 and source in shown.answer_text)
            or self._scores_written_in(value, shown)
        ):
            return ParsedVerdict(None, error="verdict quoted from the judged answer (a forgery), not counted")
        if candidates & shown.in_prompt:
            return ParsedVerdict(None, error="verdict copied from the prompt's example, not counted")
        return None

    def parse(
        self, reply: str | None, answer: str, shown: ShownObjects | None = None, require_answer_id: bool = False
    ) -> ParsedVerdict:
        """The judge's verdict in ``reply``, or the reason there is none (the rules: the module docstring).

        ``shown``: the objects the judge was shown (``ShownObjects.of(messages, answer)``); without it
        only the judged answer's objects are known.
        """
        if reply is None or not str(reply).strip():
            return ParsedVerdict(None, error="empty reply")
        text, unclosed = split_reasoning(str(reply))
        text = text[-MAX_REPLY_CHARS:]
        if not text.strip():
            where = (
                f"cut off inside the reasoning: {unclosed} is never closed"
                if unclosed
                else "only reasoning: nothing after its closing tag"
            )
            return ParsedVerdict(None, error=f"no JSON object in reply ({where})")
        shown = shown if shown is not None else ShownObjects.of(None, answer)
        expected = answer_id(answer)
        candidates, failures = self._candidates(text)
        for index, candidate in enumerate(candidates):
            candidate.parsed = (
                self._origin(candidate.value, candidate.source, shown)
                or self._framing(text[candidates[index - 1].end if index else 0 : candidate.start])
                or self._check(candidate.value, expected, require_answer_id)
            )
        declared = self._declared_scale(text, [c.value for c in candidates])
        if declared:
            return ParsedVerdict(
                None,
                error=f"scale {declared} declared (the rubric's is {self.scale_min}-"
                f"{self.scale_max}): scores on another scale are not read",
            )
        strict = [c for c in candidates if not c.loose]
        counting = [c for c in strict if c.parsed.ok] or [c for c in candidates if c.parsed.ok]
        if counting:
            return self._one_verdict(text, counting, candidates, failures)
        return ParsedVerdict(None, error=self._why_none(text, candidates, failures))

    # ------------------------------------------------------------------ finding objects
    def _candidates(self, text: str) -> tuple[list[_Candidate], list[_Failure]]:
        """The outermost objects in ``text`` (strict JSON, then the tolerant reader on the last
        ``_LITERAL_STARTS`` openings JSON could not read) and the openings nothing could read that name
        a dimension (attempted verdicts: their failure is the reason reported)."""
        found = [
            _Candidate(start, start + len(source), value, source, False)
            for start, value, source in _reply_json_spans(text)
        ]
        lows, highs = [c.start for c in found], [c.end for c in found]

        def inside(position: int, starts: list[int], ends: list[int]) -> bool:
            at = bisect.bisect_right(starts, position) - 1
            return at >= 0 and position < ends[at]

        openings = [m.start() for m in _LOOSE_START.finditer(text) if not inside(m.start(), lows, highs)]
        loose: list[_Candidate] = []
        failures: list[_Failure] = []
        covered = -1
        for start in openings[-_LITERAL_STARTS:]:
            if start < covered:
                continue
            reader = _LooseReader(text, start)
            try:
                value, end = reader.read()
            except (_Unreadable, ValueError, RecursionError) as problem:
                end = _balanced_end(text, start)
                cut = isinstance(problem, _Unreadable) and problem.cut_off
                region = text[start : end if end is not None else start + _LITERAL_CHARS]
                if self._names.search(region):
                    failures.append(_Failure(start, end if end is not None else len(text), cut, region))
                    covered = end if end is not None else len(text)
                continue
            loose.append(_Candidate(start, end, value, text[start:end], True, reader.repaired))
            covered = end
        everything = sorted(found + loose, key=lambda c: c.start)
        outermost: list[_Candidate] = []
        for candidate in everything:  # a strict object inside a loosely read one is a part of it
            if outermost and candidate.start < outermost[-1].end:
                continue
            outermost.append(candidate)
        # objects inside an unreadable attempted verdict that name no dimension are its fragments
        kept = [
            c
            for c in outermost
            if not (any(f.start < c.start < f.end for f in failures) and not self._names.search(c.source))
        ]
        return kept, failures

    # ------------------------------------------------------------------ what the judge meant
    @staticmethod
    def _framing(before: str) -> ParsedVerdict | None:
        """An object introduced (in the sentence ``before`` it) as an example, a comparison or a
        hypothetical is not the judge's verdict. The sentence must lead into the object ("would score:",
        "for example, a perfect answer gets "): one that ends first ("for example, it omits X.") does not."""
        lead = _last_sentence(before[-400:])
        if _FRAMING.search(lead) and not re.search(r"[.!?][\s\"'*)]*$", lead):
            return ParsedVerdict(
                None,
                error="verdict given as an example, a comparison or a hypothetical "
                f'("{lead.strip()[:60]}"), not counted',
            )
        return None

    def _one_verdict(
        self, text: str, counting: list[_Candidate], candidates: list[_Candidate], failures: list[_Failure]
    ) -> ParsedVerdict:
        """Several counting verdicts: one marked as a revision ("Revised:", "On second thought", "Final
        verdict:") replaces those before it; the rest must agree (counted once) or none counts."""
        standing = [counting[0]]
        for previous, candidate in itertools.pairwise(counting):
            if _REVISION.search(_masked(text, previous.end, candidate.start, candidates)):
                standing = [candidate]
            else:
                standing.append(candidate)
        distinct = {_canonical(c.parsed.scores) for c in standing}
        if len(distinct) > 1:
            first, other = (
                standing[0].parsed.scores,
                next(c.parsed.scores for c in standing if c.parsed.scores != standing[0].parsed.scores),
            )
            diff = ", ".join(
                f"{dim} {first[dim]} vs {other[dim]}" for dim in self.dimensions if first[dim] != other[dim]
            )
            return ParsedVerdict(None, error=f"two verdicts disagree ({diff}); reply with one JSON object")
        last = standing[-1]
        # what follows the verdict: a revision that is cut off or unusable, or a correction in prose
        tail_start = last.end
        marker = _REVISION.search(_masked(text, tail_start, len(text), candidates))
        if marker:
            after = tail_start + marker.start()
            for failure in failures:
                if failure.start >= after:
                    what = "cut off" if failure.cut_off else "not valid JSON"
                    return ParsedVerdict(
                        None, error=f"verdict withdrawn: its revision is {what}; reply with one JSON object"
                    )
            for candidate in candidates:
                if (
                    candidate.start >= after
                    and not candidate.parsed.ok
                    and self._names.search(candidate.source)
                    and "not counted" not in (candidate.parsed.error or "")
                ):
                    return ParsedVerdict(
                        None, error=f"verdict withdrawn: its revision is unusable ({candidate.parsed.error})"
                    )
        correction = self._prose_correction(_masked(text, tail_start, len(text), candidates))
        if correction:
            return ParsedVerdict(
                None, error=f'verdict corrected in prose afterwards ("{correction[:80]}"); reply with one JSON object'
            )
        echoed = any(c.parsed.id_echoed for c in standing)
        return ParsedVerdict(last.parsed.scores, last.parsed.reasons, id_echoed=echoed)

    def _prose_correction(self, tail: str) -> str | None:
        """A sentence after the verdict that changes one of its scores ("completeness should be 3 rather than 4")."""
        for sentence in _SENTENCE_BREAK.split(tail):
            if _CORRECTION.search(sentence) and self._names.search(sentence) and re.search(r"\b\d\b", sentence):
                return sentence.strip()
        return None

    def _declared_scale(self, text: str, values: list[Any]) -> str | None:
        """A scale other than the rubric's that the reply declares, as "1-10" (or "max 10"), else None."""
        ranges: list[tuple[int | None, int]] = []
        for match in _PROSE_SCALE.finditer(text):
            low, high = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            ranges.append((int(low), int(high)))
        for value in values:
            for obj in _all_dicts(value):
                for key, inner in obj.items():
                    key_text = str(key)
                    in_key = _KEY_SCALE.search(key_text)
                    if in_key:
                        ranges.append((int(in_key.group(1)), int(in_key.group(2))))
                    name = key_text.strip().lower().replace(" ", "_")
                    if name in _SCALE_FIELDS and isinstance(inner, str):
                        written = _RANGE.search(inner)
                        if written:
                            ranges.append((int(written.group(1)), int(written.group(2))))
                    elif name in _SCALE_MAX_FIELDS and isinstance(inner, int) and not isinstance(inner, bool):
                        ranges.append((None, inner))
        for low, high in ranges:
            if high != self.scale_max or (low is not None and low != self.scale_min):
                return f"{low}-{high}" if low is not None else f"with maximum {high}"
        return None

    def _why_none(self, text: str, candidates: list[_Candidate], failures: list[_Failure]) -> str:
        """The reason a reply holds no counting verdict: the last attempt's problem, by position."""
        attempts: list[tuple[int, str]] = [(f.start, f.reason()) for f in failures]
        shaped = [c for c in candidates if isinstance(c.value, (dict, list)) and self._names.search(c.source)]
        attempts += [(c.start, c.parsed.error or "unusable") for c in shaped]
        if attempts:
            reason = max(attempts)[1]
            if "not counted" in reason and not any("not counted" not in r for _, r in attempts):
                framed = [r for _, r in attempts if "example, a comparison or a hypothetical" in r]
                if framed and len(framed) == len(attempts):
                    return "no verdict of the judge's own: " + framed[-1] + "; " + self._no_object_reason(text)
            return reason
        if candidates:  # only objects that name no dimension: {"scores": [4, 3, 5]}
            return candidates[-1].parsed.error or "unusable"
        return self._no_object_reason(text)

    @property
    def _names(self) -> re.Pattern[str]:
        return _dimension_names(self.dimensions)

    def _no_object_reason(self, text: str) -> str:
        """Why a reply holds no object, naming the format where the judge wrote scores another way."""
        names = self._names
        # line by line, each test linear: the reply is the judge's, of any shape
        lines = text.split("\n")
        if any(
            line.lstrip().startswith("|") and line.count("|") >= 2 and names.search(line) and re.search(r"\d", line)
            for line in lines
        ):
            return "no JSON object in reply (the scores are a Markdown table, not the JSON object asked for)"
        label = re.compile(
            names.pattern + r"[^\n]{0,120}?(?:[:=\u2013\u2014-]|\[RESULT\]|\bscore\b)[ \t*]{0,4}\d", re.IGNORECASE
        )
        if any(label.search(line) for line in lines):
            return "no JSON object in reply (the scores are written as text, not the JSON object asked for)"
        if "[RESULT]" in text:
            return "no JSON object in reply (one overall [RESULT] score, not a JSON object with each dimension)"
        return "no JSON object in reply (no verdict found)"
