"""Keys are refused where lm-eval would copy them (``--model_args``, ``--metadata``, the user's task YAMLs), before
the run, one line each naming the flag and the fix; nothing is scrubbed from results by value. So a variable whose
value happens to be a task name (``DEPLOY_TOKEN=emsqa_private``) no longer renames the task in the results."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, clear_medeval_settings, run_medeval

from medeval_metrics import cli, preflight
from medeval_metrics.data import MedevalDataError

KEY = "sk-canary-refused-0123456789abcdef"
PRIVATE = {"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    clear_medeval_settings(monkeypatch)


def problems(*argv, environ=None) -> list[str]:
    try:
        preflight.run_checks(
            ["--tasks", "emsqa_private", *argv], lm_eval_names=list, environ=environ or {}, check_options=True
        )
    except MedevalDataError as exc:
        return getattr(exc, "problems", None) or [str(exc)]
    return []


@pytest.mark.parametrize(
    "model_args, field",
    [
        (f"model=m,base_url=http://127.0.0.1:9/v1,api_key={KEY}", "api_key"),
        ("model=m,auth_token=gw-0123456789", "auth_token"),
        (
            json.dumps({"model": "m", "header": {"X-Gateway-Auth": "gw-0123456789", "Accept": "*/*"}}),
            "header.X-Gateway-Auth",
        ),
        (json.dumps({"model": "m", "extra": {"note": f"Bearer {KEY}"}}), "extra.note"),
        ("model=m,base_url=http://user:pa55word@127.0.0.1:9/v1", "base_url"),
    ],
)
def test_a_key_in_model_args_is_refused_naming_the_field_and_the_variable_to_use(model_args, field):
    found = [p for p in problems("--model", "local-chat-completions", "--model_args", model_args) if "holds a key" in p]
    assert len(found) == 1, found
    assert found[0].startswith(f"--model_args {field} holds a key, and lm-eval copies --model_args into the results")
    assert "MEDEVAL_MODEL_API_KEY_ENV" in found[0] and KEY not in found[0] and "gw-0123456789" not in found[0]


def test_settings_that_merely_look_like_keys_pass():
    model_args = "pretrained=x,token=True,add_bos_token=True,max_length=2048,tokenizer=gpt2"
    assert [p for p in problems("--model", "local-completions", "--model_args", model_args) if "holds a key" in p] == []


def test_a_key_in_metadata_is_refused_and_a_judge_s_key_variable_name_is_not_a_key():
    metadata = {**PRIVATE, "api_key": KEY}
    found = problems("--metadata", json.dumps(metadata), "--allow-unknown-metadata")
    assert found == [
        "--metadata api_key holds a key, and lm-eval copies --metadata into every task's config in the results JSON; "
        "give it in an environment variable instead (a judge's key: its variable's name as api_key_env in the "
        "judges file)."
    ]
    panel = {"judges": [{"name": "a", "backend": "local-chat-completions", "model": "m", "api_key_env": "PANEL_KEY"}]}
    assert not [
        p for p in problems("--metadata", json.dumps({**PRIVATE, "medeval_judges": panel})) if "holds a key" in p
    ]


def test_a_variable_s_value_that_is_a_task_name_is_no_key():
    """The bug of the by-value redaction: DEPLOY_TOKEN=emsqa_private made every emsqa_private a secret."""
    environ = {"DEPLOY_TOKEN": "emsqa_private"}
    metadata = {"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json"), "emsqa_revision": "emsqa_private"}
    assert problems("--metadata", json.dumps(metadata), environ=environ) == []


def test_a_key_written_in_one_of_the_user_s_task_yamls_is_refused_naming_the_file(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "mine.yaml").write_text(
        f"task: my_probe\ndataset_path: json\noutput_type: generate_until\nmetadata:\n  version: 1\n  api_key: {KEY}\n"
    )
    found = [p for p in problems("--include_path", str(tasks), "--metadata", json.dumps(PRIVATE)) if "holds a key" in p]
    assert found == [
        f"{tasks / 'mine.yaml'}: metadata.api_key holds a key, and lm-eval copies each task's config into the results "
        "JSON; read the key from an environment variable in the task's code instead."
    ]


def test_the_pack_s_own_task_yamls_hold_no_key():
    from pathlib import Path

    from medeval_metrics import tasks_path
    from medeval_metrics.preflight.keys import task_yaml_credential_problems

    assert task_yaml_credential_problems(sorted(Path(tasks_path()).rglob("*.yaml")), {}) == []


def test_medeval_run_stops_on_a_key_in_model_args_before_lm_eval_starts(monkeypatch, capsys):
    import lm_eval.__main__

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: pytest.fail("lm-eval started"))
    code = cli.main(
        [
            "run",
            "--model",
            "local-chat-completions",
            "--model_args",
            f"model=m,base_url=http://127.0.0.1:9/v1,api_key={KEY}",
            "--tasks",
            "emsqa_private",
            "--metadata",
            json.dumps(PRIVATE),
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2 and "medeval: error: --model_args api_key holds a key, and lm-eval copies" in err and KEY not in err
    )


@pytest.mark.e2e
def test_a_variable_holding_a_task_s_name_leaves_the_results_and_the_report_whole(tmp_path, capsys, monkeypatch):
    """Before: with DEPLOY_TOKEN=emsqa_private the run exited 0 but its results JSON held the task under
    [REDACTED:DEPLOY_TOKEN], and `medeval report` then found no medeval task."""
    from conftest import find_results

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": '["a"]'}))
    out = tmp_path / "out"
    proc = run_medeval(
        [
            "run",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={table}",
            "--tasks",
            "emsqa_private",
            "--limit",
            "4",
            "--metadata",
            json.dumps(PRIVATE),
            "--output_path",
            str(out),
            "--log_samples",
        ],
        capsys,
        monkeypatch,
        env={"DEPLOY_TOKEN": "emsqa_private"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = find_results(out)
    assert "emsqa_private" in results["results"] and "emsqa_private" in results["configs"] and samples["emsqa_private"]
    assert "[REDACTED" not in json.dumps(results)
    report = run_medeval(["report", str(out), "--output", str(tmp_path / "report")], capsys)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "emsqa_private" in (tmp_path / "report" / "results.md").read_text()
