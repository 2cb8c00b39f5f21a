"""Dense retrieval ranks, checked by hand: with the bag-of-words encoder (``testing.bow_encoder``) a
query-chunk score is the cosine of their word counts over the encoder's vocabulary, so every rank and
score in the table below was worked out on paper. A wrong order, a lost chunk or a filter that lets
another file through fails here (the tiny random encoder scores every pair 0.99999-1.0)."""

from __future__ import annotations

import json
import math

import pytest

from medeval_metrics.emsqa.retrieval import RetrievalSettings, corpus_files, open_index
from medeval_metrics.testing.bow_encoder import build_bow_encoder

pytestmark = pytest.mark.e2e  # loads an encoder

VOCABULARY = ["oxygen", "aspirin", "chest", "pain", "airway", "burns", "splint", "glucose", "fracture", "infant"]
# file -> sections; the indexed text is "title. text" and only vocabulary words count:
KNOWLEDGE = {
    "cardiovascular": {
        "Chest pain": "give aspirin and oxygen",  # chest pain aspirin oxygen: |c| = 2
        "Angina": "chest pain chest pain",
    },  # chest 2, pain 2: |c| = sqrt 8
    "trauma": {
        "Fracture": "splint the fracture",  # fracture 2, splint 1: |c| = sqrt 5
        "Burns": "burns need oxygen",
    },  # burns 2, oxygen 1: |c| = sqrt 5
    "pediatrics": {"Infant airway": "infant airway oxygen"},  # infant 2, airway 2, oxygen 1: |c| = 3
}
CHEST, ANGINA, FRACTURE, BURNS, INFANT = (
    "cardiovascular_0_0",
    "cardiovascular_0_1",
    "trauma_0_0",
    "trauma_0_1",
    "pediatrics_0_0",
)
S3, S5, S8 = math.sqrt(3), math.sqrt(5), math.sqrt(8)

# query, sources (None: global), k -> expected (chunk id, score) best first, by hand
RANKS = [
    ("chest pain and aspirin", None, 2, [(CHEST, 3 / (S3 * 2)), (ANGINA, 4 / (S3 * S8))]),  # 0.866 > 0.816
    ("oxygen", None, 3, [(CHEST, 1 / 2), (BURNS, 1 / S5), (INFANT, 1 / 3)]),  # 0.5 > 0.447 > 0.333
    ("infant airway fracture", None, 2, [(INFANT, 4 / (S3 * 3)), (FRACTURE, 2 / (S3 * S5))]),  # 0.770 > 0.516
    (
        "burns oxygen splint",
        None,
        4,
        [(BURNS, 3 / (S3 * S5)), (CHEST, 1 / (S3 * 2)), (FRACTURE, 1 / (S3 * S5)), (INFANT, 1 / (S3 * 3))],
    ),
    # filter then retrieve: only trauma's chunks, the zero-score one last
    ("infant airway fracture", ["trauma"], 2, [(FRACTURE, 2 / (S3 * S5)), (BURNS, 0.0)]),
    # two files: top k of each, merged by score
    (
        "burns oxygen splint",
        ["pediatrics", "trauma"],
        3,
        [(BURNS, 3 / (S3 * S5)), (FRACTURE, 1 / (S3 * S5)), (INFANT, 1 / (S3 * 3))],
    ),
]


@pytest.fixture(scope="module")
def knowledge(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kb")
    for stem, sections in KNOWLEDGE.items():
        (folder / f"{stem}.json").write_text(json.dumps([sections]), encoding="utf-8")
    encoder = build_bow_encoder(tmp_path_factory.mktemp("bow") / "encoder", VOCABULARY)
    return folder, encoder, tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("query, sources, k, expected", RANKS)
def test_dense_ranks_and_scores_match_the_hand_computed_table(knowledge, query, sources, k, expected):
    folder, encoder, cache = knowledge
    mode = "global" if sources is None else "filter_then_retrieve"
    settings = RetrievalSettings(
        retriever="medcpt",
        mode=mode,
        k=k,
        query_encoder=str(encoder),
        article_encoder=str(encoder),
        batch_size=4,
        device="cpu",
    )
    index = open_index(corpus_files(folder, None, "kb", "fix"), settings, cache, "kb", "fix")
    (hits,) = index.retrieve([query], None if sources is None else [sources])
    assert [index.chunks[position].id for position, _ in hits] == [chunk for chunk, _ in expected]
    assert [score for _, score in hits] == pytest.approx([score for _, score in expected], abs=1e-5)


def test_the_encoder_spreads_similarities(knowledge):
    """The property the ranking table relies on: unrelated texts score 0, the same words score 1."""
    from medeval_metrics.emsqa.retrieval.retrievers import DenseRetriever

    _, encoder, _ = knowledge
    retriever = DenseRetriever(str(encoder), str(encoder), device="cpu")
    tokenizer, model = retriever._load_encoder(str(encoder))
    vectors = retriever.encode(["chest pain", "Pain, chest!", "splint burns", "nothing known"], tokenizer, model, 64)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] == pytest.approx(1.0, abs=1e-5) and similarity[0, 2] == pytest.approx(0.0, abs=1e-6)
    assert not vectors[3].any()  # no vocabulary word: the zero vector
