"""The published SmolLM2 reference results (docs/real-model.md, tests/core/data/smollm2_reference.json)
reproduce: a small slice is run again with the same commands (greedy, CPU) and compared per item.
Log-likelihoods may move in the last digits with another CPU or batch layout; the picks may not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import clear_medeval_settings, find_results, run_medeval

REFERENCE = json.loads((Path(__file__).parent / "data" / "smollm2_reference.json").read_text(encoding="utf-8"))
SLICE = 3


def _run(real_model, shared_data, tmp_path, capsys, task, *extra):
    out = tmp_path / task
    argv = [
        "run",
        "--tasks",
        task,
        "--model",
        "hf",
        "--model_args",
        f"pretrained={real_model},dtype=float32",
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
        *extra,
    ]
    done = run_medeval(argv, capsys)
    assert done.returncode == 0, done.stderr[-2000:]
    return {s["doc_id"]: s for s in find_results(out)[1][task]}


@pytest.mark.e2e
def test_a_slice_of_the_reference_results_reproduces_per_item(real_model, shared_data, tmp_path, capsys, monkeypatch):
    clear_medeval_settings(monkeypatch)
    loglik = _run(real_model, shared_data, tmp_path, capsys, "emsqa_public_mc")
    for item in REFERENCE["tasks"]["emsqa_public_mc"]["per_item"][:SLICE]:
        sample = loglik[item["doc_id"]]
        assert [float(r[0][0]) for r in sample["resps"]] == pytest.approx(item["logliks"], abs=2e-3)
        assert (sample["acc"], sample["f1"]) == (item["acc"], item["f1"])
    generated = _run(
        real_model,
        shared_data,
        tmp_path,
        capsys,
        "emsqa_public",
        "--apply_chat_template",
        "--gen_kwargs",
        "max_gen_toks=128",
    )
    for item in REFERENCE["tasks"]["emsqa_public"]["per_item"][:SLICE]:
        sample = generated[item["doc_id"]]
        assert sample["resps"][0][0] == item["output"]  # greedy: the same text
        assert (sample["acc"], sample["f1"]) == (item["acc"], item["f1"])
