"""How an EMSQA retrieval task's documents were retrieved, as ``medeval report`` prints it (the spec's
``Reporting.task_settings``).

A RAG task records its retrieval in the results (``configs.<task>.metadata.rag``, written by ``emsqa/rag.py``).
That record also holds folder paths (the knowledge base, the cache, the files read and saved); only the fields
below leave it, and a file by its name alone. Light on purpose: the spec imports it, and ``medeval list`` imports
every spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from medeval_metrics.data import MedevalDataError

MODE_WORDS = {
    "global": "global",
    "filter_then_retrieve": "filter-then-retrieve",
    "retrieve_then_filter": "retrieve-then-filter",
}
PROMPT_WORDS = {"pack": "the pack's", "authors": "the authors'"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # org/name: a model id, not a place on disk


def task_settings(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"retrieval": text}`` for a task whose results config records a retrieval, else {}; e.g.
    ``retriever: external: my-index; k: 2; mode: global; retrievals file: mine.jsonl; prompt: the pack's;
    knowledge: sha256 7fdd2406c2a3; chunks: 512 tokens, overlap 128``."""
    metadata = config.get("metadata")
    rag = metadata.get("rag") if isinstance(metadata, Mapping) else None
    if rag is None:
        return {}
    _need(isinstance(rag, Mapping), "metadata.rag", rag, "an object")
    settings = rag.get("settings")
    _need(isinstance(settings, Mapping), "metadata.rag.settings", settings, "an object")
    retriever, mode, k = settings.get("retriever"), settings.get("mode"), settings.get("k")
    _need(isinstance(retriever, str) and retriever.strip(), "metadata.rag.settings.retriever", retriever, "a name")
    _need(
        isinstance(mode, str) and mode in MODE_WORDS,
        "metadata.rag.settings.mode",
        mode,
        f"one of {', '.join(MODE_WORDS)}",
    )
    _need(_whole(k) and k >= 1, "metadata.rag.settings.k", k, "a whole number of at least 1")

    external = rag.get("external_retriever")
    _need(isinstance(external, (str, type(None))), "metadata.rag.external_retriever", external, "a name or null")
    parts = [
        f"retriever: {_retriever(retriever, external, settings)}",
        f"k: {k}",
        f"mode: {_mode(mode, rag, external is None)}",
    ]
    read_from = rag.get("retrievals_from")
    _need(isinstance(read_from, (str, type(None))), "metadata.rag.retrievals_from", read_from, "a file or null")
    if read_from:
        # an external file's documents are shown as given; the pack's own file holds what an earlier run retrieved
        whose = "" if external is not None else " (saved by an earlier run of the pack, not retrieved again)"
        parts.append(f"retrievals file: {_file_name(read_from)}{whose}")
    prompt = (rag.get("shown") or {}).get("prompt") if isinstance(rag.get("shown"), Mapping) else None
    if prompt is not None:  # recorded since the authors' prompt became a choice
        _need(
            isinstance(prompt, str) and prompt in PROMPT_WORDS,
            "metadata.rag.shown.prompt",
            prompt,
            f"one of {', '.join(PROMPT_WORDS)}",
        )
        parts.append(f"prompt: {PROMPT_WORDS[prompt]}")
    parts += _knowledge(rag, settings)
    return {"retrieval": "; ".join(parts)}


def _retriever(retriever: str, external: str | None, settings: Mapping[str, Any]) -> str:
    if external is not None:
        return f"external: {' '.join(external.split())}"  # as the file's header names it, on one line
    if retriever == "medcpt":
        encoders = [settings.get("query_encoder"), settings.get("article_encoder")]
        named = [_model_name(e) for e in encoders if isinstance(e, str) and e.strip()]
        return f"dense ({' + '.join(named)})" if named else "dense"
    return " ".join(retriever.split())


def _mode(mode: str, rag: Mapping[str, Any], searched_by_the_pack: bool) -> str:
    text = MODE_WORDS[mode]
    if mode == "global" or not searched_by_the_pack:  # an external file's documents are its retriever's, as given
        return text
    details = []
    pool = (rag.get("settings") or {}).get("pool_factor")
    if mode == "retrieve_then_filter" and _whole(pool):
        details.append(f"the top {pool} x k searched")
    areas = rag.get("areas")
    if areas is not None:
        _need(isinstance(areas, str), "metadata.rag.areas", areas, '"gold" or a file')
        own = str(areas).strip() == "gold"
        details.append("the items' own subject areas" if own else f"subject areas predicted in {_file_name(areas)}")
    return f"{text} ({', '.join(details)})" if details else text


def _knowledge(rag: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    parts = []
    digest = rag.get("corpus_version")
    if isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{12,64}", digest):
        missing = rag.get("missing_files")
        lacking = ""
        if isinstance(missing, list) and missing and all(isinstance(m, str) for m in missing):
            lacking = f", lacking {', '.join(_file_name(m) + '.json' for m in missing)}"
        parts.append(f"knowledge: sha256 {digest[:12]}{lacking}")
    tokens, overlap = settings.get("chunk_tokens"), settings.get("chunk_overlap")
    if _whole(tokens) and _whole(overlap):
        parts.append(f"chunks: {tokens} tokens, overlap {overlap}")
    return parts


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _file_name(path: str) -> str:
    """A file by its name alone (its folder is private), whichever separator wrote it."""
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1] or "?"


def _model_name(name: str) -> str:
    """An encoder by its model id; a local folder by its name alone."""
    name = name.strip()
    local = (
        name.startswith(("/", ".", "~", "\\"))
        or bool(re.match(r"^[A-Za-z]:[\\/]", name))
        or (bool(re.search(r"[\\/]", name)) and not _HUB_ID.match(name))
    )
    return f"{_file_name(name)} (local)" if local else name


def _kind(value: Any) -> str:
    """A value's JSON kind: an error names it, never the value (a malformed field may hold a path)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return "empty text" if not value.strip() else "text"
    return "an object" if isinstance(value, Mapping) else "a list" if isinstance(value, list) else "another value"


def _need(ok: Any, field: str, value: Any, expected: str) -> None:
    if not ok:
        raise MedevalDataError(
            f"'{field}' is {_kind(value)}, not {expected} as the EMSQA retrieval tasks write it; the results file "
            "was edited or written by another version. Restore it, or run the evaluation again."
        )
