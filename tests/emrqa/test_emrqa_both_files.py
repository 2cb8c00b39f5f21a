"""Issue 23.3 and 23.7: emrQA's two files are reported together, and its preparation prints one line."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import clear_medeval_settings

from medeval_metrics import preflight
from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa.prepare import ensure_prepared
from medeval_metrics.emrqa.synthetic import write_synthetic


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    clear_medeval_settings(monkeypatch)


def problems_of(metadata: dict, tasks: str = "emrqa_risk,emrqa_emrql_1") -> list[str]:
    with pytest.raises(MedevalDataError) as info:
        preflight.run_checks(["--tasks", tasks, "--metadata", json.dumps(metadata)], lm_eval_names=list)
    return getattr(info.value, "problems", None) or [str(info.value)]


def test_neither_file_given_is_one_problem_naming_both():
    (problem,) = problems_of({})
    assert problem.startswith("the emrQA data.json and data-ql.csv are not available")
    assert '"emrqa_data_json": "/path/to/data.json", "emrqa_data_ql_csv": "/path/to/data-ql.csv"' in problem
    assert "MEDEVAL_EMRQA_DATA_JSON and MEDEVAL_EMRQA_DATA_QL_CSV" in problem


def test_one_file_wrong_and_the_other_unset_are_both_reported(tmp_path):
    found = problems_of({"emrqa_data_json": str(tmp_path / "nope.json")})
    assert len(found) == 2
    assert found[0].startswith(
        f"the emrQA data.json: --metadata emrqa_data_json points at {tmp_path / 'nope.json'}, which does not exist."
    )
    assert found[1].startswith("the emrQA data-ql.csv is not available: no local copy is configured")


def test_both_files_malformed_are_both_reported(tmp_path):
    (tmp_path / "data.json").write_text("not json")
    (tmp_path / "data-ql.csv").write_text("")
    found = problems_of(
        {
            "emrqa_data_json": str(tmp_path / "data.json"),
            "emrqa_data_ql_csv": str(tmp_path / "data-ql.csv"),
            "emrqa_cache_dir": str(tmp_path / "cache"),
        }
    )
    assert len(found) == 2, found
    assert found[0].startswith(f"{tmp_path / 'data.json'}: emrQA data.json is malformed")
    assert found[1].startswith(f"{tmp_path / 'data-ql.csv'}")


def test_preparation_is_one_summary_line_and_the_details_are_at_debug(tmp_path, caplog):
    files = write_synthetic(tmp_path / "data")
    meta = {
        "emrqa_data_json": str(files.data_json),
        "emrqa_data_ql_csv": str(files.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path / "cache"),
    }
    lines: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="medeval_metrics.emrqa"):
        ensure_prepared(meta, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("emrQA prepared in ") and "questions" in lines[0]
    assert lines[0].endswith("; --verbosity DEBUG lists the splits")
    details = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(d.startswith("emrQA splits (seeded reconstruction") for d in details)
