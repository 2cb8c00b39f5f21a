"""lm-eval filters of the generative EMSQA tasks: each response becomes the letters it answers, or ``None``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from medeval_metrics.emsqa.extract import extract_answer


class ExtractAnswerFilter:
    """lm-eval filter: each response becomes the sorted list of letters it answers, or ``None``.

    Instantiated by lm-eval's FilterEnsemble (``function: !function medeval_metrics.emsqa.ExtractAnswerFilter``).
    """

    def __init__(self, **kwargs: Any) -> None:
        pass

    def apply(self, resps: Iterable[Sequence[str]], docs: Iterable[dict[str, Any]]) -> list[list[list[str] | None]]:
        resps, docs = list(resps), list(docs)
        answers = [
            [extract_answer(r, doc["letters"], doc.get("options"), doc.get("question")) for r in responses]
            for responses, doc in zip(resps, docs)
        ]
        if any(isinstance(doc, dict) and doc.get("extraction_model") for doc in docs):
            from medeval_metrics.emsqa import fallback  # opt-in: outputs the rules cannot read go to a model

            answers = fallback.fill_in(answers, resps, docs)
        return answers
