"""Issue 23.9 and 23.10: the demo reuses its emrQA preparation, replaces its own previous run, and its scripted
model answers enough items right (and some wrong, one unparseable) that every score shows something."""

from __future__ import annotations

import json

from medeval_metrics import demo


def test_the_synthetic_emrqa_files_are_rewritten_only_when_they_change(tmp_path):
    first = demo.synthetic_emrqa(tmp_path)
    stamps = [p.stat().st_mtime_ns for p in (first.data_json, first.data_ql_csv)]
    again = demo.synthetic_emrqa(tmp_path)
    assert [p.stat().st_mtime_ns for p in (again.data_json, again.data_ql_csv)] == stamps
    assert sorted(p.name for p in (tmp_path / "emrqa-synthetic").iterdir()) == ["data-ql.csv", "data.json"]
    first.data_json.write_text("{}")  # changed (or an older pack's): written again
    assert demo.synthetic_emrqa(tmp_path).data_json.read_text() != "{}"


def test_only_the_previous_run_s_files_are_removed(tmp_path):
    run = tmp_path / "run" / "model"
    run.mkdir(parents=True)
    for name in ("results_2026-01-01.json", "samples_emsqa_private_2026-01-01.jsonl", "medeval_breakdowns.md"):
        (run / name).write_text("x")
    (run / "notes.txt").write_text("mine")
    assert demo.remove_previous_run(tmp_path / "run") == 3
    assert [p.name for p in run.iterdir()] == ["notes.txt"]
    assert demo.remove_previous_run(tmp_path / "nothing-here") == 0


def test_the_scripted_answers_are_two_in_three_right_with_one_unparseable(tmp_path):
    meta = demo.demo_metadata(tmp_path, "http://127.0.0.1:9/v1/chat/completions")
    table = demo.answer_table(meta)
    from medeval_metrics.emsqa import load_private, process_results

    docs = list(load_private(**meta)["test"])
    scores = [process_results(doc, [table["generate"][doc["question"]]]) for doc in docs]
    assert [s["acc"] for s in scores] == [1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0]  # the last: no option named
    assert scores[-1]["unparseable"] == 1 and sum(s["unparseable"] for s in scores) == 1
    from medeval_metrics.emrqa.tasks import load_evidence, process_evidence

    risk = list(load_evidence("risk", **meta)["test"])
    relaxed = [process_evidence(doc, [table["generate"][doc["qa_id"]]])["relaxed_em"] for doc in risk]
    assert len(risk) == 12 and sum(relaxed) == 8, relaxed
    json.dumps(table)  # the run reads it from a file
