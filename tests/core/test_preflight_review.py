"""Code review of medeval_metrics/preflight (2026-12-01): the command line read as lm-eval reads it, a typo's
"meant" key switching off only the check it was meant for, invalid Hub ids and an unreachable Hub as one true
line, and the EMSQA RAG settings checked before the model loads. In-process and fast: lm-eval's task index is
a short list, the network probe a stub."""

from __future__ import annotations

import json
import os

import pytest
from conftest import FIXTURES
from test_run_checks_every_selection import no_user_settings, problems_of  # noqa: F401 (an autouse fixture)

from medeval_metrics import preflight

SYNTHETIC = str(FIXTURES / "emsqa_synthetic.json")
HUB_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT")


def medicationqa_csv(tmp_path) -> str:
    path = tmp_path / "m.csv"
    path.write_text("Question,Answer\nWhat is aspirin?,A pain reliever.\n")
    return str(path)


# ---------------------------------------------------------------- 1. --tasks, --metadata as lm-eval reads them


@pytest.mark.parametrize("flag", ["--task", "--tas", "-t", "--tasks"])
def test_an_abbreviated_tasks_flag_still_gets_its_names_checked(flag):
    # lm-eval's argparse takes --task for --tasks; the pack's checks must see the same names
    (problem,) = problems_of(flag, "emsqa_pubic")
    assert "emsqa_pubic" in problem and "emsqa_public" in problem, problem


def test_two_tasks_flags_are_both_read_as_lm_eval_merges_them():
    (problem,) = problems_of(
        "--tasks", "emsqa_pubic", "--tasks", "emsqa_private", "--metadata", f"emsqa_private_path={SYNTHETIC}"
    )
    assert "emsqa_pubic" in problem, problem


def test_two_metadata_flags_are_merged_as_lm_eval_merges_them():
    argv = ["--tasks", "emsqa_private", "--metadata", f"emsqa_private_path={SYNTHETIC}"]
    assert problems_of(*argv, "--metadata", "emsqa_allow_duplicates=false") == []
    assert problems_of(*argv, "--meta", '{"emsqa_allow_duplicates": false}') == []  # abbreviated, JSON
    # the second flag's bad value is still found
    (problem,) = problems_of(*argv, "--metadata", "emsqa_allow_duplicates=perhaps")
    assert "emsqa_allow_duplicates" in problem and "perhaps" in problem


@pytest.mark.e2e  # indexes all of lm-eval's tasks with the user's folder (about 13 s)
def test_an_abbreviated_include_path_makes_the_user_s_task_known(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "mine.yaml").write_text("task: my_own_task\ndataset_path: json\noutput_type: generate_until\n")
    assert problems_of("--tasks", "my_own_task", "--include", str(tasks), lm_eval_names=None) == []


def test_a_config_file_s_tasks_and_metadata_are_checked_where_the_command_line_gives_none(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"tasks: [emsqa_private]\nmetadata:\n  emsqa_private_path: {SYNTHETIC}\n")
    assert problems_of("--config", str(config)) == []
    config.write_text("tasks: emsqa_pubic\n")
    (problem,) = problems_of("--config", str(config))
    assert "emsqa_pubic" in problem and "emsqa_public" in problem
    # the command line's --tasks wins over the file's, as in lm-eval
    (problem,) = problems_of("--config", str(config), "--tasks", "emsqa_private")
    assert problem.startswith("the EMSQA private set is not available: no file was given")


def test_bad_metadata_json_is_still_the_pack_s_one_line():
    (problem,) = problems_of("--tasks", "emsqa_private", "--metadata", "{'emsqa_private_path': 'x'}")
    assert problem.startswith("--metadata is not valid JSON") and "\n" not in problem


def test_an_abbreviated_tasks_list_is_normalised_for_lm_eval_too():
    # lm-eval would look for a task named " b"; the pack's checks, which strip names, would have passed it
    assert preflight.read_command_line(["--task", "a, b,", "--model", "hf"]).lm_eval_argv == [
        "--tasks",
        "a,b",
        "--model",
        "hf",
    ]
    assert preflight.read_command_line(["--tas=a, b"]).lm_eval_argv == ["--tasks", "a,b"]


# ---------------------------------------------------------------- 2. "meant" only from a reported typo


def test_a_credential_variable_does_not_switch_off_the_judge_panel_check(monkeypatch, tmp_path):
    monkeypatch.setenv("MEDEVAL_JUDGE_KEY", "sk-not-a-setting")
    monkeypatch.setenv("MEDEVAL_JUDGES", str(tmp_path / "no-judges.yaml"))
    found = problems_of(
        "--tasks", "medicationqa", "--metadata", json.dumps({"medicationqa_path": medicationqa_csv(tmp_path)})
    )
    assert len(found) == 1 and "no-judges.yaml" in found[0], found


def test_a_benchmark_script_variable_does_not_switch_off_a_data_check(monkeypatch, tmp_path):
    monkeypatch.setenv("MEDEVAL_BENCH_EMSQA_PUBLIC", "1")
    missing = tmp_path / "nonexistent.json"
    (problem,) = problems_of("--tasks", "emsqa_public", "--metadata", json.dumps({"emsqa_public_path": str(missing)}))
    assert f"emsqa_public_path points at {missing}, which does not exist" in problem


def test_an_allowed_unknown_key_does_not_switch_off_a_data_check(tmp_path):
    missing = tmp_path / "nonexistent.xlsx"
    meta = json.dumps({"path": "x", "medicationqa_path": str(missing)})
    found = problems_of("--tasks", "medicationqa", "--metadata", meta, "--allow-unknown-metadata")
    assert any(f"medicationqa_path points at {missing}, which does not exist" in p for p in found), found


def test_a_reported_typo_still_stands_in_for_the_missing_data():
    found = problems_of("--tasks", "emsqa_public", "--metadata", json.dumps({"emsqa_public_pth": "/data/x.json"}))
    assert found == ["--metadata key 'emsqa_public_pth' is not one the pack reads. Did you mean 'emsqa_public_path'?"]


def test_a_misspelled_variable_still_stands_in_for_the_missing_data(monkeypatch):
    monkeypatch.setenv("MEDEVAL_EMSQA_PRIVATE_PTH", SYNTHETIC)
    (problem,) = problems_of("--tasks", "emsqa_private")
    assert problem.startswith("environment variable MEDEVAL_EMSQA_PRIVATE_PTH is not a setting") and "PATH" in problem


# ---------------------------------------------------------------- 3. invalid Hub ids


def model_problems(model_args, **kwargs):
    meta = json.dumps({"emsqa_private_path": SYNTHETIC})
    return problems_of(
        "--model",
        "hf",
        "--model_args",
        model_args,
        "--tasks",
        "emsqa_private",
        "--metadata",
        meta,
        check_options=True,
        **kwargs,
    )


@pytest.mark.parametrize("pretrained", ["org--name", "a..b/c", "x" * 100, "org/name."])
def test_an_invalid_hub_id_is_one_line_naming_it(pretrained, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (problem,) = model_problems(f"pretrained={pretrained}", hub_reachable=lambda: pytest.fail("probed"))
    assert problem.startswith(f"--model_args pretrained={pretrained}: not a folder that exists, nor a valid Hub id")
    assert "Qwen/Qwen2.5-0.5B-Instruct" in problem and "\n" not in problem


# ---------------------------------------------------------------- 4. an unreachable Hub


@pytest.fixture
def hub_on(monkeypatch, tmp_path):
    for name in HUB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    yield
    from medeval_metrics import sources

    assert not sources.hub_offline()  # nothing is left marked for later runs in this process


def test_an_unreachable_hub_is_named_with_its_endpoint_and_no_variable_is_set(hub_on, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.invalid")
    (problem,) = model_problems("pretrained=Qwen/Qwen2.5-0.5B-Instruct", hub_reachable=lambda: False)
    assert "the Hub cannot be reached (https://hub.example.invalid)" in problem and "huggingface.co" not in problem
    assert [v for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if v in os.environ] == []


def test_a_data_source_after_a_failed_probe_says_unreachable_not_disabled(hub_on, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    found = problems_of(
        "--model",
        "hf",
        "--model_args",
        f"pretrained={tmp_path}",
        "--tasks",
        "emsqa_public",
        check_options=True,
        hub_reachable=lambda: False,
    )
    assert found and "the Hub cannot be reached (https://huggingface.co)" in found[0], found
    assert not any("HF_HUB_OFFLINE" in p for p in found), found
    assert [v for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if v in os.environ] == []


def test_a_user_s_offline_setting_is_still_named(tmp_path):
    found = problems_of("--tasks", "emsqa_public")
    assert found and "the Hub is disabled (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE)" in found[0]


# ---------------------------------------------------------------- 5. the EMSQA RAG settings


@pytest.fixture
def knowledge(tmp_path):
    from medeval_metrics.emsqa.knowledge import KNOWLEDGE_FILES

    folder = tmp_path / "kb"
    folder.mkdir()
    for stem in KNOWLEDGE_FILES:
        (folder / f"{stem}.json").write_text(json.dumps([{"Scene safety": "assess the scene for hazards"}]))
    return {"emsqa_private_path": SYNTHETIC, "emsqa_knowledge_path": str(folder), "rag_cache_dir": str(tmp_path / "c")}


def rag_problems(metadata, task="emsqa_private_rag"):
    return problems_of("--tasks", task, "--metadata", json.dumps(metadata))


def test_good_rag_settings_pass(knowledge, tmp_path):
    areas = tmp_path / "areas.json"
    areas.write_text("{}")
    assert rag_problems({**knowledge, "rag_prompt": "authors", "rag_k": "5", "rag_retriever": "bm25"}) == []
    assert rag_problems({**knowledge, "rag_areas": "gold"}) == []


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("rag_prompt", "author", "rag_prompt='author' is not one of"),
        ("rag_k", "abc", "rag_k='abc' is not a whole number"),
        ("rag_k", "0", "rag_k must be a whole number of at least 1"),
        ("rag_retriever", "bm24", "rag_retriever 'bm24' is not one of"),
        ("rag_retrievals", "/nonexistent/retrievals.jsonl", "rag_retrievals points at /nonexistent/retrievals.jsonl"),
        ("rag_areas", "/nonexistent/areas.json", "rag_areas points at /nonexistent/areas.json"),
    ],
)
def test_a_bad_rag_setting_is_one_line_before_the_model(knowledge, setting, value, expected):
    (problem,) = rag_problems({**knowledge, setting: value})
    assert expected in problem and "\n" not in problem, problem


def test_every_bad_rag_setting_is_reported_at_once(knowledge):
    found = rag_problems({**knowledge, "rag_prompt": "author", "rag_k": "abc", "rag_areas": "/nonexistent/a.json"})
    assert len(found) == 3 and all(k in " ".join(found) for k in ("rag_prompt", "rag_k", "rag_areas")), found
