"""SmolLM2-135M-Instruct through ``medeval run`` on a few items of one task per benchmark: EMSQA generative
and log-likelihood, MedicationQA with ROUGE-L and SmolLM2 as its judge (``hf`` backend, no device given:
the CPU on a machine without a GPU), and emrQA smoking status on synthetic notes. Each run completes, every
output is read, and each reported number equals a recomputation from the logged samples.

One lm-eval run for all four tasks (one model load); about 3 minutes on two busy cores
(docs/real-model.md, "Test time").
"""

from __future__ import annotations

import ast
import json
import math
import time

import pytest
from conftest import clear_medeval_settings, find_results, run_medeval

LIMIT = 3
TASKS = ("emsqa_public", "emsqa_public_mc", "medicationqa", "emrqa_smoking")


@pytest.fixture(scope="module")
def live_run(real_model, shared_data, tmp_path_factory):
    from medeval_metrics.emrqa.synthetic import write_synthetic

    work = tmp_path_factory.mktemp("real-model-e2e")
    emrqa = write_synthetic(work / "emrqa")
    judges = {
        "judges": [
            {
                "name": "smollm2",
                "backend": "hf",
                "model": str(real_model),
                "max_tokens": 48,
                "model_args": {"dtype": "float32"},
            }
        ],
        "max_reasks": 0,
        "cache": None,
    }
    metadata = {
        "emsqa_public_path": str(shared_data / "emsqa"),
        "medicationqa_path": str(shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"),
        "emrqa_data_json": str(emrqa.data_json),
        "emrqa_data_ql_csv": str(emrqa.data_ql_csv),
        "emrqa_cache_dir": str(work / "emrqa-cache"),
        "medeval_judges": json.dumps(judges),
    }
    argv = [
        "run",
        "--tasks",
        ",".join(TASKS),
        "--model",
        "hf",
        "--model_args",
        f"pretrained={real_model}",
        "--batch_size",
        "4",
        "--apply_chat_template",
        "--limit",
        str(LIMIT),
        "--gen_kwargs",
        "max_gen_toks=48",
        "--output_path",
        str(work / "out"),
        "--log_samples",
        "--metadata",
        json.dumps(metadata),
        "--allow-unscored",
    ]
    return argv, work


@pytest.mark.e2e
def test_smollm2_runs_every_benchmark_and_the_numbers_recompute(live_run, capsys, monkeypatch):
    argv, work = live_run
    clear_medeval_settings(monkeypatch)
    started = time.monotonic()
    out = run_medeval(argv, capsys)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    print(f"\nSmolLM2 live run, {len(TASKS)} tasks x {LIMIT} items: {took:.0f} s")
    check_run(work / "out")


def check_run(output_dir):
    """Every logged output read again, every reported number recomputed from the logged samples."""
    from medeval_metrics.emrqa.metrics import parse_label
    from medeval_metrics.emsqa import extract_answer, score
    from medeval_metrics.judge.rubric import ShownObjects
    from medeval_metrics.medicationqa import RUBRIC
    from medeval_metrics.medicationqa.scoring import rouge_l

    results, samples = find_results(output_dir)

    def mean(rows, key):
        return sum(float(r[key]) for r in rows) / len(rows)

    # EMSQA generative: each output read again by the extractor gives the logged answer and metrics
    rows = samples["emsqa_public"]
    assert len(rows) == LIMIT
    for row in rows:
        doc, output = row["doc"], row["resps"][0][0]
        assert output.strip(), "an empty output: the model did not run"
        answer = extract_answer(output, doc["letters"], doc["options"], doc["question"])
        logged = row["filtered_resps"][0]
        assert (None if logged == "None" else logged) == answer  # lm-eval logs an unread answer (None) as 'None'
        expected = score(answer, doc["gold"], doc["letters"])
        assert {k: row[k] for k in expected} == pytest.approx(expected)
    for key in ("acc", "f1", "unparseable", "invalid_letter"):
        assert results["results"]["emsqa_public"][f"{key},flexible-extract"] == pytest.approx(mean(rows, key))

    # EMSQA log-likelihood: the most likely option of the logged log-likelihoods, scored as a set
    rows = samples["emsqa_public_mc"]
    for row in rows:
        logliks = [float(r[0][0]) for r in row["resps"]]
        assert all(math.isfinite(x) and x < 0 for x in logliks)
        best = row["doc"]["letters"][max(range(len(logliks)), key=logliks.__getitem__)]
        assert row["acc"] == float({best} == set(row["doc"]["gold"]))
    assert results["results"]["emsqa_public_mc"]["acc,none"] == pytest.approx(mean(rows, "acc"))

    # MedicationQA: ROUGE-L from the raw answer and reference; the judge's logged replies parse as logged
    rows = samples["medicationqa"]
    for row in rows:
        assert row["rougeL"] == pytest.approx(rouge_l(row["resps"][0][0], row["doc"]["answer"]))
    assert results["results"]["medicationqa"]["rougeL,scored"] == pytest.approx(mean(rows, "rougeL"))
    unscored = 0
    for row in rows:
        logged = row["judge_verdicts"]
        logged = (json.loads(logged) if isinstance(logged, str) else logged)["smollm2"]
        # the judge filter's record, logged as lm-eval's repr of the filtered response, keeps the raw reply
        record = row["filtered_resps"][0] if isinstance(row["filtered_resps"], list) else row["filtered_resps"]
        record = ast.literal_eval(record) if isinstance(record, str) else record
        verdict = record["verdicts"]["smollm2"]
        assert isinstance(verdict["reply"], str), "the hf judge on the CPU gave no reply"
        assert verdict["scores"] == logged["scores"]
        answer = row["resps"][0][0]
        messages = RUBRIC.messages(row["doc"]["question"], row["doc"]["answer"], answer)
        parsed = RUBRIC.parse(verdict["reply"], answer, ShownObjects.of(messages, answer))
        assert (parsed.scores if parsed.ok else None) == verdict["scores"]
        unscored += not verdict["scores"]
    assert results["results"]["medicationqa"]["judge_unscored_rate,scored"] == pytest.approx(unscored / len(rows))

    # emrQA smoking status: the label read from each output gives the logged accuracy
    rows = samples["emrqa_smoking"]
    for row in rows:
        read = parse_label(row["resps"][0][0], row["doc"]["labels"])
        assert row["acc"] == float(read == row["doc"]["label"])
    assert results["results"]["emrqa_smoking"]["acc,none"] == pytest.approx(mean(rows, "acc"))
