"""Issue 23.1, 23.2, 23.4: every task selection goes through the same pre-run checks (tags, patterns, the
user's own tasks), near-miss metadata keys, and the model resolved before anything else. In-process and
fast: lm-eval's full index is replaced by a short list, the network probe by a stub."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, clear_medeval_settings

from medeval_metrics import cli, preflight
from medeval_metrics.data import MedevalDataError
from medeval_metrics.preflight.selection import select


def select_tasks(names, lm_eval_names=None, user_tasks=False):
    """The selection ``run_checks`` makes of ``names``; a wrong name raises its problem."""
    selection, problems = select(names, lm_eval_names, user_tasks)
    preflight.raise_problems(problems)
    return selection


LM_EVAL_TASKS = ["hellaswag", "arc_easy", "mmlu"]


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


def test_the_pack_s_tag_is_a_selection_like_a_group():
    selection = select_tasks(["medeval"], lambda: pytest.fail("indexed lm-eval"))
    assert selection.only_pack and selection.pack_tasks[0] == "emsqa_public" and "medicationqa" in selection.pack_tasks
    assert {"emsqa_private", "emrqa_risk", "emrqa_emrql_1", "medicationqa"} <= set(selection.pack_tasks)
    assert selection.requested_groups["medeval"] == selection.pack_tasks


def test_the_tag_without_data_lists_every_missing_source_and_what_to_run_instead():
    found = problems_of("--tasks", "medeval")
    # the public sources (the Hub is off here) each with its own line, then the tag's own with the way out
    assert [p.split(" is not available")[0] for p in found[:-1]] == [
        "the EMSQA public set",
        "the EMSQA knowledge base",
        "the MedicationQA data set (MedInfo2019-QA-Medications.xlsx, 690 rows)",
    ]
    tag = found[-1]
    assert tag.startswith("--tasks medeval includes emsqa_private, ")
    assert "(emsqa_private_path, emrqa_data_ql_csv, emrqa_data_json are not set)" in tag
    assert "Run these instead: `--tasks emsqa_public_variants," in tag and ",medicationqa`" in tag


def test_medeval_run_with_the_tag_stops_before_lm_eval_and_its_full_index(monkeypatch, capsys, tmp_path):
    """Its time: scripts/bench_run_checks.py."""
    import lm_eval.__main__

    from medeval_metrics.preflight import selection

    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: pytest.fail("lm-eval started"))
    monkeypatch.setattr(selection, "lm_eval_task_names", lambda *a: pytest.fail("indexed lm-eval's tasks"))
    code = cli.main(["run", "--tasks", "medeval", "--model", "hf", "--model_args", f"pretrained={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "medeval: 4 problems, fix them all before the run:" in err and "Run these instead" in err


@pytest.mark.parametrize(
    "pattern, tasks",
    [
        ("emsqa_public_*", ["emsqa_public", "emsqa_public_cot", "emsqa_public_expert_cot", "emsqa_public_mc"]),
        ("emrql_?", ["emrqa_emrql_1", "emrqa_emrql_2"]),  # the old names, now groups of one task
        ("emrqa_emrql_*", ["emrqa_emrql_1", "emrqa_emrql_2"]),
    ],
)
def test_a_pattern_of_the_pack_s_names_selects_its_tasks_and_checks_their_data(pattern, tasks):
    selection = select_tasks([pattern], lambda: pytest.fail("indexed lm-eval"))
    assert selection.only_pack and set(tasks) <= set(selection.pack_tasks)
    found = problems_of("--tasks", pattern)
    assert found and all("not set" in p or "not available" in p for p in found), found


def test_an_emrql_pattern_reports_both_emrqa_files():
    (problem,) = problems_of("--tasks", "emrql_*")
    assert problem.startswith("the emrQA data.json and data-ql.csv are not available")


def test_a_task_of_the_user_s_include_path_on_a_pack_loader_has_its_data_checked(tmp_path):
    tasks = tmp_path / "mine"
    tasks.mkdir()
    (tasks / "my_emsqa.yaml").write_text(
        "task: my_emsqa\ntag: my_suite\ncustom_dataset: !function medeval_metrics.emsqa.load_private\n"
        f"metadata:\n  emsqa_private_path: {tmp_path / 'nowhere.json'}\n"
    )
    for name in ("my_emsqa", "my_suite", "my_*"):
        found = problems_of("--tasks", name, "--include_path", str(tasks))
        assert len(found) == 1 and found[0].startswith("my_emsqa (your task, read like emsqa_private): ")
        assert "nowhere.json, which does not exist" in found[0]
    # with the file there, it passes; --metadata overrides the YAML's own key as lm-eval does
    good = json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")})
    assert problems_of("--tasks", "my_emsqa", "--include_path", str(tasks), "--metadata", good) == []


# ---------------------------------------------------------------- 23.2 metadata keys


@pytest.mark.parametrize(
    "key, meant",
    [
        ("private_path", "emsqa_private_path"),
        ("public_path", "emsqa_public_path"),
        ("Private-Path", "emsqa_private_path"),
        ("path_public", "emsqa_public_path"),
    ],
)
def test_a_near_miss_key_is_reported_and_does_not_count_as_the_data_missing(key, meant):
    task = meant.removesuffix("_path")  # emsqa_private, emsqa_public
    found = problems_of("--tasks", task, "--metadata", json.dumps({key: "/data/x.json"}))
    assert found == [f"--metadata key {key!r} is not one the pack reads. Did you mean {meant!r}?"]


def test_an_unknown_key_is_refused_unless_allowed_on_the_command_line():
    meta = json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json"), "my_setting": 3})
    (problem,) = problems_of("--tasks", "emsqa_private", "--metadata", meta)
    assert problem.startswith("--metadata key 'my_setting' is not one the pack reads, so it would be ignored.")
    assert problems_of("--tasks", "emsqa_private", "--metadata", meta, "--allow-unknown-metadata") == []


def test_medeval_run_takes_allow_unknown_metadata_out_before_lm_eval_sees_it(monkeypatch, tmp_path):
    import sys

    import lm_eval.__main__

    (tmp_path / "config.json").write_text("{}")
    seen = []
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: seen.append(list(sys.argv)))
    meta = json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json"), "my_setting": 3})
    assert (
        cli.main(
            [
                "run",
                "--tasks",
                "emsqa_private",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={tmp_path}",
                "--metadata",
                meta,
                "--allow-unknown-metadata",
            ]
        )
        == 0
    )
    assert seen and "--allow-unknown-metadata" not in seen[0]


# ---------------------------------------------------------------- 23.4 the model first


def model_problems(model_args: str, model: str = "hf", reachable=lambda: pytest.fail("probed the network")):
    found = problems_of(
        "--model",
        model,
        "--model_args",
        model_args,
        "--tasks",
        "emsqa_private",
        "--metadata",
        json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
        check_options=True,
        hub_reachable=reachable,
    )
    return found


def test_a_local_model_folder_that_does_not_exist_is_one_line(tmp_path):
    assert model_problems(f"pretrained={tmp_path / 'no-model'}") == [
        (
            f"--model_args pretrained={tmp_path / 'no-model'}: no such folder. Give the folder holding the model "
            "(config.json and weights), or a Hugging Face Hub id such as Qwen/Qwen2.5-0.5B-Instruct."
        )
    ]
    (tmp_path / "empty").mkdir()
    (problem,) = model_problems(f"pretrained={tmp_path / 'empty'}")
    assert "has no config.json, so it is not a model folder" in problem


def test_a_missing_gguf_file_names_the_ones_there(tmp_path):
    (tmp_path / "q4.gguf").write_bytes(b"GGUF")
    assert model_problems(f"pretrained={tmp_path},gguf_file=q8.gguf") == [
        f"--model_args gguf_file=q8.gguf: not in {tmp_path}. It holds: q4.gguf."
    ]
    assert model_problems(f"pretrained={tmp_path},gguf_file=q4.gguf") == []


def test_a_hub_id_while_the_hub_is_off_or_unreachable_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (problem,) = model_problems("pretrained=Qwen/Qwen2.5-0.5B-Instruct")
    assert problem.startswith("--model_args pretrained=Qwen/Qwen2.5-0.5B-Instruct is a Hub id, the Hub is off")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    (problem,) = model_problems("pretrained=Qwen/Qwen2.5-0.5B-Instruct", reachable=lambda: False)
    assert "the Hub cannot be reached (https://huggingface.co)" in problem
    import os

    assert "HF_HUB_OFFLINE" not in os.environ  # the user's environment is left alone (test_preflight_review.py)


def test_the_hub_probe_is_made_only_when_a_download_is_needed(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    (tmp_path / "config.json").write_text("{}")
    assert model_problems(f"pretrained={tmp_path}") == []  # local model, local data: no probe (it would fail)
    probes = []
    found = problems_of(
        "--model",
        "hf",
        "--model_args",
        f"pretrained={tmp_path}",
        "--tasks",
        "emsqa_public",
        check_options=True,
        hub_reachable=lambda: probes.append(1) or False,
    )
    assert probes == [1] and "the Hub cannot be reached" in found[0]  # the download fails at once, no retries


def test_api_models_are_not_resolved():
    assert model_problems("model=gpt-4o-mini,base_url=http://127.0.0.1:9/v1", model="local-chat-completions") == []
