"""EMSQA loading: only what a run uses is read, duplicates and wrong file kinds are clear errors, and the
few-shot notice about the public validation file is a single fact, given only when examples are drawn."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import FIXTURES

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa import DeferredPool, fewshot_pool, load_private, load_public, normalise_record
from medeval_metrics.emsqa import data as emsqa_data

SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
LOG = "medeval_metrics.emsqa"


def _public_folder(tmp_path, test_records, val_records):
    (tmp_path / "test_open.json").write_text(json.dumps(test_records))
    (tmp_path / "val_open.json").write_text(json.dumps(val_records))
    return tmp_path


def _synthetic():
    return json.loads(SYNTHETIC.read_text())


def test_zero_shot_loading_never_reads_the_validation_file(tmp_path, caplog):
    records = _synthetic()
    bad_pool = records[:3] + [{"question": "broken", "choices": ["a. x", "b. "], "answer": "a"}]
    folder = _public_folder(tmp_path, records, bad_pool)
    emsqa_data._read_pool.cache_clear()
    with caplog.at_level(logging.WARNING, logger=LOG):
        splits = load_public(emsqa_public_path=str(folder))
    assert len(splits["test"]) == 12
    assert isinstance(splits["validation"], DeferredPool)
    assert emsqa_data._read_pool.cache_info().misses == 0  # not read
    assert not caplog.records  # no notice about the pool in a run that draws no examples
    # lm-eval lists the few-shot split at build time: the YAML's process_docs hands it over unread.
    assert fewshot_pool(splits["validation"]) == [splits["validation"]]
    assert emsqa_data._read_pool.cache_info().misses == 0


def test_the_pool_is_read_on_the_first_draw_and_the_notice_comes_once(tmp_path, caplog):
    records = _synthetic()
    pool = records[:3] + [{"question": "broken", "choices": ["a. x", "b. "], "answer": "a"}]
    folder = _public_folder(tmp_path, records, pool)
    emsqa_data._read_pool.cache_clear()
    sampler_cls = emsqa_data.DeferredFirstNSampler
    with caplog.at_level(logging.WARNING, logger=LOG):
        for _ in range(3):  # three variants of one run (public, CoT, Expert-CoT) share one reading
            validation = load_public(emsqa_public_path=str(folder))["validation"]
            sampler = sampler_cls(list(fewshot_pool(validation)), rnd=None)
            shots = sampler.sample(2)
            assert [doc["question"] for doc in shots] == [records[0]["question"], records[1]["question"]]
    notices = [r.getMessage() for r in caplog.records]
    assert notices == [
        "medeval: val_open.json as published has 1 record that cannot serve as a few-shot example, "
        "left out of the pool: record 3 (choice 'b' is empty)."
    ]
    assert "fix" not in notices[0].lower() and "remove" not in notices[0].lower()
    assert emsqa_data._read_pool.cache_info().misses == 1


def test_sampler_over_ordinary_docs_is_lm_evals_first_n(tmp_path):
    docs = [normalise_record(r, i, "f") for i, r in enumerate(_synthetic())]
    sampler = emsqa_data.DeferredFirstNSampler(docs, rnd=None)
    assert sampler.sample(2) == docs[:2]
    assert sampler.sample(0) == []


def test_real_public_set_notice_names_record_1823(shared_data, caplog):
    emsqa_data._read_pool.cache_clear()
    with caplog.at_level(logging.WARNING, logger=LOG):
        validation = load_public(emsqa_public_path=str(shared_data / "emsqa"))["validation"]
        assert not caplog.records
        assert len(validation) == 1859
    (notice,) = [r.getMessage() for r in caplog.records]
    assert (
        notice.startswith("medeval: val_open.json as published has 1 record")
        and "record 1823 (choice 'd' is empty)" in notice
    )


def test_a_file_concatenated_with_itself_names_both_records(tmp_path):
    records = _synthetic()
    path = tmp_path / "private.json"
    path.write_text(json.dumps(records + records))
    with pytest.raises(MedevalDataError) as info:
        load_private(emsqa_private_path=str(path))
    text = str(info.value)
    assert f"{path}: records 0 and 12 of the EMSQA private set have the same question and choices" in text
    assert "emsqa_allow_duplicates: true" in text


def test_duplicates_ignore_case_and_spacing_but_not_different_choices(tmp_path):
    first = {"question": "Which sign?", "choices": ["a. x", "b. y"], "answer": "a"}
    same = {"question": "which  sign?", "choices": ["a. X", "b. y"], "answer": "b"}
    other = {"question": "which sign?", "choices": ["a. x", "b. z"], "answer": "a"}
    path = tmp_path / "private.json"
    path.write_text(json.dumps([first, other]))
    assert len(load_private(emsqa_private_path=str(path))["test"]) == 2
    path.write_text(json.dumps([first, other, same]))
    with pytest.raises(MedevalDataError, match=r"records 0 and 2 "):
        load_private(emsqa_private_path=str(path))


def test_duplicates_opt_out_by_metadata_or_environment(tmp_path, monkeypatch):
    records = _synthetic()
    path = tmp_path / "private.json"
    path.write_text(json.dumps(records + records[:2]))
    assert len(load_private(emsqa_private_path=str(path), emsqa_allow_duplicates=True)["test"]) == 14
    monkeypatch.setenv("MEDEVAL_EMSQA_ALLOW_DUPLICATES", "1")
    assert len(load_private(emsqa_private_path=str(path))["test"]) == 14
    monkeypatch.setenv("MEDEVAL_EMSQA_ALLOW_DUPLICATES", "0")
    with pytest.raises(MedevalDataError, match="records 0 and 12"):
        load_private(emsqa_private_path=str(path))


def test_duplicate_in_the_public_test_file(tmp_path):
    records = _synthetic()
    folder = _public_folder(tmp_path, records + [records[4]], records[:2])
    with pytest.raises(MedevalDataError, match=r"records 4 and 12 of the EMSQA public test set"):
        load_public(emsqa_public_path=str(folder))


@pytest.mark.parametrize(
    "content, kind",
    [
        (b"PK\x03\x04\x14\x00\x06\x00" + b"\x00" * 40, r"a ZIP archive"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 40, r"an old-format Office file \(\.xls or \.doc\)"),
        (b"question,choices,answer\nwhat?,a. x|b. y,a\n", r"CSV text"),
        (b"\xef\xbb\xbfquestion\tchoices\tanswer\n", r"CSV text"),
    ],
)
def test_wrong_file_kinds_say_what_the_file_should_be(tmp_path, content, kind):
    path = tmp_path / "EMSQA.xlsx"
    path.write_bytes(content)
    with pytest.raises(MedevalDataError, match=kind) as info:
        load_private(emsqa_private_path=str(path))
    text = str(info.value)
    assert str(path) in text and "JSON Lines" in text and '"answer": ["b"]' in text and "UTF-8" not in text


def test_a_folder_given_as_the_private_file(tmp_path):
    with pytest.raises(
        MedevalDataError, match=r"is a folder; emsqa_private_path must name the private set's file \(JSON"
    ):
        load_private(emsqa_private_path=str(tmp_path))


@pytest.mark.parametrize(
    "answer, shown", [("a,b", '["a", "b"]'), ("a, c", '["a", "c"]'), ("A;B;D", '["a", "b", "d"]'), ("ab", '["a", "b"]')]
)
def test_multi_answer_written_as_text_says_multi_answers_are_lists(answer, shown):
    record = {"question": "q?", "choices": ["a. x", "b. y", "c. z", "d. w"], "answer": answer}
    with pytest.raises(MedevalDataError) as info:
        normalise_record(record, 7, "/data/private.json")
    text = str(info.value)
    assert "/data/private.json: record 7" in text and "a multi-answer is a list of letters" in text
    assert f'"answer": {shown}' in text


def test_single_letter_answers_still_load():
    record = {"question": "q?", "choices": ["a. x", "b. y"], "answer": " B "}
    assert normalise_record(record, 0, "f")["gold"] == ["b"]


@pytest.mark.parametrize("cache", [False, True])
def test_docs_become_a_dataset_with_the_same_rows(tmp_path, monkeypatch, cache):
    monkeypatch.setenv("MEDEVAL_DATASET_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "test_open.json"
    path.write_text(json.dumps(_synthetic()))
    docs = [normalise_record(r, i, path) for i, r in enumerate(_synthetic())]
    for _ in range(2):  # the second time from the cache, where it is on
        dataset = emsqa_data._dataset(path, "the set", False, cache=cache)
        assert [dict(row) for row in dataset] == docs
    assert (tmp_path / "cache").exists() == cache


def _public_run(folder, num_fewshot):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.testing.scripted import ScriptedLM

    manager = TaskManager(
        include_defaults=False, include_path=tasks_path(), metadata={"emsqa_public_path": str(folder)}
    )
    model = ScriptedLM({"key": "question", "generate": {}, "choose": {}, "default": '["a"]'})
    lm_eval.simple_evaluate(model=model, tasks=["emsqa_public"], task_manager=manager, limit=2, num_fewshot=num_fewshot)
    return model


@pytest.mark.e2e
def test_through_lm_eval_the_pool_is_read_only_for_few_shot_runs(tmp_path):
    records = _synthetic()
    pool = [dict(r, question=f"pool item {i}") for i, r in enumerate(records[:4])]
    folder = _public_folder(tmp_path, records, pool)
    emsqa_data._read_pool.cache_clear()
    zero_shot = _public_run(folder, 0)
    assert emsqa_data._read_pool.cache_info().misses == 0
    assert "pool item" not in zero_shot.requests_seen[0].args[0]
    few_shot = _public_run(folder, 2)
    prompt = few_shot.requests_seen[0].args[0]
    assert emsqa_data._read_pool.cache_info().misses == 1
    # first_n order: the pool's first two items, then the scored question
    assert prompt.index("pool item 0") < prompt.index("pool item 1") < prompt.index(records[0]["question"])
    assert "pool item 2" not in prompt


def test_loading_restores_the_garbage_collector_even_on_error(tmp_path):
    import gc

    path = tmp_path / "private.json"
    path.write_text(json.dumps(_synthetic() * 2))
    assert gc.isenabled()
    with pytest.raises(MedevalDataError):
        load_private(emsqa_private_path=str(path))
    assert gc.isenabled()
    gc.disable()
    try:
        load_private(emsqa_private_path=str(SYNTHETIC))
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "value, allowed",
    [(True, True), ("TRUE", True), ("yes", True), (1, True), ("0", False), ("no", False), (False, False)],
)
def test_allow_duplicates_reads_on_off_words(tmp_path, value, allowed):
    records = _synthetic()
    folder = _public_folder(tmp_path, records + [dict(records[0], id="again")], records[:2])
    if allowed:
        assert len(load_public(emsqa_public_path=str(folder), emsqa_allow_duplicates=value)["test"]) == len(records) + 1
    else:
        with pytest.raises(MedevalDataError, match="have the same question and choices"):
            load_public(emsqa_public_path=str(folder), emsqa_allow_duplicates=value)


def test_a_mistyped_allow_duplicates_is_an_error_not_false(tmp_path, monkeypatch):
    folder = _public_folder(tmp_path, _synthetic(), _synthetic()[:2])
    with pytest.raises(MedevalDataError, match=r"--metadata emsqa_allow_duplicates='ture' is neither true nor false"):
        load_public(emsqa_public_path=str(folder), emsqa_allow_duplicates="ture")
    monkeypatch.setenv("MEDEVAL_EMSQA_ALLOW_DUPLICATES", "maybe")
    with pytest.raises(MedevalDataError, match=r"MEDEVAL_EMSQA_ALLOW_DUPLICATES='maybe' is neither true nor false"):
        load_public(emsqa_public_path=str(folder))
