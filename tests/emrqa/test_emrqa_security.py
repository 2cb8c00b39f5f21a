"""emrQA inputs an attacker or an unlucky copy can produce (issue 22, items 7 and 9a)."""

from __future__ import annotations

import json
import os

import pytest

from medeval_metrics.data import MedevalDataError, file_sha256
from medeval_metrics.emrqa import jsonstream
from medeval_metrics.emrqa.cache import ensure_prepared
from medeval_metrics.emrqa.synthetic import write_synthetic


def test_a_relabelled_file_of_the_same_size_with_its_time_restored_is_prepared_again(tmp_path):
    data = write_synthetic(tmp_path / "data")
    meta = {
        "emrqa_data_json": str(data.data_json),
        "emrqa_data_ql_csv": str(data.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path / "cache"),
    }
    first, manifest = ensure_prepared(meta, log=lambda _: None)
    old_sha = manifest["inputs"]["data_json_sha256"]
    # relabel one question in place: same size, then the old modification time back (cp -p, rsync -a, touch -r)
    before = os.stat(data.data_json)
    raw = data.data_json.read_bytes()
    at = raw.index(b'"question": ["') + len(b'"question": ["')
    swapped = raw[:at] + (b"Y" if raw[at : at + 1] != b"Y" else b"Z") + raw[at + 1 :]
    data.data_json.write_bytes(swapped)
    os.utime(data.data_json, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(data.data_json)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    messages: list[str] = []
    second, manifest = ensure_prepared(meta, log=messages.append)
    assert second != first and any(m.startswith("emrQA prepared in") for m in messages)  # one summary line
    assert manifest["inputs"]["data_json_sha256"] == file_sha256(data.data_json) != old_sha
    # unchanged inputs are still reused, without preparing
    messages.clear()
    assert ensure_prepared(meta, log=messages.append)[0] == second and messages == []


@pytest.mark.parametrize("where", ["qas", "context"])
def test_a_deeply_nested_data_json_is_a_clear_error_without_note_text(tmp_path, where):
    deep = "[" * 100_000 + "]" * 100_000
    note = (
        ('{"note_id": "1", "context": ["PATIENT SECRET"], "qas": ' + deep + "}")
        if where == "qas"
        else ('{"note_id": "1", "context": ' + deep + ', "qas": []}')
    )
    path = tmp_path / "data.json"
    path.write_text('{"data": [{"title": "medication", "paragraphs": [' + note + "]}]}", encoding="utf-8")
    with pytest.raises(MedevalDataError, match=r"data.json: emrQA data.json nests arrays/objects too deeply") as caught:
        list(jsonstream.iter_notes(path))
    assert "PATIENT SECRET" not in str(caught.value) and "note 0 of" in str(caught.value)


def test_a_deeply_nested_note_before_its_title_is_a_clear_error(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "data.json"
    path.write_text(
        json.dumps({"data": [{"paragraphs": ["PLACEHOLDER"], "title": "medication"}]}).replace(
            '"PLACEHOLDER"', '{"note_id": "1", "qas": ' + deep + "}"
        ),
        encoding="utf-8",
    )
    with pytest.raises(MedevalDataError, match="too deeply"):
        list(jsonstream.iter_notes(path))
