"""The validated-dataset cache (``medeval_metrics.data.validated_dataset``), through the EMSQA public loader:
an unchanged file is read from the cache, any change to the file, the options or the validating code is
validated again, bad data is never cached, and a cache that cannot be used never stops a run."""

from __future__ import annotations

import json
import logging
import os

import pytest
from conftest import FIXTURES

from medeval_metrics import checksums, dataset_cache
from medeval_metrics import data as shared_data
from medeval_metrics.data import MedevalDataError, validated_dataset
from medeval_metrics.emsqa import data as emsqa_data
from medeval_metrics.emsqa import load_public

RECORDS = json.loads((FIXTURES / "emsqa_synthetic.json").read_text())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("MEDEVAL_DATASET_CACHE", str(folder))
    return folder


@pytest.fixture
def validations(monkeypatch):
    """How many times the EMSQA loader validated a file (cache hits do not)."""
    calls = []
    real = emsqa_data.load_docs

    def counting(path, *args, **kwargs):
        calls.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(emsqa_data, "load_docs", counting)
    return calls


def _folder(tmp_path, records):
    folder = tmp_path / "emsqa"
    folder.mkdir(exist_ok=True)
    (folder / "test_open.json").write_text(json.dumps(records))
    return folder


def test_an_unchanged_file_is_validated_once(tmp_path, cache, validations):
    folder = _folder(tmp_path, RECORDS)
    first = load_public(emsqa_public_path=str(folder))["test"]
    second = load_public(emsqa_public_path=str(folder))["test"]
    assert validations == ["test_open.json"]
    assert second.to_list() == first.to_list() and len(second) == len(RECORDS)
    assert second._fingerprint == first._fingerprint
    assert len(list(cache.glob("*.arrow"))) == 1 and not list(cache.glob("*.tmp-*"))


def test_a_same_size_rewrite_within_the_clock_tick_is_read_again(tmp_path, cache, validations):
    folder = _folder(tmp_path, RECORDS)
    path = folder / "test_open.json"
    before = load_public(emsqa_public_path=str(folder))["test"]
    stat = path.stat()
    text = path.read_text()
    changed = text.replace(RECORDS[0]["question"], RECORDS[0]["question"][::-1], 1)  # same length
    assert len(changed) == len(text) and changed != text
    path.write_text(changed)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even the same modification time
    after = load_public(emsqa_public_path=str(folder))["test"]
    assert validations == ["test_open.json", "test_open.json"]
    assert after[0]["question"] == RECORDS[0]["question"].strip()[::-1].strip()
    assert after[0]["question"] != before[0]["question"]


def test_the_duplicates_option_is_part_of_the_key(tmp_path, cache, validations):
    repeated = RECORDS + [dict(RECORDS[0], id="again")]
    folder = _folder(tmp_path, repeated)
    allowed = load_public(emsqa_public_path=str(folder), emsqa_allow_duplicates=True)["test"]
    assert len(allowed) == len(repeated)
    with pytest.raises(MedevalDataError, match="have the same question and choices"):
        load_public(emsqa_public_path=str(folder))  # the allowed copy in the cache must not answer this


def test_bad_data_is_never_cached(tmp_path, cache):
    folder = _folder(tmp_path, RECORDS[:2] + [{"question": "q?", "choices": ["a. x", "b. y"], "answer": "z"}])
    for _ in range(2):  # the same clear error both times, not a cached dataset the second time
        with pytest.raises(MedevalDataError, match=r"record 2 .*answer \['z'\] is not among the item's choices"):
            load_public(emsqa_public_path=str(folder))
    assert not cache.exists() or not list(cache.iterdir())


def test_a_change_to_the_validating_code_is_a_new_key(tmp_path, cache):
    path = _folder(tmp_path, RECORDS) / "test_open.json"
    build = lambda: emsqa_data.load_docs(path, "the set")
    code = tmp_path / "validator.py"
    code.write_text("version = 1\n")
    one = validated_dataset(path, {}, build, emsqa_data.doc_schema(), code_files=(code,))
    code.write_text("version = 2\n")
    two = validated_dataset(path, {}, build, emsqa_data.doc_schema(), code_files=(code,))
    assert one._fingerprint != two._fingerprint and len(list(cache.glob("*.arrow"))) == 2


def test_off_keeps_everything_in_memory(tmp_path, monkeypatch, validations):
    monkeypatch.setenv("MEDEVAL_DATASET_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = _folder(tmp_path, RECORDS)
    load_public(emsqa_public_path=str(folder))
    load_public(emsqa_public_path=str(folder))
    assert validations == ["test_open.json", "test_open.json"] and not (tmp_path / "xdg").exists()


def test_the_default_home_is_under_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDEVAL_DATASET_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert shared_data.dataset_cache_root() == tmp_path / "xdg" / "medeval" / "datasets"


def test_the_private_set_is_never_copied_into_the_cache(tmp_path, cache):
    private = tmp_path / "exam.json"
    private.write_text(json.dumps(RECORDS))
    emsqa_data.load_private(emsqa_private_path=str(private))
    assert not cache.exists()


def test_a_damaged_cache_file_is_replaced(tmp_path, cache, validations, caplog):
    folder = _folder(tmp_path, RECORDS)
    expected = load_public(emsqa_public_path=str(folder))["test"].to_list()
    (arrow,) = cache.glob("*.arrow")
    arrow.write_bytes(arrow.read_bytes()[:100])  # a disk that filled up, a copy cut short
    with caplog.at_level(logging.WARNING, logger="medeval.data"):
        again = load_public(emsqa_public_path=str(folder))["test"]
    assert again.to_list() == expected and len(validations) == 2
    assert "is unreadable" in caplog.text and str(folder / "test_open.json") in caplog.text
    assert load_public(emsqa_public_path=str(folder))["test"].to_list() == expected and len(validations) == 2


def test_an_unwritable_cache_is_noticed_once_and_the_run_goes_on(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("MEDEVAL_DATASET_CACHE", str(blocker / "datasets"))
    monkeypatch.setattr(dataset_cache, "_unwritable_cache_noticed", set())
    folder = _folder(tmp_path, RECORDS)
    with caplog.at_level(logging.WARNING, logger="medeval.data"):
        first = load_public(emsqa_public_path=str(folder))["test"]
        second = load_public(emsqa_public_path=str(folder))["test"]
    assert len(first) == len(second) == len(RECORDS)
    notices = [r.getMessage() for r in caplog.records if "cannot write the data cache" in r.getMessage()]
    assert len(notices) == 1 and "MEDEVAL_DATASET_CACHE" in notices[0] and str(blocker) in notices[0]


def test_items_without_levels_still_get_text_list_columns(tmp_path, cache):
    bare = [{k: v for k, v in r.items() if k not in ("level", "category")} for r in RECORDS]
    dataset = load_public(emsqa_public_path=str(_folder(tmp_path, bare)))["test"]
    assert str(dataset.features["level"]) == "List(Value('string'))" and dataset[0]["level"] == []


def test_a_changed_published_file_is_noticed_also_when_it_comes_from_the_cache(tmp_path, cache, monkeypatch, caplog):
    from medeval_metrics.data import CHECKSUM_ENV

    folder = _folder(tmp_path, RECORDS)  # named like the published test_open.json, but not it
    monkeypatch.setenv(CHECKSUM_ENV, "error")
    for _ in range(2):  # validated, then from the cache: refused both times
        with pytest.raises(MedevalDataError, match=r"test_open\.json: not the published test_open\.json"):
            load_public(emsqa_public_path=str(folder))
    monkeypatch.setenv(CHECKSUM_ENV, "off")
    load_public(emsqa_public_path=str(folder))  # now cached
    monkeypatch.setenv(CHECKSUM_ENV, "error")
    with pytest.raises(MedevalDataError, match=r"not the published test_open\.json"):
        load_public(emsqa_public_path=str(folder))


def test_a_changed_validation_file_is_noticed_only_when_examples_are_drawn(tmp_path, cache, monkeypatch, caplog):
    from medeval_metrics.data import CHECKSUM_ENV

    folder = _folder(tmp_path, RECORDS)
    (folder / "val_open.json").write_text(json.dumps(RECORDS[:3]))
    monkeypatch.setenv(CHECKSUM_ENV, "warn")
    monkeypatch.setattr(checksums, "_digests", {})
    emsqa_data._read_pool.cache_clear()
    with caplog.at_level(logging.WARNING, logger="medeval.data"):
        pool = load_public(emsqa_public_path=str(folder))["validation"]
    assert "val_open.json" not in caplog.text  # zero-shot: never read, never hashed
    with caplog.at_level(logging.WARNING, logger="medeval.data"):
        assert len(pool) == 3
    assert "not the published val_open.json" in caplog.text


def test_a_hub_copy_is_checked_against_the_pins_also_from_the_cache(tmp_path, cache, monkeypatch):
    from medeval_metrics.data import CHECKSUM_ENV

    changed = _folder(tmp_path, RECORDS) / "test_open.json"  # what a changed upstream file would download as
    revisions = []

    def download(source, suffixes, revision=None):
        revisions.append(revision)
        if suffixes == ["val_open.json"]:
            raise MedevalDataError("no validation file")
        return changed

    monkeypatch.setattr(emsqa_data, "download_hub_file", download)
    monkeypatch.delenv("MEDEVAL_EMSQA_PUBLIC_PATH", raising=False)
    monkeypatch.setenv(CHECKSUM_ENV, "warn")
    assert len(load_public()["test"]) == len(RECORDS)  # validated and cached, with a warning
    monkeypatch.setenv(CHECKSUM_ENV, "error")
    with pytest.raises(MedevalDataError, match=r"not the published test_open\.json"):
        load_public()  # the cache hit is refused too
    monkeypatch.setenv("MEDEVAL_EMSQA_REVISION", "abc123")  # the revision can come from the environment
    monkeypatch.setenv(CHECKSUM_ENV, "off")
    load_public()
    assert revisions[-2:] == ["abc123", "abc123"]


def test_an_unenterable_cache_folder_never_stops_a_run(tmp_path, cache, monkeypatch):
    folder = _folder(tmp_path, RECORDS)
    real_is_file = type(cache).is_file

    def is_file(self):
        if self.parent == cache:
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_file(self)

    monkeypatch.setattr(type(cache), "is_file", is_file)
    assert len(load_public(emsqa_public_path=str(folder))["test"]) == len(RECORDS)
