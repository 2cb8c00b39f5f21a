"""Canary keys through real retried API failures: an evaluated API model (lm-eval's
``openai-chat-completions``) against a loopback server that answers 429 and 500 before succeeding.

Plain ``lm_eval`` is the control: it prints the key (and writes a key given in --model_args into
the results JSON), which shows the check below can fail. ``medeval run`` refuses a key given in --model_args
before the run, and leaves no trace of the environment's key in stdout, stderr (lm-eval's log, cleaned while
the run lasts), the results JSON or the sample logs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EMSQA_ITEMS, FIXTURES, find_results, run_cli, run_lm_eval_cli
from conftest import emsqa_gold as _emsqa_gold

from medeval_metrics.testing.fake_api import FakeChatServer

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


def _run(kind: str, tasks: Path, out: Path, cwd: Path, key_in_args: bool = True) -> tuple[str, list[int], dict]:
    with FakeChatServer(answer=_answer, fail=FAILURES, max_requests=40) as server:
        in_args = f",auth_token={ARG_KEY_CANARY}" if key_in_args else ""
        args = [
            "--model",
            "openai-chat-completions",
            "--model_args",
            f"model=fake-gpt,base_url={server.chat_url},num_concurrent=2,max_retries=3{in_args}",
            "--include_path",
            str(tasks),
            "--tasks",
            "leak_probe",
            "--apply_chat_template",
            "--output_path",
            str(out),
            "--log_samples",
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

    # `medeval run` refuses the key in --model_args before any request, naming the flag, not the value
    refused = run_cli(
        ["run", "--model", "openai-chat-completions", "--model_args", f"model=m,auth_token={ARG_KEY_CANARY}"]
        + ["--include_path", str(tasks), "--tasks", "leak_probe"],
        cwd=tmp_path,
        env={"OPENAI_API_KEY": ENV_KEY_CANARY},
        timeout=300,
    )
    assert refused.returncode == 2 and refused.stderr.strip().startswith("medeval: error: --model_args auth_token")
    assert ARG_KEY_CANARY not in refused.stdout + refused.stderr

    # Protected: the same run through `medeval run`, the key in the environment only.
    out = tmp_path / "out-medeval"
    console, statuses, files = _run("medeval", tasks, out, tmp_path, key_in_args=False)
    assert "ClientResponseError" in console and "Authorization': 'Bearer [REDACTED:OPENAI_API_KEY]'" in console
    assert ENV_KEY_CANARY not in console
    assert any(name.endswith(".jsonl") for name in files) and any("results_" in name for name in files)
    for name, text in files.items():
        assert ENV_KEY_CANARY not in text, f"key written to {name}"
    results, samples = find_results(out)
    assert results["results"]["leak_probe"]["exact_match,none"] == pytest.approx(5 / 6)
    assert sorted(s["filtered_resps"][0] for s in samples["leak_probe"]) == sorted(SERVER_SAYS.values())


@pytest.mark.e2e
def test_plain_lm_eval_with_a_pack_task_keeps_lm_eval_s_own_logging(tmp_path, monkeypatch):
    """Plain ``lm_eval --include_path <pack>``: building and scoring a pack task changes nothing of lm-eval's, its
    logging included, so a retried failure prints the key as lm-eval prints it for any task (docs/security.md
    says so: use `medeval run`, which cleans the log while it runs). The key never reaches a file, and the
    scores are the pack's."""

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
                "--model",
                "openai-chat-completions",
                "--model_args",
                f"model=fake-gpt,base_url={server.chat_url},num_concurrent=2,max_retries=3",
                "--include_path",
                tasks_path(),
                "--tasks",
                "emsqa_private",
                "--apply_chat_template",
                "--metadata",
                json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
                "--output_path",
                str(out),
                "--log_samples",
            ],
            cwd=tmp_path,
            env={"OPENAI_API_KEY": ENV_KEY_CANARY},
            timeout=300,
        )
        statuses = server.statuses
    assert result.returncode == 0, result.stderr[-3000:]
    assert statuses[:2] == [500, 429] and statuses.count(200) == len(EMSQA_ITEMS)
    console = result.stdout + result.stderr
    assert "ClientResponseError" in console and f"Bearer {ENV_KEY_CANARY}" in console  # lm-eval's own line
    for path in out.rglob("*"):
        if path.is_file():
            assert ENV_KEY_CANARY not in path.read_text(), f"key written to {path}"
    results, _ = find_results(out)
    assert results["results"]["emsqa_private"]["acc,flexible-extract"] == 1.0


@pytest.mark.e2e
def test_keys_of_evaluated_api_model_and_judge_leave_no_trace(tmp_path):
    """The issue's acceptance run: MedicationQA with an API model under evaluation and an API judge,
    both behind servers that answer 429 and 500 first; a canary key for each (the judge's in a
    variable whose name no rule recognises, so only the judge's registration protects it)."""
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    rows = [
        {
            "question": f"can i take drug{i} with food",
            "focus_drug": f"drug{i}",
            "question_type": "Usage",
            "answer": f"Drug{i} can be taken with food.",
            "section_title": "How to use",
            "url": f"https://example.org/{i}",
        }
        for i in range(4)
    ]
    data = tmp_path / "medicationqa.json"
    data.write_text(json.dumps(rows))
    judge_canary = "judge-canary-4455667788"
    cache, out = tmp_path / "verdicts.sqlite", tmp_path / "out"
    judge_script = {
        ("judge-a", rows[0]["question"]): [{"status": 429, "headers": {"Retry-After": "0"}}, {"status": 500}]
    }
    with (
        FakeJudgeServer(script=judge_script) as judge,
        FakeChatServer(answer="Take it with food.", fail=FAILURES) as model,
    ):
        judges = {
            "judges": [
                {
                    "name": "a",
                    "backend": "local-chat-completions",
                    "model": "judge-a",
                    "base_url": judge.url,
                    "api_key_env": "PANEL_CREDENTIAL",
                }
            ],
            "cache": str(cache),
            "backoff_base": 0.01,
        }
        result = run_cli(
            [
                "run",
                "--tasks",
                "medicationqa",
                "--model",
                "openai-chat-completions",
                "--model_args",
                f"model=fake-gpt,base_url={model.chat_url},num_concurrent=2,max_retries=3",
                "--apply_chat_template",
                "--output_path",
                str(out),
                "--log_samples",
            ],
            cwd=tmp_path,
            env={
                "OPENAI_API_KEY": ENV_KEY_CANARY,
                "PANEL_CREDENTIAL": judge_canary,
                "MEDEVAL_JUDGES": json.dumps(judges),
                "MEDEVAL_MEDICATIONQA_PATH": str(data),
            },
            timeout=300,
        )
        model_statuses = model.statuses
        judge_auth = {r["authorization"] for r in judge.requests}
        judge_requests = judge.count()
    assert result.returncode == 0, result.stderr[-3000:]
    assert model_statuses.count(429) == 1 and model_statuses.count(500) == 1 and model_statuses.count(200) == len(rows)
    # 429 and 500 retried, and the health check's one request (with the same key, to the same endpoint)
    assert judge_auth == {f"Bearer {judge_canary}"} and judge_requests == len(rows) + 2 + 1
    results, _ = find_results(out)
    assert results["results"]["medicationqa"]["judge_computed,scored"] == 1.0
    everything = (
        result.stdout
        + result.stderr
        + "\n".join(p.read_bytes().decode("utf-8", "replace") for p in [*out.rglob("*"), cache] if p.is_file())
    )
    assert ENV_KEY_CANARY not in everything and judge_canary not in everything
    assert "[REDACTED:OPENAI_API_KEY]" in everything  # the model's retried failures were logged, redacted


# --- each key only to its own endpoint; header values recognised by value ---------------------------

OTHER_VENDOR_KEYS = {
    "ANTHROPIC_API_KEY": "canary-anthropic-11223344556",
    "AZURE_OPENAI_API_KEY": "canary-azure-22334455667",
    "MEDEVAL_JUDGE_API_KEY": "canary-judge-33445566778",
    "HF_TOKEN": "hf_canaryTokenAbCdEfGhIjKlMnOpQrSt",
    "PANEL_CREDENTIAL": "canary-panel-44556677889",
}
HEADER_CANARY = "canary-header-5a6b7c8d9e0f1122"


def _everything_written(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file()}


def _probe_reply(body: dict) -> str:
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    return next((a for q, a in ANSWERS.items() if f"Item {q}." in text), "?")


@pytest.mark.e2e
def test_evaluated_model_gets_only_its_own_key(tmp_path):
    """openai-chat-completions reads OPENAI_API_KEY (lm-eval's variable for that backend): the model
    endpoint receives exactly that key, and no other vendor's or the judge's key in any header or body."""
    from medeval_metrics.testing.recording_api import RecordingChatServer

    tasks = _write_task(tmp_path)
    with RecordingChatServer(reply=_probe_reply, fail={1: 429}) as server:
        result = run_cli(
            [
                "run",
                "--model",
                "openai-chat-completions",
                "--model_args",
                f"model=fake-gpt,base_url={server.chat_url},num_concurrent=1,max_retries=3",
                "--include_path",
                str(tasks),
                "--tasks",
                "leak_probe",
                "--apply_chat_template",
            ],
            cwd=tmp_path,
            env={"OPENAI_API_KEY": ENV_KEY_CANARY, **OTHER_VENDOR_KEYS},
            timeout=300,
        )
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(requests) == len(ANSWERS) + 1  # the 429 was retried
    assert {r["headers"].get("Authorization") for r in requests} == {f"Bearer {ENV_KEY_CANARY}"}
    sent = "\n".join(json.dumps(r["headers"]) + r["raw"] for r in requests)
    for name, value in OTHER_VENDOR_KEYS.items():
        assert value not in sent, f"{name} reached the evaluated model's endpoint"
    console = result.stdout + result.stderr
    assert ENV_KEY_CANARY not in console and not any(v in console for v in OTHER_VENDOR_KEYS.values())


def _header_run(kind: str, tasks: Path, out: Path, cwd: Path, server) -> str:
    model_args = json.dumps(
        {
            "model": "fake-gpt",
            "base_url": server.chat_url,
            "num_concurrent": 1,
            "max_retries": 3,
            "header": {"X-Gateway-Auth": HEADER_CANARY, "Content-Type": "application/json"},
        }
    )
    args = [
        "--model",
        "local-chat-completions",
        "--model_args",
        model_args,
        "--include_path",
        str(tasks),
        "--tasks",
        "leak_probe",
        "--apply_chat_template",
        "--output_path",
        str(out),
        "--log_samples",
    ]
    runner = run_lm_eval_cli if kind == "plain" else run_cli
    result = runner(
        args if kind == "plain" else ["run", *args], cwd=cwd, env={"OPENAI_API_KEY": ENV_KEY_CANARY}, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.mark.e2e
def test_a_custom_header_key_in_model_args_is_refused_before_any_request(tmp_path):
    """A gateway key passed as a header in ``--model_args`` JSON: plain lm-eval prints it and writes it into the
    results JSON (the control); `medeval run` refuses it before the first request, naming the header, not its
    value, and the way to give a key (a variable)."""
    from medeval_metrics.testing.recording_api import RecordingChatServer

    tasks = _write_task(tmp_path)
    with RecordingChatServer(reply=_probe_reply, fail={1: 500}) as server:
        console = _header_run("plain", tasks, tmp_path / "plain", tmp_path, server)
    written = "\n".join(_everything_written(tmp_path / "plain").values())
    assert HEADER_CANARY in console and HEADER_CANARY in written, "control: lm-eval no longer leaks header values"

    with RecordingChatServer(reply=_probe_reply) as server:
        model_args = json.dumps(
            {"model": "fake-gpt", "base_url": server.chat_url, "header": {"X-Gateway-Auth": HEADER_CANARY}}
        )
        result = run_cli(
            ["run", "--model", "local-chat-completions", "--model_args", model_args]
            + ["--include_path", str(tasks), "--tasks", "leak_probe", "--output_path", str(tmp_path / "medeval")],
            cwd=tmp_path,
            env={"OPENAI_API_KEY": ENV_KEY_CANARY},
            timeout=300,
        )
        requests = list(server.requests)
    assert result.returncode == 2 and requests == []
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("medeval: error: --model_args header.X-Gateway-Auth holds a key")
    assert "MEDEVAL_MODEL_API_KEY_ENV" in line and HEADER_CANARY not in result.stdout + result.stderr
    assert not (tmp_path / "medeval").exists()


# --- emrQA notes in error bodies ----------------------------------------------------------------------


def _planted_emrqa(tmp_path: Path) -> tuple[dict, list[str]]:
    """Synthetic emrQA files with one distinctive invented line planted in every smoking note."""
    from medeval_metrics.emrqa.synthetic import write_synthetic

    info = write_synthetic(tmp_path / "emrqa", notes_per_subset=20, questions_per_note=8, lines_per_note=12)
    data = json.loads(info.data_json.read_text())
    planted = []
    for subset in data["data"]:
        if subset["title"] != "smoking":
            continue
        for number, note in enumerate(subset["paragraphs"]):
            line = f"Planted note line {number}: Mr. Quillfeather-{number} keeps bees on Larkspur Lane."
            note["context"] += "\n" + line
            planted.append(line)
    info.data_json.write_text(json.dumps(data))
    metadata = {
        "emrqa_data_json": str(info.data_json),
        "emrqa_data_ql_csv": str(info.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path / "emrqa-cache"),
        "emrqa_sample_size": 4,
    }
    return metadata, planted


@pytest.mark.e2e
def test_emrqa_note_lines_in_a_422_body_never_reach_the_console(tmp_path):
    """An OpenAI-compatible server rejects requests with a 422 that quotes the request body (the note);
    lm-eval logs that body on every retry. The body is replaced by its length and hash."""
    from medeval_metrics.testing.recording_api import RecordingChatServer

    metadata, planted = _planted_emrqa(tmp_path)
    out = tmp_path / "out"
    with RecordingChatServer(
        reply="NON-SMOKER", fail={1: 422, 2: 422, 4: 422, 6: 422}, echo_request_in_errors=True
    ) as server:
        result = run_cli(
            [
                "run",
                "--model",
                "local-chat-completions",
                "--model_args",
                f"model=fake-gpt,base_url={server.chat_url},num_concurrent=2,max_retries=5",
                "--tasks",
                "emrqa_smoking",
                "--apply_chat_template",
                "--metadata",
                json.dumps(metadata),
                "--output_path",
                str(out),
            ],
            cwd=tmp_path,
            timeout=600,
        )
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr[-3000:]
    failed = [r for r in requests if r["status"] == 422]
    assert len(failed) == 4
    # the check can fail: the rejected requests carried planted note lines, which the 422 bodies quoted
    assert any(line in r["raw"] for r in failed for line in planted)
    console = result.stdout + result.stderr
    assert console.count("Status code: 422") == 4 and console.count("[response body withheld: ") == 4
    leaked = [line for line in planted if line in console or line.split(": ", 1)[1] in console]
    assert leaked == [], f"{len(leaked)} of {len(planted)} planted note lines reached the console"
    assert "Quillfeather" not in console and "Larkspur" not in console
    for name, text in _everything_written(out).items():
        assert "Quillfeather" not in text, f"note text in {name}"


@pytest.mark.e2e
def test_a_local_model_server_never_gets_the_openai_key(tmp_path):
    """Issue 12, item 1 for the evaluated model: `local-chat-completions` at a host that is not OpenAI's
    gets no Authorization header although OPENAI_API_KEY is set; the key the user names for it with
    MEDEVAL_MODEL_API_KEY_ENV reaches it, and no other."""
    from medeval_metrics.testing.recording_api import RecordingChatServer

    tasks = _write_task(tmp_path)
    local_key = "canary-local-server-55667788"
    args = [
        "run",
        "--model",
        "local-chat-completions",
        "--include_path",
        str(tasks),
        "--tasks",
        "leak_probe",
        "--apply_chat_template",
        "--limit",
        "2",
    ]
    seen = {}
    for label, extra in (
        ("unnamed", {}),
        ("named", {"MEDEVAL_MODEL_API_KEY_ENV": "LOCAL_SERVER_CREDENTIAL", "LOCAL_SERVER_CREDENTIAL": local_key}),
    ):
        with RecordingChatServer(reply=_probe_reply) as server:
            result = run_cli(
                [*args, "--model_args", f"model=m,base_url={server.chat_url},num_concurrent=1,tokenizer_backend=none"],
                cwd=tmp_path,
                env={"OPENAI_API_KEY": ENV_KEY_CANARY, **OTHER_VENDOR_KEYS, **extra},
                timeout=300,
            )
            assert result.returncode == 0, result.stderr[-3000:]
            seen[label] = [dict(r["headers"]) for r in server.requests]
            sent = "\n".join(json.dumps(r["headers"]) + r["raw"] for r in server.requests)
        assert ENV_KEY_CANARY not in sent and not any(v in sent for v in OTHER_VENDOR_KEYS.values())
        assert local_key not in result.stdout + result.stderr
    assert seen["unnamed"] and all("Authorization" not in h for h in seen["unnamed"])
    assert seen["named"] and {h.get("Authorization") for h in seen["named"]} == {f"Bearer {local_key}"}
