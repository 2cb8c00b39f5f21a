"""Issue 23.6 and 23.7: `medeval run --help` leads with the pack's own options; a run of the README's smoke
command prints no warning of the pack's, only lm-eval's own lines (issue 30: the pack quiets none), and one summary
line per task."""

from __future__ import annotations

import inspect
import logging
import re
import time

import pytest
from conftest import SHARED_DATA, run_cli

from medeval_metrics import cli
from medeval_metrics.preflight import read_command_line


def test_run_help_starts_with_the_pack_s_options_exit_codes_and_pointers_then_lm_eval_s(capsys):
    assert cli.main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: medeval run [the pack's options]")
    order = [
        text.index(part)
        for part in (
            "--allow-unknown-metadata",
            "--allow-unscored",
            "--skip-judge-check",
            "--breakdown",
            "--judge-model",
            "metadata keys the pack reads",
            "emsqa_private_path",
            "exit codes: 0 done; 2 a problem",
            "3 a judge scored no item",
            "`medeval list`",
        )
    ]
    lm_eval_s = text.index("lm-eval's options (`lm-eval run --help`)")
    assert (
        max(order) < lm_eval_s < text.index("Evaluate language models on various benchmarks")
        and "  rag_mode" not in text
        and ", rag_mode," not in text
    )  # a task's own


# ---------------------------------------------------------------- lm-eval's own lines are lm-eval's

# What lm-eval 0.4.13 itself prints in a documented run of the pack's tasks: `medeval run` quiets none of it (it
# replaces no logger filter and no lm-eval function; issue 30). Any other warning in a documented run is a finding.
LM_EVAL_OWN_WARNINGS = (
    "--limit SHOULD ONLY BE USED FOR TESTING",  # --limit (medeval run also says it in its summary line)
    "specified through cli, these settings will update set parameters in yaml tasks",  # --gen_kwargs
    "Custom kwargs can be passed to `--metadata`",  # each task whose custom_dataset is a function
    "fatal: not a git repository",  # lm-eval's git probe, run with the console as its stderr
    "Left truncation applied",  # a prompt longer than the model's context
)


def test_lm_eval_still_prints_the_lines_the_documented_runs_show():
    """The wording the smoke test below recognises as lm-eval's own."""
    import lm_eval.api.task
    import lm_eval.config.evaluate_config
    import lm_eval.evaluator
    import lm_eval.loggers.utils

    source = "".join(
        inspect.getsource(module)
        for module in (lm_eval.evaluator, lm_eval.config.evaluate_config, lm_eval.api.task, lm_eval.loggers.utils)
    )
    for line in LM_EVAL_OWN_WARNINGS[:3]:
        assert line in source
    assert '"git", "describe", "--always"' in source.replace("'", '"')  # the probe, stderr not redirected


# ---------------------------------------------------------------- the summary after a run


RESULTS = {
    "results": {
        "emsqa_public": {
            "alias": "emsqa_public",
            # lm-eval writes the YAML's first filter first: the summary still reads the headline reading
            "acc,strict-match": 0.05,
            "f1,strict-match": 0.1,
            "unparseable,strict-match": 0.9,
            "requested_format,strict-match": 0.1,
            "acc,flexible-extract": 0.25,
            "acc_stderr,flexible-extract": 0.1,
            "f1,flexible-extract": 0.5,
            "unparseable,flexible-extract": 0.125,
            "invalid_letter,flexible-extract": 0.0,
            "requested_format,flexible-extract": 0.1,
        },
        "emsqa": {"alias": "emsqa"},
    },
    "n-samples": {"emsqa_public": {"original": 100, "effective": 20}},
}


def test_the_summary_is_one_line_per_task_with_its_headline_numbers():
    # a task's recorded wall time includes the model calls it shared with the other tasks: the times are said
    # once, for the run (each task's own steps are in medeval report's run-time table)
    results = {**RESULTS, "medeval_run": {"setup_s": 2.0, "tasks": {"emsqa_public": {"wall_s": 567.4}}}}
    settings = read_command_line(["--tasks", "emsqa_public", "--limit", "20"])
    text = cli.run_summary(settings, results, time.time() - 12.0)
    lines = text.splitlines()
    assert lines[0] == (
        "medeval: emsqa_public: acc 0.250, f1 0.500, unparseable 0.125, requested_format 0.100 (20 items, "
        "--limit 20: a test run, not comparable scores)"
    )
    assert re.fullmatch(
        r"medeval: the run took 1[23]\.\d s; model and data ready in 2\.0 s \(each task's steps: medeval report\)\.",
        lines[1],
    )
    assert lines[2:] == [
        "medeval: per-category breakdowns and model-card reports need `--output_path DIR --log_samples`."
    ]


@pytest.mark.e2e
def test_the_readme_smoke_command_prints_only_lm_eval_s_own_warnings_and_one_line_per_task(tmp_path, tiny_model):
    data = SHARED_DATA / "emsqa"
    if not (data / "test_open.json").is_file():
        pytest.skip(f"no public EMSQA copy in {data}")
    proc = run_cli(
        [
            "run",
            "--tasks",
            "emsqa_public",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model}",
            "--device",
            "cpu",
            "--limit",
            "20",
            "--gen_kwargs",
            "max_gen_toks=8",
            "--metadata",
            f'{{"emsqa_public_path": "{data}"}}',
            "--output_path",
            str(tmp_path / "smoke"),
            "--log_samples",
        ],
        cwd=tmp_path,
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    noted = [line for line in text.splitlines() if "WARNING" in line or "fatal:" in line or "Warning" in line]
    assert [line for line in noted if not any(own in line for own in LM_EVAL_OWN_WARNINGS)] == []
    summary = [line for line in proc.stdout.splitlines() if line.startswith("medeval: emsqa_public: ")]
    assert (
        len(summary) == 1
        and "acc " in summary[0]
        and "(20 items, " in summary[0]
        and "--limit 20: a test run" in summary[0]
    )
    assert "medeval_breakdowns.md (and .json); `--breakdown` prints them" in proc.stdout
    assert "| level" not in proc.stdout and "**emsqa_public** by level" not in proc.stdout  # tables only on request


@pytest.mark.e2e  # starts a subprocess or loads a tokenizer
def test_counting_a_long_prompt_does_not_make_transformers_warn(tiny_model, caplog):
    import transformers

    from medeval_metrics.context_fit import ContextFit

    fit = ContextFit({"pretrained": str(tiny_model)}, max_gen_toks=16)
    transformers.logging.enable_propagation()  # transformers keeps its warnings to its own handler otherwise
    try:
        with caplog.at_level(logging.WARNING):
            counts = fit._tokenize(["word " * 3000])
    finally:
        transformers.logging.disable_propagation()
    assert counts[0] > fit.limit and not [r for r in caplog.records if "Token indices" in r.getMessage()]
