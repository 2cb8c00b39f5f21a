"""`medeval run` as a user runs it: bad input fails before any model is built; the pack-only index
gives the same results as the full one (issue 15)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, find_results, run_cli

pytestmark = pytest.mark.e2e

SYNTHETIC = str(FIXTURES / "emsqa_synthetic.json")


@pytest.mark.parametrize(
    "tasks, metadata, message",
    [
        ("emsqa_pubic", {}, "Did you mean 'emsqa_public'"),
        ("emsqa_private", {"emsqa_private_pth": SYNTHETIC}, "Did you mean 'emsqa_private_path'"),
        ("emsqa_private", {"emsqa_private_path": "/nowhere/private.json"}, "does not exist"),
        (
            "medicationqa",
            {"medicationqa_path": SYNTHETIC.replace("emsqa_synthetic.json", "none.xlsx")},
            "does not exist",
        ),
        ("emsqa", {}, "--tasks emsqa_public_variants"),
        (
            "medicationqa",
            {"medicationqa_path": "MEDICATIONQA_CSV", "medeval_judges": "/nowhere/judges.yaml"},
            "judges.yaml",
        ),
    ],
)
def test_bad_input_fails_before_the_model_is_built(tmp_path, tasks, metadata, message):
    # a model folder with a config and no weights: it passes the model check, and an error about it would mean
    # lm-eval got as far as building the model
    (tmp_path / "no-such-model").mkdir()
    (tmp_path / "no-such-model" / "config.json").write_text("{}")
    args = ["run", "--model", "hf", "--model_args", f"pretrained={tmp_path}/no-such-model", "--tasks", tasks]
    if metadata.get("medicationqa_path") == "MEDICATIONQA_CSV":
        (tmp_path / "m.csv").write_text("Question,Answer\nWhat is aspirin for?,Pain and fever.\n")
        metadata = {**metadata, "medicationqa_path": str(tmp_path / "m.csv")}
    if metadata:
        args += ["--metadata", json.dumps(metadata)]
    proc = run_cli(args, cwd=tmp_path, timeout=120)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert err[-1].startswith("medeval: error:") and message in err[-1], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "no-such-model" not in proc.stderr


def test_a_model_folder_that_is_not_there_is_one_line_before_anything_else(tmp_path):
    proc = run_cli(
        [
            "run",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tmp_path}/nowhere",
            "--tasks",
            "emsqa_private",
            "--metadata",
            json.dumps({"emsqa_private_path": SYNTHETIC}),
        ],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"medeval: error: --model_args pretrained={tmp_path}/nowhere: no such folder. Give the folder holding the "
        "model (config.json and weights), or a Hugging Face Hub id such as Qwen/Qwen2.5-0.5B-Instruct."
    ]


def test_single_quoted_metadata_is_one_line_with_the_fix(tmp_path):
    proc = run_cli(
        ["run", "--model", "hf", "--tasks", "emsqa_private", "--metadata", "{'emsqa_private_path': 'x'}"],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("""--metadata '{"emsqa_private_path": "x"}'""")


def test_pack_only_index_gives_the_same_results_as_the_full_index(tmp_path, tiny_model):
    def run(out, env):
        proc = run_cli(
            [
                "run",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={tiny_model}",
                "--device",
                "cpu",
                "--tasks",
                "emsqa_private",
                "--limit",
                "4",
                "--output_path",
                str(out),
                "--log_samples",
                "--metadata",
                json.dumps({"emsqa_private_path": SYNTHETIC}),
                "--gen_kwargs",
                "max_gen_toks=4",
            ],
            cwd=tmp_path,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return find_results(out)

    pack_results, pack_samples = run(tmp_path / "pack", {})
    full_results, full_samples = run(tmp_path / "full", {"MEDEVAL_FULL_TASK_INDEX": "1"})
    assert pack_results["results"] == full_results["results"]
    assert [s["filtered_resps"] for s in pack_samples["emsqa_private"]] == [
        s["filtered_resps"] for s in full_samples["emsqa_private"]
    ]


def test_ctrl_c_while_judges_answer_slowly_ends_at_once_with_the_resume_line(tmp_path, tiny_model):
    """Before: the thread pool waited for every in-flight judge request (here 60 s each) after Ctrl-C."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    data = tmp_path / "m.csv"
    data.write_text("Question,Answer\n" + "".join(f"question {i}?,answer {i}.\n" for i in range(6)))
    with FakeJudgeServer(latency=60) as server:
        panel = {
            "judges": [{"name": "a", "backend": "local-chat-completions", "model": "a", "base_url": server.url}],
            "cache": str(tmp_path / "judges.sqlite"),
            "concurrency": 2,
            "timeout": 120,
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "medeval_metrics.cli",
                "run",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={tiny_model}",
                "--device",
                "cpu",
                "--tasks",
                "medicationqa",
                "--gen_kwargs",
                "max_gen_toks=4",
                "--use_cache",
                str(tmp_path / "lm"),
                "--skip-judge-check",  # the judges' first requests are then the run's, where Ctrl-C is meant to land
                "--metadata",
                json.dumps({"medicationqa_path": str(data), "medeval_judges": panel}),
            ],
            cwd=tmp_path,
            env={**os.environ},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.time() + 300
        while server.count() == 0 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert server.count() > 0, "the run never reached the judges"
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=45)  # well under one 60 s judge request
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("Ctrl-C did not end the run")
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("medeval: interrupted. Run the same command again")
