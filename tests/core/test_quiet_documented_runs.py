"""Issue 23.6 and 23.7: `medeval run --help` leads with the pack's own options; a run of the README's smoke
command prints no warning, no git probe line, and one summary line per task."""

from __future__ import annotations

import inspect
import logging
import subprocess
import sys

import pytest
from conftest import SHARED_DATA, run_cli

from medeval_metrics import cli, lm_eval_compat


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


# ---------------------------------------------------------------- the git probe


@pytest.mark.e2e  # starts a subprocess or loads a tokenizer
def test_lm_eval_s_git_probe_still_writes_to_the_console_outside_a_repository(tmp_path):
    """When this fails, lm-eval runs git quietly itself and ``quiet_documented_runs`` (a) can go."""
    code = "from lm_eval.loggers.utils import get_git_commit_hash; get_git_commit_hash()"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        text=True,
        env={"PATH": "/usr/bin:/bin", "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)},
    )
    assert "fatal: not a git repository" in proc.stderr


@pytest.mark.e2e  # starts a subprocess or loads a tokenizer
def test_the_pack_s_git_probe_is_silent_and_records_the_same(tmp_path, capfd, monkeypatch):
    import lm_eval.evaluator

    monkeypatch.setattr(lm_eval.evaluator, "get_git_commit_hash", lm_eval.evaluator.get_git_commit_hash)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    lm_eval_compat.quiet_documented_runs()
    assert lm_eval.evaluator.get_git_commit_hash() is None and capfd.readouterr().err == ""
    monkeypatch.chdir(__import__("pathlib").Path(__file__).parent)
    head = subprocess.run(["git", "describe", "--always"], capture_output=True, check=False, text=True).stdout.strip()
    assert lm_eval.evaluator.get_git_commit_hash() == (head or None)


# ---------------------------------------------------------------- warnings the documented commands cause


def test_lm_eval_still_warns_as_the_filter_expects():
    """When this fails, lm-eval's wording changed and the filter no longer matches: update or drop it."""
    import lm_eval.config.evaluate_config
    import lm_eval.evaluator

    assert lm_eval_compat._GEN_KWARGS_WARNING in inspect.getsource(lm_eval.evaluator.simple_evaluate)
    assert lm_eval_compat._LIMIT_WARNING in inspect.getsource(lm_eval.config.evaluate_config)


class Kept(logging.Handler):
    """The records a logger lets through (lm-eval's loggers do not propagate once lm-eval set up logging)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> Kept:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self)


@pytest.mark.parametrize(
    "gen_kwargs, shown",
    [
        ({"max_gen_toks": 8}, False),  # the README's smoke command: only the budget
        ("max_gen_toks=8,until=\n\n", False),
        ({"temperature": 0.7}, True),  # sampling settings: lm-eval's advice is for the user
        ({"max_gen_toks": 8, "top_p": 0.9}, True),
    ],
)
def test_the_gen_kwargs_warning_is_dropped_only_for_a_token_budget(gen_kwargs, shown):
    lm_eval_compat.quiet_documented_runs()
    with Kept("lm_eval.evaluator") as kept:
        kept.logger.warning(
            "generation_kwargs: %s specified through cli, these settings will update set parameters "
            "in yaml tasks. Ensure 'do_sample=True' for non-greedy decoding!",
            gen_kwargs,
        )
    assert bool(kept.records) == shown


# ---------------------------------------------------------------- the summary after a run


RESULTS = {
    "results": {
        "emsqa_public": {
            "alias": "emsqa_public",
            "acc,extract_answer": 0.25,
            "acc_stderr,extract_answer": 0.1,
            "f1,extract_answer": 0.5,
            "unparseable,extract_answer": 0.125,
            "invalid_letter,extract_answer": 0.0,
        },
        "emsqa": {"alias": "emsqa"},
    },
    "n-samples": {"emsqa_public": {"original": 100, "effective": 20}},
}


def test_the_summary_is_one_line_per_task_with_its_headline_numbers():
    text = cli.run_summary(["--tasks", "emsqa_public", "--limit", "20"], RESULTS, 0.0)
    assert text.splitlines() == [
        (
            "medeval: emsqa_public: acc 0.250, f1 0.500, unparseable 0.125, invalid_letter 0.000 (20 items, "
            "--limit 20: a test run, not comparable scores)"
        ),
        "medeval: per-category breakdowns and model-card reports need `--output_path DIR --log_samples`.",
    ]


@pytest.mark.e2e
def test_the_readme_smoke_command_prints_no_warning_and_one_line_per_task(tmp_path, tiny_model):
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
    assert [line for line in text.splitlines() if "WARNING" in line or "fatal:" in line or "Warning" in line] == []
    summary = [line for line in proc.stdout.splitlines() if line.startswith("medeval: emsqa_public: ")]
    assert (
        len(summary) == 1
        and "acc " in summary[0]
        and "(20 items, " in summary[0]
        and "--limit 20: a test run" in summary[0]
    )
    assert "medeval_breakdowns.md (and .json); `--breakdown` prints them" in proc.stdout
    assert "| level" not in proc.stdout and "**emsqa_public** by level" not in proc.stdout  # tables only on request


def test_lm_eval_s_truncation_warning_is_kept_once():
    import lm_eval.models.huggingface

    assert lm_eval_compat._TRUNCATION_WARNING in inspect.getsource(lm_eval.models.huggingface)  # still its wording
    for handler_filter in logging.getLogger("lm_eval.models.huggingface").filters:
        if isinstance(handler_filter, lm_eval_compat._DropDocumentedRunWarnings):
            handler_filter.truncations = 0
    lm_eval_compat.quiet_documented_runs()
    with Kept("lm_eval.models.huggingface") as kept:
        for length in (2566, 2549, 2601):
            kept.logger.warning(
                f"Left truncation applied. Original sequence length was {length}, truncating to last "
                "1000 tokens. Some content will be lost."
            )
    assert [r.getMessage()[:58] for r in kept.records] == ["Left truncation applied. Original sequence length was 2566"]


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
