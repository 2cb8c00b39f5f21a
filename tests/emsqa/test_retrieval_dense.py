"""Dense (MedCPT-style) retrieval offline: a tiny random BERT pair built on the spot stands in for the
MedCPT query and article encoders, through the same path a user's ``rag_retriever: medcpt`` run
takes (EMSQA loader -> settings -> cache -> transformers encoders -> FAISS inner product).
Marked e2e: it builds models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES
from test_emsqa_rag import make_kb

from medeval_metrics.emsqa.data import load_docs
from medeval_metrics.emsqa.rag import AREA_FILES, add_retrieval

pytestmark = pytest.mark.e2e
SYNTHETIC = FIXTURES / "emsqa_synthetic.json"


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    from medeval_metrics.testing.tiny_encoder import build_tiny_encoder

    root = tmp_path_factory.mktemp("tiny-encoders")
    return build_tiny_encoder(root / "query", seed=1), build_tiny_encoder(root / "article", seed=2)


def dense_metadata(tmp_path, encoders, **extra):
    items = json.loads(SYNTHETIC.read_text())
    query, article = encoders
    return {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", items)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_retriever": "medcpt",
        "rag_query_encoder": str(query),
        "rag_article_encoder": str(article),
        "rag_k": 4,
        **extra,
    }


def cls_embeddings(folder, texts, max_tokens):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model(**tokenizer(texts, truncation=True, max_length=max_tokens, padding=True, return_tensors="pt"))
    vectors = out.last_hidden_state[:, 0, :].numpy()
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_dense_scores_are_cls_inner_products_of_the_two_encoders(tmp_path, encoders):
    from medeval_metrics.emsqa.retrieval.retrievers import load_chunks

    docs = load_docs(SYNTHETIC, "synthetic")
    record = add_retrieval(docs, dense_metadata(tmp_path, encoders))
    assert record["settings"]["retriever"] == "medcpt"
    assert record["settings"]["query_encoder"] == str(encoders[0])
    assert record["settings"]["chunk_tokenizer"] == str(encoders[1])  # chunked with the article encoder's tokenizer
    chunk_folder = next(p.parent for p in (tmp_path / "cache").rglob("chunks.json"))
    chunks = {c.id: c for c in load_chunks(chunk_folder)}
    # Recompute item 2's scores by hand: [CLS] of the last layer, L2-normalised, inner product.
    hits = docs[2]["rag_chunks"]
    assert len(hits) == 4
    query = cls_embeddings(encoders[0], [docs[2]["question"]], 64)[0]
    articles = cls_embeddings(encoders[1], [chunks[h["id"]].indexed_text for h in hits], 512)
    assert [h["score"] for h in hits] == pytest.approx(list(articles @ query), abs=1e-5)
    every = cls_embeddings(encoders[1], [c.indexed_text for c in chunks.values()], 512) @ query
    assert hits[0]["score"] == pytest.approx(float(every.max()), abs=1e-5)  # the best of all chunks comes first


def test_dense_filtered_mode_and_cache_reuse(tmp_path, encoders, monkeypatch):
    metadata = dense_metadata(tmp_path, encoders, rag_mode="filter_then_retrieve")
    docs = load_docs(SYNTHETIC, "synthetic")
    add_retrieval(docs, metadata)
    for doc in docs:
        wanted = {AREA_FILES[a] for a in doc["category"]}
        assert doc["rag_chunks"] and {c["source"] for c in doc["rag_chunks"]} <= wanted
    expected = [d["rag_chunks"] for d in docs]

    def no_embedding(*args, **kwargs):
        raise AssertionError("articles embedded again although cached")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.DenseRetriever.build", no_embedding)
    again = load_docs(SYNTHETIC, "synthetic")
    record = add_retrieval(again, metadata)
    assert record["index_from_cache"] and [d["rag_chunks"] for d in again] == expected


def test_same_encoder_finds_a_chunk_from_its_own_text(tmp_path, encoders):
    # With one encoder on both sides, a query equal to a chunk's indexed text scores 1.0 against it.
    from medeval_metrics.emsqa.rag import knowledge_files
    from medeval_metrics.emsqa.retrieval import RetrievalSettings, open_index

    metadata = dense_metadata(tmp_path, encoders)
    files, _ = knowledge_files(metadata)
    settings = RetrievalSettings(
        retriever="medcpt",
        query_encoder=str(encoders[1]),
        article_encoder=str(encoders[1]),
        query_max_tokens=512,
        k=3,
        device="cpu",
    )
    index = open_index(files, settings, tmp_path / "cache2", "kb", "fix")
    target = index.chunks[7]
    (position, score), *_ = index.retrieve([target.indexed_text], None)[0]
    assert position == 7 and score == pytest.approx(1.0, abs=1e-5)


def test_missing_encoder_is_a_clear_error(tmp_path, encoders):
    from medeval_metrics.data import MedevalDataError

    # the article encoder chunks the knowledge base too: its tokenizer is the first thing that cannot load
    metadata = dense_metadata(tmp_path, encoders, rag_article_encoder=str(tmp_path / "no-such-encoder"))
    with pytest.raises(MedevalDataError, match="cannot load the tokenizer .*no-such-encoder.*rag_retriever bm25"):
        add_retrieval(load_docs(SYNTHETIC, "synthetic"), metadata)
