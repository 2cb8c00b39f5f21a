"""SmolLM2-135M-Instruct through ``medeval run`` on a few items of one task per benchmark: EMSQA generative
and log-likelihood, MedicationQA with ROUGE-L and SmolLM2 as its judge (``hf`` backend, no device given:
the CPU on a machine without a GPU), and emrQA smoking status on synthetic notes; and Gemma-3-270M, a base
model, on EMSQA zero-shot and CoT without a chat template. Each run completes, every output is read under
both EMSQA readings, and each reported number equals a recomputation from the logged samples.

One lm-eval run per model (one model load each); about 3 minutes for SmolLM2 and 1-2 for Gemma on two busy
cores (docs/real-model.md, "Live end-to-end test").
"""

from __future__ import annotations

import ast
import json
import logging
import math
import sys
import time

import pytest
from conftest import clear_medeval_settings, find_results, run_medeval

LIMIT = 3
TASKS = ("emsqa_public", "emsqa_public_mc", "medicationqa", "emrqa_smoking")
GEMMA_LIMIT, GEMMA_TOKENS = 2, 48  # a base model seldom stops early: the budget sets its run time
GEMMA_TASKS = {"emsqa_public": "list", "emsqa_public_cot": "object"}  # task: the format its prompt asks for


class _CurrentStderr:
    """Writes to whatever sys.stderr is when a record is written (pytest swaps it between test phases)."""

    def write(self, text):
        return sys.stderr.write(text)

    def flush(self):
        sys.stderr.flush()


@pytest.fixture
def open_log_streams(monkeypatch):
    """lm-eval (and datasets, transformers) make their log handler once per process, on the sys.stderr of that
    moment: after an earlier in-process run under capsys it is a closed capture, and a later run's warnings
    print '--- Logging error ---' with a traceback. Such handlers write to the current stderr instead."""
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and getattr(handler.stream, "closed", False):
                monkeypatch.setattr(handler, "stream", _CurrentStderr())


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
def test_smollm2_runs_every_benchmark_and_the_numbers_recompute(live_run, capsys, monkeypatch, open_log_streams):
    argv, work = live_run
    run_live(argv, capsys, monkeypatch, f"SmolLM2 live run, {len(TASKS)} tasks x {LIMIT} items")
    check_run(work / "out")


def run_live(argv, capsys, monkeypatch, what):
    """``medeval run ARGV`` in this process: it succeeds without a traceback; its time is printed (``-s``)."""
    clear_medeval_settings(monkeypatch)
    started = time.monotonic()
    out = run_medeval(argv, capsys)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    print(f"\n{what}: {took:.0f} s")


@pytest.fixture(scope="module")
def gemma_run(real_model_gemma, shared_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("real-model-gemma-e2e")
    argv = [
        "run",
        "--tasks",
        ",".join(GEMMA_TASKS),
        "--model",
        "hf",
        "--model_args",
        f"pretrained={real_model_gemma}",
        "--batch_size",
        "2",
        "--limit",
        str(GEMMA_LIMIT),
        "--gen_kwargs",
        f"max_gen_toks={GEMMA_TOKENS}",
        "--output_path",
        str(work / "out"),
        "--log_samples",
        "--metadata",
        json.dumps({"emsqa_public_path": str(shared_data / "emsqa")}),
    ]
    return argv, work


@pytest.mark.e2e
def test_gemma_base_model_runs_emsqa_without_a_chat_template_and_the_numbers_recompute(
    gemma_run, capsys, monkeypatch, open_log_streams
):
    argv, work = gemma_run
    what = f"Gemma-3-270M live run, {len(GEMMA_TASKS)} tasks x {GEMMA_LIMIT} items, {GEMMA_TOKENS} tokens"
    run_live(argv, capsys, monkeypatch, what)
    results, samples = find_results(work / "out")
    for task, answer_format in GEMMA_TASKS.items():
        # a base model may write nothing (it sometimes ends at once): read what it wrote, empty or not
        check_emsqa_generative(results, samples, task, GEMMA_LIMIT, answer_format, require_text=False)
    assert "<start_of_turn>" not in samples["emsqa_public"][0]["arguments"]["gen_args_0"]["arg_0"]


def check_emsqa_generative(results, samples, task, limit, answer_format, require_text=True):
    """Each logged EMSQA output read again under both readings gives the logged answer, its metrics and the
    reported means (lm-eval logs one sample per item and filter)."""
    from medeval_metrics.emsqa import score
    from medeval_metrics.emsqa.filters import read_flexible
    from medeval_metrics.emsqa.strict import read_strict

    readers = {
        "strict-match": lambda text, doc: read_strict(text, answer_format, doc["letters"]),
        "flexible-extract": lambda text, doc: read_flexible(text, doc, answer_format),
    }
    for name, reader in readers.items():
        rows = [row for row in samples[task] if row["filter"] == name]
        assert sorted(row["doc_id"] for row in rows) == list(range(limit)), (task, name)
        for row in rows:
            doc, output = row["doc"], row["resps"][0][0]
            assert output.strip() or not require_text, "an empty output: the model did not run"
            answer = reader(output, doc)
            logged = row["filtered_resps"][0]
            assert (None if logged == "None" else logged) == answer  # lm-eval logs an unread answer as 'None'
            expected = score(answer, doc["gold"], doc["letters"])
            expected["requested_format"] = float(read_strict(output, answer_format, doc["letters"]) is not None)
            assert {k: row[k] for k in expected} == pytest.approx(expected), (task, name, row["doc_id"])
        for key in ("acc", "f1", "unparseable", "invalid_letter", "requested_format"):
            mean = sum(float(row[key]) for row in rows) / len(rows)
            assert results["results"][task][f"{key},{name}"] == pytest.approx(mean), (task, key, name)


def check_run(output_dir):
    """Every logged output read again, every reported number recomputed from the logged samples."""
    from medeval_metrics.emrqa.metrics import parse_label
    from medeval_metrics.judge.rubric import ShownObjects
    from medeval_metrics.medicationqa import RUBRIC
    from medeval_metrics.medicationqa.scoring import rouge_l

    results, samples = find_results(output_dir)

    def mean(rows, key):
        return sum(float(r[key]) for r in rows) / len(rows)

    # EMSQA generative: each output read again under both readings gives the logged answers and metrics
    check_emsqa_generative(results, samples, "emsqa_public", LIMIT, "list")

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
