"""A searchable corpus (chunks + retriever, from the on-disk cache) and the three retrieval modes.

Modes (as in the EMSQA authors' retriever, code/EMSRAG/retrieval.py):

- ``global``: the top k chunks of the whole corpus;
- ``filter_then_retrieve``: the top k within each of the item's sources, merged by score, top k;
- ``retrieve_then_filter``: the top ``pool_factor * k`` of the whole corpus (10k by default), keeping
  those from the item's sources, up to k (so it can return fewer).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.retrieval.cache import cached_build
from medeval_metrics.emsqa.retrieval.corpus import Chunk, CorpusFile, chunk_corpus, chunk_tokenizer, corpus_version
from medeval_metrics.emsqa.retrieval.retrievers import BM25Retriever, DenseRetriever, load_chunks, save_chunks
from medeval_metrics.files import model_fingerprint

log = logging.getLogger("medeval_metrics.emsqa.retrieval")

MODES = ("global", "filter_then_retrieve", "retrieve_then_filter")
RETRIEVERS = ("bm25", "medcpt")
MEDCPT_QUERY_ENCODER = "ncbi/MedCPT-Query-Encoder"
MEDCPT_ARTICLE_ENCODER = "ncbi/MedCPT-Article-Encoder"


@dataclass(frozen=True)
class RetrievalSettings:
    """Everything that decides what an item retrieves (defaults: the EMSQA authors')."""

    retriever: str = "bm25"  # "bm25", or "medcpt" for dense retrieval with the two encoders below
    mode: str = "global"
    k: int = 32
    chunk_tokens: int = 512
    chunk_overlap: int = 128
    chunk_tokenizer: str | None = None  # None: "basic" for bm25, the article encoder's tokenizer for dense
    query_encoder: str = MEDCPT_QUERY_ENCODER
    article_encoder: str = MEDCPT_ARTICLE_ENCODER
    query_max_tokens: int = 64
    pool_factor: int = 10  # retrieve_then_filter looks at the top pool_factor * k
    batch_size: int = 32
    device: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        problems = []
        if self.retriever not in RETRIEVERS:
            problems.append(f"rag_retriever {self.retriever!r} is not one of {list(RETRIEVERS)}.")
        if self.mode not in MODES:
            problems.append(f"rag_mode {self.mode!r} is not one of {list(MODES)}.")
        if not isinstance(self.k, int) or self.k < 1:
            problems.append(f"rag_k must be a whole number of at least 1, got {self.k!r}.")
        if self.pool_factor < 1:
            problems.append(f"rag_pool_factor must be at least 1, got {self.pool_factor!r}.")
        if problems:
            raise MedevalDataError(" ".join(problems))

    @property
    def tokenizer_name(self) -> str:
        if self.chunk_tokenizer:
            return self.chunk_tokenizer
        return "basic" if self.retriever == "bm25" else self.article_encoder

    def chunking(self) -> dict[str, Any]:
        name = self.tokenizer_name
        return {
            "tokens": self.chunk_tokens,
            "overlap": self.chunk_overlap,
            "tokenizer": name if name == "basic" else model_fingerprint(name, small_files_only=True),
            "text": "title. chunk",
        }

    def record(self) -> dict[str, Any]:
        """The settings as written into the results' config."""
        out = asdict(self)
        out.pop("device")
        out.pop("batch_size")
        if self.retriever == "bm25":
            out.pop("query_encoder"), out.pop("article_encoder"), out.pop("query_max_tokens")
        if self.mode != "retrieve_then_filter":
            out.pop("pool_factor")
        out["chunk_tokenizer"] = self.tokenizer_name
        return out

    def make_retriever(self) -> BM25Retriever | DenseRetriever:
        if self.retriever == "bm25":
            return BM25Retriever()
        return DenseRetriever(
            self.query_encoder,
            self.article_encoder,
            self.query_max_tokens,
            self.chunk_tokens,
            self.batch_size,
            self.device,
        )


def chunks_version(files: Sequence[CorpusFile], settings: RetrievalSettings) -> str:
    """Identifies the chunk set (corpus content + chunking): chunk ids mean the same text under it."""
    blob = json.dumps({"corpus": corpus_version(files), "chunking": settings.chunking()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class KnowledgeIndex:
    chunks: Sequence[Chunk]  # StoredChunks from the cache
    retriever: Any  # None when only the chunks were needed (precomputed retrievals)
    settings: RetrievalSettings
    version: str  # chunks_version
    built: bool  # False when it came from the cache
    seconds: float
    index_folder: Path | None = None  # a cached index not loaded yet: loaded on the first search

    def __post_init__(self) -> None:
        # ids and sources without making every chunk (StoredChunks has them as lists, read only)
        self.chunk_ids: list[str] = getattr(self.chunks, "ids", None) or [c.id for c in self.chunks]
        self.chunk_sources: list[str] = getattr(self.chunks, "sources", None) or [c.source for c in self.chunks]

    # made when first needed (the filtered modes; precomputed retrievals): a --limit run of global
    # retrieval needs neither, and each costs milliseconds over 14,679 chunks
    @functools.cached_property
    def positions_by_source(self) -> dict[str, np.ndarray]:
        by_source: dict[str, list[int]] = {}
        for position, source in enumerate(self.chunk_sources):
            by_source.setdefault(source, []).append(position)
        return {s: np.asarray(p, dtype=np.int64) for s, p in by_source.items()}

    @functools.cached_property
    def position_of(self) -> dict[str, int]:
        return {chunk_id: position for position, chunk_id in enumerate(self.chunk_ids)}

    def retrieve(
        self, queries: Sequence[str], sources: Sequence[Sequence[str]] | None
    ) -> list[list[tuple[int, float]]]:
        """Hits (chunk position, score) per query; ``sources[i]`` limits query i in the filtered modes."""
        settings = self.settings
        mode, k = settings.mode, settings.k
        if mode != "global" and sources is None:
            raise MedevalDataError(f"rag_mode {mode} needs the sources of each item.")
        if k > len(self.chunks):
            raise MedevalDataError(
                f"rag_k={k} is larger than the corpus ({len(self.chunks):,} chunks). Choose a smaller k "
                "(the paper uses 32)."
            )
        if self.index_folder is not None:
            self.retriever.load(self.index_folder)
            self.index_folder = None
        prepared = self.retriever.prepare(list(queries))
        if mode == "global":
            return self.retriever.search(prepared, k)
        if mode == "retrieve_then_filter":
            pool = self.retriever.search(prepared, min(settings.pool_factor * k, len(self.chunks)))
            out = []
            for hits, wanted in zip(pool, sources):
                wanted_set = set(wanted)
                out.append([h for h in hits if self.chunk_sources[h[0]] in wanted_set][:k])  # no chunk text read
            return out
        merged: list[list[tuple[int, float]]] = [[] for _ in queries]
        for source in sorted({s for item in sources for s in item}):
            rows = [i for i, item in enumerate(sources) if source in item]
            subset = prepared[rows] if isinstance(prepared, np.ndarray) else [prepared[i] for i in rows]
            for row, hits in zip(
                rows, self.retriever.search(subset, k, self.positions_by_source.get(source, np.empty(0, np.int64)))
            ):
                merged[row].extend(hits)
        return [sorted(set(hits), key=lambda h: (-h[1], h[0]))[:k] for hits in merged]


CHUNKS_LAYOUT = 2  # 2: chunks.json as columns, the texts' lengths in bytes (1: a list per chunk)


def open_index(
    files: Sequence[CorpusFile],
    settings: RetrievalSettings,
    cache_root: Path,
    what: str,
    fix: str,
    with_retriever: bool = True,
) -> KnowledgeIndex:
    """Chunks and retriever for ``files`` from the cache, building them there first if needed."""
    started = time.perf_counter()
    chunking = settings.chunking()
    base_spec = {"corpus": corpus_version(files), "sources": sorted(f.source for f in files), "chunking": chunking}

    def build_chunks(folder: Path) -> None:
        tokenizer = chunk_tokenizer(settings.tokenizer_name)
        save_chunks(chunk_corpus(files, tokenizer, settings.chunk_tokens, settings.chunk_overlap, what, fix), folder)

    # the chunk files' layout in the chunks' key only: a new layout must not rebuild an index (hours for dense)
    chunk_folder, built = cached_build(
        cache_root, {"kind": "chunks", "layout": CHUNKS_LAYOUT, **base_spec}, build_chunks
    )
    chunks = load_chunks(chunk_folder)
    retriever, pending = None, None
    if with_retriever:
        retriever = settings.make_retriever()

        def build_index(folder: Path) -> None:
            retriever.build(chunks, folder)

        index_folder, index_built = cached_build(
            cache_root, {"kind": "index", **base_spec, "retriever": retriever.spec}, build_index
        )
        if not index_built:
            pending = index_folder  # loaded when first searched
        built = built or index_built
    seconds = time.perf_counter() - started
    log.info(
        "medeval: %s: %d chunks, %s index %s in %.2f s",
        what,
        len(chunks),
        settings.retriever,
        "built" if built else "loaded from cache",
        seconds,
    )
    return KnowledgeIndex(chunks, retriever, settings, chunks_version(files, settings), built, seconds, pending)
