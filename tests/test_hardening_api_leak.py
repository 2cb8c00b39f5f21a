"""Canary keys through real retried API failures: an evaluated API model (lm-eval's
``openai-chat-completions``) against a loopback server that answers 429 and 500 before succeeding.

Plain ``lm_eval`` is the control: it prints the key (and writes a key given in --model_args into
the results JSON), which shows the check below can fail. ``medeval run`` must leave no trace of
either key in stdout, stderr (lm-eval's log), the results JSON or the sample logs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.testing.fake_api import FakeChatServer
from conftest import FIXTURES, find_results, run_cli, run_lm_eval_cli

ENV_KEY_CANARY = "canary-env-9f8e7d6c5b4a3210"
ARG_KEY_CANARY = "canary-arg-1a2b3c4d5e6f7788"
FAILURES = {1: 429, 2: 500}  # arrival order -> status; lm-eval retries each
ANSWERS = {"q0": "A", "q1": "B", "q2": "C", "q3": "D", "q4": "A", "q5": "B"}
SERVER_SAYS = {**ANSWERS, "q5": "C"}  # one wrong answer: exact_match 5/6


def _write_task(folder: Path) -> Path:
    docs = folder / "docs.jsonl"
    docs.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in ANSWERS.items()))
    tasks = folder / "tasks"
    tasks.mkdir()
    (tasks / "leak_probe.yaml").write_text(
        "task: leak_probe\n"
        "dataset_path: json\n"
        f"dataset_kwargs: {{data_files: {{test: {docs}}}}}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        'doc_to_text: "Item {{question}}. Answer:"\n'
        "doc_to_target: answer\n"
        'generation_kwargs: {until: ["\\n"], max_gen_toks: 4, do_sample: false}\n'
        "metric_list:\n"
        "  - {metric: exact_match, aggregation: mean, higher_is_better: true}\n"
        "metadata: {version: 1.0}\n"
    )
    return tasks


def _answer(messages: list[dict]) -> str:
    text = " ".join(str(m.get("content", "")) for m in messages)
    return next((a for q, a in SERVER_SAYS.items() if f"Item {q}." in text), "?")


def _run(kind: str, tasks: Path, out: Path, cwd: Path) -> tuple[str, list[int], dict]:
    with FakeChatServer(answer=_answer, fail=FAILURES, max_requests=40) as server:
        args = [
            "--model", "openai-chat-completions",
            "--model_args",
            f"model=fake-gpt,base_url={server.chat_url},num_concurrent=2,max_retries=3,auth_token={ARG_KEY_CANARY}",
            "--include_path", str(tasks), "--tasks", "leak_probe", "--apply_chat_template",
            "--output_path", str(out), "--log_samples",
        ]
        env = {"OPENAI_API_KEY": ENV_KEY_CANARY}
        runner = run_lm_eval_cli if kind == "plain" else run_cli
        result = runner(args if kind == "plain" else ["run", *args], cwd=cwd, env=env, timeout=300)
        statuses = server.statuses
        auth_headers = {r["headers"].get("Authorization") for r in server.requests}
    assert result.returncode == 0, result.stderr[-3000:]
    # the key really was sent, and the failures really were retried
    assert auth_headers == {f"Bearer {ENV_KEY_CANARY}"}
    assert statuses.count(429) == 1 and statuses.count(500) == 1
    assert statuses.count(200) == len(ANSWERS)
    files = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
    return result.stdout + result.stderr, statuses, files


@pytest.mark.e2e
def test_api_key_never_printed_or_written_through_retried_failures(tmp_path):
    tasks = _write_task(tmp_path)

    # Control: plain lm-eval leaks both keys (if this stops holding, lm-eval was fixed upstream).
    console, _, files = _run("plain", tasks, tmp_path / "out-plain", tmp_path)
    assert ENV_KEY_CANARY in console, "control: plain lm-eval no longer logs the key on retried errors"
    assert "ClientResponseError" in console
    results_text = next(text for name, text in files.items() if "results_" in name)
    assert ARG_KEY_CANARY in results_text, "control: lm-eval no longer copies model_args into the results JSON"

    # Protected: the same run through `medeval run`.
    out = tmp_path / "out-medeval"
    console, statuses, files = _run("medeval", tasks, out, tmp_path)
    assert "ClientResponseError" in console and "Authorization': 'Bearer [REDACTED:OPENAI_API_KEY]'" in console
    assert ENV_KEY_CANARY not in console and ARG_KEY_CANARY not in console
    assert any(name.endswith(".jsonl") for name in files) and any("results_" in name for name in files)
    for name, text in files.items():
        assert ENV_KEY_CANARY not in text and ARG_KEY_CANARY not in text, f"key written to {name}"
    results, samples = find_results(out)
    assert results["results"]["leak_probe"]["exact_match,none"] == pytest.approx(5 / 6)
    assert results["config"]["model_args"]["auth_token"] == "[REDACTED]"
    assert sorted(s["filtered_resps"][0] for s in samples["leak_probe"]) == sorted(SERVER_SAYS.values())


EMSQA_ITEMS = json.loads((FIXTURES / "emsqa_synthetic.json").read_text())


def _emsqa_gold(item: dict) -> list[str]:
    return [item["answer"]] if isinstance(item["answer"], str) else sorted(item["answer"])


@pytest.mark.e2e
def test_plain_lm_eval_with_a_pack_task_is_protected(tmp_path, monkeypatch):
    """Plain ``lm_eval --include_path <pack>``: building a pack task (its loader) turns redaction on
    before the first request, so the retried failures print no key; a key named in
    MEDEVAL_SECRET_ENV_VARS and one in --model_args are kept out of the console and files too."""

    def answer(messages: list[dict]) -> str:
        text = " ".join(str(m.get("content", "")) for m in messages)
        # the last question in the prompt is the one asked (earlier ones would be few-shot)
        item = max(EMSQA_ITEMS, key=lambda it: text.rfind(it["question"]))
        return json.dumps(_emsqa_gold(item))

    from medeval_metrics import tasks_path

    out = tmp_path / "out"
    with FakeChatServer(answer=answer, fail={1: 500, 2: 429}, max_requests=60) as server:
        result = run_lm_eval_cli(
            [
                "--model", "openai-chat-completions",
                "--model_args",
                f"model=fake-gpt,base_url={server.chat_url},num_concurrent=2,max_retries=3,api_key={ARG_KEY_CANARY}",
                "--include_path", tasks_path(), "--tasks", "emsqa_private", "--apply_chat_template",
                "--metadata", json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
                "--output_path", str(out), "--log_samples",
            ],
            cwd=tmp_path,
            env={"OPENAI_API_KEY": ENV_KEY_CANARY, "MEDEVAL_SECRET_ENV_VARS": "GATEWAY_CREDENTIAL",
                 "GATEWAY_CREDENTIAL": "gw-canary-5566778899"},
            timeout=300,
        )
        statuses = server.statuses
    assert result.returncode == 0, result.stderr[-3000:]
    assert statuses[:2] == [500, 429] and statuses.count(200) == len(EMSQA_ITEMS)
    console = result.stdout + result.stderr
    assert "ClientResponseError" in console and "Bearer [REDACTED:OPENAI_API_KEY]" in console
    files = {str(p): p.read_text() for p in out.rglob("*") if p.is_file()}
    for where, text in {"console": console, **files}.items():
        for canary in (ENV_KEY_CANARY, "gw-canary-5566778899"):
            assert canary not in text, f"{canary} in {where}"
    # A key in --model_args: plain lm_eval logs its model arguments while building the model,
    # before any pack code runs (documented; `medeval run` covers that line too, see above). Every
    # later line and every file is clean.
    first_pack_line = result.stderr.index("Building contexts for emsqa_private")
    assert ARG_KEY_CANARY not in result.stderr[first_pack_line:]
    assert "'api_key': '[REDACTED]'" in result.stdout  # lm-eval's closing model_args summary, redacted
    assert ARG_KEY_CANARY not in result.stdout
    for where, text in files.items():
        assert ARG_KEY_CANARY not in text, f"--model_args key in {where}"
    results, _ = find_results(out)
    assert results["results"]["emsqa_private"]["acc,extract_answer"] == 1.0


@pytest.mark.e2e
def test_keys_of_evaluated_api_model_and_judge_leave_no_trace(tmp_path):
    """The issue's acceptance run: MedicationQA with an API model under evaluation and an API judge,
    both behind servers that answer 429 and 500 first; a canary key for each (the judge's in a
    variable whose name no rule recognises, so only the judge's registration protects it)."""
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    rows = [{"question": f"can i take drug{i} with food", "focus_drug": f"drug{i}", "question_type": "Usage",
             "answer": f"Drug{i} can be taken with food.", "section_title": "How to use", "url": f"https://example.org/{i}"}
            for i in range(4)]
    data = tmp_path / "medicationqa.json"
    data.write_text(json.dumps(rows))
    judge_canary = "judge-canary-4455667788"
    cache, out = tmp_path / "verdicts.sqlite", tmp_path / "out"
    judge_script = {("judge-a", rows[0]["question"]): [{"status": 429, "headers": {"Retry-After": "0"}}, {"status": 500}]}
    with FakeJudgeServer(script=judge_script) as judge, FakeChatServer(answer="Take it with food.", fail=FAILURES) as model:
        judges = {"judges": [{"name": "a", "backend": "local-chat-completions", "model": "judge-a", "base_url": judge.url,
                              "api_key_env": "PANEL_CREDENTIAL"}],
                  "cache": str(cache), "backoff_base": 0.01}
        result = run_cli(
            ["run", "--tasks", "medicationqa", "--model", "openai-chat-completions",
             "--model_args", f"model=fake-gpt,base_url={model.chat_url},num_concurrent=2,max_retries=3",
             "--apply_chat_template", "--output_path", str(out), "--log_samples"],
            cwd=tmp_path,
            env={"OPENAI_API_KEY": ENV_KEY_CANARY, "PANEL_CREDENTIAL": judge_canary, "MEDEVAL_JUDGES": json.dumps(judges),
                 "MEDEVAL_MEDICATIONQA_PATH": str(data)},
            timeout=300,
        )
        model_statuses = model.statuses
        judge_auth = {r["authorization"] for r in judge.requests}
        judge_requests = judge.count()
    assert result.returncode == 0, result.stderr[-3000:]
    assert model_statuses.count(429) == 1 and model_statuses.count(500) == 1 and model_statuses.count(200) == len(rows)
    assert judge_auth == {f"Bearer {judge_canary}"} and judge_requests == len(rows) + 2  # 429 and 500 retried
    results, _ = find_results(out)
    assert results["results"]["medicationqa"]["judge_computed,scored"] == 1.0
    everything = result.stdout + result.stderr + "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in [*out.rglob("*"), cache] if p.is_file()
    )
    assert ENV_KEY_CANARY not in everything and judge_canary not in everything
    assert "[REDACTED:OPENAI_API_KEY]" in everything  # the model's retried failures were logged, redacted
