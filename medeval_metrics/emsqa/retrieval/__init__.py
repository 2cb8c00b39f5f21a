"""Retrieval for retrieval-augmented tasks: once per item, when a run first reaches it (not per request).

Generic: names no benchmark. ``corpus`` (files of titled sections -> overlapping token windows),
``retrievers`` (bm25 via ``bm25s``; dense with two encoders and FAISS inner product, the ``[rag]``
extra), ``index`` (settings, the three modes, the cached index), ``cache`` (on-disk, keyed by
corpus content + chunking + retriever, one build across processes), ``precomputed`` (retrieval
files written by one run and read by another, or made by another retriever on the same chunks). Whether a prompt with its documents fits the model:
``medeval_metrics.context_fit``.
"""

from medeval_metrics.emsqa.retrieval.cache import cached_build, default_cache_root
from medeval_metrics.emsqa.retrieval.corpus import (
    Chunk,
    CorpusFile,
    chunk_corpus,
    corpus_files,
    corpus_version,
    file_sha256,
)
from medeval_metrics.emsqa.retrieval.index import MODES, KnowledgeIndex, RetrievalSettings, chunks_version, open_index
from medeval_metrics.emsqa.retrieval.precomputed import read_retrievals, write_retrievals

__all__ = [
    "MODES",
    "Chunk",
    "CorpusFile",
    "KnowledgeIndex",
    "RetrievalSettings",
    "cached_build",
    "chunk_corpus",
    "chunks_version",
    "corpus_files",
    "corpus_version",
    "default_cache_root",
    "file_sha256",
    "open_index",
    "read_retrievals",
    "write_retrievals",
]
