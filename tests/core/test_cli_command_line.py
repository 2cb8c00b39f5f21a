"""`medeval run`'s command line is read once, by the pack's own parser (``preflight.read_command_line``), into the
``RunSettings`` every check and wrapper reads; lm-eval gets its own options as given, the pack's taken out."""

from __future__ import annotations

import json
import sys

import pytest

from medeval_metrics import cli, preflight
from medeval_metrics.preflight.argv import LM_EVAL_OPTIONS, read_command_line


def _lm_eval_run_parser():
    """lm-eval's own `run` parser (the test reads lm-eval's private parser to compare; the pack does not)."""
    import argparse

    from lm_eval._cli.harness import HarnessCLI

    parser = HarnessCLI()._parser
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]


def test_the_lm_eval_options_the_pack_reads_have_lm_eval_s_names_and_value_counts():
    """When this fails, lm-eval renamed an option or changed how many values it takes: update LM_EVAL_OPTIONS."""
    theirs = _lm_eval_run_parser()
    for dest, (names, nargs) in LM_EVAL_OPTIONS.items():
        action = theirs._option_string_actions[names[0]]
        assert action.dest == dest and set(names) == set(action.option_strings), dest
        theirs_nargs = 0 if action.nargs == 0 else action.nargs
        # lm-eval 0.4.12's --metadata takes one JSON value (0.4.13: key=value pairs too): the pack reads the wider
        # form and hands lm-eval the values as given
        assert theirs_nargs == nargs or (dest == "metadata" and theirs_nargs is None), dest


def test_no_lm_eval_option_the_pack_passes_through_is_taken_for_an_abbreviation_of_one_it_reads():
    """argparse takes a unique prefix for the whole option: an lm-eval option unknown to the pack's parser that is a
    prefix of one it knows would be read as that one."""
    theirs = [o for o in _lm_eval_run_parser()._option_string_actions if o.startswith("--")]
    ours = [name for names, _ in LM_EVAL_OPTIONS.values() for name in names if name.startswith("--")]
    clashes = [o for o in theirs if o not in ours and any(k.startswith(o) for k in ours)]
    assert clashes == []


def test_one_reading_gives_every_setting_and_lm_eval_s_command_line():
    settings = read_command_line(
        [
            "--model",
            "hf",
            "--task",  # lm-eval's abbreviation
            "emsqa_public, emsqa_private,",
            "--metadata",
            "emrqa_seed=3",
            "--meta",
            '{"emsqa_revision": "main"}',
            "--batch_size",  # not read by the pack: passed through as given
            "8",
            "--seed=1,2,3,4",
            "--allow-unknown-metadata",
            "--skip-judge-check",
            "--breakdown",
            "--limit",
            "-1",
            "-s",
            "-o",
            "out",
            "--apply_chat_template",
            "--gen_kwargs",
            "max_gen_toks=8",
        ]
    )
    assert settings.tasks == ["emsqa_public", "emsqa_private"]
    assert settings.metadata == {"emrqa_seed": 3, "emsqa_revision": "main"}
    assert (settings.model, settings.limit, settings.output_path, settings.log_samples) == ("hf", -1.0, "out", True)
    assert settings.gen_kwargs == {"max_gen_toks": 8} and settings.apply_chat_template is True
    assert settings.allow_unknown_metadata and settings.skip_judge_check and settings.breakdown
    assert settings.lm_eval_argv == [
        "--model",
        "hf",
        "--tasks",
        "emsqa_public,emsqa_private",
        "--metadata",
        "emrqa_seed=3",
        "--metadata",
        '{"emsqa_revision": "main"}',
        "--limit",
        "-1",
        "--log_samples",
        "--output_path",
        "out",
        "--apply_chat_template",
        "--gen_kwargs",
        "max_gen_toks=8",
        "--batch_size",
        "8",
        "--seed=1,2,3,4",
    ]
    assert settings.problems == ()


def test_the_judge_flags_become_one_metadata_for_the_checks_and_for_lm_eval(monkeypatch):
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    settings = read_command_line(
        ["--model", "hf", "--tasks", "medicationqa", "--metadata", "medicationqa_path=x.xlsx"]
        + ["--judge-model", "a", "--judge-model", "b", "--judge-base-url", "http://h/v1", "--allow-unscored"]
    )
    assert settings.judge_model == ("a", "b") and settings.allow_unscored
    judged = preflight.with_judge_panel(settings)
    assert [j["model"] for j in judged.metadata["medeval_judges"]["judges"]] == ["a", "b"]
    argv = judged.lm_eval_argv
    assert argv[:4] == ["--model", "hf", "--tasks", "medicationqa"] and argv.count("--metadata") == 1
    assert json.loads(argv[argv.index("--metadata") + 1]) == judged.metadata
    assert not [a for a in argv if a.startswith(("--judge", "--allow"))]
    assert preflight.with_judge_panel(read_command_line(["--model", "hf"])) == read_command_line(["--model", "hf"])


def test_a_line_argparse_cannot_read_is_one_problem_and_nothing_else():
    settings = read_command_line(["--tasks", "emsqa_public", "--model"])
    assert settings.problems == ("the command line cannot be read: argument --model/-M: expected one argument.",)
    assert not settings.readable


def test_medeval_run_hands_lm_eval_the_line_it_read_and_puts_sys_argv_back(monkeypatch, capsys):
    import lm_eval.__main__
    from conftest import FIXTURES

    seen = []
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: seen.append(list(sys.argv)))
    before = list(sys.argv)
    meta = json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")})
    code = cli.main(["run", "--model", "hf", "--tasks", "emsqa_private", "--metadata", meta, "--breakdown", "-b", "2"])
    assert code == 0, capsys.readouterr().err
    assert seen == [["lm-eval", "run", "--model", "hf", "--tasks", "emsqa_private", "--metadata", meta, "-b", "2"]]
    assert sys.argv == before


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_anywhere_on_the_line_is_the_pack_s_help(flag, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_lm_eval_run_help", lambda: "(lm-eval's options)\n")
    assert cli.main(["run", "--tasks", "x", flag]) == 0
    assert capsys.readouterr().out.startswith("usage: medeval run [the pack's options]")


def test_verbosity_debug_shows_the_pack_s_debug_lines_for_the_run_only():
    import logging

    loggers = [logging.getLogger(name) for name in ("medeval_metrics", "medeval")]
    before = [(logger.level, list(logger.handlers)) for logger in loggers]
    with cli._pack_debug_logging(read_command_line(["--verbosity", "debug"]).verbosity):
        assert all(
            logger.level == logging.DEBUG and len(logger.handlers) == len(h) + 1
            for logger, (_, h) in zip(loggers, before)
        )
    assert [(logger.level, list(logger.handlers)) for logger in loggers] == before
    with cli._pack_debug_logging("INFO"):
        assert [(logger.level, list(logger.handlers)) for logger in loggers] == before


@pytest.mark.parametrize("value", ["5", "[1, 2]", "[{a: 1}]"])
def test_a_config_file_option_of_a_wrong_type_is_one_problem_not_a_traceback(tmp_path, value):
    """A --config file whose model_args / metadata is a number or a list (found by a review: TypeError/KeyError)."""
    config = tmp_path / "c.yaml"
    config.write_text(f"model: hf\ntasks: emsqa_public\nmodel_args: {value}\nmetadata: {value}\n")
    settings = read_command_line(["--config", str(config)])
    assert any("--model_args in the --config file is" in p for p in settings.problems), settings.problems
    assert any("--metadata in the --config file is" in p for p in settings.problems), settings.problems
