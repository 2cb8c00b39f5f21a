"""EMSQA loaders: the real public files, synthetic items, and a clear error for each kind of bad input."""

import json

import pytest
from conftest import FIXTURES

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa import PRIVATE_SOURCE, PUBLIC_SOURCE, load_private, load_public, normalise_record

SYNTHETIC = FIXTURES / "emsqa_synthetic.json"


def test_real_public_set(shared_data):
    data = load_public(emsqa_public_path=str(shared_data / "emsqa"))
    test, val = data["test"], data["validation"]
    assert len(test) == 3721
    # val_open.json has 1,860 items; record 1823 has an empty choice and is left out of the few-shot pool.
    assert len(val) == 1859
    multi = [doc for doc in test if len(doc["gold"]) > 1]
    assert len(multi) == 1 and multi[0]["gold"] == ["a", "b", "c"]
    assert sorted({len(doc["letters"]) for doc in test}) == [2, 3, 4, 5, 6]
    assert {level for doc in test for level in doc["level"]} == {"emr", "emt", "aemt", "paramedic"}
    assert len({area for doc in test for area in doc["category"]}) == 10


def test_public_path_can_name_the_test_file(shared_data):
    data = load_public(emsqa_public_path=str(shared_data / "emsqa" / "test_open.json"))
    assert len(data["test"]) == 3721 and len(data["validation"]) == 1859


def test_scored_split_is_strict_about_the_bad_validation_record(shared_data):
    with pytest.raises(MedevalDataError, match=r"record 1823 .*choice 'd' is empty"):
        load_private(emsqa_private_path=str(shared_data / "emsqa" / "val_open.json"))


def test_synthetic_private_set_from_metadata_and_env(monkeypatch):
    docs = load_private(emsqa_private_path=str(SYNTHETIC))["test"]
    assert len(docs) == 12
    assert docs[1]["gold"] == ["a", "b", "d"] and docs[1]["options"][1] == "pale, cool skin"
    assert docs[5]["letters"] == ["a", "b", "c", "d", "e", "f"]
    assert docs[2]["letters"] == ["a", "b"]
    monkeypatch.setenv(PRIVATE_SOURCE.env_var, str(SYNTHETIC))
    assert len(load_private()["test"]) == 12


def test_jsonl_private_file(tmp_path):
    records = json.loads(SYNTHETIC.read_text())
    path = tmp_path / "private.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert load_private(emsqa_private_path=str(path))["test"][0]["gold"] == ["a"]


def test_out_of_order_choices_keep_their_own_letters():
    doc = normalise_record(
        {"question": "q", "choices": ["b. second", "a. first", "c. third"], "answer": "a"}, 0, "f.json"
    )
    assert doc["letters"] == ["a", "b", "c"] and doc["options"] == ["first", "second", "third"]


GOOD = {"question": "q?", "choices": ["a. x", "b. y"], "answer": "a", "level": ["emt"], "category": ["trauma"]}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"question": None}, r"record 3 has no 'question' field"),
        ({"choices": None}, r"record 3 .* has no 'choices' field"),
        ({"answer": None}, r"has no 'answer' field"),
        ({"question": "  "}, r"record 3 has an empty question"),
        ({"choices": ["a. only"]}, r"at least 2"),
        ({"choices": ["a. x", "b. "]}, r"choice 'b' is empty"),
        ({"choices": ["a. x", "y without letter"]}, r"choice 1 .* does not start with its letter"),
        ({"choices": ["a. x", "a. y"]}, r"letter 'a' is used by two choices"),
        ({"choices": ["a. x", 7]}, r"choice 1 is a int"),
        ({"answer": "c"}, r"answer \['c'\] is not among the item's choices \['a', 'b'\]"),
        ({"answer": ["a", "e"]}, r"answer \['e'\] is not among"),
        ({"answer": []}, r"'answer' must be a letter or a non-empty list"),
        ({"answer": 1}, r"'answer' must be a letter"),
    ],
)
def test_bad_records_name_the_file_and_record(change, message):
    record = dict(GOOD)
    for key, value in change.items():
        if value is None:
            record.pop(key)
        else:
            record[key] = value
    with pytest.raises(MedevalDataError, match=message) as info:
        normalise_record(record, 3, "/data/private.json")
    assert "/data/private.json: record 3" in str(info.value)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", r"is empty"),
        ('[{"question": "q"', r"not valid JSON .*truncated"),
        ('{"question": "q"}\n{"broken', r"line 2 .*not valid JSON"),
        ("[1, 2]", r"record 0 .* is a int, not a JSON object"),
        ("[]", r"holds no records"),
    ],
)
def test_bad_files(tmp_path, content, message):
    path = tmp_path / "private.json"
    path.write_text(content)
    with pytest.raises(MedevalDataError, match=message):
        load_private(emsqa_private_path=str(path))


def test_wrong_encoding(tmp_path):
    path = tmp_path / "private.json"
    path.write_bytes('[{"question": "caf\u00e9"}]'.encode("latin-1"))
    with pytest.raises(MedevalDataError, match=r"not UTF-8 .*Re-save the file as UTF-8"):
        load_private(emsqa_private_path=str(path))


def test_missing_private_file_says_how_to_point_at_it(monkeypatch):
    monkeypatch.delenv(PRIVATE_SOURCE.env_var, raising=False)
    with pytest.raises(MedevalDataError) as info:
        load_private()
    text = str(info.value)
    assert "emsqa_private_path" in text and "MEDEVAL_EMSQA_PRIVATE_PATH" in text and "--metadata" in text


def test_configured_path_that_does_not_exist(tmp_path):
    with pytest.raises(MedevalDataError, match=r"points at .*nope.json, which does not exist"):
        load_private(emsqa_private_path=str(tmp_path / "nope.json"))


def test_public_set_offline_without_local_copy_explains_the_download(monkeypatch):
    monkeypatch.delenv(PUBLIC_SOURCE.env_var, raising=False)
    with pytest.raises(MedevalDataError) as info:
        load_public()
    text = str(info.value)
    assert "Hub is disabled" in text and "test_open.json" in text and "UVA-DSA/EMSQA" in text
    assert "MEDEVAL_EMSQA_PUBLIC_PATH" in text


def test_public_folder_without_test_file(tmp_path):
    with pytest.raises(MedevalDataError, match="no test_open.json in this folder"):
        load_public(emsqa_public_path=str(tmp_path))
