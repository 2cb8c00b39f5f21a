"""`medeval run`'s checks before lm-eval builds the model (issue 13.4, 13.5), the pack-only task index
(issue 15) and Ctrl-C. In-process and fast: lm-eval's full index is replaced by a short list here."""

from __future__ import annotations

import inspect
import json

import pytest
from conftest import FIXTURES, clear_medeval_settings

from medeval_metrics import cli, preflight
from medeval_metrics.data import MedevalDataError
from medeval_metrics.preflight.data_checks import group_problems
from medeval_metrics.preflight.selection import select


def select_tasks(names, lm_eval_names=None, user_tasks=False):
    """The selection ``run_checks`` makes of ``names``; a wrong name raises its problem."""
    selection, problems = select(names, lm_eval_names, user_tasks)
    preflight.raise_problems(problems)
    return selection


LM_EVAL_TASKS = ["hellaswag", "arc_easy", "arc_challenge", "mmlu", "pubmedqa", "medmcqa"]


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    clear_medeval_settings(monkeypatch)


def fake_index():
    return LM_EVAL_TASKS + list(preflight.pack_names())


def checks(*argv):
    return preflight.run_checks(list(argv), lm_eval_names=fake_index)


# ---------------------------------------------------------------- --metadata


@pytest.mark.parametrize(
    "value, expected",
    [
        ("{'emsqa_public_path': '/data/t.json'}", '--metadata \'{"emsqa_public_path": "/data/t.json"}\''),
        ('{"emsqa_public_path": "/data/t.json",}', "not valid JSON"),
        ('{"emsqa_public_path": /data/t.json}', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_bad_metadata_json_is_one_line_showing_the_fix(value, expected):
    with pytest.raises(MedevalDataError) as info:
        preflight.parse_metadata(["--metadata", value])
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_metadata_in_both_forms_lm_eval_accepts():
    assert preflight.parse_metadata(["--metadata", '{"emrqa_seed": 3}', "--tasks", "x"]) == {"emrqa_seed": 3}
    assert preflight.parse_metadata(["--metadata", "emrqa_seed=3", "emsqa_revision=main", "--tasks", "x"]) == {
        "emrqa_seed": 3,
        "emsqa_revision": "main",
    }
    assert preflight.parse_metadata(['--metadata={"emrqa_seed": 4}']) == {"emrqa_seed": 4}
    assert preflight.parse_metadata(["--tasks", "emsqa_public"]) == {}


def test_repeated_metadata_flags_are_merged_in_order_with_the_same_result_as_lm_eval():
    import argparse

    from lm_eval._cli.utils import MergeDictAction

    argv = ["--tasks", "x", "--metadata", '{"emrqa_seed": 3, "a": 1}', "--metadata", "emrqa_seed=4", "b=2"]
    merged = preflight.parse_metadata(argv)
    assert merged == {"emrqa_seed": 4, "a": 1, "b": 2}
    assert preflight.read_command_line(argv).metadata == merged
    theirs = argparse.ArgumentParser()  # lm-eval's own merging of the flag (its action, in a parser of the test's)
    theirs.add_argument("--metadata", nargs="+", action=MergeDictAction)
    theirs.add_argument("--tasks", nargs="+")
    assert theirs.parse_args(argv).metadata == merged


@pytest.mark.parametrize(
    "key, closest",
    [
        ("emsqa_public_pth", "emsqa_public_path"),
        ("medicationqa_file", "medicationqa_path"),
        ("emrqa_data_jsn", "emrqa_data_json"),
        ("medeval_judge", "medeval_judges"),
        ("emrqa_samplesize", "emrqa_sample_size"),
    ],
)
def test_a_misspelled_pack_key_is_an_error_naming_the_closest_key(key, closest):
    with pytest.raises(MedevalDataError, match=f"Did you mean '{closest}'"):
        checks("--metadata", json.dumps({key: "x"}))


def test_keys_no_task_of_the_pack_reads_need_the_explicit_allowance():
    meta = json.dumps({"tokenizer": "gpt2", "max_seq_lengths": [4096]})
    with pytest.raises(MedevalDataError) as info:
        checks("--metadata", meta)
    assert info.value.problems == [
        f"--metadata key {key!r} is not one the pack reads, so it would be ignored. If a task of your own (or one "
        "of lm-eval's) reads it, add --allow-unknown-metadata; `medeval run --help` lists the pack's keys."
        for key in ("tokenizer", "max_seq_lengths")
    ]
    assert checks("--metadata", meta, "--allow-unknown-metadata") is None


def test_known_keys_cover_every_data_source_and_loader_option():
    keys = preflight.known_metadata_keys()
    assert {
        "emsqa_public_path",
        "emsqa_private_path",
        "medicationqa_path",
        "emrqa_data_json",
        "emrqa_data_ql_csv",
        "medeval_judges",
        "emrqa_sample_size",
        "emrqa_seed",
        "emrqa_cache_dir",
        "emsqa_revision",
    } <= set(keys)


# ---------------------------------------------------------------- --tasks


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("emsqa_pubic", "'emsqa_public'"),
        ("medicatonqa", "'medicationqa'"),
        ("emrqa_smokng", "'emrqa_smoking'"),
        ("hellaswg", "'hellaswag'"),
    ],
)
def test_a_mistyped_task_gets_did_you_mean_and_a_pointer_to_medeval_list(name, suggestion):
    with pytest.raises(MedevalDataError) as info:
        checks("--tasks", name)
    message = str(info.value)
    assert f"Did you mean {suggestion}" in message and "`medeval list`" in message and "\n" not in message


def test_a_typo_of_a_pack_name_needs_no_lm_eval_index():
    def no_index():
        raise AssertionError("built lm-eval's index")

    with pytest.raises(MedevalDataError, match="Did you mean 'emsqa_public'"):
        select_tasks(["emsqa_pubic"], no_index)
    # with the user's own tasks folder, the name may be theirs: lm-eval's index (theirs included) decides
    assert select_tasks(["emsqa_mine"], lambda: ["emsqa_mine"], user_tasks=True).other_names == ["emsqa_mine"]


def test_lm_eval_tasks_and_paths_pass_and_switch_off_the_pack_only_index(tmp_path):
    selection = checks("--tasks", "hellaswag,arc_*")
    assert selection.other_names == ["hellaswag", "arc_*"] and not selection.only_pack


def test_a_group_expands_to_its_tasks():
    selection = checks(
        "--tasks",
        "emsqa_public_variants",
        "--metadata",
        json.dumps({"emsqa_public_path": str(FIXTURES / "emsqa_synthetic.json")}),
    )
    assert selection.pack_tasks == ["emsqa_public", "emsqa_public_cot", "emsqa_public_expert_cot", "emsqa_public_mc"]
    assert selection.only_pack


def test_a_group_with_tasks_lacking_data_names_them_and_how_to_exclude_them():
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(group_problems(select_tasks(["emsqa"], fake_index), {})[0])
    message = str(info.value)
    assert "emsqa_private, emsqa_private_cot, emsqa_private_expert_cot, emsqa_private_mc" in message
    assert "--tasks emsqa_public_variants" in message and "emsqa_private_path" in message


def test_a_group_with_every_task_given_data_passes():
    selection = select_tasks(["emsqa"], fake_index)
    preflight.raise_problems(group_problems(selection, {"emsqa_private_path": "/somewhere.json"})[0])


# ---------------------------------------------------------------- data and judges


def test_a_missing_data_path_is_reported_before_anything_runs(tmp_path):
    with pytest.raises(MedevalDataError, match="does not exist"):
        checks(
            "--tasks", "emsqa_private", "--metadata", json.dumps({"emsqa_private_path": str(tmp_path / "nope.json")})
        )


def test_a_folder_given_as_the_private_file_is_refused(tmp_path):
    with pytest.raises(MedevalDataError, match="is a folder"):
        checks("--tasks", "emsqa_private", "--metadata", json.dumps({"emsqa_private_path": str(tmp_path)}))


def test_bad_records_in_the_data_are_found_before_the_model(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question": "q", "choices": ["a", "b"], "answer": "z"}]))
    with pytest.raises(MedevalDataError, match="bad.json"):
        checks("--tasks", "emsqa_private", "--metadata", json.dumps({"emsqa_private_path": str(bad)}))


def test_good_data_passes(tmp_path):
    selection = checks(
        "--tasks",
        "emsqa_private",
        "--metadata",
        json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
    )
    assert selection.pack_tasks == ["emsqa_private"]


def test_emrqa_without_its_files_says_what_to_get(tmp_path):
    with pytest.raises(MedevalDataError, match="emrqa_data_json"):
        checks("--tasks", "emrqa_risk")


def test_a_judges_file_that_does_not_exist_is_reported_before_the_model(tmp_path):
    meta = {"medicationqa_path": str(tmp_path / "m.csv"), "medeval_judges": str(tmp_path / "judges.yaml")}
    (tmp_path / "m.csv").write_text("Question,Answer\nWhat is aspirin?,A pain reliever.\n")
    with pytest.raises(MedevalDataError, match="judges.yaml"):
        checks("--tasks", "medicationqa", "--metadata", json.dumps(meta))


@pytest.mark.parametrize(
    "judge, message",
    [
        (
            {"backend": "local-chat-completion", "base_url": "http://127.0.0.1:9/v1"},
            "Did you mean 'local-chat-completions'",
        ),
        ({"backend": "openai-chat-completion"}, "Did you mean 'openai-chat-completions'"),
        ({"backend": "local-chat-completions"}, 'local-chat-completions needs "base_url"'),
    ],
)
def test_a_judge_backend_typo_or_missing_base_url_is_reported_before_the_model(tmp_path, judge, message):
    (tmp_path / "m.csv").write_text("Question,Answer\nWhat is aspirin?,A pain reliever.\n")
    panel = {"judges": [{"name": "j", "model": "m", **judge}]}
    meta = {"medicationqa_path": str(tmp_path / "m.csv"), "medeval_judges": panel}
    with pytest.raises(MedevalDataError, match=message):
        checks("--tasks", "medicationqa", "--metadata", json.dumps(meta))


def test_a_judge_panel_is_not_checked_for_tasks_without_judges(tmp_path):
    meta = {
        "emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json"),
        "medeval_judges": str(tmp_path / "judges.yaml"),
    }
    checks("--tasks", "emsqa_private", "--metadata", json.dumps(meta))


# ---------------------------------------------------------------- medeval run


def test_medeval_run_stops_on_a_bad_name_before_lm_eval_starts(monkeypatch, capsys, tmp_path):
    import lm_eval.__main__

    (tmp_path / "config.json").write_text("{}")

    monkeypatch.setattr(preflight.selection, "lm_eval_task_names", lambda include_path=None: fake_index())
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: pytest.fail("lm-eval started"))
    assert cli.main(["run", "--model", "hf", "--model_args", f"pretrained={tmp_path}", "--tasks", "emsqa_pubic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("medeval: error: --tasks: no task or group named 'emsqa_pubic'") and "\n" not in err


@pytest.mark.parametrize(
    "argv, hint", [([], "add `--use_cache PATH`"), (["--use_cache", "/tmp/c"], "/tmp/c* are reused")]
)
def test_ctrl_c_ends_with_one_line_on_how_to_resume(monkeypatch, capsys, argv, hint):
    import lm_eval.__main__

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", interrupted)
    data = [
        "--tasks",
        "emsqa_private",
        "--metadata",
        json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
    ]
    assert cli.main(["run", "--model", "hf", *data, *argv]) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("medeval: interrupted.") and hint in err and "Traceback" not in err and "\n" not in err


# ---------------------------------------------------------------- pack-only task index (issue 15)


@pytest.mark.parametrize(
    "argv, env, pack_only",
    [
        (["--tasks", "emsqa_private"], {}, True),
        (["--tasks", "emsqa_private", "--include_path", "/mine"], {}, False),
        (["--tasks", "emsqa_private,hellaswag"], {}, False),
        (["--tasks", "emsqa_private"], {"MEDEVAL_FULL_TASK_INDEX": "1"}, False),
    ],
)
def test_the_pack_only_index_is_used_only_when_it_suffices(monkeypatch, argv, env, pack_only):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    meta = ["--metadata", json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")})]
    settings = preflight.read_command_line([*argv, *meta])
    assert cli._pack_only_index(checks(*argv, *meta), settings) is pack_only


def test_pack_only_index_holds_the_pack_and_nothing_else():
    """Also notices if lm-eval's TaskManager loses ``include_defaults`` (the wrapper would then be wrong)."""
    from lm_eval.tasks import TaskManager

    from medeval_metrics.lm_eval_compat import pack_task_index

    assert "include_defaults" in inspect.signature(TaskManager.__init__).parameters  # the argument the wrapper sets
    before = TaskManager.__init__
    with pack_task_index(pack_only=True):
        names = set(TaskManager().all_tasks)  # as lm-eval's CLI builds it: no --include_path
    assert TaskManager.__init__ is before
    assert {"emsqa_public", "medicationqa", "emrqa", "emsqa"} <= names and "hellaswag" not in names


def test_a_misspelled_environment_variable_is_an_error_naming_the_known_one():
    with pytest.raises(
        MedevalDataError, match=r"MEDEVAL_EMSQA_PUBLIC_PTH is not a setting .*Did you mean MEDEVAL_EMSQA_PUBLIC_PATH\?"
    ):
        preflight.raise_problems(preflight.environment_problems({"MEDEVAL_EMSQA_PUBLIC_PTH": "/x"}))
    with pytest.raises(MedevalDataError, match=r"MEDEVAL_RAG_KK .*Did you mean MEDEVAL_RAG_K\?"):
        preflight.raise_problems(preflight.environment_problems({"MEDEVAL_RAG_KK": "4"}))
    # known settings, the pack's own switches and key variables a judge config names are left alone
    preflight.raise_problems(
        preflight.environment_problems(
            {
                "MEDEVAL_EMSQA_PUBLIC_PATH": "/x",
                "MEDEVAL_EMRQA_SEED": "1",
                "MEDEVAL_JUDGES": "{}",
                "MEDEVAL_DATA_CHECKSUMS": "off",
                "MEDEVAL_EMSQA_JUDGE_API_KEY": "k",
                "MEDEVAL_RAG_K": "8",
                "MEDEVAL_EMSQA_ALLOW_DUPLICATES": "1",
                "PATH": "/bin",
            }
        )
    )
