"""Settings are bounded before use (length, control characters), and an error quotes at most a short, escaped
excerpt of a bad value (issue 32: a 120 KB MEDEVAL_JUDGES was `OSError: File name too long`, a 120 KB
MEDEVAL_EMRQA_SAMPLE_SIZE was echoed whole, an escape sequence in a path reached the terminal raw)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_medeval

from medeval_metrics.checksums import check_known_checksum
from medeval_metrics.command_line import merge_key_values
from medeval_metrics.emrqa.sampling import sample_size
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import (
    EXCERPT_CHARS,
    MAX_VALUE_CHARS,
    checked_value,
    env_setting,
    excerpt,
    flag_setting,
    setting,
)

HUGE = "x" * 120_000
ESCAPE = "/tmp/\x1b[2J\x1b[31mdata.json"  # clears the screen and turns the text red when printed raw


def test_excerpt_is_short_escaped_and_says_how_long_the_value_was():
    assert excerpt("12") == "'12'"
    assert excerpt(HUGE) == f"'{'x' * EXCERPT_CHARS}'... (120,000 characters)"
    assert excerpt(ESCAPE) == "'/tmp/\\x1b[2J\\x1b[31mdata.json'" and "\x1b" not in excerpt(ESCAPE)
    assert excerpt("a\u202eb") == "'a\\u202eb'"  # a right-to-left override shown as its code point
    assert excerpt("é") == "'é'"  # printable text as it is
    assert len(excerpt(list(range(100_000)))) < 100 and len(excerpt({"k": HUGE})) < 100


@pytest.mark.parametrize(
    "value, problem",
    [
        (HUGE, "is 120,000 characters long, more than a value of it can be (4,096)"),
        (ESCAPE, "holds a control character (U+001B at character 6)"),
        ("a\rb", "holds a control character (U+000D at character 2)"),
        ("a\u202eb", "holds a control character (U+202E at character 2)"),
    ],
)
def test_a_bad_value_is_refused_naming_where_with_an_excerpt(value, problem, monkeypatch):
    monkeypatch.setenv("MEDEVAL_EMRQA_SAMPLE_SIZE", value)
    with pytest.raises(MedevalDataError) as caught:
        setting({}, "emrqa_sample_size")
    message = str(caught.value)
    assert message.startswith(f"MEDEVAL_EMRQA_SAMPLE_SIZE {problem}")
    assert len(message) < 300 and "\x1b" not in message and "\r" not in message and "\u202e" not in message
    with pytest.raises(MedevalDataError, match="^--metadata emrqa_sample_size "):
        setting({"emrqa_sample_size": value}, "emrqa_sample_size")


def test_good_values_pass_and_an_inline_panel_may_be_long_and_pretty_printed():
    assert checked_value("/data/emsqa private/test_open.json", "x") == "/data/emsqa private/test_open.json"
    assert checked_value("a\tb", "x") == "a\tb" and checked_value(5, "x") == 5
    assert checked_value("y" * MAX_VALUE_CHARS, "x")
    panel = '{\n  "judges": [\r\n' + " " * 200_000 + "]}"
    assert checked_value(panel, "MEDEVAL_JUDGES", "MEDEVAL_JUDGES") == panel
    with pytest.raises(MedevalDataError, match=r"U\+000A"):
        checked_value("a\nb", "MEDEVAL_EMSQA_PRIVATE_PATH", "MEDEVAL_EMSQA_PRIVATE_PATH")
    assert env_setting("MEDEVAL_NOT_SET_ANYWHERE") is None


def test_a_huge_judges_variable_without_a_slash_is_one_short_line(monkeypatch):
    from medeval_metrics.judge.config import load_panel

    monkeypatch.setenv("MEDEVAL_JUDGES", HUGE)  # before: OSError: File name too long
    with pytest.raises(MedevalDataError) as caught:
        load_panel()
    message = str(caught.value)
    assert message.startswith("MEDEVAL_JUDGES: 'xxxx") and "(120,000 characters) is neither inline JSON" in message
    assert len(message) < 300


@pytest.mark.parametrize("value", ["n" * 300, "judges-" + "a" * 250 + ".yaml"])
def test_a_judges_path_the_system_cannot_open_is_one_line(value, monkeypatch):
    from medeval_metrics.judge.config import load_panel

    monkeypatch.setenv("MEDEVAL_JUDGES", value)  # one name longer than 255 bytes: ENAMETOOLONG from stat
    with pytest.raises(MedevalDataError, match="^MEDEVAL_JUDGES: .*judges file") as caught:
        load_panel()
    assert len(str(caught.value)) < 400


def test_flag_and_seed_errors_quote_an_excerpt(monkeypatch):
    from medeval_metrics.emrqa.sources import split_seed

    with pytest.raises(MedevalDataError) as caught:
        flag_setting("maybe" * 500, "--metadata emsqa_allow_duplicates")
    assert len(str(caught.value)) < 200 and "(2,500 characters)" in str(caught.value)
    with pytest.raises(MedevalDataError) as caught:
        split_seed({"emrqa_seed": "7" * 10 + "z" * 3000})  # before: all 3,010 characters
    assert len(str(caught.value)) < 200 and "(3,010 characters)" in str(caught.value)


@pytest.mark.parametrize(
    "variable, value, tasks, expected",
    [
        ("MEDEVAL_JUDGES", HUGE, "medicationqa", "MEDEVAL_JUDGES: 'xxxxxxxxxx"),
        ("MEDEVAL_EMSQA_PRIVATE_PATH", ESCAPE, "emsqa_private", "MEDEVAL_EMSQA_PRIVATE_PATH holds a control character"),
        ("MEDEVAL_EMSQA_PRIVATE_PATH", "/" + HUGE, "emsqa_private", "MEDEVAL_EMSQA_PRIVATE_PATH is 120,001 characters"),
    ],
)
def test_medeval_run_says_so_in_short_escaped_lines(variable, value, tasks, expected, capsys, monkeypatch):
    monkeypatch.setenv(variable, value)
    proc = run_medeval(["run", "--tasks", tasks, "--model", "medeval-scripted"], capsys)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "OSError" not in proc.stderr
    assert any(line.startswith(f"medeval: error: {expected}") for line in proc.stderr.splitlines()), proc.stderr
    assert "\x1b" not in proc.stderr and max(len(line) for line in proc.stderr.splitlines()) < 700


def test_every_pack_variable_can_be_checked_before_a_run():
    from medeval_metrics.settings import variable_value_problems

    environ = {
        "MEDEVAL_DATA_CHECKSUMS": "warn\x1b[8m",
        "MEDEVAL_MODEL_MAX_REPLY_MB": HUGE,
        "MEDEVAL_SEED": "1",
        "PATH": HUGE,
    }
    assert [line.split(" ", 1)[0] for line in variable_value_problems(environ)] == [
        "MEDEVAL_DATA_CHECKSUMS",
        "MEDEVAL_MODEL_MAX_REPLY_MB",
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda bad: sample_size({"emrqa_sample_size": bad}),
        lambda bad: check_known_checksum(Path("test_open.json"), mode=bad),
        lambda bad: merge_key_values("--metadata", [[bad]]),
    ],
    ids=["emrqa_sample_size", "MEDEVAL_DATA_CHECKSUMS", "--metadata key=value"],
)
@pytest.mark.parametrize("escape", ["\x1b[31m", ""], ids=["with an escape sequence", "plain"])
def test_errors_quote_a_short_escaped_excerpt_of_a_long_bad_value(call, escape):
    bad = escape + "z" * 3000  # under the 4,096-character bound
    with pytest.raises(MedevalDataError) as info:
        call(bad)
    message = str(info.value)
    assert "\x1b" not in message  # shown escaped, never acting on the terminal
    assert "z" * 100 not in message and f"{len(bad):,} characters" in message


def test_medeval_run_checks_bound_the_variables_read_outside_the_setting_reader():
    """MEDEVAL_MODEL_MAX_REPLY_MB and MEDEVAL_REAL_MODEL_SOURCE are read where they are used: the pre-run checks
    bound them first, each in one line with an escaped excerpt."""
    from test_run_checks_every_selection import problems_of

    environ = {"MEDEVAL_MODEL_MAX_REPLY_MB": "9" * 5000, "MEDEVAL_REAL_MODEL_SOURCE": "/tmp/\x1b[31mx"}
    problems = problems_of("--tasks", "emsqa_private", "--limit", "1", environ=environ)
    assert any(p.startswith("MEDEVAL_MODEL_MAX_REPLY_MB is 5,000 characters long") for p in problems), problems
    assert any(p.startswith("MEDEVAL_REAL_MODEL_SOURCE holds a control character") for p in problems), problems
    assert not any("\x1b" in p or "9" * 100 in p for p in problems)
