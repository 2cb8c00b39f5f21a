"""The published reference results (docs/real-model.md, "Reference results"; tests/core/data/real_model_reference.json,
written by scripts/reference_results.py).

Fast: the stored texts and log-likelihoods, read again with the current filters and ``process_results``, give the
stored per-item scores and aggregates (a reader change must re-score the reference: ``--rescore``).
End to end: a slice of each EMSQA run is run again with the same commands (greedy, CPU) and compared per item.
Log-likelihoods may move in the last digits with another CPU or batch layout; texts and scores may not."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT, clear_medeval_settings, find_results, run_medeval

_spec = importlib.util.spec_from_file_location("reference_results", REPO_ROOT / "scripts" / "reference_results.py")
reference_results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference_results)

REFERENCE = json.loads(reference_results.OUT.read_text(encoding="utf-8"))
SLICE = 3  # items per run in the end-to-end check: about two minutes for the three runs on two cores
DOC = {
    "question": "Which drug dilates the coronary arteries?",
    "options": ["aspirin", "nitroglycerin", "oxygen", "morphine"],
    "letters": ["a", "b", "c", "d"],
    "gold": ["b"],
}


# --- fast: the stored scores are the current readers' --------------------------------------------------------


def test_the_reference_holds_the_published_sizes():
    runs = REFERENCE["runs"]
    expected = {  # run: (task, items, chat template, generation budget)
        "smollm2_mc": ("emsqa_public_mc", 400, False, None),
        "smollm2_zero_shot_chat": ("emsqa_public", 100, True, 128),
        "gemma3_zero_shot": ("emsqa_public", 100, False, 64),
    }
    for name, (task, items, chat, budget) in expected.items():
        run = runs[name]
        assert (run["task"], run["items"], run["chat_template"]) == (task, items, chat), name
        assert [i["doc_id"] for i in run["per_item"]] == list(range(items)), name
        assert (run["generation_kwargs"] or {}).get("max_gen_toks") == budget, name
    for name in ("smollm2_zero_shot_chat", "gemma3_zero_shot"):  # both readings, and the text they read
        for item in runs[name]["per_item"]:
            assert set(item["scores"]) == {"strict-match", "flexible-extract"}, (name, item["doc_id"])
            assert isinstance(item["output"], str), (name, item["doc_id"])
    assert runs["medicationqa"]["items"] == len(runs["medicationqa"]["per_item"]) == 10  # kept as recorded


def test_the_stored_scores_are_what_the_current_readers_give():
    _, changes = reference_results.rescore(REFERENCE)
    assert not changes, (
        "the reference results were scored with another reader; run `python scripts/reference_results.py "
        "--rescore` and update docs/real-model.md's table:\n" + "\n".join(changes[:5])
    )


def test_the_docs_table_shows_the_stored_aggregates():
    page = (REPO_ROOT / "docs" / "real-model.md").read_text(encoding="utf-8")
    section = page.split("## Reference results", 1)[1].split("\n## ", 1)[0]
    missing = [row for row in reference_results.table_rows(REFERENCE) if row not in section.splitlines()]
    assert not missing, (
        "docs/real-model.md's reference table is stale; these rows are what it must show:\n" + "\n".join(missing)
    )


def test_a_reader_change_without_a_rescore_is_noticed(monkeypatch):
    """What the test above guards against: the flexible reader reading nothing, the stored scores left as they were."""
    from medeval_metrics.emsqa import filters

    monkeypatch.setattr(filters, "extract_answer", lambda *args, **kwargs: None)
    _, changes = reference_results.rescore(REFERENCE)
    # every reply the flexible reader read outside the requested format now changes, and the aggregates with them
    read_outside_format = [
        (name, item["doc_id"])
        for name, run in REFERENCE["runs"].items()
        if run["task"] == "emsqa_public"
        for item in run["per_item"]
        if item["scores"]["flexible-extract"]["unparseable"] == 0.0
        and item["scores"]["flexible-extract"]["requested_format"] == 0.0
    ]
    assert read_outside_format  # the data hold such replies, or this test would prove nothing
    changed_items = {c.split(":")[0] for c in changes if " doc " in c}
    assert changed_items == {f"{name} doc {doc_id}" for name, doc_id in read_outside_format}
    changed_aggregates = {c.split(" aggregates")[0] for c in changes if " aggregates: " in c}
    assert changed_aggregates == {name for name, _ in read_outside_format}


@pytest.mark.parametrize(
    ("output", "strict", "flexible"),
    [  # (acc, unparseable, requested_format) under each reading
        ('["b"]', (1.0, 0.0, 1.0), (1.0, 0.0, 1.0)),  # the requested JSON list: the same under both
        ("The answer is B.", (0.0, 1.0, 0.0), (1.0, 0.0, 0.0)),  # only the flexible reader reads prose
        ('["a"]', (0.0, 0.0, 1.0), (0.0, 0.0, 1.0)),  # in format and wrong
    ],
)
def test_rescoring_one_generated_item(output, strict, flexible):
    scores = reference_results.score_item(reference_results.task_scorer("emsqa_public"), {"doc": DOC, "output": output})
    assert set(scores) == {"strict-match", "flexible-extract"}
    for reading, expected in (("strict-match", strict), ("flexible-extract", flexible)):
        got = scores[reading]
        assert (got["acc"], got["unparseable"], got["requested_format"]) == expected, reading


def test_rescoring_one_loglikelihood_item():
    scoring = reference_results.task_scorer("emsqa_public_mc")
    item = {"doc": {"letters": ["a", "b", "c", "d"], "gold": ["b"]}, "logliks": [-3.0, -1.0, -2.0, -4.0]}
    assert reference_results.score_item(scoring, item) == {"none": {"acc": 1.0, "f1": 1.0}}
    item["doc"]["gold"] = ["b", "c"]  # one of two: F1 2 * 1 * 0.5 / 1.5
    assert reference_results.score_item(scoring, item) == {"none": {"acc": 0.0, "f1": pytest.approx(2 / 3)}}


def test_aggregates_are_lm_evals_mean_and_standard_error():
    items = [{"scores": {"x": {"acc": value}}} for value in (1.0, 0.0, 0.0, 1.0)]
    # mean 0.5; sample variance (4 * 0.25) / 3; standard error sqrt(1/3) / 2
    assert reference_results.aggregates(items) == {
        "acc,x": 0.5,
        "acc_stderr,x": pytest.approx(0.28867513459481287, abs=1e-15),
    }


def test_an_entry_without_its_text_is_named_with_the_fix():
    run = {"task": "emsqa_public", "metrics": {}, "per_item": [{"doc_id": 7, "doc": DOC, "scores": {}}]}
    with pytest.raises(
        ValueError, match=r"real_model_reference.json: run r, doc 7: no usable 'output' field.*--only r"
    ):
        reference_results.rescore({"runs": {"r": run}})


def test_the_dump_reads_back_as_it_was(tmp_path):
    reference = {"note": "x", "runs": {"r": {"task": "t", "metrics": {"acc,none": 0.5}, "per_item": [{"doc_id": 0}]}}}
    assert json.loads(reference_results.dump(reference)) == reference


# --- end to end: a slice of each run reproduces -----------------------------------------------------------------


def _rerun(model_dir: Path, name: str, shared_data: Path, tmp_path: Path, capsys) -> dict[int, list[dict]]:
    _, task, _, chat, gen = reference_results.RUNS[name]
    out = tmp_path / name
    argv = [
        "run",
        "--tasks",
        task,
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model_dir},dtype=float32",
        "--device",
        "cpu",
        "--batch_size",
        "8",
        "--limit",
        str(SLICE),
        "--output_path",
        str(out),
        "--log_samples",
        "--metadata",
        json.dumps({"emsqa_public_path": str(shared_data / "emsqa")}),
        *(["--apply_chat_template"] if chat else []),
        *(["--gen_kwargs", gen] if gen else []),
    ]
    done = run_medeval(argv, capsys)
    assert done.returncode == 0, done.stderr[-2000:]
    rows: dict[int, list[dict]] = {}
    for sample in find_results(out)[1][task]:
        rows.setdefault(sample["doc_id"], []).append(sample)
    return rows


def _compare(name: str, rows: dict[int, list[dict]]) -> None:
    for item in REFERENCE["runs"][name]["per_item"][:SLICE]:
        samples = rows[item["doc_id"]]
        if "logliks" in item:
            got = [float(r[0][0]) for r in samples[0]["resps"]]
            assert got == pytest.approx(item["logliks"], abs=2e-3), (name, item["doc_id"])
        else:
            assert samples[0]["resps"][0][0] == item["output"], (name, item["doc_id"])  # greedy: the same text
        scores = {s["filter"]: {m: s[m] for m in s["metrics"]} for s in samples}
        assert scores == item["scores"], (name, item["doc_id"])


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(reference_results.RUNS))
def test_a_slice_of_each_reference_run_reproduces_per_item(name, request, shared_data, tmp_path, capsys, monkeypatch):
    clear_medeval_settings(monkeypatch)
    model = reference_results.RUNS[name][0]
    model_dir = request.getfixturevalue("real_model" if model == "smollm2" else "real_model_gemma")
    _compare(name, _rerun(model_dir, name, shared_data, tmp_path, capsys))
