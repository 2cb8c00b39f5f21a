"""A judge URL's ``user:password@`` is used for the request but never written or printed (issue 32).

``medeval run`` hands a panel whose URL holds credentials to the tasks through ``$MEDEVAL_JUDGES`` for the run,
not through the ``--metadata`` lm-eval copies into every task's config in the results JSON; every line the pack
prints is cleaned of ``user:password@`` before a host, with or without the URL's scheme.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

from medeval_metrics.cli import _judges_variable, panel_outside_lm_eval_metadata
from medeval_metrics.judge.config import panel_as_recorded, panel_url_credentials
from medeval_metrics.preflight import read_command_line, with_judge_panel
from medeval_metrics.redact import redact_for_display, redact_text

PASSWORD = "pw-canary-5e6f7a8b9c"
USER = "judge-user"
URL = f"http://{USER}:{PASSWORD}@127.0.0.1:8000/v1/chat/completions"


def _panel(url: str = URL, cache: str | None = None) -> dict:
    return {
        "judges": [{"name": "a", "backend": "local-chat-completions", "model": "a", "base_url": url}],
        "cache": cache,
    }


@pytest.mark.parametrize(
    "line",
    [
        f"judge a: cannot connect to {USER}:{PASSWORD}@127.0.0.1:8000: is the judge's server running?",
        f"HTTP 401 from {USER}:{PASSWORD}@judge.example.org/v1",
        f"'base_url': '{URL}'",
        f"at {USER}:{PASSWORD}@[::1]:8000",
    ],
)
def test_user_and_password_before_a_host_are_redacted_with_or_without_the_scheme(line):
    # before: the pattern needed "://" in front, so "cannot connect to user:pass@127.0.0.1:..." went out whole
    for cleaned in (redact_text(line), redact_for_display(line)):
        assert PASSWORD not in cleaned and USER not in cleaned


@pytest.mark.parametrize("line", ["the answer is 10:30 at the clinic", "git@github.com:org/repo", "a@b: c"])
def test_text_that_only_looks_alike_is_left_alone(line):
    assert redact_text(line) == line


def test_a_panel_with_url_credentials_is_told_apart_and_recorded_without_them():
    assert panel_url_credentials(_panel()) and panel_url_credentials(json.dumps(_panel()))
    assert not panel_url_credentials(_panel(URL.replace(f"{USER}:{PASSWORD}@", "")))
    assert not panel_url_credentials("/path/judges.yaml")  # a file's path: the file is the user's own
    recorded = panel_as_recorded(json.dumps(_panel()))
    assert json.loads(recorded)["judges"][0]["base_url"] == "http://127.0.0.1:8000/v1/chat/completions"


@pytest.mark.parametrize(
    "given",
    [
        ["--judge-model", "jm", "--judge-base-url", URL],
        ["--metadata", json.dumps({"medeval_judges": _panel()})],
        ["--metadata", json.dumps({"medeval_judges": json.dumps(_panel())}), "--metadata", "x_other=1"],
    ],
    ids=["flags", "inline-metadata", "inline-json-text"],
)
def test_the_panel_with_credentials_leaves_lm_eval_s_metadata_for_the_variable(given, monkeypatch):
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    argv = ["--model", "hf", "--tasks", "medicationqa", *given, "--metadata", '{"medicationqa_path": "/m.json"}']
    settings, panel, metadata = panel_outside_lm_eval_metadata(with_judge_panel(read_command_line(argv)))
    # before: the panel (with its password) was in the --metadata lm-eval writes into the results JSON
    assert PASSWORD not in " ".join(settings.lm_eval_argv) and "medeval_judges" not in " ".join(settings.lm_eval_argv)
    assert metadata["medicationqa_path"] == "/m.json" and "medeval_judges" not in metadata
    assert '"medicationqa_path": "/m.json"' in " ".join(settings.lm_eval_argv)
    assert PASSWORD in panel and json.loads(panel)["judges"][0]["base_url"].startswith(f"http://{USER}:")
    assert PASSWORD not in json.dumps(settings.metadata)  # what the checks see: the URL without credentials
    assert "127.0.0.1:8000" in json.dumps(settings.metadata)
    assert PASSWORD not in redact_text(f"the password {PASSWORD} alone")  # registered: redacted by value too
    with _judges_variable(panel):
        assert os.environ["MEDEVAL_JUDGES"] == panel
    assert "MEDEVAL_JUDGES" not in os.environ


def test_a_panel_without_credentials_or_a_file_path_stays_in_the_metadata(monkeypatch):
    monkeypatch.setenv("MEDEVAL_JUDGES", "the user's own")
    plain = _panel(URL.replace(f"{USER}:{PASSWORD}@", ""))
    for value in (plain, "/path/judges.yaml"):
        settings = read_command_line(["--tasks", "medicationqa", "--metadata", json.dumps({"medeval_judges": value})])
        assert panel_outside_lm_eval_metadata(settings) == (settings, None, settings.metadata)
    with _judges_variable(json.dumps(plain)):
        assert os.environ["MEDEVAL_JUDGES"] != "the user's own"
    assert os.environ["MEDEVAL_JUDGES"] == "the user's own"  # put back after the run


def _everything(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.e2e  # `medeval run` (scripted model, loopback judge) and `medeval judge` as subprocesses
@pytest.mark.parametrize("how", ["flags", "inline-metadata", "judges-file"])
def test_no_url_password_in_any_file_or_console_line_and_the_judge_still_authenticates(tmp_path, how):
    umask = os.umask(0o022)  # the usual default: the files with answers and verdicts are 0600 all the same
    try:
        _run_and_judge_with_url_credentials(tmp_path, how)
    finally:
        os.umask(umask)


def _run_and_judge_with_url_credentials(tmp_path: Path, how: str) -> None:
    import stat

    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    rows = [
        {"question": f"can i take drug{i} with food", "focus_drug": f"drug{i}", "question_type": "Dose",
         "answer": f"Drug{i} can be taken with food.", "section_title": "Use", "url": "https://example.org"}
        for i in range(3)
    ]  # fmt: skip
    data, table, out = tmp_path / "m.json", tmp_path / "table.json", tmp_path / "out"
    data.write_text(json.dumps(rows))
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": "Take it with food."}))
    home = tmp_path / "home"  # the default judge cache (~/.cache/medeval) lands here, not in the user's home
    with FakeJudgeServer() as server:
        url = server.url.replace("http://", f"http://{USER}:{PASSWORD}@")
        panel = _panel(url, cache=str(tmp_path / "judges.sqlite"))
        judges_file = tmp_path / "judges.json"
        judges_file.write_text(json.dumps(panel))
        metadata = {"medicationqa_path": str(data)}
        given = {
            "flags": ["--judges", str(judges_file), "--judge-model", "jm", "--judge-base-url", url],
            "inline-metadata": [],
            "judges-file": ["--judges", str(judges_file)],
        }[how]
        if how == "inline-metadata":
            metadata["medeval_judges"] = panel
        run = run_cli(
            ["run", "--tasks", "medicationqa", "--model", "medeval-scripted", "--model_args", f"table={table}",
             "--output_path", str(out), "--log_samples", "--use_cache", str(tmp_path / "lm"),
             "--metadata", json.dumps(metadata), *given],
            cwd=tmp_path, env={"HOME": str(home), "MEDEVAL_JUDGES": ""}, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        run_requests = server.count()
        rejudge = tmp_path / "rejudge.json"  # a cache of its own: every verdict is asked again, with the credentials
        rejudge.write_text(json.dumps(_panel(url, cache=str(tmp_path / "rejudge.sqlite"))))
        judged = run_cli(
            ["judge", str(out), "--judges", str(rejudge), "--quiet"],
            cwd=tmp_path, env={"HOME": str(home)}, timeout=300,
        )  # fmt: skip
        assert judged.returncode == 0, judged.stderr[-3000:]
        seen = [request["authorization"] for request in server.requests]
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert run_requests >= 3 and len(seen) >= 2 * run_requests  # the run's verdicts, then all asked again
    assert set(seen) == {expected}  # the URL's credentials still authenticate every request
    results = json.loads(next(p for p in out.rglob("results_*.json") if "_judged" not in p.name).read_text())
    assert results["results"]["medicationqa"]["judge_computed,scored"] == 1.0
    block = json.loads(next(out.rglob("results_*_judged.json")).read_text())["medeval_judge"]["medicationqa"]
    assert block["judges"][0]["base_url"] == server.url  # recorded without its credentials
    written = _everything(out)
    for path in [*out.rglob("samples_*.jsonl"), *out.rglob("results_*.json"), *out.rglob("judged_*.jsonl")]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path  # answers and verdicts: the user's alone
    consoles = run.stdout + run.stderr + judged.stdout + judged.stderr
    assert PASSWORD not in written and USER not in written
    assert PASSWORD not in consoles and USER not in consoles
    for path in [*tmp_path.glob("lm*"), *(p for p in tmp_path.rglob("*.sqlite*") if p.is_file())]:
        assert PASSWORD.encode() not in path.read_bytes(), path


def test_a_token_given_as_the_url_user_name_alone_is_taken_out_and_redacted(monkeypatch):
    """``https://TOKEN@host``: no password, the user name is the credential (found by a review: it was moved out of
    --metadata but not registered, so a line quoting the URL showed it)."""
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    token = "tok4b1c2d3e4f5a6b7c8d9e0"
    url = f"http://{token}@127.0.0.1:8000/v1/chat/completions"
    argv = ["--model", "hf", "--tasks", "medicationqa", "--judge-model", "jm", "--judge-base-url", url]
    settings, panel, _ = panel_outside_lm_eval_metadata(with_judge_panel(read_command_line(argv)))
    assert (
        token in panel and token not in " ".join(settings.lm_eval_argv) and token not in json.dumps(settings.metadata)
    )
    assert token not in redact_text(f"cannot connect to {url}")
