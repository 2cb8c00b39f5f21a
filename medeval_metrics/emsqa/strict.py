"""The strict reading of an EMSQA reply: the answer only where the reply is in the format the prompt asks for.

Two formats, one per prompt family (``prompts.py``):

- ``list`` (zero-/few-shot): the reply *is* a JSON list of option letters, ``["b"]`` or ``["a", "c"]``;
- ``object`` (CoT, Expert-CoT, RAG): the reply *ends with* a JSON object on its own line whose ``answer`` is
  such a list or one letter (the authors' answer field allows both), ``{"answer": ["b"]}``.

Allowed around it and nothing else: surrounding white space, a markdown code fence (around the whole reply,
or around the final object), a closed reasoning block (``<think>...</think>``). Letters may be upper case;
letters that are no option stay (wrong picks, counted by ``invalid_letter``). Anything else is ``None``: not
in the requested format, whatever it says.
This is lm-eval's ``strict-match`` convention (gsm8k); ``extract.py`` is the flexible reading.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from medeval_metrics.emsqa.reasoning import strip_reasoning

FORMATS = ("list", "object")
# the instruction lines that ask for each format, which the prompts end with (prompts.py; the flexible reader knows
# their echo, extract.py)
LIST_INSTRUCTION = (
    "One or more options may be correct. Reply with a JSON list of the lowercase letters of all correct options, "
    'e.g. ["b"] or ["a", "c"].'
)
COT_INSTRUCTION = (
    "One or more options may be correct. Think step by step, then finish with the final answer as a JSON object on "
    'its own line, e.g. {"answer": ["b"]} or {"answer": ["a", "c"]}.'
)
RUN_PAST_OPTIONS = 2  # a run through the alphabet this many letters past the options is counting (extract.py too)
_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)
_FINAL_FENCE = re.compile(r"(?:\A|\n)[ \t]*```[A-Za-z]*[ \t]*\n(?P<body>[^`]*?)\n?[ \t]*```\Z")
_DECODER = json.JSONDecoder()


class FormatRead(list):
    """Letters read from a reply in the requested format (a list like any answer; ``scoring`` counts it as
    ``requested_format``)."""

    in_format = True


def _letters(value: Any) -> list[str] | None:
    """Sorted lower-case letters of a JSON answer value: a list of one-letter strings, or one such string."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(
        isinstance(item, str) and len(item) == 1 and item.isascii() and item.isalpha() for item in items
    ):
        return None
    return sorted({item.lower() for item in items})


def _unwrapped(text: str) -> str:
    body = strip_reasoning(text).strip()
    fenced = _FENCE.match(body)
    return fenced.group("body").strip() if fenced else body


def _final_object(body: str) -> Any:
    """The JSON object the text ends with, where it starts a line; ``None`` otherwise."""
    if not body.endswith("}"):
        return None
    start = len(body)
    for _ in range(64):  # nested braces in a long reasoning field: a few dozen starts at most
        start = body.rfind("{", 0, start)
        if start < 0:
            return None
        if body[:start].rstrip(" \t").endswith("\n") or not body[:start].strip():
            try:
                value, end = _DECODER.raw_decode(body, start)
            except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
                continue
            if end == len(body) and isinstance(value, dict):
                return value
    return None


def _counting(letters: list[str], options: int) -> bool:
    """``["a", "b", ..., "j"]``: the alphabet run past the item's options is a model counting, not choosing (the
    flexible reader's rule too, so a reply reads the same under both)."""
    return len(letters) >= options + RUN_PAST_OPTIONS and letters == [chr(ord("a") + i) for i in range(len(letters))]


def read_strict(text: Any, answer_format: str, valid_letters: Sequence[str] | None = None) -> FormatRead | None:
    """The letters of a reply in ``answer_format`` (``"list"`` or ``"object"``), or ``None``. With the item's
    ``valid_letters``, a list counting through the alphabet past them is no answer."""
    if answer_format not in FORMATS:
        raise ValueError(f"answer_format must be one of {', '.join(FORMATS)}, not {answer_format!r}")
    if not isinstance(text, str) or not text.strip():
        return None
    body = _unwrapped(text)
    if answer_format == "list":
        if not (body.startswith("[") and body.endswith("]")):
            return None
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
            return None
        letters = _letters(value) if isinstance(value, list) else None
    else:
        fenced = _FINAL_FENCE.search(body)  # reasoning, then the final object in a code block of its own
        found = _final_object(fenced.group("body").strip() if fenced else body)
        letters = _letters(found["answer"]) if isinstance(found, dict) and "answer" in found else None
    if letters is None or (valid_letters is not None and _counting(letters, len(valid_letters))):
        return None
    return FormatRead(letters)
