"""``medeval judge``: a panel is required, flags build one, a dead judge speaks up and stops early,
and a judged results file is never replaced by one that judged less."""

from __future__ import annotations

import json

import pytest
from conftest import closed_port_url

from medeval_metrics.cli import main
from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.cli import unscored_exit_code
from medeval_metrics.judge.config import panel_from_flags, panel_from_obj
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC
from medeval_metrics.testing.fake_judge import FakeJudgeServer

# a judges file supplies only the settings when --judge-model is given: fast backoff for the tests
FAST = [
    "--judges",
    json.dumps(
        {"judges": [{"backend": "hf", "model": "unused"}], "cache": None, "backoff_base": 0.001, "backoff_max": 0.001}
    ),
]


def write_run(folder, n=3):
    folder.mkdir(exist_ok=True)
    with (folder / "samples_medicationqa_2026-01-01T00-00-00.jsonl").open("w") as handle:
        for i in range(n):
            doc = {"question": f"q{i}", "answer": "Take with food.", "question_type": "Dose"}
            handle.write(
                json.dumps({"doc_id": i, "doc": doc, "resps": [["Take it with food."]], "filter": "scored"}) + "\n"
            )
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {"medicationqa": {}}}))


def test_without_a_panel_it_is_an_error_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    write_run(tmp_path / "run")
    assert main(["judge", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no judge panel" in err
    assert not list((tmp_path / "run").glob("*_judged.json"))


def test_flags_build_a_panel_by_position_with_broadcast():
    panel = panel_from_flags(["gpt-4o", "llama"], ["http://h:8000/v1"], ["K1", "K2"])
    assert [(j.model, j.backend, j.base_url, j.api_key_env) for j in panel.judges] == [
        ("gpt-4o", "local-chat-completions", "http://h:8000/v1/chat/completions", "K1"),
        ("llama", "local-chat-completions", "http://h:8000/v1/chat/completions", "K2"),
    ]
    assert panel_from_flags(["gpt-4o"]).judges[0].backend == "openai-chat-completions"
    assert [j.name for j in panel_from_flags(["m", "m"], ["http://a/v1", "http://b/v1"]).judges] == ["m_1", "m_2"]
    with pytest.raises(MedevalDataError, match="given 2 times for 3 --judge-model"):
        panel_from_flags(["a", "b", "c"], ["http://x", "http://y"])


def test_dead_judge_is_stopped_early_and_fails_the_command(tmp_path, capsys):
    url = closed_port_url()
    panel = panel_from_obj(
        {
            "judges": [{"name": "dead", "backend": "local-chat-completions", "model": "m", "base_url": url}],
            "cache": None,
            "concurrency": 1,
            "max_retries": 2,
            "fail_fast": 3,
            "backoff_base": 0.001,
            "backoff_max": 0.001,
        },
        "t",
    )
    out = PanelRunner(panel, RUBRIC).judge([JudgeItem(f"q{i}", "r", "a") for i in range(10)], progress=False)
    verdicts = [row["dead"] for row in out]
    assert verdicts[0]["unscored_reason"] == "connection error after 3 request(s)"
    assert sum(v["requests"] for v in verdicts) == 3  # not 3 per item
    assert all(v["unscored_reason"].startswith("judge stopped: its first 3 requests all failed") for v in verdicts[1:])
    # the CLI's rule: a judge that scored nothing is exit 3 with one line, unless allowed
    write_run(tmp_path / "run")
    code = main(
        [
            "judge",
            str(tmp_path / "run"),
            "--quiet",
            *FAST,
            "--judge-model",
            "m",
            "--judge-base-url",
            url,
            "--skip-judge-check",
        ]
    )  # the judge dies after the check: its verdicts say so
    captured = capsys.readouterr()
    assert code == 3 and "judge(s) scored nothing: m (" in captured.err and captured.err.count("\n") == 1
    assert "judge m: 0 scored, 3 unscored (top reason: " in captured.out
    assert unscored_exit_code({"m": {"scored": 0, "unscored": 3, "top_reason": "x"}}, allow_unscored=True) == (0, None)


def test_a_judged_file_is_never_replaced_by_one_that_judged_less(tmp_path, capsys):
    write_run(tmp_path / "run")
    judged = tmp_path / "run" / "results_2026-01-01T00-00-00_judged.json"
    with FakeJudgeServer() as server:
        assert (
            main(
                [
                    "judge",
                    str(tmp_path / "run"),
                    "--quiet",
                    *FAST,
                    "--judge-model",
                    "m",
                    "--judge-base-url",
                    server.url.removesuffix("/chat/completions"),
                ]
            )
            == 0
        )
    good = json.loads(judged.read_text())
    block = good["medeval_judge"]["medicationqa"]
    assert block["items_scored"] == 3 and block["judges"][0]["base_url"].startswith("http://127.0.0.1")
    assert block["settings"]["max_reasks"] == 1 and block["rubric_hash"] == RUBRIC.content_hash()
    # now the judge is down: the good file stays as it was
    code = main(
        [
            "judge",
            str(tmp_path / "run"),
            "--quiet",
            *FAST,
            "--judge-model",
            "m",
            "--judge-base-url",
            closed_port_url(),
            "--allow-unscored",
            "--skip-judge-check",
        ]
    )
    assert code == 0 and json.loads(judged.read_text()) == good
    assert "kept" in capsys.readouterr().out


def test_a_helm_prompt_rubric_file_runs_end_to_end(tmp_path, capsys):
    from pathlib import Path

    from medeval_metrics.testing.fake_judge import default_scores

    rubric_file = Path(__file__).parents[1] / "fixtures" / "rubric_helm_style.yaml"
    write_run(tmp_path / "run", n=4)
    with FakeJudgeServer(style="helm") as server:  # HELM-shaped verdicts: "explanation", no answer id
        judges = {
            "judges": [{"name": "h", "backend": "local-chat-completions", "model": "jm", "base_url": server.url}],
            "cache": str(tmp_path / "c.sqlite"),
            "rubric": str(rubric_file),
        }
        assert main(["judge", str(tmp_path / "run"), "--quiet", "--judges", json.dumps(judges)]) == 0
        sent = server.requests[0]
    assert sent["turns"] == 1  # one user message, as HELM sends it
    results = json.loads((tmp_path / "run" / "results_2026-01-01T00-00-00_judged.json").read_text())
    block = results["medeval_judge"]["medicationqa"]
    assert block["rubric"] == "helm-style-medicationqa" and block["items_scored"] == 4
    expected = sum(sum(default_scores("jm", f"q{i}").values()) / 3 for i in range(4)) / 4
    assert results["results"]["medicationqa"]["judge_panel_score,scored"] == pytest.approx(expected)
    assert results["results"]["medicationqa"]["judge_id_echo_rate,scored"] == 0.0


def test_run_side_exit_code_for_medeval_run():
    from medeval_metrics.judge.cli import run_unscored_exit_code

    # per judge, from the samples the run logged: a scored both items, b neither
    verdicts = {"a": {"scores": {"accuracy": 4}}, "b": {"scores": None, "unscored_reason": "HTTP 500"}}
    results = {
        "results": {"medicationqa": {"judge_verdicts,scored": 1.0}, "emsqa_public_mc": {"acc,none": 0.0}},
        "samples": {"medicationqa": [{"judge_verdicts": verdicts}, {"judge_verdicts": json.dumps(verdicts)}]},
    }
    assert run_unscored_exit_code(results) == (
        3,
        "judge(s) scored nothing: b (medicationqa). Fix them, or pass --allow-unscored.",
    )
    assert run_unscored_exit_code(results, allow_unscored=True) == (0, None)


def test_rate_limits_at_the_start_do_not_stop_a_judge():
    script = {("j1", f"q{i}"): [{"status": 429, "headers": {"Retry-After": "0"}}] * 2 for i in range(4)}
    with FakeJudgeServer(script=script) as server:
        panel = panel_from_obj(
            {
                "judges": [{"name": "j", "backend": "local-chat-completions", "model": "j1", "base_url": server.url}],
                "cache": None,
                "concurrency": 1,
                "max_retries": 2,
                "fail_fast": 3,
            },
            "t",
        )
        out = PanelRunner(panel, RUBRIC).judge([JudgeItem(f"q{i}", "r", "a") for i in range(4)], progress=False)
    assert all(row["j"]["scores"] for row in out)  # 8 rate-limited requests first, then every item scored


def test_a_run_its_own_panel_judged_is_not_replaced_by_a_dead_panel_and_judge_metrics_never_mix(tmp_path, capsys):
    """The run's own verdicts count as "judged" too; a re-judge replaces every judge metric of the task."""
    folder = tmp_path / "run"
    write_run(folder)
    samples = folder / "samples_medicationqa_2026-01-01T00-00-00.jsonl"
    scored = {
        "old": {"scores": {"accuracy": 4, "completeness": 4, "clarity": 4}, "unscored_reason": None, "id_echoed": False}
    }
    lines = [{**json.loads(line), "judge_verdicts": json.dumps(scored)} for line in samples.read_text().splitlines()]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps({"results": {"medicationqa": {"judge_success_old,scored": 1.0, "judge_panel_score,scored": 4.0}}})
    )
    code = main(
        [
            "judge",
            str(folder),
            "--quiet",
            *FAST,
            "--judge-model",
            "m",
            "--judge-base-url",
            closed_port_url(),
            "--allow-unscored",
            "--skip-judge-check",
        ]
    )
    assert code == 0 and not list(folder.glob("*_judged.json"))  # the run's own 3 scored items stay the result
    assert "kept the results on file" in capsys.readouterr().out
    with FakeJudgeServer() as server:
        assert (
            main(
                [
                    "judge",
                    str(folder),
                    "--quiet",
                    *FAST,
                    "--judge-model",
                    "m",
                    "--judge-base-url",
                    server.url.removesuffix("/chat/completions"),
                ]
            )
            == 0
        )
    task = json.loads((folder / "results_2026-01-01T00-00-00_judged.json").read_text())["results"]["medicationqa"]
    assert "judge_success_old,scored" not in task  # no judge of another panel left beside this one
    # per-judge success is no metric (task version 5): it is in the medeval_judge block and the verdicts
    assert not [k for k in task if k.startswith("judge_success_")]
    block = json.loads((folder / "results_2026-01-01T00-00-00_judged.json").read_text())["medeval_judge"]
    assert list(block["medicationqa"]["per_judge"]) == ["m"] and block["medicationqa"]["per_judge"]["m"]["scored"] > 0
