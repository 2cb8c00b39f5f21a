"""The generic retrieval layer on small hand-made corpora: chunking, corpus validation, bm25 modes,
ranking ties, the index cache and precomputed-retrieval files."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.retrieval import (
    RetrievalSettings,
    cached_build,
    chunk_corpus,
    corpus_files,
    corpus_version,
    open_index,
    read_retrievals,
    write_retrievals,
)
from medeval_metrics.emsqa.retrieval.corpus import BasicTokenizer, window_bounds
from medeval_metrics.emsqa.retrieval.retrievers import top_k

FIX = "Get the file again."


def write_corpus(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, pages in files.items():
        (folder / f"{name}.json").write_text(json.dumps(pages), encoding="utf-8")
    return folder


SMALL = {
    "heart": [
        {
            "Chest pain": "chest pain with sweating suggests a heart attack; give aspirin and oxygen",
            "Cardiac arrest": "start compressions at a rate of 100 to 120 per minute and attach the defibrillator",
        },
        {"Angina": "nitroglycerin relieves angina chest pain within minutes"},
    ],
    "lungs": [
        {"Asthma": "wheezing and shortness of breath; give a bronchodilator inhaler", "Empty": "   "},
    ],
    "skin": [{"Burns": "burns are classified by depth; estimate body surface area with the rule of nines"}],
}


@pytest.mark.parametrize(
    "n_tokens, size, overlap, expected",
    [
        (10, 4, 1, [(0, 4), (3, 7), (6, 10)]),
        (4, 4, 1, [(0, 4)]),
        (5, 4, 1, [(0, 4), (3, 5)]),  # the last window ends at the text's end
        (3, 512, 128, [(0, 3)]),
        (0, 512, 128, []),
        (1024, 512, 128, [(0, 512), (384, 896), (768, 1024)]),
    ],
)
def test_window_bounds(n_tokens, size, overlap, expected):
    assert window_bounds(n_tokens, size, overlap) == expected


@pytest.mark.parametrize("size, overlap", [(0, 0), (4, 4), (4, 5), (4, -1)])
def test_impossible_windows_are_an_error(size, overlap):
    with pytest.raises(MedevalDataError, match="overlap smaller than the size"):
        window_bounds(10, size, overlap)


def test_basic_windows_keep_the_original_text():
    text = "Give O2, then reassess:  ABCs (airway, breathing)!"
    windows = BasicTokenizer().windows(text, 4, 1)
    # tokens: Give O2 , then | then reassess : ABCs | ABCs ( airway , | , breathing ) !
    assert windows == ["Give O2, then", "then reassess:  ABCs", "ABCs (airway,", ", breathing)!"]


def test_chunk_ids_titles_and_empty_sections(tmp_path):
    files = corpus_files(write_corpus(tmp_path / "kb", SMALL), None, "the corpus", FIX)
    assert [f.source for f in files] == ["heart", "lungs", "skin"]
    chunks = chunk_corpus(files, BasicTokenizer(), 512, 128, "the corpus", FIX)
    assert [c.id for c in chunks] == [
        "heart_0_0",
        "heart_0_1",
        "heart_1_0",
        "lungs_0_0",
        "skin_0_0",
    ]  # "Empty" gives none
    assert chunks[2].indexed_text == "Angina. nitroglycerin relieves angina chest pain within minutes"
    windows = chunk_corpus(files, BasicTokenizer(), 6, 2, "the corpus", FIX)
    heart_0_1 = [c for c in windows if c.id.startswith("heart_0_1_")]
    assert [c.text for c in heart_0_1[:2]] == ["start compressions at a rate of", "rate of 100 to 120 per"]


def test_corpus_version_follows_content(tmp_path):
    folder = write_corpus(tmp_path / "kb", SMALL)
    before = corpus_version(corpus_files(folder, None, "c", FIX))
    assert before == corpus_version(corpus_files(folder, None, "c", FIX))
    (folder / "skin.json").write_text(json.dumps([{"Burns": "changed"}]))
    assert corpus_version(corpus_files(folder, None, "c", FIX)) != before


@pytest.mark.parametrize(
    "content, message",
    [
        ('[{"A": "text"}, {"B": "te', r"bad\.json: the corpus is not valid JSON \(line 1, column"),
        ('{"A": "text"}', r"bad\.json: the corpus is a JSON dict; expected a list of pages"),
        ('[{"A": "x"}, ["not", "a", "page"]]', r"bad\.json: page 1 of the corpus is a list"),
        (
            '[{"A": "x"}, {"B": "y", "Vitals": {"pulse": 80}}]',
            r"bad\.json: page 1, section 'Vitals' of the corpus holds a dict",
        ),
    ],
)
def test_malformed_corpus_files_name_file_page_and_fix(tmp_path, content, message):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "bad.json").write_text(content)
    with pytest.raises(MedevalDataError, match=message) as info:
        chunk_corpus(corpus_files(folder, None, "the corpus", FIX), BasicTokenizer(), 512, 128, "the corpus", FIX)
    assert FIX in str(info.value)


def test_a_folder_without_corpus_files_is_an_error(tmp_path):
    with pytest.raises(MedevalDataError, match="no .json files of the corpus here"):
        corpus_files(tmp_path, None, "the corpus", FIX)


def test_top_k_breaks_ties_by_position_and_can_drop_zero_scores():
    scores = np.array([0.5, 2.0, 0.5, 2.0, 0.0, 1.0])
    assert top_k(scores, 3) == [(1, 2.0), (3, 2.0), (5, 1.0)]
    assert top_k(scores, 4) == [(1, 2.0), (3, 2.0), (5, 1.0), (0, 0.5)]
    assert top_k(scores, 10, allowed=np.array([4, 2, 0])) == [(0, 0.5), (2, 0.5), (4, 0.0)]
    assert top_k(scores, 10, allowed=np.array([4, 2, 0]), positive_only=True) == [(0, 0.5), (2, 0.5)]
    # over every position, positive only (bm25's global search): zero scores dropped, ties by position
    assert top_k(scores, 3, positive_only=True) == [(1, 2.0), (3, 2.0), (5, 1.0)]
    assert top_k(scores, 10, positive_only=True) == [(1, 2.0), (3, 2.0), (5, 1.0), (0, 0.5), (2, 0.5)]
    assert top_k(np.zeros(4), 2, positive_only=True) == []


@pytest.fixture
def small_index(tmp_path):
    files = corpus_files(write_corpus(tmp_path / "kb", SMALL), None, "the corpus", FIX)

    def make(**settings):
        return open_index(files, RetrievalSettings(**settings), tmp_path / "cache", "the corpus", FIX)

    return make


def ids(index, hits):
    return [index.chunks[p].id for p, _ in hits]


def test_the_three_modes_on_a_hand_checked_corpus(small_index):
    query = ["chest pain and shortness of breath"]
    glob = small_index(mode="global", k=3)
    # "chest pain" is in heart_0_0 and heart_1_0, "shortness of breath" in lungs_0_0; skin shares no term.
    assert sorted(ids(glob, glob.retrieve(query, None)[0])) == ["heart_0_0", "heart_1_0", "lungs_0_0"]
    ftr = small_index(mode="filter_then_retrieve", k=3)
    assert ids(ftr, ftr.retrieve(query, [["lungs"]])[0]) == ["lungs_0_0"]
    both = ftr.retrieve(query, [["lungs", "heart"]])[0]
    assert sorted(ids(ftr, both)) == ["heart_0_0", "heart_1_0", "lungs_0_0"]
    assert [s for _, s in both] == sorted((s for _, s in both), reverse=True)
    # retrieve_then_filter looks at the top pool_factor * k globally, keeps the item's files: fewer than k.
    rtf = small_index(mode="retrieve_then_filter", k=2, pool_factor=1)
    assert ids(rtf, rtf.retrieve(query, [["lungs"]])[0]) == [
        i for i in ids(glob, glob.retrieve(query, None)[0])[:2] if i.startswith("lungs")
    ]
    assert rtf.retrieve(query, [["skin"]]) == [[]]


@pytest.mark.parametrize(
    "query, files, pool_factor, expected",
    [
        # bm25 ranks lungs_0_0 (1.25), heart_0_0 (0.95), heart_1_0 (0.75) for the first query; lungs_0_0 third
        # (0.63) for the second: the item's own chunk is found only where it lies within pool_factor * k
        ("chest pain and shortness of breath", ["heart"], 1, []),
        ("chest pain and shortness of breath", ["heart"], 2, ["heart_0_0"]),
        ("breath and chest pain", ["lungs"], 2, []),
        ("breath and chest pain", ["lungs"], 3, ["lungs_0_0"]),
    ],
)
def test_retrieve_then_filter_searches_the_pool_not_the_top_k(small_index, query, files, pool_factor, expected):
    rtf = small_index(mode="retrieve_then_filter", k=1, pool_factor=pool_factor)
    assert ids(rtf, rtf.retrieve([query], [files])[0]) == expected


def test_k_larger_than_the_corpus_is_an_error(small_index):
    index = small_index(k=6)
    with pytest.raises(MedevalDataError, match=r"rag_k=6 is larger than the corpus \(5 chunks\)"):
        index.retrieve(["burns"], None)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"mode": "everything"}, "rag_mode 'everything' is not one of"),
        ({"k": 0}, "rag_k must be"),
        ({"retriever": "tfidf"}, "rag_retriever 'tfidf'"),
    ],
)
def test_bad_settings_are_named(settings, message):
    with pytest.raises(MedevalDataError, match=message):
        RetrievalSettings(**settings)


def test_second_open_does_no_work_and_gives_identical_results(small_index, monkeypatch):
    first = small_index(k=3)
    assert first.built
    expected = first.retrieve(["angina nitroglycerin", "rule of nines"], None)

    def no_work(*args, **kwargs):
        raise AssertionError("the cached index was rebuilt")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.index.chunk_corpus", no_work)
    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.build", no_work)
    second = small_index(k=3)
    assert not second.built
    assert second.retrieve(["angina nitroglycerin", "rule of nines"], None) == expected
    assert second.version == first.version


def test_a_new_chunk_file_layout_rebuilds_the_chunks_not_the_index(small_index, monkeypatch):
    """The chunk files' layout is in the chunks' cache key only: a pack that stores chunks differently does
    not embed the knowledge base again (hours with a dense encoder on CPU)."""
    first = small_index(k=3)
    expected = first.retrieve(["angina nitroglycerin"], None)

    def no_index_build(*args, **kwargs):
        raise AssertionError("the index was built again")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.index.CHUNKS_LAYOUT", 99)
    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.build", no_index_build)
    again = small_index(k=3)
    assert again.built  # the chunks were made again, under their new key
    assert again.retrieve(["angina nitroglycerin"], None) == expected


def test_cache_key_changes_with_chunking(small_index):
    assert small_index(chunk_tokens=512).built
    assert small_index(chunk_tokens=8, chunk_overlap=2).built  # another key: built again
    assert not small_index(chunk_tokens=8, chunk_overlap=2).built


def test_concurrent_builders_build_once(tmp_path):
    builds = []

    def build(folder):
        builds.append(folder)
        time.sleep(0.3)
        (folder / "index.bin").write_text("x")

    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cached_build(tmp_path, {"a": 1}, build))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert sorted(built for _, built in results) == [False, False, True]
    assert len({folder for folder, _ in results}) == 1 and (results[0][0] / "index.bin").read_text() == "x"


def test_a_failed_build_leaves_nothing_trusted(tmp_path):
    def broken(folder):
        (folder / "half").write_text("x")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        cached_build(tmp_path, {"a": 1}, broken)
    folder, built = cached_build(tmp_path, {"a": 1}, lambda f: (f / "ok").write_text("y"))
    assert built and (folder / "ok").exists() and not (folder / "half").exists()


def test_precomputed_file_round_trip_and_sample_logs(tmp_path):
    chunks = [{"id": "heart_0_0", "source": "heart", "score": 3.25}]
    path = write_retrievals(tmp_path / "r.jsonl", {"chunks_version": "v1"}, [("0", chunks), ("7", [])])
    assert read_retrievals(path, "v1") == {"0": chunks, "7": []}
    samples = tmp_path / "samples_task_2026.jsonl"
    samples.write_text(
        json.dumps({"doc_id": 0, "doc": {"id": "3", "rag_chunks": chunks, "rag_chunks_version": "v1"}}) + "\n"
    )
    assert read_retrievals(samples, "v1") == {"3": chunks}
    with pytest.raises(MedevalDataError, match="another corpus or chunking"):
        read_retrievals(path, "v2")


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json\n", "line 1 is not valid JSON"),
        ('{"id": "1"}\n', "line 1 has no item id and chunk list"),
        ('{"id": "1", "chunks": [{"id": "x"}]}\n', "each chunk needs 'id' and 'score'"),
        ("\n", "no retrievals"),
    ],
)
def test_bad_precomputed_files_are_named(tmp_path, text, message):
    path = tmp_path / "r.jsonl"
    path.write_text(text)
    with pytest.raises(MedevalDataError, match=message):
        read_retrievals(path, "v1")


def test_an_unloadable_chunk_tokenizer_is_named(tmp_path):
    from medeval_metrics.emsqa.retrieval.corpus import chunk_tokenizer

    with pytest.raises(
        MedevalDataError,
        match="cannot load the tokenizer .*no-tokenizer-here.*as rag_article_encoder, or retrieve with rag_retriever bm25",
    ):
        chunk_tokenizer(str(tmp_path / "no-tokenizer-here"))


def test_stored_chunks_give_back_each_text_whole_in_any_order_and_any_script(tmp_path):
    """The cache keeps texts in one file, read by byte offset for only the chunks a run shows: texts with
    multi-byte characters, an empty one and the last one come back exactly, whatever is read first."""
    from medeval_metrics.emsqa.retrieval.corpus import Chunk
    from medeval_metrics.emsqa.retrieval.retrievers import load_chunks, save_chunks

    texts = ["plain", "café — 5 mg/kg ≥ 2 µg", "", "🚑 ambulance", "last"]
    chunks = [Chunk(f"c{i}", "src", f"title {i}", t) for i, t in enumerate(texts)]
    save_chunks(chunks, tmp_path)
    stored = load_chunks(tmp_path)
    assert len(stored) == 5 and stored.ids == [c.id for c in chunks]
    assert [stored[i].text for i in (4, 1, 3, 0, 2)] == [texts[i] for i in (4, 1, 3, 0, 2)]
    assert stored[-1] == chunks[-1] and list(stored) == chunks
    with pytest.raises(IndexError):
        stored[5]
    empty = tmp_path / "empty"
    empty.mkdir()
    save_chunks([Chunk("e0", "src", "t", ""), Chunk("e1", "src", "t", "")], empty)  # a texts file of 0 bytes
    assert [c.text for c in (load_chunks(empty)[1], load_chunks(empty)[0])] == ["", ""]


QUERY_TEXTS = [
    "What is the FIRST step in CPR?",
    "Give 0.3 mg IM; don't wait — re-assess q5min",
    "café naïve µg İstanbul ΣΑΣ straße ﬁre",  # lower-casing that changes length, Unicode word characters
    "a I x 1 2",  # one-character words and numbers only
    "",
    "the and of is",  # stopwords only
    "pt's O2 sat 88% (room air), BP 90/60; HR 130",
]


def _same_query_tokens(texts):
    """Queries are split by the pack (bm25s.tokenize makes two progress bars per call), the index by bm25s."""
    import bm25s

    from medeval_metrics.emsqa.retrieval.retrievers import _query_tokenizer

    split, stopwords = _query_tokenizer()
    expected = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    assert [[t for t in split(text.lower()) if t not in stopwords] for text in texts] == expected
    return expected


def test_the_query_tokens_are_bm25s_tokenize_s():
    expected = _same_query_tokens(QUERY_TEXTS)
    assert expected[2][:2] == ["café", "naïve"] and expected[3] == [] and expected[5] == []


def test_every_public_question_gets_bm25s_tokenize_s_tokens(shared_data):
    questions = [item["question"] for item in json.loads((shared_data / "emsqa" / "test_open.json").read_text())]
    assert len(_same_query_tokens(questions)) == 3721


def test_bm25_scores_are_lucene_bm25_by_its_definition(small_index):
    """Each score is Lucene BM25 (Kamphuis et al. 2020): sum over query terms of
    ln(1 + (N - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * dl / avgdl)), k1 1.5, b 0.75, over
    lowercased words of two or more characters without English stopwords; computed here from that formula."""
    import math
    import re

    from bm25s.stopwords import STOPWORDS_EN

    index = small_index(mode="global", k=5)
    docs = [
        [w for w in re.findall(r"(?u)\b\w\w+\b", c.indexed_text.lower()) if w not in STOPWORDS_EN] for c in index.chunks
    ]
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)

    def score(query: str, doc: list[str]) -> float:
        total = 0.0
        for term in {w for w in re.findall(r"(?u)\b\w\w+\b", query.lower()) if w not in STOPWORDS_EN}:
            df, tf = sum(term in d for d in docs), doc.count(term)
            if df and tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * len(doc) / avgdl))
        return total

    for query in ("chest pain and shortness of breath", "give aspirin", "burns rule of nines", "compressions"):
        expected = sorted(
            ((p, score(query, d)) for p, d in enumerate(docs) if score(query, d) > 0), key=lambda h: (-h[1], h[0])
        )
        got = index.retrieve([query], None)[0]
        assert [p for p, _ in got] == [p for p, _ in expected], query
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-5), query
