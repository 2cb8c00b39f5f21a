"""A reply's reasoning blocks, which are not its answer (read by the extraction rules and the opt-in model fallback)."""

from __future__ import annotations

import re

_THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Drop ``<think>...</think>`` blocks (an unclosed one runs to the end) and any text before a
    stray ``</think>`` (chat templates that open the block in the prompt)."""
    if "</think>" in text.lower() and "<think>" not in text.lower():
        # positions from a regex on the text itself: lower() can lengthen it ("İ" -> "i̇")
        last_close = None
        for last_close in _THINK_CLOSE.finditer(text):
            pass
        text = text[last_close.end() :] if last_close else text
    return _THINK_BLOCK.sub(" ", text)
