"""A retrieval corpus: titled sections read from JSON files, split into overlapping token windows.

Layout (the one the EMSQA knowledge base uses): a folder of ``<source>.json`` files, each a JSON
list of pages, each page an object mapping a section title to its text. ``<source>`` (the file
name without ``.json``) is what filtered retrieval selects on.

Chunk ids follow ``<source>_<page>_<section>`` with ``_<window>`` appended when a section has more
than one window, so ids are stable for a given corpus and chunking, and readable in sample logs.
The indexed text of a chunk is ``"<title>. <window text>"``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from medeval_metrics.data import MedevalDataError, file_sha256


@dataclass(frozen=True)
class Chunk:
    id: str
    source: str  # file stem, e.g. "cardiovascular"
    title: str
    text: str

    @property
    def indexed_text(self) -> str:
        return f"{self.title}. {self.text}"


@dataclass(frozen=True)
class CorpusFile:
    source: str
    path: Path
    sha256: str


class WindowTokenizer(Protocol):
    """What chunking needs: text -> token spans, and a way back to text for a window of them."""

    name: str

    def windows(self, text: str, size: int, overlap: int) -> list[str]: ...


_BASIC_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class BasicTokenizer:
    """Words and single punctuation marks (the split BERT's basic tokenizer makes before WordPiece).

    Needs no model files, so bm25 chunking works offline and is deterministic. A window is the
    original text from its first to its last token, so nothing is rewritten. WordPiece splits rare
    words into several pieces, so a 512-token window here holds somewhat more text than a
    512-WordPiece window of the paper's article encoder (set the chunk tokenizer to that encoder's
    name to match the paper's windows exactly).
    """

    name = "basic"

    def windows(self, text: str, size: int, overlap: int) -> list[str]:
        spans = [m.span() for m in _BASIC_TOKEN.finditer(text)]
        return [text[spans[start][0] : spans[end - 1][1]] for start, end in window_bounds(len(spans), size, overlap)]


class HFTokenizer:
    """A Hugging Face tokenizer (the article encoder's): windows of token ids, decoded back to text."""

    def __init__(self, name_or_path: str) -> None:
        from transformers import AutoTokenizer

        self.name = str(name_or_path)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self.name, use_fast=True)
        except OSError as exc:
            raise MedevalDataError(
                f"chunking: cannot load the tokenizer {self.name!r} ({str(exc).splitlines()[0][:200]}). Download it, "
                "give a local folder as rag_article_encoder, or retrieve with rag_retriever bm25."
            ) from exc

    def windows(self, text: str, size: int, overlap: int) -> list[str]:
        ids = self._tokenizer.encode(text, add_special_tokens=False)
        pieces = [
            self._tokenizer.decode(ids[start:end], skip_special_tokens=True, clean_up_tokenization_spaces=True)
            for start, end in window_bounds(len(ids), size, overlap)
        ]
        return [piece for piece in pieces if piece.strip()]


def window_bounds(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) of windows of ``size`` tokens stepping by ``size - overlap``; the last one ends at
    the text's end (no window lies wholly inside the one before it)."""
    if size <= 0 or not 0 <= overlap < size:
        raise MedevalDataError(
            f"chunking: window {size} tokens with overlap {overlap} is not possible; "
            "the size must be positive and the overlap smaller than the size (defaults 512 and 128)."
        )
    bounds, start, step = [], 0, size - overlap
    while start < n_tokens:
        end = min(start + size, n_tokens)
        bounds.append((start, end))
        if end == n_tokens:
            break
        start += step
    return bounds


def chunk_tokenizer(name: str | None) -> WindowTokenizer:
    return BasicTokenizer() if name in (None, "", "basic") else HFTokenizer(name)


def corpus_files(folder: Path, sources: Sequence[str] | None, what: str, fix: str) -> list[CorpusFile]:
    """The corpus's JSON files in name order (``sources``: only those stems, which must exist)."""
    folder = Path(folder)
    if folder.is_file():
        paths = [folder]
    else:
        paths = sorted(p for p in folder.glob("*.json") if p.is_file())
    if not paths:
        raise MedevalDataError(f"{folder}: no .json files of {what} here. {fix}")
    if sources is not None:
        by_stem = {p.stem: p for p in paths}
        paths = [by_stem[s] for s in sorted(sources) if s in by_stem]
    return [CorpusFile(p.stem, p, file_sha256(p)) for p in paths]


def corpus_version(files: Iterable[CorpusFile]) -> str:
    """One hash for the corpus content: names and bytes of every file."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.source):
        digest.update(f"{f.source}\0{f.sha256}\n".encode())
    return digest.hexdigest()


def read_pages(file: CorpusFile, what: str, fix: str) -> list[dict[str, str]]:
    """A file's pages, validated: a JSON list of objects mapping section titles to text."""
    try:
        data = json.loads(file.path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise MedevalDataError(f"{file.path}: {what} is not UTF-8 text (byte {exc.start}). {fix}") from exc
    except json.JSONDecodeError as exc:
        raise MedevalDataError(
            f"{file.path}: {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            f"the file may be truncated. {fix}"
        ) from exc
    if not isinstance(data, list):
        raise MedevalDataError(
            f"{file.path}: {what} is a JSON {type(data).__name__}; expected a list of pages, each an object "
            f"mapping a section title to its text. {fix}"
        )
    for page_index, page in enumerate(data):
        if not isinstance(page, dict):
            raise MedevalDataError(
                f"{file.path}: page {page_index} of {what} is a {type(page).__name__}, not an object mapping "
                f"section titles to text. {fix}"
            )
        for title, text in page.items():
            if not isinstance(text, str):
                raise MedevalDataError(
                    f"{file.path}: page {page_index}, section {title[:60]!r} of {what} holds a "
                    f"{type(text).__name__}, not text. {fix}"
                )
    return data


def chunk_corpus(
    files: Sequence[CorpusFile], tokenizer: WindowTokenizer, size: int, overlap: int, what: str, fix: str
) -> list[Chunk]:
    """Every section of every file as windows; sections with no text give no chunk."""
    chunks: list[Chunk] = []
    for file in files:
        for page_index, page in enumerate(read_pages(file, what, fix)):
            for section_index, (title, text) in enumerate(page.items()):
                pieces = tokenizer.windows(text, size, overlap) if text.strip() else []
                base = f"{file.source}_{page_index}_{section_index}"
                for piece_index, piece in enumerate(pieces):
                    chunk_id = base if len(pieces) == 1 else f"{base}_{piece_index}"
                    chunks.append(Chunk(chunk_id, file.source, str(title).strip(), piece))
    if not chunks:
        raise MedevalDataError(f"{', '.join(str(f.path) for f in files)}: {what} holds no text to retrieve. {fix}")
    return chunks
