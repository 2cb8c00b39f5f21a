"""Issue 32: every input of `medeval report` ends in a one-line error or is reported with the other tasks: a
suite with tasks outside the pack (shown, their text hidden unless --public-task names them), wrong types in any
results field, sample logs that are not UTF-8 or hold lines that are JSON but not objects, a lone surrogate in
an output; and bidirectional controls are shown as code points in report.html. No lm-eval run: results and
samples files as lm-eval writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import run_medeval

DATE = "2026-01-01T10-00-00.000001"
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f"]
BIDI.append("\u061c")


def _results(folder: Path, tasks: dict[str, float] | None = None, **fields) -> Path:
    """A results file as lm-eval writes it; ``tasks``: task -> acc (filter none); ``fields`` replace its fields."""
    tasks = tasks or {"emsqa_public_mc": 0.5}
    folder.mkdir(parents=True, exist_ok=True)
    results = {
        "results": {t: {"alias": t, "acc,none": v, "acc_stderr,none": 0.05} for t, v in tasks.items()},
        "versions": {t: 1 for t in tasks},
        "n-shot": {t: 0 for t in tasks},
        "n-samples": {t: {"original": 3, "effective": 3} for t in tasks},
        "configs": {t: {"generation_kwargs": {"max_gen_toks": 8}} for t in tasks},
        "config": {"model": "hf", "model_args": "pretrained=org/m", "limit": None},
        "medeval_run": {"tasks": {t: {"wall_s": 1.5, "judge": {"requests": 3}} for t in tasks}},
        **fields,
    }
    path = folder / f"results_{DATE}.json"
    path.write_text(json.dumps(results))
    return path


def _sample(doc_id: int, output: str, acc: float = 1.0, **doc) -> dict:
    return {
        "doc_id": doc_id,
        "doc": {"question": f"question {doc_id}", "level": ["emt"], "category": ["trauma"], **doc},
        "target": "a",
        "arguments": {"gen_args_0": {"arg_0": f"Question: question {doc_id}\nAnswer:"}},
        "resps": [[output]],
        "filtered_resps": [output],
        "filter": "none",
        "acc": acc,
    }


def _samples(folder: Path, task: str, records: list, raw: bytes | None = None) -> Path:
    path = folder / f"samples_{task}_{DATE}.jsonl"
    path.write_bytes(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records).encode())
    return path


def _report(tmp_path: Path, capsys, *extra: str, figures: bool = False):
    args = ["report", str(tmp_path / "run"), "--output", str(tmp_path / "r"), *extra]
    return run_medeval(args if figures else [*args, "--no-figures"], capsys)


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


# --------------------------------------------------------------------------- tasks outside the pack


def test_a_suite_with_a_task_outside_the_pack_is_reported_with_its_text_hidden(tmp_path, capsys):
    run = tmp_path / "run"
    _results(run, {"emsqa_public_mc": 0.5, "mysuite_private_notes": 0.25})
    _samples(run, "emsqa_public_mc", [_sample(0, "The answer is A.")])
    _samples(run, "mysuite_private_notes", [_sample(0, "ZEBRA-OWN-OUTPUT"), _sample(1, "ZEBRA-OTHER", acc=0.0)])
    proc = _report(tmp_path, capsys, "--html", figures=True)
    assert proc.returncode == 0, proc.stderr
    results_md = (tmp_path / "r" / "results.md").read_text()
    assert (
        "| `mysuite_private_notes` | 1 | none | 0 | acc (`acc`) | 0.2500 | 0.0500 | 0.152–0.348 (normal) | 3 |"
        in results_md
    )
    assert "`mysuite_private_notes`: not a task of the pack" in results_md
    index = yaml.safe_load((tmp_path / "r" / "model_index.yaml").read_text())["model-index"][0]
    assert [r["task"]["name"] for r in index["results"]] == ["emsqa_public_mc"]  # no dataset id known for it
    assert "mysuite" not in (tmp_path / "r" / "card_section.md").read_text()
    page = (tmp_path / "r" / "report.html").read_text()
    assert "ZEBRA" not in page and "The answer is A." in page  # its text hidden, the pack's public text shown
    assert "The text of mysuite_private_notes is hidden" in page
    assert page.count('data-task="mysuite_private_notes"') == 2  # its items are there, with their status
    assert 'data-task="mysuite_private_notes" data-status="wrong"' in page


def test_public_task_shows_the_text_of_a_task_outside_the_pack(tmp_path, capsys):
    run = tmp_path / "run"
    _results(run, {"emsqa_public_mc": 0.5, "mysuite_a": 0.25, "other_b": 0.5})
    _samples(run, "mysuite_a", [_sample(0, "ZEBRA-PUBLIC-A")])
    _samples(run, "other_b", [_sample(0, "ZEBRA-HIDDEN-B")])
    proc = _report(tmp_path, capsys, "--html", "--public-task", "mysuite_*")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r" / "report.html").read_text()
    assert "ZEBRA-PUBLIC-A" in page and "ZEBRA-HIDDEN-B" not in page
    # a pack task's privacy is its spec's: --public-task does not show a private set
    _samples(run, "emsqa_private", [_sample(0, "ZEBRA-PRIVATE-SET")])
    _results(run, {"emsqa_private": 0.5})
    assert _report(tmp_path, capsys, "--html", "--public-task", "*").returncode == 0
    assert "ZEBRA-PRIVATE-SET" not in (tmp_path / "r" / "report.html").read_text()


def test_a_task_outside_the_pack_named_like_a_pack_variant_gets_figures_and_items(tmp_path, capsys):
    """emrql_1 (the logical-form tasks' old name) is outside the pack but has emrQA's logical-form breakdown."""
    run = tmp_path / "run"
    _results(run, {"emsqa_public_mc": 0.5, "emrql_1": 0.5})
    records = [
        {**_sample(i, "ZEBRA-NOTE", acc=0.0), "lf_acc": float(i % 2), "doc": {"lf_template": f"T{i % 2}"}}
        for i in range(3)
    ]
    _samples(run, "emrql_1", records)
    proc = _report(tmp_path, capsys, "--html", figures=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert any(name.startswith("figures/org_m/emrql_1__") for name in report["figures"])
    assert "ZEBRA-NOTE" not in (tmp_path / "r" / "report.html").read_text()


def test_a_task_name_from_a_file_is_escaped_on_the_page(tmp_path, capsys):
    run = tmp_path / "run"
    task = "x<b onmouseover=alert(1)>"
    _results(run, {"emsqa_public_mc": 0.5, task: 0.5})
    _samples(run, task, [_sample(0, "out")])
    assert _report(tmp_path, capsys, "--html").returncode == 0
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<b onmouseover" not in page and "x&lt;b onmouseover=alert(1)&gt;" in page


# --------------------------------------------------------------------------- wrong types in the results file

WRONG_FIELDS = [
    ({"config": ["hf"]}, "'config' is a list"),
    ({"config": {"model": "hf", "model_args": 7, "limit": None}}, "'config.model_args' is a number (7)"),
    ({"config": {"model": ["hf"], "model_args": "pretrained=org/m"}}, "'config.model' is a list"),
    ({"config": {"model": "hf", "limit": "six"}}, "'config.limit' is text ('six')"),
    ({"config": {"model": "hf", "gen_kwargs": 3}}, "'config.gen_kwargs' is a number (3)"),
    ({"n-samples": "x"}, "'n-samples' is text ('x')"),
    ({"n-samples": {"emsqa_public_mc": [3, 3]}}, "'n-samples.emsqa_public_mc' is a list"),
    ({"n-samples": {"emsqa_public_mc": {"original": 3, "effective": "3"}}}, "'n-samples.emsqa_public_mc.effective'"),
    ({"n-samples": {"emsqa_public_mc": {"original": True}}}, "'n-samples.emsqa_public_mc.original' is true/false"),
    ({"versions": ["1"]}, "'versions' is a list"),
    ({"versions": {"emsqa_public_mc": {"v": 1}}}, "'versions.emsqa_public_mc' is an object"),
    ({"n-shot": {"emsqa_public_mc": -1}}, "'n-shot.emsqa_public_mc' is a number (-1)"),
    ({"configs": {"emsqa_public_mc": "cfg"}}, "'configs.emsqa_public_mc' is text"),
    ({"configs": {"emsqa_public_mc": {"generation_kwargs": "x"}}}, "'configs.emsqa_public_mc.generation_kwargs'"),
    ({"medeval_run": {"tasks": {"emsqa_public_mc": {"wall_s": "1.5"}}}}, "'medeval_run.tasks.emsqa_public_mc.wall_s'"),
    ({"medeval_run": {"tasks": {"emsqa_public_mc": {"wall_s": -2}}}}, "'medeval_run.tasks.emsqa_public_mc.wall_s'"),
    ({"medeval_run": {"tasks": ["emsqa_public_mc"]}}, "'medeval_run.tasks' is a list"),
    (
        {"medeval_run": {"tasks": {"emsqa_public_mc": {"judge": {"requests": 1.5}}}}},
        "'medeval_run.tasks.emsqa_public_mc.judge.requests' is a number",
    ),
    ({"medeval_run": 5}, "'medeval_run' is a number"),
    ({"medeval_judge": {"emsqa_public_mc": {"judged_at": 5}}}, "'medeval_judge.emsqa_public_mc.judged_at'"),
    ({"chat_template": {"a": 1}}, "'chat_template' is an object"),
    ({"lm_eval_version": 4}, "'lm_eval_version' is a number"),
    ({"fewshot_as_multiturn": "yes"}, "'fewshot_as_multiturn' is text"),
    ({"task_hashes": "abc"}, "'task_hashes' is text"),
    ({"results": {"emsqa_public_mc": [0.5]}}, "'results.emsqa_public_mc' is a list"),
]


@pytest.mark.parametrize("fields, expected", WRONG_FIELDS, ids=[e.split("'")[1] for _, e in WRONG_FIELDS])
def test_a_wrong_typed_results_field_is_one_line_naming_it(tmp_path, capsys, fields, expected):
    path = _results(tmp_path / "run", **fields)
    _samples(tmp_path / "run", "emsqa_public_mc", [_sample(0, "A")])
    error = _one_line_error(_report(tmp_path, capsys, "--html"))
    assert f"{path}: {expected}" in error and "Restore it, or run the evaluation again" in error


def test_null_sections_read_as_absent(tmp_path, capsys):
    _results(tmp_path / "run", versions=None, configs=None, medeval_run=None, **{"n-samples": None, "n-shot": None})
    proc = _report(tmp_path, capsys, "--html")
    assert proc.returncode == 0, proc.stderr
    assert "| `emsqa_public_mc` | ? | none | ? | " in (tmp_path / "r" / "results.md").read_text()


def test_a_results_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    path = _results(tmp_path / "run")
    path.write_bytes(path.read_bytes().replace(b'"org/m"', b'"org/\xff"').replace(b"org/m", b"org/\xffm"))
    error = _one_line_error(_report(tmp_path, capsys))
    assert f"{path}: line 1 is not UTF-8 text" in error


def test_a_results_file_nested_too_deep_is_one_line(tmp_path, capsys):
    path = tmp_path / "run" / f"results_{DATE}.json"
    path.parent.mkdir()
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert f"{path}: not a readable lm-eval results JSON" in _one_line_error(_report(tmp_path, capsys))


# --------------------------------------------------------------------------- sample logs


@pytest.mark.parametrize(
    "raw, expected",
    [
        (
            b'{"doc_id": 0, "doc": {}}\n{"doc_id": 1, "resps": [["caf\xe9"]]}\n',
            "line 2 is not UTF-8 text (byte 54: 0xe9)",
        ),
        (b'{"doc_id": 0, "doc": {}}\n[1, 2]\n', "line 2 is JSON but not a record: a list"),
        (b'"just text"\n', "line 1 is JSON but not a record: text"),
        (b"42\n", "line 1 is JSON but not a record: a number"),
        (b"null\n", "line 1 is JSON but not a record: null"),
        (b'{"doc_id": 0, "doc": ["q"]}\n', "record 1: 'doc' is a list, not an object"),
        (b'{"doc_id": "zero", "doc": {}}\n', "record 1: 'doc_id' is text ('zero'), not a whole number"),
        (b'{"doc_id": 0, "doc": {}, "filter": 3}\n', "record 1: 'filter' is a number, not text"),
    ],
)
def test_a_bad_sample_log_is_one_line_naming_file_and_line(tmp_path, capsys, raw, expected):
    _results(tmp_path / "run")
    path = _samples(tmp_path / "run", "emsqa_public_mc", [], raw=raw)
    error = _one_line_error(_report(tmp_path, capsys, "--html"))
    assert f"{path}: {expected}" in error, error


def test_a_doc_the_breakdown_cannot_read_is_one_line(tmp_path, capsys):
    _results(tmp_path / "run", {"emrqa_risk": 0.5})
    doc = {"subset": "risk", "lf_template": "T", "answers_json": "[1, 2]"}  # answers that are not objects
    path = _samples(tmp_path / "run", "emrqa_risk", [{"doc_id": 7, "doc": doc, "filter": "none", "relaxed_em": 1.0}])
    error = _one_line_error(_report(tmp_path, capsys))
    assert f"{path}: record 1 (doc_id '7'): its doc's answer_type cannot be read (AttributeError)" in error


def test_a_lone_surrogate_in_an_output_is_replaced_and_the_report_written(tmp_path, capsys):
    """A JSON escape of half a character (a model's output cut inside an emoji): U+FFFD, as a UTF-8 decoder would."""
    run = tmp_path / "run"
    _results(run)
    record = json.dumps(_sample(0, "cut \ud83d here, whole \U0001f600", category=["tra\udc00uma"]))
    assert "\\ud83d here" in record  # written as lm-eval writes it: an ASCII escape
    _samples(run, "emsqa_public_mc", [], raw=(record + "\n").encode())
    proc = _report(tmp_path, capsys, "--html", figures=True)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "cut \ufffd here, whole \U0001f600" in page
    assert "tra\ufffduma" in (tmp_path / "r" / "breakdowns.md").read_text(encoding="utf-8")


def test_a_line_separator_in_an_output_does_not_cut_the_record(tmp_path, capsys):
    """lm-eval writes text unescaped: U+2028 and U+0085 stay raw inside a JSON line."""
    run = tmp_path / "run"
    _results(run)
    text = "".join(json.dumps(_sample(i, f"one\u2028two\x85three {i}"), ensure_ascii=False) + "\n" for i in range(2))
    _samples(run, "emsqa_public_mc", [], raw=text.encode("utf-8"))
    proc = _report(tmp_path, capsys, "--html")
    assert proc.returncode == 0, proc.stderr
    assert "one\u2028two\x85three 1" in (tmp_path / "r" / "report.html").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- bidirectional controls on the page


def test_bidirectional_controls_are_shown_as_code_points(tmp_path, capsys):
    run = tmp_path / "run"
    _results(run, {"emsqa_public_mc": 0.5})
    outputs = [f"safe {c}gnp.exe{c} end" for c in BIDI]
    _samples(run, "emsqa_public_mc", [_sample(i, out, category=[f"area{BIDI[i]}"]) for i, out in enumerate(outputs)])
    proc = _report(tmp_path, capsys, "--html")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert not any(c in page for c in BIDI)
    for c in BIDI:
        code = f"\u27e8U+{ord(c):04X}\u27e9"
        assert f"safe {code}gnp.exe{code} end" in page  # the output, in the order it was written
        assert f"area{code}" in page  # a category from the doc, in the filter and on the item


def test_visible_marks_only_the_controls():
    from medeval_metrics.report.html import visible

    assert visible("abc \u05d0\u05d1 \u202eX\u202c") == "abc \u05d0\u05d1 \u27e8U+202E\u27e9X\u27e8U+202C\u27e9"
    assert visible("\u061c\u200e\u200f\u2066\u2069") == "⟨U+061C⟩⟨U+200E⟩⟨U+200F⟩⟨U+2066⟩⟨U+2069⟩"
    assert visible("lone \udc00") == "lone \ufffd"
