"""Each judge gets exactly the key its config names, or no Authorization header at all (issue 12),
whatever OPENAI_API_KEY and other vendors' variables hold; header values are never config."""

from __future__ import annotations

import json

import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.config import panel_from_obj, validate_panel
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC
from medeval_metrics.testing.fake_api import FakeChatServer

OPENAI_CANARY = "sk-openai-canary-0001"
JUDGE_CANARY = "judge-canary-0002"
HEADER_CANARY = "header-canary-0003"
VERDICT = json.dumps({"accuracy": 4, "completeness": 4, "clarity": 4})


def test_each_endpoint_receives_only_its_own_credentials(tmp_path, monkeypatch):
    for variable, value in {
        "OPENAI_API_KEY": OPENAI_CANARY,
        "ANTHROPIC_API_KEY": "sk-ant-canary",
        "HF_TOKEN": "hf_canary",
        "JUDGE_B_KEY": JUDGE_CANARY,
        "JUDGE_C_HEADER": HEADER_CANARY,
    }.items():
        monkeypatch.setenv(variable, value)
    with FakeChatServer(answer=VERDICT) as a, FakeChatServer(answer=VERDICT) as b, FakeChatServer(answer=VERDICT) as c:
        panel = panel_from_obj(
            {
                "judges": [
                    {"name": "plain", "backend": "local-chat-completions", "model": "m", "base_url": a.chat_url},
                    {
                        "name": "keyed",
                        "backend": "local-chat-completions",
                        "model": "m",
                        "base_url": b.chat_url,
                        "api_key_env": "JUDGE_B_KEY",
                    },
                    {
                        "name": "header",
                        "backend": "local-chat-completions",
                        "model": "m",
                        "base_url": c.chat_url,
                        "header_env": {"x-api-key": "JUDGE_C_HEADER"},
                    },
                ],
                "cache": str(tmp_path / "c.sqlite"),
            },
            "t",
        )
        out = PanelRunner(panel, RUBRIC).judge([JudgeItem("q", "r", "a")], progress=False)
        seen = {
            name: [{k.lower(): v for k, v in r["headers"].items()} for r in server.requests]
            for name, server in (("plain", a), ("keyed", b), ("header", c))
        }
    assert all(row["scores"] for row in out[0].values())
    assert all("authorization" not in h for h in seen["plain"])  # not lm-eval's $OPENAI_API_KEY fallback
    assert [h.get("authorization") for h in seen["keyed"]] == [f"Bearer {JUDGE_CANARY}"]
    assert [(h.get("x-api-key"), h.get("authorization")) for h in seen["header"]] == [(HEADER_CANARY, None)]
    everything = json.dumps(seen)
    assert OPENAI_CANARY not in everything and "sk-ant-canary" not in everything and "hf_canary" not in everything
    assert JUDGE_CANARY not in json.dumps(seen["plain"] + seen["header"])
    stored = (tmp_path / "c.sqlite").read_bytes()
    assert all(v.encode() not in stored for v in (JUDGE_CANARY, HEADER_CANARY, OPENAI_CANARY))


@pytest.mark.parametrize(
    "judge",
    [
        {"model_args": {"header": {"x-api-key": "abc"}}},
        {"model_args": {"headers": {"Authorization": "Bearer abc"}}},
        {"model_args": {"api_key": "abc"}},
    ],
)
def test_header_values_are_refused_like_keys(judge):
    with pytest.raises(MedevalDataError, match="secret in the judges config.*header_env"):
        panel_from_obj([{"backend": "local-chat-completions", "model": "m", **judge}], "judges.yaml")


def test_a_key_pasted_as_api_key_env_is_refused_without_echo():
    pasted = "sk-proj-abcdefghijklmnop1234567890"
    with pytest.raises(MedevalDataError) as info:
        panel_from_obj([{"backend": "openai-chat-completions", "model": "m", "api_key_env": pasted}], "judges.yaml")
    assert "NAME of an environment variable" in str(info.value) and pasted not in str(info.value)
    with pytest.raises(MedevalDataError) as info:
        panel_from_obj([{"backend": "openai-chat-completions", "model": "m", "header_env": {"x-key": pasted}}], "j")
    assert pasted not in str(info.value)


def test_validate_panel_lists_every_problem_once(tmp_path, monkeypatch):
    monkeypatch.delenv("MISSING_JUDGE_KEY", raising=False)
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database")
    panel = panel_from_obj(
        {
            "judges": [
                {"name": "typo", "backend": "local-chat-completion", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
                {"name": "nourl", "backend": "local-chat-completions", "model": "m"},
                {
                    "name": "nokey",
                    "backend": "openai-chat-completions",
                    "model": "m",
                    "api_key_env": "MISSING_JUDGE_KEY",
                },
            ],
            "cache": str(not_sqlite),
        },
        "t",
    )
    with pytest.raises(MedevalDataError) as info:
        validate_panel(panel, where="judges.yaml")
    message = str(info.value)
    assert (
        "judge typo: unknown lm-eval backend 'local-chat-completion'. Did you mean 'local-chat-completions'?" in message
    )
    assert 'judge nourl: backend local-chat-completions needs "base_url"' in message
    assert "judge nokey: the environment variable MISSING_JUDGE_KEY is not set" in message
    assert f"cache {not_sqlite} exists and is not a SQLite file" in message
    assert message.count("\n") == 4  # a header line, then one line per problem


@pytest.mark.parametrize("make", ["folder", "uncreatable"])
def test_validate_panel_refuses_unusable_cache_paths(tmp_path, make):
    if make == "folder":
        path = tmp_path
        expected = "is a folder"
    else:
        blocker = tmp_path / "file"
        blocker.write_text("x")
        path = blocker / "sub" / "cache.sqlite"
        expected = "cannot be created"
    panel = panel_from_obj({"judges": [{"backend": "hf", "model": "m"}], "cache": str(path)}, "t")
    with pytest.raises(MedevalDataError, match=expected):
        validate_panel(panel)
    ok = panel_from_obj({"judges": [{"backend": "hf", "model": "m"}], "cache": str(tmp_path / "new" / "c.sqlite")}, "t")
    validate_panel(ok)  # absent: fine (and its folder now exists)
    assert (tmp_path / "new").is_dir()


def test_judged_results_name_key_variables_never_their_values(tmp_path, monkeypatch):
    from medeval_metrics.judge.cli import judge_output
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    monkeypatch.setenv("JUDGE_C_HEADER", HEADER_CANARY)
    monkeypatch.setenv("JUDGE_B_KEY", JUDGE_CANARY)
    folder = tmp_path / "run"
    folder.mkdir()
    doc = {"question": "q0", "answer": "Take with food.", "question_type": "Dose"}
    (folder / "samples_medicationqa_2026-01-01T00-00-00.jsonl").write_text(
        json.dumps({"doc_id": 0, "doc": doc, "resps": [["Take it with food."]], "filter": "scored"}) + "\n"
    )
    with FakeJudgeServer() as server:
        panel = panel_from_obj(
            {
                "judges": [
                    {
                        "name": "h",
                        "backend": "local-chat-completions",
                        "model": "m",
                        "base_url": server.url,
                        "api_key_env": "JUDGE_B_KEY",
                        "header_env": {"x-api-key": "JUDGE_C_HEADER"},
                    }
                ],
                "cache": None,
            },
            "t",
        )
        entry = judge_output(folder, panel, progress=False)[0]
    written = entry["results"].read_text() + entry["verdicts"].read_text()
    assert HEADER_CANARY not in written and JUDGE_CANARY not in written
    block = json.loads(entry["results"].read_text())["medeval_judge"]["medicationqa"]
    assert block["judges"][0]["header_env"] == {"x-api-key": "JUDGE_C_HEADER"}
    assert block["judges"][0]["api_key_env"] == "JUDGE_B_KEY"


def test_a_known_backend_without_its_package_says_so():
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    panel = panel_from_obj([{"name": "v", "backend": "vllm", "model": "m"}], "t")
    with pytest.raises(MedevalDataError, match="judge v: lm-eval backend 'vllm' needs a package that is not installed"):
        validate_panel(panel)


def test_a_judges_file_with_broken_yaml_is_one_line_naming_the_place(tmp_path):
    from medeval_metrics.judge.config import load_panel

    path = tmp_path / "judges.yaml"
    path.write_text("judges: [ {name: a\n")
    with pytest.raises(MedevalDataError) as caught:
        load_panel(str(path))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: not valid YAML at line 2, column 1: ")
