"""Issue 33, the user's path a third time: MedicationQA without judges says so before the model loads, a tokenizer
without a chat template is one line before the model loads, a run's outputs cut by the token budget are said once,
the few-shot notice starts on its own line, `enable` says which copy runs, and a data path one folder too high or
not there at all is a short message naming the fix."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from types import SimpleNamespace

import pytest
from conftest import FIXTURES, two_judge_panel
from test_run_checks_every_selection import LM_EVAL_TASKS, no_user_settings, problems_of  # noqa: F401

from medeval_metrics import cli, preflight
from medeval_metrics.preflight.budget import budget_hits, budget_notice
from medeval_metrics.preflight.model import chat_template_problem

SYNTHETIC = str(FIXTURES / "emsqa_synthetic.json")


def medicationqa_csv(tmp_path) -> str:
    path = tmp_path / "m.csv"
    path.write_text("Question,Answer\nWhat is aspirin?,A pain reliever.\n")
    return str(path)


def notices_of(*argv, environ=None) -> list[str]:
    said: list[str] = []
    preflight.run_checks(list(argv), lm_eval_names=lambda: LM_EVAL_TASKS, environ=environ or {}, notify=said.append)
    return said


# ---------------------------------------------------------------- MedicationQA without a judge panel


def test_a_judged_task_without_a_panel_is_one_line_naming_the_way_to_add_one_and_medeval_judge(tmp_path):
    meta = json.dumps({"medicationqa_path": medicationqa_csv(tmp_path)})
    (notice,) = notices_of("--tasks", "medicationqa", "--metadata", meta, "--output_path", "out", "--log_samples")
    assert (
        notice.startswith("medicationqa: no judge panel, so judge scores will not be computed") and "\n" not in notice
    )
    assert "--judges judges.yaml" in notice and "--judge-model MODEL" in notice and "MEDEVAL_JUDGES" in notice
    assert "`medeval judge out --judges judges.yaml` scores this run's saved answers later" in notice


def test_without_saved_samples_the_notice_says_what_medeval_judge_needs(tmp_path):
    meta = json.dumps({"medicationqa_path": medicationqa_csv(tmp_path)})
    (notice,) = notices_of("--tasks", "medicationqa", "--metadata", meta)
    assert "(run with --output_path DIR --log_samples)" in notice


def test_a_panel_in_metadata_or_the_environment_or_an_unjudged_task_gets_no_notice(tmp_path):
    panel = two_judge_panel(SimpleNamespace(url="http://127.0.0.1:9/v1/chat/completions"), None)
    data = medicationqa_csv(tmp_path)
    with_panel = json.dumps({"medicationqa_path": data, "medeval_judges": json.loads(panel)})
    assert notices_of("--tasks", "medicationqa", "--metadata", with_panel) == []
    only_data = json.dumps({"medicationqa_path": data})
    assert notices_of("--tasks", "medicationqa", "--metadata", only_data, environ={"MEDEVAL_JUDGES": panel}) == []
    assert notices_of("--tasks", "emsqa_private", "--metadata", json.dumps({"emsqa_private_path": SYNTHETIC})) == []


def test_medeval_run_prints_the_notice_before_lm_eval_builds_the_model(tmp_path, monkeypatch, capsys):
    """The line is on stderr before lm-eval's part of the run starts (here replaced: no model is built)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    order = []
    monkeypatch.setattr(cli, "_run", lambda settings, selection: order.append(capsys.readouterr().err) or 0)
    meta = json.dumps({"medicationqa_path": medicationqa_csv(tmp_path)})
    code = cli.main(["run", "--model", "medeval-scripted", "--tasks", "medicationqa", "--metadata", meta])
    assert code == 0 and len(order) == 1
    assert "medeval: note: medicationqa: no judge panel, so judge scores will not be computed" in order[0]


def test_the_notice_is_not_said_when_a_problem_stops_the_run(tmp_path):
    said: list[str] = []
    with pytest.raises(Exception, match="emsqa_pubic"):
        preflight.run_checks(
            ["--tasks", "medicationqa,emsqa_pubic", "--metadata", json.dumps({"medicationqa_path": "x.csv"})],
            lm_eval_names=lambda: LM_EVAL_TASKS,
            notify=said.append,
        )
    assert said == []


# ---------------------------------------------------------------- --apply_chat_template without a template


def model_folder(tmp_path, name="m", tokenizer_config=None, files=()):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    if tokenizer_config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    for file in files:
        (folder / file).write_text("{{ messages }}")
    return folder


def test_a_tokenizer_without_a_chat_template_is_one_line_before_the_model_loads(tmp_path, monkeypatch, capsys):
    folder = model_folder(tmp_path, tokenizer_config={"tokenizer_class": "PreTrainedTokenizerFast"})
    monkeypatch.setattr(cli, "_run", lambda *a: pytest.fail("lm-eval started"))
    meta = json.dumps({"emsqa_private_path": SYNTHETIC})
    code = cli.main(
        ["run", "--model", "hf", "--model_args", f"pretrained={folder}", "--apply_chat_template", "--tasks",
         "emsqa_private", "--metadata", meta]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0] == (
        f"medeval: error: --apply_chat_template: the tokenizer of --model_args pretrained={folder} has no chat "
        "template (a base model, or one converted without it): leave out --apply_chat_template, or give a tokenizer "
        "that has one (--model_args tokenizer=ORG/NAME-Instruct)."
    )


@pytest.mark.parametrize(
    "tokenizer_config, files",
    [
        ({"chat_template": "{{ messages }}"}, ()),  # in the config (transformers 4.x)
        ({}, ("chat_template.jinja",)),  # its own file (transformers 4.43+, 5.x: SmolLM2's folder)
        ({}, ("chat_template.json",)),
        (None, ()),  # no tokenizer_config.json: nothing to tell from
    ],
)
def test_a_template_found_or_nothing_to_tell_from_passes(tmp_path, tokenizer_config, files):
    folder = model_folder(tmp_path, tokenizer_config=tokenizer_config, files=files)
    assert chat_template_problem("hf", {"pretrained": str(folder)}, True) is None


def test_the_template_is_looked_for_in_the_tokenizer_given_and_only_when_asked(tmp_path):
    base = model_folder(tmp_path, "base", tokenizer_config={})
    chat = model_folder(tmp_path, "chat", tokenizer_config={"chat_template": "x"})
    assert chat_template_problem("hf", {"pretrained": str(base), "tokenizer": str(chat)}, True) is None
    problem = chat_template_problem("hf", {"pretrained": str(chat), "tokenizer": str(base)}, "default")
    assert problem and f"--model_args tokenizer={base}" in problem
    assert chat_template_problem("hf", {"pretrained": str(base)}, False) is None
    assert chat_template_problem("local-chat-completions", {"pretrained": str(base)}, True) is None
    assert chat_template_problem("hf", {"pretrained": str(base), "gguf_file": "m.gguf"}, True) is None


def hub_cache(tmp_path, monkeypatch, files: dict, absent=()):
    """A Hugging Face cache holding ``files`` of org/base at revision abc, ``absent`` known not to exist."""
    repo = tmp_path / "hub" / "models--org--base"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc")
    for name, text in files.items():
        (repo / "snapshots" / "abc").mkdir(parents=True, exist_ok=True)
        (repo / "snapshots" / "abc" / name).write_text(text)
    for name in absent:
        (repo / ".no_exist" / "abc").mkdir(parents=True, exist_ok=True)
        (repo / ".no_exist" / "abc" / name).write_text("")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


def test_a_hub_id_is_decided_from_the_cache_only_when_it_can_tell(tmp_path, monkeypatch):
    config = {"tokenizer_config.json": "{}"}
    hub_cache(tmp_path, monkeypatch, config, absent=("chat_template.jinja", "chat_template.json"))
    problem = chat_template_problem("hf", {"pretrained": "org/base"}, True)
    assert problem and "--model_args pretrained=org/base has no chat template" in problem
    # the template file not known either way (never looked for): the model's own download decides
    other = tmp_path / "other"
    other.mkdir()
    hub_cache(other, monkeypatch, config)
    assert chat_template_problem("hf", {"pretrained": "org/base"}, True) is None
    assert chat_template_problem("hf", {"pretrained": "org/not-cached"}, True) is None


# ---------------------------------------------------------------- the token budget, after the run


def words(text: str) -> int:
    return len(text.split())


def results_with(samples, configs=None):
    return {"samples": samples, "configs": configs or {}, "config": {"model": "hf"}}


def sample(text: str, budget: int | None = 10):
    kwargs = {"until": ["\n\n"]} | ({"max_gen_toks": budget} if budget else {})
    return {"arguments": [("prompt", kwargs)], "resps": [[text]]}


def test_the_share_of_outputs_that_ran_to_the_budget_is_counted_per_task():
    """Budget 10, counted in words here: 10 and 20 words ran to it (>= 95%: 9.5), 9 words did not."""
    results = results_with(
        {
            "a": [sample("w " * 10), sample("w " * 9), sample("w " * 20)],
            "b": [sample("short"), sample("also short")],
        }
    )
    assert budget_hits(results, words) == {"a": (2, 3, {10}), "b": (0, 2, {10})}
    assert budget_notice(results, words) == (
        "outputs that ran to the token budget, cut short (an answer after the cut is lost): a 2 of 3 (67%, "
        "max_gen_toks 10). `--gen_kwargs max_gen_toks=N` sets the budget (docs/medeval-run.md, the token budget)."
    )


def test_an_item_logged_once_per_reading_is_counted_once():
    """lm-eval logs each item once per filter (EMSQA's strict-match and flexible-extract) with the same outputs."""
    items = [("w " * 10, 0), ("w " * 9, 1), ("w " * 20, 2)]
    logged = [
        {**sample(text), "doc_id": doc_id, "filter": reading}
        for reading in ("strict-match", "flexible-extract")
        for text, doc_id in items
    ]
    assert budget_hits(results_with({"a": logged}), words) == {"a": (2, 3, {10})}


def test_the_budget_is_read_from_a_samples_file_s_arguments_or_the_task_config():
    """A samples file writes a request's arguments as {"gen_args_0": {"arg_0": ..., "arg_1": ...}}; a request without
    max_gen_toks falls back on the task config's generation_kwargs; a log-likelihood task is not counted."""
    from_file = {"arguments": {"gen_args_0": {"arg_0": "prompt", "arg_1": {"max_gen_toks": 4}}}, "resps": [["a b c d"]]}
    results = results_with(
        {"a": [from_file], "b": [sample("a b c", budget=None)], "mc": [sample("x", budget=None)]},
        {"b": {"generation_kwargs": {"max_gen_toks": 3}}, "mc": {"output_type": "multiple_choice"}},
    )
    assert budget_hits(results, words) == {"a": (1, 1, {4}), "b": (1, 1, {3})}


def test_nothing_is_said_without_samples_a_hit_or_a_tokenizer():
    assert budget_notice({"results": {}}, words) is None
    assert budget_notice(results_with({"a": [sample("short")]}), words) is None
    scripted = {**results_with({"a": [sample("w " * 10)]}), "config": {"model": "medeval-scripted"}}
    assert budget_notice(scripted) is None  # no tokenizer to count with: not guessed


@pytest.mark.e2e
def test_a_model_that_never_stops_is_reported_at_its_budget(tmp_path, tiny_model):
    """The tiny random model writes until the budget on every item: every output counts, with its tokenizer."""
    from conftest import run_cli

    out = tmp_path / "out"
    proc = run_cli(
        ["run", "--tasks", "emsqa_private", "--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device",
         "cpu", "--limit", "4", "--gen_kwargs", "max_gen_toks=8", "--metadata",
         json.dumps({"emsqa_private_path": SYNTHETIC}), "--output_path", str(out), "--log_samples"],
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    lines = next(out.rglob("samples_emsqa_private_*.jsonl")).read_text().splitlines()
    results["samples"] = {"emsqa_private": [json.loads(line) for line in lines]}
    notice = budget_notice(results)
    assert notice and "emsqa_private 4 of 4 (100%, max_gen_toks 8)" in notice


# ---------------------------------------------------------------- the few-shot notice and a progress bar


def test_the_few_shot_notice_starts_on_its_own_line_under_a_progress_bar(tmp_path, monkeypatch):
    """lm-eval draws its bar while the pool is read: the bar is cleared for the notice (as a terminal shows it, the
    notice starts at the line's first column) and drawn again after."""
    from tqdm import tqdm

    from medeval_metrics.emsqa.data import load_docs

    records = json.loads((FIXTURES / "emsqa_synthetic.json").read_text())
    records[1]["choices"][0] = ""  # an empty choice: left out of the pool
    pool = tmp_path / "val_open.json"
    pool.write_text(json.dumps(records))
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("medeval_metrics.emsqa")
    logger.addHandler(handler)
    try:
        with tqdm(total=3, file=sys.stderr, desc="Building contexts") as bar:
            bar.update(1)
            bar.refresh()
            load_docs(pool, "the validation set", skip_invalid=True)
    finally:
        logger.removeHandler(handler)
    shown = stream.getvalue()
    assert "cannot serve as a few-shot example" in shown
    line = next(line for line in shown.split("\n") if "cannot serve" in line)
    as_drawn = line.split("\r")[line.split("\r").index(next(p for p in line.split("\r") if "cannot serve" in p))]
    # a cursor movement tqdm writes when other bars of the process are open (a full test run) moves, it prints nothing
    as_drawn = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", as_drawn)
    assert as_drawn.startswith("medeval: val_open.json as published has 1 record"), repr(line)
    assert line.split("\r")[-2].strip() == ""  # the bar's line was blanked before the notice was written


# ---------------------------------------------------------------- enable, then --include_path too


def test_enable_says_in_one_line_which_copy_runs_when_include_path_is_given_too(tmp_path, capsys):
    from lm_eval.tasks import TaskManager

    from medeval_metrics import lm_eval_link
    from medeval_metrics.pack import tasks_path

    lm_eval_tasks = tmp_path / "lm_eval_tasks"
    lm_eval_tasks.mkdir()
    assert lm_eval_link._cmd(SimpleNamespace(action="enable", target=str(lm_eval_tasks))) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "--include_path" in line]
    assert said == [lm_eval_link.BOTH_COPIES]
    assert "runs the --include_path copy" in said[0] and "overrides existing task" in said[0]
    # what it says is what lm-eval does: the folder given later (--include_path) replaces the enabled copy
    manager = TaskManager(include_defaults=False, include_path=[str(lm_eval_tasks), tasks_path()])
    assert str(manager._index["emsqa_public"].yaml_path).startswith(tasks_path())


# ---------------------------------------------------------------- a data path one folder too high, or not there


def test_a_parent_folder_of_the_emsqa_files_names_the_subfolder_that_holds_them(tmp_path):
    final = tmp_path / "EMSQA" / "data" / "final"
    final.mkdir(parents=True)
    (final / "test_open.json").write_text(json.dumps(json.loads((FIXTURES / "emsqa_synthetic.json").read_text())))
    (tmp_path / "EMSQA" / "knowledge").mkdir()
    (problem,) = problems_of("--tasks", "emsqa_public", "--metadata", json.dumps({"emsqa_public_path": str(tmp_path)}))
    assert problem == (
        f"{tmp_path}: no test_open.json in this folder, but {final} holds one: point the pack at that folder."
    )


def test_a_folder_with_no_copy_under_it_says_where_to_get_the_files(tmp_path):
    (tmp_path / "empty").mkdir()
    (problem,) = problems_of("--tasks", "emsqa_public", "--metadata", json.dumps({"emsqa_public_path": str(tmp_path)}))
    assert problem.startswith(f"{tmp_path}: no test_open.json in this folder or the ones under it. Download")
    assert problem.lower().count("point the pack at") == 1


@pytest.mark.parametrize(
    "key, placeholder",
    [("emsqa_public_path", "/path/to/folder"), ("medicationqa_path", "/path/to/file")],
)
def test_a_path_that_does_not_exist_is_short_says_the_fix_once_with_the_right_placeholder(key, placeholder):
    task = {"emsqa_public_path": "emsqa_public", "medicationqa_path": "medicationqa"}[key]
    (problem,) = problems_of("--tasks", task, "--metadata", json.dumps({key: "/data/EMSQA/data/fnal"}))
    assert "points at /data/EMSQA/data/fnal, which does not exist." in problem
    assert problem.lower().count("point the pack at") == 1 and "\n" not in problem
    assert f'--metadata \'{{"{key}": "{placeholder}"}}\'' in problem
    assert len(f"medeval: error: {problem}") <= 2 * 132, len(problem)  # two lines of a 132-column terminal


def test_a_path_from_the_environment_is_answered_with_the_variable(monkeypatch):
    monkeypatch.setenv("MEDEVAL_EMSQA_PUBLIC_PATH", "/data/EMSQA/data/fnal")
    (problem,) = problems_of("--tasks", "emsqa_public")
    assert problem.endswith("Point the pack at an existing folder: export MEDEVAL_EMSQA_PUBLIC_PATH=/path/to/folder.")


@pytest.mark.e2e
def test_medeval_run_says_once_that_outputs_ran_to_the_budget(tmp_path, tiny_model):
    """The tiny random model never stops by itself: with an 8-token budget every output is cut, and the run says so
    in one line after its summary, naming the task, the share and the flag."""
    from conftest import EMSQA_SYNTHETIC, run_cli

    proc = run_cli(
        [
            "run", "--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device", "cpu",
            "--tasks", "emsqa_private", "--limit", "3", "--gen_kwargs", "max_gen_toks=8",
            "--metadata", json.dumps({"emsqa_private_path": str(EMSQA_SYNTHETIC)}),
            "--output_path", str(tmp_path / "out"), "--log_samples",
        ],
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = [line for line in proc.stderr.splitlines() if line.startswith("medeval: note: outputs that ran")]
    assert notes == [
        "medeval: note: outputs that ran to the token budget, cut short (an answer after the cut is lost): "
        "emsqa_private 3 of 3 (100%, max_gen_toks 8). `--gen_kwargs max_gen_toks=N` sets the budget "
        "(docs/medeval-run.md, the token budget)."
    ]
