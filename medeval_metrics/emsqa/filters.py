"""lm-eval filters of the generative EMSQA tasks, lm-eval's two readings (as gsm8k's): each response becomes the
letters it answers, or ``None``.

``strict-match`` (``StrictAnswerFilter``) reads only a reply in the format the prompt asks for (``strict.py``);
``flexible-extract`` (``ExtractAnswerFilter``) reads such a reply the same way and every other reply with the
heuristic reader (``extract.py``). The task YAML names the format: ``answer_format: list`` or ``object``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from medeval_metrics.emsqa.extract import extract_answer
from medeval_metrics.emsqa.strict import FORMATS, read_strict


def _format(answer_format: Any, name: str = "answer_format") -> str:
    if answer_format not in FORMATS:
        raise ValueError(
            f"EMSQA answer filter: {name} is {answer_format!r}; set it to 'list' (a JSON list of letters) or"
            " 'object' (a final {\"answer\": [...]} line) in the task YAML's filter_list"
        )
    return answer_format


class _Formats:
    """The format a filter reads: the task's (``answer_format``), or, for an item shown the authors' RAG prompt,
    the one that prompt asks for (``authors_format``: their Expert-CoT RAG template asks for a JSON list)."""

    def __init__(self, answer_format: str = "list", authors_format: str | None = None, **unknown: Any) -> None:
        if unknown:
            raise ValueError(
                f"EMSQA answer filter: unknown setting {', '.join(map(repr, unknown))} (known: answer_format,"
                " authors_format)"
            )
        self.answer_format = _format(answer_format)
        self.authors_format = None if authors_format is None else _format(authors_format, "authors_format")

    def of(self, doc: dict[str, Any]) -> str:
        # rag.py shows the authors' wording only where rag_prompt is "authors" and the item has its documents block
        if self.authors_format and doc.get("rag_prompt") == "authors" and doc.get("rag_context") is not None:
            return self.authors_format
        return self.answer_format


def read_flexible(text: Any, doc: dict[str, Any], answer_format: str) -> list[str] | None:
    """The flexible reading of one reply: the strict one where the reply is in format (an explicit ``[]``
    included), else the heuristic reader's."""
    strict = read_strict(text, answer_format, doc["letters"])
    if strict is not None:
        return strict
    return extract_answer(text, doc["letters"], doc.get("options"), doc.get("question"))


class StrictAnswerFilter:
    """lm-eval filter ``strict-match``: the letters of a reply in the requested format, else ``None``."""

    def __init__(self, **settings: Any) -> None:
        self.formats = _Formats(**settings)

    def apply(self, resps: Iterable[Sequence[str]], docs: Iterable[dict[str, Any]]) -> list[list[list[str] | None]]:
        return [
            [read_strict(r, self.formats.of(doc), doc["letters"]) for r in responses]
            for responses, doc in zip(resps, docs)
        ]


class ExtractAnswerFilter:
    """lm-eval filter ``flexible-extract``: the strict reading where there is one (so a reply in the requested
    format scores the same under both), else the heuristic reader's letters, else ``None``; the opt-in
    extraction model then reads what is still ``None``, except replies the reader found to commit to nothing."""

    def __init__(self, **settings: Any) -> None:
        self.formats = _Formats(**settings)

    def apply(self, resps: Iterable[Sequence[str]], docs: Iterable[dict[str, Any]]) -> list[list[list[str] | None]]:
        resps, docs = list(resps), list(docs)
        answers = [
            [read_flexible(r, doc, self.formats.of(doc)) for r in responses] for responses, doc in zip(resps, docs)
        ]
        if any(isinstance(doc, dict) and doc.get("extraction_model") for doc in docs):
            from medeval_metrics.emsqa import fallback  # opt-in: outputs the rules cannot read go to a model

            answers = fallback.fill_in(answers, resps, docs)
        return answers
