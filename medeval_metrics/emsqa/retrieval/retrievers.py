"""Two retrievers over a list of chunks: ``bm25`` (the ``bm25s`` library) and dense (a query and an
article encoder through transformers, FAISS inner product).

Both answer ``search(prepared_queries, k, allowed)``: for each query, the top ``k`` chunk positions
and scores, best first, among ``allowed`` positions (all when ``None``). Ties go to the lower chunk
position, so results are identical across runs.
"""

from __future__ import annotations

import functools
import itertools
import json
import mmap
import operator
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.retrieval.corpus import Chunk
from medeval_metrics.files import model_fingerprint

Hits = list[tuple[int, float]]


def top_k(scores: np.ndarray, k: int, allowed: np.ndarray | None = None, positive_only: bool = False) -> Hits:
    """Best ``k`` (position, score) pairs, ties broken by lower position."""
    if allowed is None and positive_only:  # bm25 over all chunks: only the few that share a term (half the time)
        positions = np.flatnonzero(scores > 0)
        values = scores[positions]
    else:
        positions = np.arange(scores.shape[0]) if allowed is None else np.asarray(allowed)
        values = scores[positions]
        if positive_only:
            keep = values > 0
            positions, values = positions[keep], values[keep]
    if values.size == 0 or k <= 0:
        return []
    if values.size > k:
        threshold = np.partition(values, values.size - k)[values.size - k]
        keep = values >= threshold
        positions, values = positions[keep], values[keep]
    order = np.lexsort((positions, -values))[:k]
    return [(int(positions[i]), float(values[i])) for i in order]


class BM25Retriever:
    """Okapi BM25 (``bm25s``, Lucene variant) over ``"title. chunk"`` texts; English stopwords removed.

    Chunks that share no term with the query score 0 and are never returned, so an item can get
    fewer than k documents.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._model: Any = None

    @property
    def spec(self) -> dict[str, Any]:
        import bm25s

        return {
            "kind": "bm25",
            "library": f"bm25s {bm25s.__version__}",
            "method": "lucene",
            "k1": self.k1,
            "b": self.b,
            "stopwords": "en",
            "token_pattern": "bm25s default",
        }

    def build(self, chunks: Sequence[Chunk], folder: Path) -> None:
        import bm25s

        self._model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        # tokens as ids with their vocabulary: bm25s then skips mapping 2 million strings (index 1.4 s -> 0.9 s);
        # the same vocabulary and scores as from the strings
        texts = [c.indexed_text for c in chunks]
        tokenized = bm25s.tokenize(texts, stopwords="en", return_ids=True, show_progress=False)
        self._model.index(tokenized, show_progress=False)
        self._model.save(str(folder / "bm25"), show_progress=False)

    def load(self, folder: Path) -> None:
        import bm25s

        # mapped, not read: a --limit run touches a few pages of the 8 MB of scores (load 20 ms -> 11 ms). Kept
        # as plain arrays over the same pages: numpy's memmap subclass made each of a query's slices an object
        # of its own (0.18 ms a query)
        self._model = bm25s.BM25.load(str(folder / "bm25"), show_progress=False, mmap=True)
        scores = self._model.scores
        for name in ("data", "indices", "indptr"):
            if isinstance(scores.get(name), np.memmap):
                scores[name] = scores[name].view(np.ndarray)

    def prepare(self, queries: Sequence[str]) -> list[list[int]]:
        # bm25s.tokenize's own steps without the two progress bars it makes, disabled, per call: a run retrieves
        # per item as lm-eval reaches it, and they were 0.15 of a query's 0.45 ms. The same tokens (tested)
        split, stopwords = _query_tokenizer()
        return [self._model.get_tokens_ids([t for t in split(q.lower()) if t not in stopwords]) for q in queries]

    def search(self, prepared: Sequence[list[int]], k: int, allowed: np.ndarray | None = None) -> list[Hits]:
        n = self._model.scores["num_docs"]
        out = []
        for token_ids in prepared:
            scores = self._model.get_scores_from_ids(token_ids) if token_ids else np.zeros(n, dtype=np.float32)
            out.append(top_k(np.asarray(scores), k, allowed, positive_only=True))
        return out


@functools.cache
def _query_tokenizer() -> tuple[Any, frozenset[str]]:
    """What ``bm25s.tokenize(texts, stopwords="en")`` does to a text, from bm25s's own defaults: lower-case,
    its token pattern, its English stopwords."""
    import inspect
    import re

    import bm25s
    from bm25s.stopwords import STOPWORDS_EN

    pattern = inspect.signature(bm25s.tokenize).parameters["token_pattern"].default
    return re.compile(pattern).findall, frozenset(STOPWORDS_EN)


class DenseRetriever:
    """MedCPT-style dense retrieval: the [CLS] vector of each encoder's last layer (the pooling the
    MedCPT model cards specify), L2-normalised, searched by inner product in a FAISS flat index.

    Queries are cut at ``query_max_tokens`` (64 for MedCPT), articles at ``article_max_tokens``.
    Any pair of BERT-style encoders given by Hub name or local folder works the same way.
    """

    def __init__(
        self,
        query_encoder: str,
        article_encoder: str,
        query_max_tokens: int = 64,
        article_max_tokens: int = 512,
        batch_size: int = 32,
        device: str | None = None,
    ) -> None:
        self.query_encoder, self.article_encoder = str(query_encoder), str(article_encoder)
        self.query_max_tokens, self.article_max_tokens = int(query_max_tokens), int(article_max_tokens)
        self.batch_size = int(batch_size)
        self.device = device
        self._index: Any = None
        self._query_model: Any = None

    @property
    def spec(self) -> dict[str, Any]:
        return {
            "kind": "dense",
            "pooling": "cls",
            "normalized": True,
            "search": "faiss IndexFlatIP",
            "query_encoder": model_fingerprint(self.query_encoder),
            "article_encoder": model_fingerprint(self.article_encoder),
            "query_max_tokens": self.query_max_tokens,
            "article_max_tokens": self.article_max_tokens,
        }

    def _device(self) -> str:
        if self.device:
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def _load_encoder(self, name: str) -> tuple[Any, Any]:
        try:
            from transformers import AutoModel, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(name)
            model = AutoModel.from_pretrained(name).to(self._device()).eval()
        except OSError as exc:
            raise MedevalDataError(
                f"dense retrieval: cannot load the encoder {name!r} ({str(exc).splitlines()[0][:200]}). Download it "
                "(e.g. `huggingface-cli download ncbi/MedCPT-Article-Encoder`) or give a local folder, or use "
                "rag_retriever bm25, or a precomputed-retrievals file (rag_retrievals)."
            ) from exc
        return tokenizer, model

    def encode(self, texts: Sequence[str], tokenizer: Any, model: Any, max_tokens: int) -> np.ndarray:
        import torch

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths share a batch
        out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                encoded = tokenizer(
                    [texts[i] for i in batch], truncation=True, padding=True, max_length=max_tokens, return_tensors="pt"
                ).to(model.device)
                cls = model(**encoded).last_hidden_state[:, 0, :].float()
                out[batch] = torch.nn.functional.normalize(cls, dim=-1).cpu().numpy()
        return out

    def build(self, chunks: Sequence[Chunk], folder: Path) -> None:
        tokenizer, model = self._load_encoder(self.article_encoder)
        embeddings = self.encode([c.indexed_text for c in chunks], tokenizer, model, self.article_max_tokens)
        np.save(folder / "embeddings.npy", embeddings)
        self._index = self._faiss_index(embeddings)

    def load(self, folder: Path) -> None:
        self._index = self._faiss_index(np.load(folder / "embeddings.npy"))

    @staticmethod
    def _faiss_index(embeddings: np.ndarray) -> Any:
        try:
            import faiss
        except ImportError as exc:
            raise MedevalDataError(
                "dense retrieval needs FAISS: `pip install 'medeval-metrics[rag]'` (or faiss-cpu)."
            ) from exc
        index = faiss.IndexFlatIP(embeddings.shape[1])
        index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
        return index

    def prepare(self, queries: Sequence[str]) -> np.ndarray:
        if self._query_model is None:
            self._query_model = self._load_encoder(self.query_encoder)
        tokenizer, model = self._query_model
        return self.encode(list(queries), tokenizer, model, self.query_max_tokens)

    def search(self, prepared: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[Hits]:
        import faiss

        if len(prepared) == 0:
            return []
        params = None
        limit = self._index.ntotal
        if allowed is not None:
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(np.asarray(allowed, dtype=np.int64)))
            limit = len(allowed)
        k = min(k, limit)
        if k <= 0:
            return [[] for _ in range(len(prepared))]
        scores, ids = self._index.search(np.ascontiguousarray(prepared, dtype=np.float32), k, params=params)
        return [
            [(int(i), float(s)) for i, s in zip(row_ids, row_scores) if i >= 0]
            for row_ids, row_scores in zip(ids, scores)
        ]


def save_chunks(chunks: Sequence[Chunk], folder: Path) -> None:
    # Texts as one UTF-8 file plus each one's length in bytes: a run reads only the texts its prompts show. The
    # rest as four columns, not a list per chunk: 14,679 small lists made the first load in a process after
    # a model's, and so the first RAG task's start, pay a full garbage collection (0.3 s of a 3 s run).
    texts = [c.text.encode("utf-8") for c in chunks]
    (folder / "chunks.txt").write_bytes(b"".join(texts))
    columns = {
        "ids": [c.id for c in chunks],
        "sources": [c.source for c in chunks],
        "titles": [c.title for c in chunks],
        "bytes": [len(t) for t in texts],
    }
    (folder / "chunks.json").write_text(json.dumps(columns, ensure_ascii=False), encoding="utf-8")


class StoredChunks(Sequence[Chunk]):
    """The chunks of a cache folder; a chunk's text is read from the texts file when first asked for, so a
    run reads and makes only the chunks its prompts show (not all 14,679, 12 MB)."""

    def __init__(self, folder: Path) -> None:
        columns = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
        self.ids, self.sources, self._titles = columns["ids"], columns["sources"], columns["titles"]
        self._ends = list(itertools.accumulate(columns["bytes"]))
        self._folder = folder
        self._made: dict[int, Chunk] = {}
        self._texts: mmap.mmap | bytes | None = None  # the texts file, mapped when a text is first read

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[Chunk]:
        # every chunk (an index build): the texts file read once, not opened per chunk (0.35 s -> 0.03 s)
        data, start = (self._folder / "chunks.txt").read_bytes(), 0
        for position, end in enumerate(self._ends):
            made = self._made.get(position)
            yield made or Chunk(
                self.ids[position], self.sources[position], self._titles[position], data[start:end].decode("utf-8")
            )
            start = end

    def __getitem__(self, position):  # type: ignore[override]
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        position = operator.index(position)
        if position < 0:
            position += len(self.ids)
        chunk = self._made.get(position)
        if chunk is None:
            if not 0 <= position < len(self.ids):
                raise IndexError(position)
            start = self._ends[position - 1] if position else 0
            if self._texts is None:  # mapped once: opening the file per chunk was 0.05 ms of each chunk shown
                with open(self._folder / "chunks.txt", "rb") as texts:
                    # an empty file (every text empty) cannot be mapped, and has nothing to read
                    empty = os.fstat(texts.fileno()).st_size == 0
                    self._texts = b"" if empty else mmap.mmap(texts.fileno(), 0, access=mmap.ACCESS_READ)
            text = self._texts[start : self._ends[position]].decode("utf-8")
            chunk = Chunk(self.ids[position], self.sources[position], self._titles[position], text)
            self._made[position] = chunk
        return chunk


def load_chunks(folder: Path) -> StoredChunks:
    return StoredChunks(folder)
