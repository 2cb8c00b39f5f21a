"""emrQA text helpers shared by preparation and scoring: collapsed matching, locating spans, logical forms."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any


def as_list(value: Any) -> list[Any]:
    """A list as itself, anything else as a one-item list (upstream fields hold either)."""
    return list(value) if isinstance(value, list) else [value]


def collapse(text: str) -> str:
    """Lower-cased, whitespace runs as one space, stripped: for matching and strict EM."""
    # str.split() splits on exactly the characters re's \s matches in str patterns, and is several times faster.
    return " ".join(text.lower().split())


class NoteIndex:
    """A note in collapsed form with a map back to original character offsets, to locate spans."""

    def __init__(self, note: str) -> None:
        chars: list[str] = []
        origin: list[int] = []
        previous_space = True  # drops leading whitespace
        for index, ch in enumerate(note):
            if ch.isspace():
                if not previous_space:
                    chars.append(" ")
                    origin.append(index)
                previous_space = True
                continue
            previous_space = False
            for lowered in ch.lower():  # a few characters lower-case to two
                chars.append(lowered)
                origin.append(index)
        self.text = "".join(chars)
        self.origin = origin
        self.length = len(note)

    def locate(self, span: str, near: int) -> tuple[int, int] | None:
        """(start, end) in the original note of the occurrence of ``span`` nearest ``near``."""
        needle = collapse(span)
        if not needle:
            return None
        best: tuple[int, int] | None = None
        position = self.text.find(needle)
        while position != -1:
            start = self.origin[position]
            end = self.origin[position + len(needle) - 1] + 1
            if best is None or abs(start - near) < abs(best[0] - near):
                best = (start, end)
            if start > near:  # later occurrences are only farther away
                break
            position = self.text.find(needle, position + 1)
        return best


@lru_cache(maxsize=64)
def note_index(note: str) -> NoteIndex:
    return NoteIndex(note)


# --- logical forms ---------------------------------------------------------------------------------

_SLOT = re.compile(r"\|[^|]*\|")


_STRUCTURE = "[]{}(),=<>"


def normalise_lf(text: str) -> str:
    """Whitespace-normalised logical form: runs collapsed, none next to brackets or commas."""
    # After collapsing, every whitespace run is one space, so dropping " c" and "c " for each structure
    # character removes exactly the spaces next to one: linear (1 MB of "{" was ~1 s with a regex that
    # built a replacement per bracket).
    text = " ".join(str(text).split())
    for char in _STRUCTURE:
        if char in text:
            text = text.replace(" " + char, char).replace(char + " ", char)
    return text


# A slot value holds no brackets, so a slot cannot swallow structure (e.g. a repeated sub-form).
_SLOT_VALUE = r"[^()\[\]{}|]+?"


@lru_cache(maxsize=4096)
def template_pattern(lf_template: str, any_slot_value: bool = False) -> re.Pattern[str]:
    """A regex matching any logical form with the template's structure (slots filled with any value).

    ``any_slot_value`` also lets slot values hold brackets (for reading files, not for scoring).
    """
    pieces = _SLOT.split(normalise_lf(lf_template))
    slot = ".+?" if any_slot_value else _SLOT_VALUE
    return re.compile(slot.join(re.escape(piece) for piece in pieces), re.DOTALL)
