"""Issue 31: a task read two ways (lm-eval's ``strict-match`` and ``flexible-extract`` filters) is reported with both
readings side by side in results.md, the card section, model_index.yaml, report.html and the comparison, the headline
reading named, with the share of outputs in the requested format; a task with one filter reads as before, and a run
of an earlier task version (one filter, named ``extract_answer``) still reports sensibly.

The run is synthetic and every number hand-computed. Four docs of ``emsqa_public_cot`` (gold b, b, b, a):

| doc | reply                  | strict-match | flexible-extract | in format |
|-----|------------------------|--------------|------------------|-----------|
| 0   | {"answer": ["b"]}      | b (right)    | b (right)        | yes       |
| 1   | The answer is B.       | none         | b (right)        | no        |
| 2   | The answer is A.       | none         | a (wrong)        | no        |
| 3   | I cannot tell.         | none         | none             | no        |

flexible: acc 2/4 = 0.5, unparseable 1/4 = 0.25; strict: acc 1/4 = 0.25, unparseable 3/4 = 0.75; requested format 1/4
under both. Standard errors (lm-eval's: sample sd / sqrt(n)): 0 1 1 0 -> sqrt((1/3)/4) = 0.2887; one 1 (or one 0) of
four -> sqrt((0.75/3)/4) = 0.25.

The spec's readings are the ones the tests give (``readings_spec``), not EMSQA's own spec file.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from medeval_metrics.report import build_report
from medeval_metrics.spec import MetricInfo, Reading

NEW, OLD = "2026-03-02T10-00-00.000000", "2026-03-01T10-00-00.000000"
STRICT_ABOUT = "lm-eval's gsm8k-style reading: only a reply in the requested format is read"
FLEXIBLE_ABOUT = "the pack's reader: the requested format first, else the answer the reply commits to"
READINGS = (
    Reading("flexible-extract", "the pack's reader", FLEXIBLE_ABOUT, headline=True, former_filters=("extract_answer",)),
    Reading("strict-match", "lm-eval's strict reading", STRICT_ABOUT),
)

# (reply, strict reading, flexible reading, gold)
ITEMS = [
    ('{"answer": ["b"]}', ["b"], ["b"], ["b"]),
    ("The answer is B.", None, ["b"], ["b"]),
    ("The answer is A.", None, ["a"], ["b"]),
    ("I cannot tell.", None, None, ["a"]),
]


@pytest.fixture
def readings_spec(monkeypatch):
    """The pack's registry with EMSQA's reporting given the two readings, the requested-format share (the same under
    each reading) and the unparseable rate in the model-index."""
    from medeval_metrics import registry

    loaded = registry._loaded()
    emsqa = registry.benchmark("emsqa")
    metrics = dict(emsqa.reporting.metrics)
    metrics["unparseable"] = replace(metrics["unparseable"], in_model_index=True)
    metrics["requested_format"] = MetricInfo(
        "Outputs in the requested format", "requested_format_rate", proportion=True, across_readings=True
    )
    reporting = replace(emsqa.reporting, metrics=metrics, readings=READINGS, reading_metrics=("acc", "unparseable"))
    spec = replace(emsqa, reporting=reporting)
    patched = registry._Loaded(
        tuple(spec if s is emsqa else s for s in loaded.specs),
        {name: ((spec if s is emsqa else s), task) for name, (s, task) in loaded.tasks.items()},
    )
    monkeypatch.setattr(registry, "_loaded", lambda: patched)
    return spec


def _doc(index: int, gold: list[str]) -> dict:
    return {
        "id": f"q{index}",
        "question": f"question {index}",
        "choices": ["a. one", "b. two"],
        "letters": ["a", "b"],
        "gold": gold,
        "level": ["emt"],
        "category": ["trauma"],
    }


def _sample(index: int, reply: str, read: list[str] | None, gold: list[str], filter_name: str) -> dict:
    right = float(read is not None and sorted(read) == sorted(gold))
    return {
        "doc_id": index,
        "doc": _doc(index, gold),
        "target": json.dumps(gold),
        "arguments": {"gen_args_0": {"arg_0": f"Question: question {index}\nAnswer:", "arg_1": {}}},
        "resps": [[reply]],
        "filtered_resps": [read],
        "filter": filter_name,
        "acc": right,
        "f1": right,
        "unparseable": float(read is None),
        "requested_format": float(reply.startswith("{")),
        "invalid_letter": 0.0,
        "extracted_by_model": 0.0,
    }


def _values(prefix: str, filter_name: str, **values: tuple[float, float]) -> dict:
    out = {}
    for metric, (value, stderr) in values.items():
        out[f"{metric},{filter_name}"] = value
        out[f"{metric}_stderr,{filter_name}"] = stderr
    return out


def write_run(folder: Path, stamp: str = NEW, old: bool = False, model: str = "org/model") -> Path:
    """A run of ``emsqa_public_cot`` (two readings; ``old``: task version 6, one filter ``extract_answer``, whose
    reader read doc 3 as "a", right: acc 0.75) and ``emsqa_public_mc`` (one filter, ``none``)."""
    folder.mkdir(parents=True, exist_ok=True)
    task = "emsqa_public_cot"
    if old:
        samples = [
            _sample(i, reply, flexible, gold, "extract_answer") for i, (reply, _, flexible, gold) in enumerate(ITEMS)
        ]
        samples[3] = _sample(3, ITEMS[3][0], ["a"], ["a"], "extract_answer")
        cot = _values(task, "extract_answer", acc=(0.75, 0.25), f1=(0.75, 0.25), unparseable=(0.0, 0.0))
    else:
        samples = [_sample(i, reply, strict, gold, "strict-match") for i, (reply, strict, _, gold) in enumerate(ITEMS)]
        samples += [_sample(i, reply, flex, gold, "flexible-extract") for i, (reply, _, flex, gold) in enumerate(ITEMS)]
        cot = {
            **_values(
                task,
                "strict-match",
                acc=(0.25, 0.25),
                f1=(0.25, 0.25),
                unparseable=(0.75, 0.25),
                requested_format=(0.25, 0.25),
                invalid_letter=(0.0, 0.0),
                extracted_by_model=(0.0, 0.0),
            ),
            **_values(
                task,
                "flexible-extract",
                acc=(0.5, 0.2887),
                f1=(0.5, 0.2887),
                unparseable=(0.25, 0.25),
                requested_format=(0.25, 0.25),
                invalid_letter=(0.0, 0.0),
                extracted_by_model=(0.0, 0.0),
            ),
        }
    mc = _values("emsqa_public_mc", "none", acc=(0.5, 0.2887), f1=(0.5, 0.2887))
    results = {
        "results": {task: {"alias": task, **cot}, "emsqa_public_mc": {"alias": "emsqa_public_mc", **mc}},
        "versions": {task: 6 if old else 7, "emsqa_public_mc": 1},
        "n-shot": {task: 0, "emsqa_public_mc": 0},
        "n-samples": {t: {"original": 4, "effective": 4} for t in (task, "emsqa_public_mc")},
        "config": {"model": "hf", "model_args": f"pretrained={model}", "limit": None},
        "configs": {task: {"output_type": "generate_until"}, "emsqa_public_mc": {"output_type": "multiple_choice"}},
    }
    with open(folder / f"samples_{task}_{stamp}.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(s) + "\n" for s in samples)
    (folder / f"results_{stamp}.json").write_text(json.dumps(results))
    return folder


READINGS_HEADER = (
    "| Task | Version | n-shot | Exact set-match accuracy, flexible-extract (headline) | Exact set-match accuracy, "
    "strict-match | Unparseable answer rate, flexible-extract (headline) | Unparseable answer rate, strict-match | "
    "Outputs in the requested format, each reading | Samples |"
)
READINGS_ROW = (
    "| `emsqa_public_cot` | 7 | 0 | 0.5000 ± 0.2887 | 0.2500 ± 0.2500 | 0.2500 ± 0.2500 | 0.7500 ± 0.2500 | "
    "0.2500 ± 0.2500 | 4 |"
)


def _table_rows(text: str, task: str) -> list[str]:
    """The rows of ``task`` in the results tables (a metric named in each: the readings table's row is not one)."""
    return [line for line in text.splitlines() if line.startswith(f"| `{task}` |") and "(`" in line]


def test_results_show_both_readings_side_by_side_the_headline_named(readings_spec, tmp_path):
    out = tmp_path / "report"
    build_report([write_run(tmp_path / "run")], out, figures=False)
    text = (out / "results.md").read_text()
    assert READINGS_HEADER in text and READINGS_ROW in text
    # the full tables: each reading's row, the headline first; the requested-format share once, for each reading
    rows = _table_rows(text, "emsqa_public_cot")
    assert [re.split(r" \| ", r)[2] + " / " + re.search(r"\(`(\w+)`\)", r).group(1) for r in rows] == [
        "flexible-extract (headline) / acc",
        "strict-match / acc",
        "flexible-extract (headline) / f1",
        "strict-match / f1",
        "flexible-extract (headline) / unparseable",
        "strict-match / unparseable",
        "each reading / requested_format",
        "flexible-extract (headline) / invalid_letter",
        "strict-match / invalid_letter",
        "flexible-extract (headline) / extracted_by_model",
        "strict-match / extracted_by_model",
    ]
    assert "| `emsqa_public_cot` | 7 | strict-match | 0 | Exact set-match accuracy (`acc`) | 0.2500 | 0.2500 |" in text
    assert (
        "| `emsqa_public_cot` | 7 | each reading | 0 | Outputs in the requested format (`requested_format`) | 0.2500 "
        "| 0.2500 |" in text
    )
    # what the readings are, the headline named, in the spec's words
    assert (
        f"`emsqa_public_cot`: `flexible-extract` (headline), the pack's reader: {FLEXIBLE_ABOUT}. `strict-match`, "
        f"lm-eval's strict reading: {STRICT_ABOUT}." in text
    )
    # a task with one filter: as before, in no readings table
    assert _table_rows(text, "emsqa_public_mc")[0].startswith(
        "| `emsqa_public_mc` | 1 | none | 0 | Exact set-match accuracy (`acc`) | 0.5000 | 0.2887 |"
    )
    assert text.count("| Task | Version | n-shot |") == 1


def test_card_section_and_model_index_carry_both_readings_and_the_unparseable_rate(readings_spec, tmp_path):
    out = tmp_path / "report"
    card = tmp_path / "card" / "README.md"
    build_report([write_run(tmp_path / "run")], out, figures=False, update_card=card)
    section = (out / "card_section.md").read_text()
    assert READINGS_HEADER in section and READINGS_ROW in section
    assert f"`flexible-extract` (headline), the pack's reader: {FLEXIBLE_ABOUT}." in section
    assert "| `emsqa_public_cot` | 7 | strict-match | 0 | Unparseable answer rate (`unparseable`) | 0.7500 |" in section
    index = yaml.safe_load((out / "model_index.yaml").read_text())["model-index"][0]["results"]
    cot = next(r for r in index if r["task"]["name"] == "emsqa_public_cot")
    assert [(m["type"], m["name"], m.get("config"), m["value"]) for m in cot["metrics"]] == [
        ("accuracy", "Exact set-match accuracy (flexible-extract)", "flexible-extract", 0.5),
        ("accuracy", "Exact set-match accuracy (strict-match)", "strict-match", 0.25),
        ("f1", "Set F1 (per item, averaged) (flexible-extract)", "flexible-extract", 0.5),
        ("f1", "Set F1 (per item, averaged) (strict-match)", "strict-match", 0.25),
        ("unparseable_rate", "Unparseable answer rate (flexible-extract)", "flexible-extract", 0.25),
        ("unparseable_rate", "Unparseable answer rate (strict-match)", "strict-match", 0.75),
        ("requested_format_rate", "Outputs in the requested format", "flexible-extract", 0.25),
    ]
    mc = next(r for r in index if r["task"]["name"] == "emsqa_public_mc")  # one filter: names as before
    assert [(m["name"], m.get("config")) for m in mc["metrics"]] == [
        ("Exact set-match accuracy", None),
        ("Set F1 (per item, averaged)", None),
    ]
    card_index = yaml.safe_load(card.read_text().split("---")[1])["model-index"][0]["results"]
    assert card_index == index and READINGS_ROW in card.read_text()


def test_an_old_run_with_one_filter_named_extract_answer_reports_sensibly(readings_spec, tmp_path):
    out = tmp_path / "report"
    build_report([write_run(tmp_path / "run", stamp=OLD, old=True)], out, figures=False)
    text = (out / "results.md").read_text()
    assert "| Task | Version | n-shot |" not in text  # one reading: no side-by-side table
    assert (
        "| `emsqa_public_cot` | 6 | extract_answer | 0 | Exact set-match accuracy (`acc`) | 0.7500 | 0.2500 |" in text
    )
    assert (
        "`emsqa_public_cot`: read one way, `extract_answer`: the name an earlier version of the task gave its "
        "`flexible-extract` reading" in text
    )
    index = yaml.safe_load((out / "model_index.yaml").read_text())["model-index"][0]["results"]
    cot = next(r for r in index if r["task"]["name"] == "emsqa_public_cot")
    assert [(m["name"], m["config"], m["value"]) for m in cot["metrics"]][:2] == [
        ("Exact set-match accuracy", "extract_answer", 0.75),
        ("Set F1 (per item, averaged)", "extract_answer", 0.75),
    ]


def test_a_new_run_replaces_the_old_runs_card_entries_under_the_former_filter_name(readings_spec, tmp_path):
    card = tmp_path / "README.md"
    build_report([write_run(tmp_path / "old", stamp=OLD, old=True)], tmp_path / "r1", figures=False, update_card=card)
    assert "config: extract_answer" in card.read_text()
    build_report([write_run(tmp_path / "new")], tmp_path / "r2", figures=False, update_card=card)
    results = yaml.safe_load(card.read_text().split("---")[1])["model-index"][0]["results"]
    cot = next(r for r in results if r["task"]["name"] == "emsqa_public_cot")
    configs = [(m["type"], m.get("config")) for m in cot["metrics"]]
    assert ("accuracy", "extract_answer") not in configs and ("f1", "extract_answer") not in configs
    assert ("accuracy", "flexible-extract") in configs and ("accuracy", "strict-match") in configs
    # the old run's unparseable rate, published under the old name, goes too: the new run has the reading
    assert ("unparseable_rate", "extract_answer") not in configs
    # both runs given at once: the newer run's readings alone
    build_report([tmp_path / "old", tmp_path / "new"], tmp_path / "r3", figures=False)
    index = yaml.safe_load((tmp_path / "r3" / "model_index.yaml").read_text())["model-index"][0]["results"]
    cot = next(r for r in index if r["task"]["name"] == "emsqa_public_cot")
    assert "extract_answer" not in {m.get("config") for m in cot["metrics"]}


def test_comparison_puts_the_old_filter_name_on_its_readings_line(readings_spec, tmp_path):
    build_report(
        [write_run(tmp_path / "old", stamp=OLD, old=True, model="org/old"), write_run(tmp_path / "new")],
        tmp_path / "report",
        figures=False,
    )
    text = (tmp_path / "report" / "comparison.md").read_text()
    assert (
        "| `emsqa_public_cot` | acc | flexible-extract (headline) | 0.7500 ± 0.2500 (n=4, as extract_answer) | "
        "0.5000 ± 0.2887 (n=4) |" in text
    )
    assert "| `emsqa_public_cot` | acc | strict-match | – | 0.2500 ± 0.2500 (n=4) |" in text
    assert "| `emsqa_public_cot` | requested_format | each reading | – | 0.2500 ± 0.2500 (n=4) |" in text
    assert "version 6 in org/old; version 7 in org/model" in text


def test_breakdowns_show_the_headline_reading_first(readings_spec, tmp_path):
    """lm-eval logs strict-match first (the YAML's order); breakdowns.md shows flexible-extract (the headline) first:
    by level, emt: flexible acc 2/4, strict 1/4."""
    build_report([write_run(tmp_path / "run")], tmp_path / "report", figures=False)
    text = (tmp_path / "report" / "breakdowns.md").read_text()
    flexible = text.index("**emsqa_public_cot** by level (filter `flexible-extract`)")
    strict = text.index("**emsqa_public_cot** by level (filter `strict-match`)")
    assert flexible < strict
    assert "| emt | 4 | 0.5000 ± 0.2887 |" in text[flexible:strict]


def test_figures_keep_the_plain_name_for_the_headline_reading(readings_spec, tmp_path):
    report = build_report([write_run(tmp_path / "run")], tmp_path / "report")
    cot = sorted(
        f.rsplit("/", 1)[1] for f in report["figures"] if "emsqa_public_cot__level__" in f or "cot__level." in f
    )
    assert cot == ["emsqa_public_cot__level.png", "emsqa_public_cot__level__strict-match.png"]


def test_comparison_figure_uses_the_headline_reading(readings_spec, tmp_path, monkeypatch):
    from medeval_metrics.report import figures

    drawn = {}
    monkeypatch.setattr(figures, "comparison_figure", lambda path, title, label, series, *a, **k: drawn.update(series))
    build_report(
        [write_run(tmp_path / "old", stamp=OLD, old=True, model="org/old"), write_run(tmp_path / "new")],
        tmp_path / "report",
    )
    assert {run: values["value"] for run, values in drawn["emsqa_public_cot"].items()} == {
        "org/old": 0.75,
        "org/model": 0.5,  # flexible-extract's, not strict-match's 0.25
    }


class _Items:
    """The items of report.html: per item its data-* attributes and the rows of its readings table."""

    def __init__(self, page: str):
        self.items = []
        for match in re.finditer(r'<details class="item [^"]*" id="item-\d+" ([^>]*)>(.*?)</details>', page, re.DOTALL):
            attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', match.group(1)))
            readings = re.findall(
                r"<tr><td>([^<]*)</td><td><code[^>]*>([^<]*)</code></td><td>([^<]*)</td></tr>", match.group(2)
            )
            self.items.append((attrs, readings, match.group(2)))


def test_html_items_show_what_each_reading_read(readings_spec, tmp_path):
    out = tmp_path / "report"
    build_report([write_run(tmp_path / "run")], out, figures=False, html=True)
    page = (out / "report.html").read_text()
    items = [i for i in _Items(page).items if i[0]["task"] == "emsqa_public_cot"]
    assert len(items) == 4  # one item per doc, not one per doc and filter
    assert [i[0]["status"] for i in items] == ["correct", "correct", "wrong", "unparseable"]  # the headline's
    assert [i[0]["readings"] for i in items] == ["agree", "differ", "differ", "agree"]
    assert items[1][1] == [
        ("flexible-extract (headline)", "b", "correct (Exact set-match accuracy 1)"),
        ("strict-match", "no answer", "unparseable (Exact set-match accuracy 0)"),
    ]
    assert "strict-match: unparseable" in items[1][2] or "strict-match: unparseable" in page
    assert '<select name="readings">' in page
    assert READINGS_ROW.split(" | ")[3] in page  # the readings table's cells: 0.5000 ± 0.2887
    assert "Readings side by side" in page
    assert "<code>flexible-extract</code> (headline), the pack&#x27;s reader: " in page  # what each reading reads


def test_html_items_of_one_filter_tasks_are_as_before(readings_spec, tmp_path):
    out = tmp_path / "report"
    build_report([write_run(tmp_path / "run", stamp=OLD, old=True)], out, figures=False, html=True)
    page = (out / "report.html").read_text()
    items = _Items(page).items
    assert len(items) == 4 and {i[0]["readings"] for i in items} == {"one reading"}
    assert all('<div class="field">Extracted answer</div>' in i[2] for i in items)
    assert '<select name="readings">' not in page and "Readings side by side" not in page


@pytest.mark.parametrize(
    "readings, why",
    [
        ((Reading("a", "A", "a"), Reading("a", "A again", "a")), "readings name the filter 'a' twice"),
        ((Reading("a", "A", "a", former_filters=("old",)), Reading("old", "B", "b")), "the filter 'old' twice"),
        ((Reading("a", "A", "a", headline=True), Reading("b", "B", "b", headline=True)), "more than one reading"),
    ],
)
def test_a_spec_whose_readings_contradict_each_other_is_refused(readings, why):
    from medeval_metrics.spec import Reporting

    with pytest.raises(ValueError, match=why):
        Reporting("Toy", "question-answering", "acc", readings=readings)


def test_judge_scores_count_each_doc_once_under_two_readings(readings_spec, tmp_path):
    """lm-eval logs each doc once per filter: a doc's judge scores (the documented ``judge_scores`` field) count once,
    from the headline reading's samples: judge-x gave docs 0-3 scores 5, 4, 3, 2 -> mean 3.5 over 4 items, not 8."""
    run = write_run(tmp_path / "run")
    path = next(run.glob("samples_emsqa_public_cot_*.jsonl"))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        record["judge_scores"] = {"judge-x": {"accuracy": 5 - record["doc_id"]}}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    build_report([run], tmp_path / "report", figures=False)
    judges = json.loads((tmp_path / "report" / "judges.json").read_text())["org/model"]["emsqa_public_cot"]
    assert judges["judge-x"]["accuracy"]["value"] == 3.5 and judges["judge-x"]["accuracy"]["n"] == 4


def test_emsqa_spec_names_its_two_readings_and_puts_the_unparseable_rate_on_the_card():
    """EMSQA's own spec (not the tests'): flexible-extract is the headline reading and was named extract_answer up to
    task version 6; strict-match is the other; the unparseable rate and the requested-format share (the same under
    both readings) go into the model-index."""
    from medeval_metrics import registry

    reporting = registry.benchmark("emsqa").reporting
    assert [(r.filter, r.headline, r.former_filters) for r in reporting.readings] == [
        ("flexible-extract", True, ("extract_answer",)),
        ("strict-match", False, ()),
    ]
    assert "unparseable" in reporting.reading_metrics
    assert reporting.info("unparseable").in_model_index
    requested = reporting.info("requested_format")
    assert requested is not None and requested.across_readings and requested.in_model_index and requested.proportion


def test_a_task_outside_the_pack_read_two_ways_is_side_by_side_with_no_headline_named(readings_spec, tmp_path):
    """A user's gsm8k beside the pack's task: its two filters side by side under its first metric, neither called the
    headline (the pack knows nothing of its readings), nothing said about them, and still off the card."""
    run = write_run(tmp_path / "run")
    path = next(run.glob("results_*.json"))
    results = json.loads(path.read_text())
    results["results"]["gsm8k"] = {
        "alias": "gsm8k",
        "exact_match,strict-match": 0.25,
        "exact_match_stderr,strict-match": 0.01,
        "exact_match,flexible-extract": 0.375,
        "exact_match_stderr,flexible-extract": 0.02,
    }
    results["n-samples"]["gsm8k"] = {"original": 1319, "effective": 1319}
    results["versions"]["gsm8k"], results["n-shot"]["gsm8k"] = 3, 5
    path.write_text(json.dumps(results))
    out = tmp_path / "report"
    build_report([run], out, figures=False)
    text = (out / "results.md").read_text()
    assert (
        "| Task | Version | n-shot | exact_match, flexible-extract | exact_match, strict-match | Samples |\n"
        "|---|---|---|---:|---:|---:|\n"
        "| `gsm8k` | 3 | 5 | 0.3750 ± 0.0200 | 0.2500 ± 0.0100 | 1,319 |" in text
    )
    assert "| `gsm8k` | 3 | flexible-extract | 5 | exact_match (`exact_match`) | 0.3750 |" in text
    assert "`gsm8k`: `" not in text  # no line about its readings
    assert "gsm8k" not in (out / "model_index.yaml").read_text()
