"""Opt-in BERTScore-F1, offline with a tiny random encoder built on the spot; cross-checked against
the bert_score library when it is installed (a check, not a dependency)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e  # builds a model (torch): kept out of the fast loop

WORDS = ["take", "the", "tablet", "with", "food", "twice", "a", "day", "do", "not", "drink", "alcohol", "water", "once"]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=64)
    assert tokenizer("water")["input_ids"] == [2, vocab["water"], 3]  # real tokens, not [UNK]
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=5 + len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(folder)
    return str(folder)


def test_identical_texts_score_one_and_different_ones_less(tiny_encoder):
    from medeval_metrics.medicationqa.bertscore import bertscore_f1

    reference = "take the tablet with food twice a day"
    assert bertscore_f1(reference, reference, tiny_encoder) == pytest.approx(1.0, abs=1e-6)
    close = bertscore_f1("take the tablet with water twice a day", reference, tiny_encoder)
    far = bertscore_f1("do not drink alcohol", reference, tiny_encoder)
    assert far < close < 1.0
    assert bertscore_f1("", reference, tiny_encoder) == 0.0
    assert bertscore_f1("   ", reference, tiny_encoder) == 0.0


def test_matches_the_bert_score_library(tiny_encoder):
    bert_score = pytest.importorskip("bert_score")
    from medeval_metrics.medicationqa.bertscore import bertscore_f1

    pairs = [
        ("take the tablet with food", "take the tablet with water once a day"),
        ("do not drink alcohol", "take the tablet twice a day"),
        ("water", "drink water"),
    ]
    scorer = bert_score.BERTScorer(model_type=tiny_encoder, num_layers=2, idf=False, rescale_with_baseline=False)
    _, _, theirs = scorer.score([a for a, _ in pairs], [r for _, r in pairs])
    ours = [bertscore_f1(a, r, tiny_encoder) for a, r in pairs]
    assert ours == pytest.approx(theirs.tolist(), abs=1e-5)


def test_off_by_default_and_on_by_metadata(monkeypatch):
    from medeval_metrics.medicationqa import process_results
    from medeval_metrics.medicationqa.bertscore import ENV_VAR, HELM_MODEL, model_from_metadata

    monkeypatch.delenv(ENV_VAR, raising=False)
    assert model_from_metadata({}) is None
    assert model_from_metadata({"medicationqa_bertscore_model": True}) == HELM_MODEL
    assert "bertscore_f1" not in process_results({"answer": "take it"}, ["take it"])


def test_a_local_encoder_reaches_process_results_by_key_not_by_path(tiny_encoder, tmp_path, monkeypatch):
    import json

    from medeval_metrics.medicationqa import load_medicationqa, process_results
    from medeval_metrics.medicationqa.bertscore import ENV_VAR, bertscore_f1

    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    data = tmp_path / "mq.json"
    data.write_text(json.dumps([{"question": "how do i take it", "answer": "take the tablet with food"}]))
    doc = load_medicationqa(medicationqa_path=str(data), medicationqa_bertscore_model=tiny_encoder)["test"][0]
    assert tiny_encoder not in json.dumps(doc) and doc["bertscore_model"].startswith("local-model:")
    out = process_results(doc, ["take the tablet with water"])
    assert out["bertscore_f1"] == bertscore_f1("take the tablet with water", doc["answer"], tiny_encoder)
