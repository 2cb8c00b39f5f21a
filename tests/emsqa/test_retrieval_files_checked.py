"""Bad rag_retrievals and rag_areas files are one clear error naming the file and the line, never a
traceback (issue 22, item 8)."""

from __future__ import annotations

import json

import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.rag import read_predicted_areas
from medeval_metrics.emsqa.retrieval import read_retrievals

GOOD_CHUNK = {"id": "heart_0_0", "source": "heart", "score": 3.25}
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "line, message",
    [
        (json.dumps({"id": "1", "chunks": ["not an object"]}), r"line 2: each chunk needs 'id' and 'score'"),
        (
            json.dumps({"id": "1", "chunks": [{"id": "c", "score": "high"}]}),
            r"line 2, chunk 0: 'id' must be a string and 'score' a number \(got str and str\)",
        ),
        (
            json.dumps({"id": "1", "chunks": [{"id": "c", "score": None}]}),
            r"line 2, chunk 0: .*\(got str and NoneType\)",
        ),
        (
            json.dumps({"id": "1", "chunks": [{"id": ["c"], "score": 1.0}]}),
            r"line 2, chunk 0: .*\(got list and float\)",
        ),
        (
            json.dumps({"id": ["1"], "chunks": [GOOD_CHUNK]}),
            r"line 2: the item id is a list; expected a string or a number",
        ),
        (json.dumps({"doc": "a string", "chunks": []}), r"line 2: its 'doc' is a str, not an object"),
        ('{"id": "1", "chunks": ' + DEEP + "}", r"the rag_retrievals file \(line 2\) nests arrays/objects too deeply"),
    ],
    ids=["chunk-not-object", "text-score", "null-score", "list-chunk-id", "list-item-id", "doc-not-object", "deep"],
)
def test_a_bad_retrievals_record_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "retrievals.jsonl"
    path.write_text(json.dumps({"id": "0", "chunks": [GOOD_CHUNK]}) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(MedevalDataError, match=message) as caught:
        read_retrievals(path, "v1")
    assert str(caught.value).startswith(f"{path}:")


def test_a_retrievals_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "retrievals.jsonl"
    path.write_bytes(json.dumps({"id": "0", "chunks": [GOOD_CHUNK]}).encode() + b"\n" + b'{"id": "\xff\xfe"}\n')
    with pytest.raises(
        MedevalDataError,
        match=r"retrievals.jsonl: the rag_retrievals file is not UTF-8 text "
        r"\(byte \d+, line 2\)",
    ):
        read_retrievals(path, "v1")


@pytest.mark.parametrize(
    "content, message",
    [
        (
            b'{"0": ["trauma"], "1": "\xff"}',
            r"areas.json: the predicted-areas file is not UTF-8 text \(byte \d+, line 1\)",
        ),
        (('{"0": ' + DEEP + "}").encode(), r"areas.json: the predicted-areas file nests arrays/objects too deeply"),
        (
            ('{"id": "0", "areas": ["trauma"]}\n{"id": "1", "areas": ' + DEEP + "}\n").encode(),
            r"the predicted-areas file \(line 2\) nests arrays/objects too deeply",
        ),
        (
            b'{"id": "0", "areas": ["trauma"]}\n{"id": "1", "areas": ["trauma"]}\n["a list"]\n',
            r"line 3 of the predicted-areas file is a list, not an object",
        ),
    ],
    ids=["bad-utf8", "deep-object", "deep-line", "line-not-object"],
)
def test_a_bad_areas_file_is_one_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "areas.json"
    path.write_bytes(content)
    with pytest.raises(MedevalDataError, match=message):
        read_predicted_areas(path, ["0", "1"])
