"""What a user mistypes or gets wrong on `medeval run`'s command line, found before lm-eval builds the model
(user-path review of 2026-12-01, items 1-4, 7-9, 14, 17). In-process and fast: lm-eval's task index is a short
list, lm-eval's CLI is replaced where a test must see that it never started."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

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


PRIVATE = {"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    clear_medeval_settings(monkeypatch)


def fake_index():
    return ["hellaswag", "arc_easy", *preflight.pack_names()]


def run_checks(*argv, environ=None, metadata=PRIVATE, tasks=("--tasks", "emsqa_private")):
    """`medeval run ARGV`'s checks, lm-eval's options included; the error text, or None when all pass."""
    full = [*tasks, "--metadata", json.dumps(metadata), *argv]
    try:
        preflight.run_checks(full, lm_eval_names=fake_index, environ=environ or {}, check_options=True)
    except MedevalDataError as exc:
        return str(exc)
    return None


def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "not_a_folder"
    path.write_text("x")
    return path


# ---------------------------------------------------------------- lm-eval's options (items 1 and 7)


def test_an_output_path_that_cannot_be_written_stops_the_run_before_the_model(tmp_path):
    under_a_file = a_file(tmp_path) / "out"
    message = run_checks("--output_path", str(under_a_file), "--log_samples")
    assert message.startswith(f"--output_path {under_a_file}: {a_file(tmp_path)} is a file, not a folder")
    assert "lose" not in message or "results" in message and "\n" not in message
    if Path("/proc/self").exists():  # a folder even root cannot write into
        assert "/proc is not writable" in run_checks("--output_path", "/proc/medeval-x/out", "--log_samples")
    # a folder that does not exist yet is fine (lm-eval creates it), and so is a results file's name
    assert run_checks("--output_path", str(tmp_path / "new" / "deeper"), "--log_samples") is None
    assert run_checks("--output_path", str(tmp_path / "results.json")) is None
    assert not list(tmp_path.glob("new")), "the check must not leave folders behind"


def test_a_use_cache_path_that_cannot_be_written_is_refused(tmp_path):
    cache = a_file(tmp_path) / "responses"
    message = run_checks("--use_cache", str(cache))
    assert message.startswith(f"--use_cache {cache}: ") and f"{cache}_rank0.db" in message
    assert run_checks("--use_cache", str(tmp_path / "cache" / "responses")) is None


def test_log_samples_without_output_path_says_to_add_it():
    assert run_checks("--log_samples") == (
        "--log_samples (and --predict_only) write the samples into the --output_path folder: add --output_path DIR."
    )
    assert "add --output_path DIR" in run_checks("--predict_only")


@pytest.mark.parametrize(
    "limit, refused", [("0", True), ("-1", True), ("-0.5", True), ("0.1", False), ("20", False), ("5000", False)]
)
def test_a_limit_of_zero_or_below_is_refused(limit, refused):
    message = run_checks("--limit", limit)
    assert (message is not None) is refused
    if refused:
        assert message.startswith(f"--limit {float(limit):g} selects no items") and "leave --limit out" in message


@pytest.mark.parametrize("extra", [(), ("--device", "cpu")], ids=["lm-eval's default device", "--device too"])
def test_a_device_in_model_args_is_refused_before_lm_eval_crashes_on_it(tmp_path, extra):
    # lm-eval 0.4.13 passes --device (default cuda:0) next to model_args: HFLM() got multiple values for 'device'
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    message = run_checks("--model", "hf", "--model_args", f"pretrained={model},device=cpu", *extra)
    assert message.startswith("--model_args device=cpu: lm-eval also passes its own --device")
    assert message.endswith("Drop device from --model_args and give --device cpu instead.")
    assert run_checks("--model", "hf", "--model_args", f"pretrained={model}", "--device", "cpu") is None


@pytest.mark.parametrize(
    "model, suggestion", [("hff", "'hf'"), ("vlm", "'vllm'"), ("local-chat-completion", "'local-chat-completions'")]
)
def test_a_mistyped_model_gets_did_you_mean(model, suggestion):
    message = run_checks("--model", model)
    assert message.startswith(f"--model {model!r} is not a model backend lm-eval knows. Did you mean {suggestion}")


def test_known_models_pass_the_pack_s_scripted_one_included():
    from medeval_metrics.rigs import register_scripted_model

    assert run_checks("--model", "hf") is None and run_checks() is None  # lm-eval's default is hf
    register_scripted_model()  # as `medeval run --model medeval-scripted` does before its checks
    assert run_checks("--model", "medeval-scripted") is None


def test_no_tasks_is_one_line_naming_the_flag():
    message = run_checks("--model", "hf", tasks=())
    assert message.startswith("--tasks is missing") and "`medeval list`" in message


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--tasks", "emsqa_public, emsqa_private"], ["--tasks", "emsqa_public,emsqa_private"]),
        (["--tasks", "emsqa_public,", "emsqa_private"], ["--tasks", "emsqa_public,emsqa_private"]),
        (["--tasks", "emsqa_public,emsqa_private,"], ["--tasks", "emsqa_public,emsqa_private"]),
        (
            ["--tasks=emsqa_public, emsqa_private,", "--limit", "-1"],
            ["--tasks", "emsqa_public,emsqa_private", "--limit", "-1"],
        ),
        (["-t", " emsqa_public ", "--model", "hf"], ["--tasks", "emsqa_public", "--model", "hf"]),
        (["--model", "hf", "--tasks", "a,b"], ["--model", "hf", "--tasks", "a,b"]),
        (["--tasks", ","], ["--tasks"]),  # nothing left: lm-eval's parser says it needs a value
    ],
)
def test_task_lists_with_spaces_or_empty_entries_are_normalised(argv, expected):
    assert preflight.read_command_line(argv).lm_eval_argv == expected


def test_medeval_run_hands_lm_eval_the_normalised_task_list(monkeypatch, capsys):
    import sys

    import lm_eval.__main__

    seen = []
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: seen.append(list(sys.argv)))
    monkeypatch.setattr(cli, "run_summary", lambda *args: "")
    code = cli.main(
        ["run", "--model", "hf", "--tasks", "emsqa_private, emsqa_private_cot,", "--metadata", json.dumps(PRIVATE)]
    )
    assert code == 0, capsys.readouterr().err
    assert seen[0][seen[0].index("--tasks") + 1] == "emsqa_private,emsqa_private_cot"


def test_medeval_run_stops_on_an_unwritable_output_path_before_lm_eval_starts(monkeypatch, capsys, tmp_path):
    import lm_eval.__main__

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: pytest.fail("lm-eval started"))
    code = cli.main(
        [
            "run",
            "--model",
            "hf",
            "--tasks",
            "emsqa_private",
            "--metadata",
            json.dumps(PRIVATE),
            "--output_path",
            str(a_file(tmp_path) / "out"),
            "--log_samples",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("medeval: error: --output_path ") and "\n" not in err


# ---------------------------------------------------------------- environment variables (item 2)


@pytest.mark.parametrize(
    "name, closest",
    [
        ("MEDEVAL_JUDGE", "MEDEVAL_JUDGES"),
        ("MEDEVAL_JUDGESS", "MEDEVAL_JUDGES"),
        ("MEDEVAL_JUDES", "MEDEVAL_JUDGES"),
        ("MEDEVAL_JUDGE_FILE", "MEDEVAL_JUDGES"),
        ("MEDEVAL_SECRET_ENV_VAR", "MEDEVAL_SECRET_ENV_VARS"),
        ("MEDEVAL_DATA_CHECKSUM", "MEDEVAL_DATA_CHECKSUMS"),
        ("MEDEVAL_DATASET_CACH", "MEDEVAL_DATASET_CACHE"),
        ("MEDEVAL_MODEL_API_KEY_EN", "MEDEVAL_MODEL_API_KEY_ENV"),
        ("MEDEVAL_FULL_TASK_INDX", "MEDEVAL_FULL_TASK_INDEX"),
    ],
)
def test_every_misspelled_medeval_variable_is_an_error_naming_the_known_one(name, closest):
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(preflight.environment_problems({name: "x"}))
    assert str(info.value) == (
        f"environment variable {name} is not a setting the pack reads. Did you mean {closest}? "
        f"Rename or unset it (`unset {name}`)."
    )


def test_every_variable_the_pack_reads_is_known_and_passes():
    """Collected from the code: a new MEDEVAL_* variable must be added to known_environment_variables."""
    package = Path(preflight.__file__).parent.parent
    in_code = {
        name
        for path in package.rglob("*.py")
        for name in re.findall(r"MEDEVAL_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8"))
    }
    examples_of_typos = {
        "MEDEVAL_EMSQA_PUBLIC_PTH",
        "MEDEVAL_JUDGE",
        "MEDEVAL_BENCH",
    }  # preflight: docstrings, a prefix
    known = set(preflight.known_environment_variables())
    secret_names = {n for n in in_code if n.endswith(("_KEY", "_TOKEN", "_SECRET"))}  # a key's variable, not a setting
    assert in_code - examples_of_typos - secret_names <= known
    assert {"MEDEVAL_JUDGES", "MEDEVAL_FULL_TASK_INDEX", "MEDEVAL_MODEL_API_KEY_ENV", "MEDEVAL_DATASET_CACHE"} <= known
    preflight.raise_problems(
        preflight.environment_problems(
            {name: "1" for name in known - {"MEDEVAL_RAG_MODE"}}
            | {"MEDEVAL_BENCH_EMRQA_NOTES": "80", "MEDEVAL_JUDGE_API_KEY": "k"}
        )
    )


def test_all_misspelled_variables_are_reported_in_one_error():
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(
            preflight.environment_problems({"MEDEVAL_JUDGE": "j.yaml", "MEDEVAL_DATASET_CACH": "off", "HOME": "/root"})
        )
    lines = str(info.value).splitlines()
    assert lines[0] == "2 problems, fix them all before the run:"
    assert "MEDEVAL_DATASET_CACH " in lines[1] and "MEDEVAL_JUDGE " in lines[2]


# ---------------------------------------------------------------- --metadata keys (items 4 and 8)


@pytest.mark.parametrize(
    "key, message",
    [
        (
            "EMSQA_PUBLIC_PATH",
            "--metadata key 'EMSQA_PUBLIC_PATH' is not one the pack reads (keys are lower case). "
            "Did you mean 'emsqa_public_path'?",
        ),
        ("Emsqa_Private_Path", "(keys are lower case). Did you mean 'emsqa_private_path'?"),
        (
            "ems_public_path",
            "--metadata key 'ems_public_path' is not one the pack reads. Did you mean 'emsqa_public_path'?",
        ),
        ("medicationqa_pat", "Did you mean 'medicationqa_path'?"),
    ],
)
def test_wrong_case_or_unprefixed_keys_get_did_you_mean(key, message):
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(preflight.metadata_key_problems({key: "/data"}))
    assert message in str(info.value)


def test_the_opt_in_bertscore_key_is_known():  # documented, read by medicationqa.bertscore, refused before
    preflight.raise_problems(
        preflight.metadata_key_problems({"medicationqa_bertscore_model": "distilbert-base-uncased"})
    )
    preflight.raise_problems(
        preflight.environment_problems({"MEDEVAL_MEDICATIONQA_BERTSCORE_MODEL": "distilbert-base-uncased"})
    )


def test_a_one_word_key_is_the_user_s_when_unknown_keys_are_allowed():
    with pytest.raises(MedevalDataError, match="Did you mean 'emrqa_seed'"):
        preflight.raise_problems(preflight.metadata_key_problems({"seed": 3}))
    preflight.raise_problems(preflight.metadata_key_problems({"seed": 3, "device": "cuda:1"}, allow_unknown=True))
    with pytest.raises(MedevalDataError, match="Did you mean 'emsqa_private_path'"):  # two words: still the pack's
        preflight.raise_problems(preflight.metadata_key_problems({"private_path": "/x"}, allow_unknown=True))


def test_keys_far_from_the_pack_s_pass_only_when_allowed():
    preflight.raise_problems(
        preflight.metadata_key_problems(
            {"tokenizer": "gpt2", "max_seq_lengths": [4096], "pretrained": "x"}, allow_unknown=True
        )
    )
    with pytest.raises(MedevalDataError, match="add --allow-unknown-metadata"):
        preflight.raise_problems(preflight.metadata_key_problems({"pretrained": "x"}))


@pytest.mark.parametrize(
    "key, meant",
    [
        ("private_path", "'emsqa_private_path'"),  # the pack's prefix left out
        ("public_path", "'emsqa_public_path'"),
        ("data_json", "'emrqa_data_json'"),
        ("PrivatePath", "'emsqa_private_path'"),  # case and separators
        ("emsqa-private-path", "'emsqa_private_path'"),
        ("path_private_emsqa", "'emsqa_private_path'"),  # word order
        ("EMSQA.Public.Path", "'emsqa_public_path'"),
        ("cache_dir", "'emrqa_cache_dir' or 'rag_cache_dir'"),  # two keys end so: both named
    ],
)
def test_near_miss_keys_without_the_prefix_or_in_another_form_get_did_you_mean_even_when_unknown_keys_are_allowed(
    key, meant
):
    for allowed in (False, True):
        with pytest.raises(MedevalDataError) as info:
            preflight.raise_problems(preflight.metadata_key_problems({key: "/x"}, allow_unknown=allowed))
        assert f"Did you mean {meant}?" in str(info.value)


@pytest.mark.parametrize(
    "mode, task",
    [
        ("filter_then_retrieve", "emsqa_public_expertrag_ftr"),
        ("retrieve_then_filter", "emsqa_public_expertrag_rtf"),
        ("global", "emsqa_public_rag"),
    ],
)
def test_rag_mode_in_metadata_is_refused_naming_the_task_for_that_mode(mode, task):
    message = run_checks(tasks=("--tasks", "emsqa_public_rag"), metadata={"rag_mode": mode})
    line = next(line for line in message.splitlines() if "rag_mode" in line)
    assert line.startswith("  - --metadata key 'rag_mode' cannot be set: each task sets its own rag_mode")
    assert f"For rag_mode {mode!r} run --tasks {task} (or " in line  # public first, as `medeval list` has it


def test_an_unknown_rag_mode_lists_each_mode_s_tasks_and_the_variable_is_refused_too():
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(preflight.metadata_key_problems({"rag_mode": "hybrid"}))
    assert "filter_then_retrieve: emsqa_public_expertrag_ftr, emsqa_private_expertrag_ftr" in str(info.value)
    with pytest.raises(
        MedevalDataError, match=r"environment variable MEDEVAL_RAG_MODE cannot be set.*`unset MEDEVAL_RAG_MODE`"
    ):
        preflight.raise_problems(preflight.environment_problems({"MEDEVAL_RAG_MODE": "global"}))


# ---------------------------------------------------------------- on/off settings (item 14)


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, True),
        ("true", True),
        ("TRUE", True),
        ("Yes", True),
        ("1", True),
        (1, True),
        ("on", True),
        (False, False),
        ("false", False),
        ("No", False),
        ("0", False),
        (0, False),
        ("off", False),
        ("", False),
        ("ture", None),
        ("2", None),
        (2, None),
        ("y", None),
        ("enabled", None),
        ([], None),
    ],
)
def test_on_off_settings_accept_true_false_words_and_refuse_the_rest(value, expected):
    if expected is None:
        with pytest.raises(
            MedevalDataError,
            match=r"^emsqa_allow_duplicates=.* is neither true nor false: give "
            r"true/false, 1/0 or yes/no \(any case\)\.$",
        ):
            preflight.flag_setting(value, "emsqa_allow_duplicates")
    else:
        assert preflight.flag_setting(value, "emsqa_allow_duplicates") is expected


def test_a_mistyped_on_off_setting_stops_the_run_in_metadata_and_environment():
    assert run_checks(metadata={**PRIVATE, "emsqa_allow_duplicates": "ture"}) == (
        "--metadata emsqa_allow_duplicates='ture' is neither true nor false: give true/false, 1/0 or yes/no (any case)."
    )
    assert "MEDEVAL_EMSQA_ALLOW_DUPLICATES='maybe' is neither" in run_checks(
        environ={"MEDEVAL_EMSQA_ALLOW_DUPLICATES": "maybe"}
    )
    assert "MEDEVAL_FULL_TASK_INDEX='yes please'" in run_checks(environ={"MEDEVAL_FULL_TASK_INDEX": "yes please"})
    assert run_checks(metadata={**PRIVATE, "emsqa_allow_duplicates": "Yes"}) is None


# ---------------------------------------------------------------- all problems at once (item 9)


def test_a_bad_task_key_variable_and_file_are_reported_together(tmp_path):
    message = run_checks(
        tasks=("--tasks", "emsqa_pubic,emsqa_private"),
        metadata={"emsqa_private_path": str(tmp_path / "missing.json"), "emsqa_publc_path": "/x"},
        environ={"MEDEVAL_JUDGE": "j.yaml"},
    )
    lines = message.splitlines()
    assert lines[0] == "4 problems, fix them all before the run:" and len(lines) == 5
    assert "'emsqa_publc_path'" in lines[1] and "MEDEVAL_JUDGE " in lines[2]
    assert "no task or group named 'emsqa_pubic'" in lines[3] and "missing.json" in lines[4]


def test_a_judges_file_with_five_faults_reports_all_five_at_once(tmp_path, monkeypatch):
    from medeval_metrics.judge.config import load_panel

    monkeypatch.delenv("UNSET_JUDGE_KEY_VAR", raising=False)
    judges = tmp_path / "judges.json"
    judges.write_text(
        json.dumps(
            {
                "judges": [
                    {
                        "name": "a",
                        "backend": "openai-chat-completion",
                        "model": "m",
                        "api_key": "sk-live-0123456789abcdef",
                    },
                    {
                        "name": "b",
                        "backend": "local-chat-completions",
                        "model": "m",
                        "api_key_env": "UNSET_JUDGE_KEY_VAR",
                    },
                ],
                "cahce": str(tmp_path / "c.sqlite"),
                "rubric": str(tmp_path / "no_rubric.yaml"),
            }
        )
    )
    with pytest.raises(MedevalDataError) as info:
        load_panel(str(judges))
    message = str(info.value)
    assert message.startswith(f"{judges}: \n")
    assert "judge 0: 'api_key' would put a secret in the judges config" in message
    assert "unknown panel setting(s) ['cahce'] (did you mean 'cache'?)" in message
    assert (
        "judge a: unknown lm-eval backend 'openai-chat-completion'. Did you mean 'openai-chat-completions'?" in message
    )
    assert 'judge b: backend local-chat-completions needs "base_url"' in message
    assert "judge b: the environment variable UNSET_JUDGE_KEY_VAR is not set" in message
    assert "no_rubric.yaml" in message and "sk-live" not in message
    assert len(message.splitlines()) == 7  # the file, then six problems, one a line


def test_the_api_key_message_keeps_its_example_after_console_redaction():
    from medeval_metrics.judge.config import SECRET_MESSAGE, load_panel
    from medeval_metrics.redact import redact_text

    with pytest.raises(MedevalDataError) as info:
        load_panel(json.dumps({"judges": [{"backend": "hf", "model": "m", "api_key": "sk-0123456789abcdef"}]}))
    shown = redact_text(str(info.value))
    assert SECRET_MESSAGE in shown and "[REDACTED]" not in shown and "x-api-key to MY_VAR" in shown


# ---------------------------------------------------------------- a group's missing data (item 3)


def test_a_group_error_names_only_the_source_that_is_missing(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    selection = select_tasks(["emsqa_rag"], fake_index)
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(group_problems(selection, {"emsqa_knowledge_path": str(kb)})[0])
    message = str(info.value)
    assert "(emsqa_private_path is not set)" in message and "emsqa_knowledge_path" not in message
    assert '--metadata \'{"emsqa_private_path": "/path/to/file"}\'' in message


def test_offline_a_group_error_says_what_the_suggested_tasks_still_need(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    selection = select_tasks(["emsqa_rag"], fake_index)
    with pytest.raises(MedevalDataError) as info:
        preflight.raise_problems(group_problems(selection, {"emsqa_public_path": "/data/final"})[0])
    assert "(the Hub is off, so those need emsqa_knowledge_path as well)" in str(info.value)


# ---------------------------------------------------------------- retrieval folders (item 7)


@pytest.mark.parametrize("key", ["rag_cache_dir", "rag_save_retrievals"])
def test_an_unwritable_retrieval_folder_is_one_line_naming_the_setting(tmp_path, key):
    import sys

    from medeval_metrics.emsqa.data import load_docs
    from medeval_metrics.emsqa.rag import add_retrieval

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "emsqa"))  # also when tests/emsqa is not collected
    from test_emsqa_rag import make_kb

    items = json.loads((FIXTURES / "emsqa_synthetic.json").read_text())
    blocked = a_file(tmp_path) / "below"
    metadata = {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", items)),
        "rag_cache_dir": str(tmp_path / "cache"),
        key: str(blocked),
    }
    with pytest.raises(MedevalDataError) as info:
        add_retrieval(load_docs(FIXTURES / "emsqa_synthetic.json", "the synthetic set"), metadata)
    message = str(info.value)
    assert message.startswith(f"{key}: {blocked} cannot be written (") and f"Set {key} (--metadata or" in message
    assert "\n" not in message and not (tmp_path / "cache").exists(), "nothing is built before the check"
    # and `medeval run` finds it before the model
    assert message in run_checks(tasks=("--tasks", "emsqa_private_rag"), metadata={**PRIVATE, **metadata})


# ---------------------------------------------------------------- small things (item 17)


def test_medeval_version(capsys):
    from medeval_metrics import __version__

    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert re.fullmatch(
        rf"medeval-metrics {re.escape(__version__)} \(lm-eval [0-9][^)]*\)", capsys.readouterr().out.strip()
    )


def test_the_no_panel_line_has_the_prefix_and_says_how_to_give_a_panel(caplog):
    from medeval_metrics.judge.filter import judge_answers
    from medeval_metrics.judge.rubric import load_rubric

    rubric = load_rubric(str(Path(preflight.__file__).parent.parent / "medicationqa" / "rubric.yaml"))
    with caplog.at_level(logging.WARNING):
        out = judge_answers(["an answer"], [{"question": "q", "answer": "a"}], rubric, "question", "answer", panel=None)
    assert out[0]["verdicts"] is None
    line = caplog.records[-1].getMessage()
    assert line.startswith("medeval: no judge panel configured")
    assert '--metadata \'{"medeval_judges": "judges.yaml"}\'' in line and "MEDEVAL_JUDGES" in line


def test_medeval_run_prints_each_problem_on_its_own_error_line(monkeypatch, capsys, tmp_path):
    import lm_eval.__main__

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: pytest.fail("lm-eval started"))
    monkeypatch.setenv("MEDEVAL_DATASET_CACH", "off")
    code = cli.main(
        ["run", "--model", "hff", "--tasks", "emsqa_private", "--limit", "0", "--metadata", json.dumps(PRIVATE)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[0] == "medeval: 3 problems, fix them all before the run:" and len(err) == 4
    assert [line.split(" ", 3)[2] for line in err[1:]] == ["--limit", "--model", "environment"]
    assert all(line.startswith("medeval: error: ") for line in err[1:])


def test_a_misspelled_key_is_reported_as_the_typo_not_as_missing_data():
    message = run_checks(metadata={"emsqa_private_pth": PRIVATE["emsqa_private_path"]})
    assert message.startswith("--metadata key 'emsqa_private_pth' is not one the pack reads. Did you mean")
    assert "\n" not in message  # no "the EMSQA private set is not available" that the typo caused
    assert "\n" not in run_checks(metadata={}, environ={"MEDEVAL_EMSQA_PRIVATE_PTH": PRIVATE["emsqa_private_path"]})


def test_unreadable_metadata_is_not_followed_by_data_errors_it_caused():
    only_bad = []
    try:
        preflight.run_checks(
            ["--tasks", "emsqa_private", "--metadata", "{'emsqa_private_path': 'x'}"],
            lm_eval_names=fake_index,
            environ={},
            check_options=True,
        )
    except MedevalDataError as exc:
        only_bad.append(str(exc))
    assert only_bad == [
        "--metadata is not valid JSON (Expecting property name enclosed in double quotes at character 1). "
        'JSON needs double quotes: --metadata \'{"emsqa_private_path": "x"}\''
    ]


def test_an_argument_lm_eval_s_parser_would_refuse_is_one_line():
    message = run_checks("--model_args", "{'pretrained': 'x'")
    assert message.startswith("--model_args is not valid JSON") and "\n" not in message
    message = run_checks("--model")
    assert message == "the command line cannot be read: argument --model/-M: expected one argument."


@pytest.mark.parametrize(
    "name, environ, refused",
    [
        ("MEDEVAL_OPENAI_KEY_2", {}, False),  # a credential a judges file's api_key_env may name
        ("MEDEVAL_JUDGE_KEY_PROD", {}, False),
        ("MEDEVAL_MYMODEL_APIKEY", {}, False),
        (
            "MEDEVAL_LOCAL_SERVER",
            {"MEDEVAL_MODEL_API_KEY_ENV": "MEDEVAL_LOCAL_SERVER"},
            False,
        ),  # named as the model's key
        ("MEDEVAL_MODEL_API_KEY_EN", {}, True),  # a near-miss of a setting stays a typo, "KEY" or not
        ("MEDEVAL_JUDGE", {}, True),
        ("MEDEVAL_DATASET_CACH", {}, True),
    ],
)
def test_credential_variables_are_not_settings_but_near_misses_are_typos(name, environ, refused):
    from medeval_metrics import preflight

    problems = preflight.environment_problems({name: "x", **environ})
    assert any(name in p and "is not a setting" in p for p in problems) == refused, problems
