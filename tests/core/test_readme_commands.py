"""Issue 33: a newcomer runs the README's commands in order, from its set-up block on. Every `medeval ...` command it
shows (in its bash blocks and in its text) is a real subcommand with real flags, `medeval run`'s flags are the pack's
or lm-eval's, the set-up block installs the extras those commands need, and the offline ones run as shown."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import tomllib
from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
# what a command shown needs beyond the pack's own dependencies: the extra that brings it (pyproject.toml)
EXTRA_NEEDED_BY = {
    "--real-model": "real-model",  # transformers reads SmolLM2's GGUF file with `gguf`
    "make-real-model": "real-model",
    "--real-judge": "real-model",
    "demo": "report",  # its report draws figures with matplotlib
    "report": "report",
}


def bash_blocks(text: str | None = None) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text or README.read_text(encoding="utf-8"), re.DOTALL)


def commands(block: str) -> list[list[str]]:
    """Each command of a bash block as words: continuation lines joined, comments dropped, `&&` split."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            out.append(words[:cut])
            words = words[cut + 1 :]
    return out


def readme_commands() -> list[list[str]]:
    """Every command of the README's bash blocks, in the order a reader meets them."""
    return [words for block in bash_blocks() for words in commands(block)]


def inline_medeval_commands() -> list[list[str]]:
    """The `medeval ...` commands the README's text quotes in code spans."""
    text = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [shlex.split(span) for span in re.findall(r"`(medeval [^`]+)`", text)]


def setup_extras() -> set[str]:
    """The extras the set-up block (the first bash block) installs with `pip install ".[a,b]"`."""
    extras: set[str] = set()
    for words in commands(bash_blocks()[0]):
        if words[:2] == ["pip", "install"]:
            for word in words[2:]:
                found = re.fullmatch(r"\.\[([\w,-]+)\]", word)
                extras |= set(found.group(1).split(",")) if found else set()
    return extras


def test_the_commands_are_read_from_the_readme():
    shown = readme_commands()
    assert ["medeval", "demo"] in shown and ["medeval", "list"] in shown
    assert any(words[:2] == ["medeval", "run"] for words in shown)
    assert ["medeval", "demo", "--real-model"] in inline_medeval_commands()


def test_the_set_up_block_installs_every_extra_the_commands_shown_need():
    """`medeval demo --real-model` failed on first use (`the gguf package is needed`): the set-up block installed
    `.[report]` only."""
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_NEEDED_BY.values()) <= set(declared)
    needed = {
        extra
        for words in readme_commands() + inline_medeval_commands()
        if words[:1] == ["medeval"]
        for word, extra in EXTRA_NEEDED_BY.items()
        if word in words[1:]
    }
    assert {"real-model", "report"} <= needed  # the README shows both kinds of command
    assert needed <= setup_extras(), f"the set-up block installs {setup_extras()}, the commands need {needed}"
    assert "gguf>=0.10" in declared["real-model"]


def _lm_eval_run_options() -> set[str]:
    """lm-eval's own `run` options (read from its private parser by this test only; the pack reads none)."""
    import argparse

    from lm_eval._cli.harness import HarnessCLI

    parser = HarnessCLI()._parser
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    return set(run._option_string_actions)


def _subcommands():
    import argparse

    from medeval_metrics.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _flags(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if w.startswith("-") and w not in ("-", "--")]


def test_every_medeval_command_shown_is_a_subcommand_with_its_own_flags():
    """In the bash blocks and in the text: the subcommand exists and each flag is one it takes; a block's command
    also parses as given (placeholders included)."""
    subcommands = _subcommands()
    blocks = [w for w in readme_commands() if w[:1] == ["medeval"]]
    wrong = []
    for words in blocks + inline_medeval_commands():
        name = words[1]
        if name not in subcommands:
            wrong.append(f"{' '.join(words)}: no subcommand {name}")
        elif name != "run":
            known = set(subcommands[name]._option_string_actions)
            wrong += [f"{' '.join(words)}: {flag}" for flag in _flags(words[2:]) if flag not in known]
    for words in blocks:
        if words[1] != "run" and words[1] in subcommands:
            subcommands[words[1]].parse_args(words[2:])  # exits (fails the test) on a value it cannot read
    assert not wrong, wrong


def test_every_flag_of_the_medeval_run_commands_shown_is_the_pack_s_or_lm_eval_s():
    from medeval_metrics.preflight import read_command_line

    theirs = _lm_eval_run_options()
    runs = [w for w in readme_commands() if w[:2] == ["medeval", "run"]]
    assert len(runs) >= 2
    for words in runs:
        settings = read_command_line(words[2:])
        assert settings.readable and not settings.problems, settings.problems
        unknown = [f for f in _flags(list(settings.passthrough)) if f not in theirs]
        assert not unknown, f"{' '.join(words)}: {unknown}"


def test_plain_lm_eval_commands_shown_use_lm_eval_s_flags():
    theirs = _lm_eval_run_options()
    shown = [w for w in readme_commands() if w[:1] == ["lm_eval"]]
    assert shown
    for words in shown:
        assert [f for f in _flags(words[1:]) if f not in theirs] == [], words


@pytest.mark.e2e
def test_a_newcomer_runs_the_readme_s_offline_commands_in_order(tmp_path):
    """From the set-up block on, as a reader would, in a fresh folder: the demo, the report and card of its run
    (the README's report command on the demo's folder), the task folder and list, `enable` into a scratch folder
    (not the installed lm-eval), the data block's run with its example path (a one-line error: no such folder),
    and each subcommand's --help. The networked steps (the Hub model, SmolLM2's download) are not run here."""
    from conftest import run_cli

    def medeval(*args, ok=True):
        proc = run_cli(list(args), cwd=tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=900)
        assert (proc.returncode == 0) == ok, f"medeval {' '.join(args)}: {proc.returncode}\n{proc.stderr[-3000:]}"
        return proc

    shown = readme_commands()
    assert ["medeval", "demo"] == next(w for w in shown if w[:1] == ["medeval"])  # the first command to run
    medeval("demo")
    assert (tmp_path / "medeval-demo" / "report" / "report.html").is_file()
    report = next(w for w in shown if w[:2] == ["medeval", "report"])
    card = tmp_path / report[report.index("--update-card") + 1]
    medeval("report", str(tmp_path / "medeval-demo" / "run"), *report[3:])
    assert (tmp_path / report[report.index("--output") + 1]).is_dir() and card.is_file()
    assert Path(medeval("tasks-path").stdout.strip(), "emsqa", "emsqa_public.yaml").is_file()
    assert "emsqa_public" in medeval("list").stdout
    assert "--include_path" in medeval("lm-eval-tasks", "enable", "--target", str(tmp_path)).stdout
    data_run = next(w for w in shown if w[:2] == ["medeval", "run"] and "--metadata" in w)
    args = [w for w in data_run[2:] if w != "..."]
    err = medeval("run", *args, ok=False).stderr.strip().splitlines()
    assert len(err) == 1 and "which does not exist. Point the pack at an existing folder" in err[0], err
    for name in sorted({w[1] for w in shown + inline_medeval_commands() if w[:1] == ["medeval"]} - {"run"}):
        medeval(name, "--help")
