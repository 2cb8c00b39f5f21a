"""Code review of medeval_metrics/preflight (2026-12-01): the command line read as lm-eval reads it, a typo's
"meant" key switching off only the check it was meant for, invalid Hub ids and an unreachable Hub as one true
line, and the EMSQA RAG settings checked before the model loads. In-process and fast: lm-eval's task index is
a short list, the network probe a stub."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, clear_medeval_settings

from medeval_metrics import preflight
from medeval_metrics.data import MedevalDataError

SYNTHETIC = str(FIXTURES / "emsqa_synthetic.json")
LM_EVAL_TASKS = ["hellaswag", "arc_easy", "mmlu"]
HUB_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT")


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    clear_medeval_settings(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def problems_of(*argv, **kwargs) -> list[str]:
    try:
        preflight.run_checks(list(argv), **{"lm_eval_names": lambda: LM_EVAL_TASKS, **kwargs})
    except MedevalDataError as exc:
        return getattr(exc, "problems", None) or [str(exc)]
    return []


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


def test_an_abbreviated_include_path_makes_the_user_s_task_known(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "mine.yaml").write_text("task: my_own_task\ndataset_path: json\noutput_type: generate_until\n")
    assert problems_of("--tasks", "my_own_task", "--include", str(tasks), lm_eval_names=None) == []


def test_bad_metadata_json_is_still_the_pack_s_one_line():
    (problem,) = problems_of("--tasks", "emsqa_private", "--metadata", "{'emsqa_private_path': 'x'}")
    assert problem.startswith("--metadata is not valid JSON") and "\n" not in problem


def test_an_abbreviated_tasks_list_is_normalised_for_lm_eval_too():
    # lm-eval would look for a task named " b"; the pack's checks, which strip names, would have passed it
    assert preflight.normalise_task_list(["--task", "a, b,", "--model", "hf"]) == ["--tasks", "a,b", "--model", "hf"]
    assert preflight.normalise_task_list(["--tas=a, b"]) == ["--tasks", "a,b"]
