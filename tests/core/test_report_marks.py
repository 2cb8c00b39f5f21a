"""Issue 33: a partial or scripted number says so wherever it is shown. A --limit run published with
--include-partial-runs carries "N of M items, partial" in the model-index entry's dataset name (which the Hub's
schema takes as free text, and which a later full run replaces), in results.md, the card section and report.html;
the card shows a generative task's unparseable rate and only the settings that apply to the run; the demo's note
(``medeval_demo.json`` beside the results file, or ``results["medeval_demo"]``) labels every scripted judge's number "scripted" in the tables, the figures' titles and
on each item, and shows the demo's synthetic items instead of hiding them. No lm-eval run: results and samples
files as lm-eval (and `medeval demo`) write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import run_medeval

from medeval_metrics.report import build_report

DATE = "2026-01-01T10-00-00.000001"
LATER = "2026-01-02T10-00-00.000001"


def emsqa_results(
    folder: Path,
    limit: int | None,
    effective: int,
    task: str = "emsqa_public",
    shots: int = 0,
    output_type: str = "generate_until",
    date: str = DATE,
    **fields,
) -> Path:
    """An EMSQA run's results: acc 0.5 and an unparseable rate of 0.25 under flexible-extract."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {
        "results": {
            task: {
                "alias": task,
                "acc,flexible-extract": 0.5,
                "acc_stderr,flexible-extract": 0.1,
                "f1,flexible-extract": 0.6,
                "f1_stderr,flexible-extract": 0.1,
                "unparseable,flexible-extract": 0.25,
                "unparseable_stderr,flexible-extract": 0.1,
            }
        },
        "versions": {task: 6},
        "n-shot": {task: shots},
        "n-samples": {task: {"original": 3721, "effective": effective}},
        "configs": {task: {"output_type": output_type, "generation_kwargs": {"max_gen_toks": 8}}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": limit, "gen_kwargs": "max_gen_toks=8"},
        "fewshot_as_multiturn": True,
        **fields,
    }
    path = folder / f"results_{date}.json"
    path.write_text(json.dumps(results))
    return path


# --------------------------------------------------------------------------- partial runs


@pytest.fixture
def partial_report(tmp_path):
    emsqa_results(tmp_path / "run", limit=4, effective=4)
    card = tmp_path / "README.md"
    build_report(
        [tmp_path / "run"],
        tmp_path / "r",
        figures=False,
        html=True,
        include_partial_runs=True,
        update_card=card,
    )
    return tmp_path / "r", card


def test_a_partial_run_is_marked_in_the_model_index_in_a_form_the_hub_reads(partial_report):
    from huggingface_hub import ModelCard

    out, card = partial_report
    for text in ((out / "model_index.yaml").read_text(), card.read_text().split("---\n")[1]):
        (result,) = yaml.safe_load(text)["model-index"][0]["results"]
        assert result["dataset"]["name"] == "EMSQA (emsqa_public) (4 of 3,721 items, partial)"
        assert result["dataset"]["type"] == "Xueren/EMS-MCQA" and result["dataset"]["args"] == {"num_few_shot": 0}
    # huggingface_hub's reader of the Hub's schema takes it, with the mark in the dataset name
    results = ModelCard.load(card).data.eval_results
    assert {r.dataset_name for r in results} == {"EMSQA (emsqa_public) (4 of 3,721 items, partial)"}


def test_a_later_full_run_replaces_the_partial_entry_name_and_all(partial_report, tmp_path):
    _, card = partial_report
    emsqa_results(tmp_path / "full", limit=None, effective=3721)
    build_report([tmp_path / "full"], tmp_path / "r2", figures=False, update_card=card)
    (result,) = yaml.safe_load(card.read_text().split("---\n")[1])["model-index"][0]["results"]
    assert result["dataset"]["name"] == "EMSQA (emsqa_public)"
    # accuracy and F1 (and whatever else the spec publishes), each once
    kinds = [(m["type"], m.get("config")) for m in result["metrics"]]
    assert {("accuracy", "flexible-extract"), ("f1", "flexible-extract")} <= set(kinds)
    assert len(kinds) == len(set(kinds))


def test_a_partial_run_is_marked_in_the_tables_the_card_and_the_page(partial_report):
    out, card = partial_report
    for text in ((out / "results.md").read_text(), (out / "card_section.md").read_text(), card.read_text()):
        # 2 of 4 at 1 (a proportion): Wilson, centre 0.5, half-width 0.350 by hand
        assert "| 0.5000 | 0.1000 | 0.150–0.850 (Wilson) | 4 of 3,721 items, partial |" in text
        assert "`emsqa_public`: partial (--limit)" in text
    page = (out / "report.html").read_text()
    assert "<td class=num>4 of 3,721 items, partial</td>" in page
    assert "<td class=num>4</td>" not in page


def test_the_card_shows_a_generative_task_s_unparseable_rate(partial_report):
    out, _ = partial_report
    section = (out / "card_section.md").read_text()
    assert "| Unparseable answer rate (`unparseable`) | 0.2500 |" in section


@pytest.mark.parametrize(
    "task, shots, output_type, multiturn, generation",
    [
        ("emsqa_public", 0, "generate_until", False, True),  # zero-shot: few-shot turns do not apply
        ("emsqa_public", 1, "generate_until", True, True),
        ("emsqa_public_mc", 0, "multiple_choice", False, False),  # nothing is generated
    ],
)
def test_the_card_shows_only_the_settings_that_apply(tmp_path, task, shots, output_type, multiturn, generation):
    emsqa_results(tmp_path / "run", limit=None, effective=3721, task=task, shots=shots, output_type=output_type)
    build_report([tmp_path / "run"], tmp_path / "r", figures=False)
    for name in ("card_section.md", "results.md"):
        text = (tmp_path / "r" / name).read_text()
        assert ("| few-shot as multi-turn |" in text) is multiturn, name
        assert ("| generation settings (command line) |" in text) is generation, name
        assert "| chat template |" in text and "| limit |" in text


# --------------------------------------------------------------------------- the demo: scripted judges, synthetic data

PRIVATE_Q = "which drug is ZEBRA-SYNTHETIC-QUESTION given first?"


def medicationqa_sample(doc_id: int, score: float) -> dict:
    verdict = {"scores": {"accuracy": 5, "completeness": 4, "clarity": 4}, "reasons": {"accuracy": "ok"}}
    verdicts = {"demo-judge-a": verdict, "smollm2": {"scores": None, "unscored_reason": "no JSON in reply"}}
    return {
        "doc_id": doc_id,
        "doc": {"question": f"drug{doc_id}?", "question_type": "Dose", "answer": "20 mg a day."},
        "target": "20 mg a day.",
        "arguments": {"gen_args_0": {"arg_0": f"Question: drug{doc_id}?"}},
        "resps": [["1.5 to 2 grams per day"]],
        # the judge filter's record, as lm-eval logs it (a repr), and the verdicts the task logs
        "filtered_resps": [repr({"answer": "1.5 to 2 grams per day", "verdicts": verdicts})],
        "filter": "scored",
        "judge_panel_score": score,
        "judge_verdicts": json.dumps(verdicts),
    }


def emsqa_private_sample(doc_id: int) -> dict:
    return {
        "doc_id": doc_id,
        "doc": {"id": str(doc_id), "question": PRIVATE_Q, "level": ["emt"], "category": ["trauma"]},
        "target": '["b"]',
        "arguments": {"gen_args_0": {"arg_0": f"Question: {PRIVATE_Q}\nAnswer:"}},
        "resps": [["The answer is B."]],
        "filtered_resps": [["b"]],
        "filter": "flexible-extract",
        "acc": 1.0,
        "unparseable": 0.0,
    }


def demo_run(folder: Path, marker, embedded: bool = False) -> Path:
    """A demo run; ``marker``: its demo note, in ``medeval_demo.json`` beside the results file (as `medeval demo`
    writes it) or, ``embedded``, under the results' ``medeval_demo`` key."""
    folder.mkdir(parents=True)
    results = {
        "results": {
            "medicationqa": {
                "alias": "medicationqa",
                "judge_panel_score,scored": 4.3,
                "judge_panel_score_stderr,scored": 0.1,
                "rougeL,scored": 0.2,
                "rougeL_stderr,scored": 0.01,
            },
            "emsqa_private": {
                "alias": "emsqa_private",
                "acc,flexible-extract": 1.0,
                "acc_stderr,flexible-extract": 0.0,
            },
        },
        "versions": {"medicationqa": 5, "emsqa_private": 6},
        "n-shot": {"medicationqa": 0, "emsqa_private": 0},
        "n-samples": {
            "medicationqa": {"original": 2, "effective": 2},
            "emsqa_private": {"original": 1, "effective": 1},
        },
        "config": {"model": "medeval-scripted", "model_args": "model=medeval-demo-scripted", "limit": None},
    }
    if marker is not None and embedded:
        results["medeval_demo"] = marker
    elif marker is not None:
        (folder / "medeval_demo.json").write_text(json.dumps(marker))
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    samples = {"medicationqa": [medicationqa_sample(0, 4.3), medicationqa_sample(1, 4.3)], "emsqa_private": []}
    samples["emsqa_private"] = [emsqa_private_sample(0)]
    for task, rows in samples.items():
        (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


# as medeval_metrics.demo.write_demo_note writes it (with --real-judge, smollm2 is a real judge beside the scripted)
DEMO = {
    "demo": True,
    "synthetic_data": ["emsqa_private", "medicationqa", "emrqa_risk"],
    "scripted_judges": ["demo-judge-a"],
    "scripted_model": True,
    "note": "medeval demo: questions written for the project",
}


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    demo_run(root / "run" / "m", DEMO)
    build_report([root / "run"], root / "r", figures=True, html=True)
    return root / "r"


def test_every_scripted_judge_score_is_labelled_in_the_tables(demo_report):
    results = (demo_report / "results.md").read_text()
    assert "| LLM-judge panel score (1-5) (scripted) (`judge_panel_score`) | 4.3000 |" in results
    assert "| ROUGE-L (`rougeL`) |" in results  # a reference-overlap score is no judge's
    assert "(scripted): a judge panel's number from scripted judges" in results
    judges = (demo_report / "judges.md").read_text()
    assert "| demo-judge-a (scripted) |" in judges
    card = (demo_report / "card_section.md").read_text()
    assert "LLM-judge panel score (1-5) (scripted)" in card
    index = yaml.safe_load((demo_report / "model_index.yaml").read_text())["model-index"][0]
    names = [m["name"] for r in index["results"] for m in r["metrics"]]
    assert "LLM-judge panel score (1-5) (scripted)" in names


def test_every_scripted_verdict_is_labelled_on_its_item(demo_report):
    page = (demo_report / "report.html").read_text()
    items = page.split('<details class="item ')[1:]
    judged = [item for item in items if 'data-task="medicationqa"' in item]
    assert len(judged) == 2
    for item in judged:
        assert item.startswith('scripted"') and 'data-status="correct"' in item  # the filter still works
        assert '<span class="badge scripted">scripted · correct</span>' in item
        assert "(scripted judges: not a verdict on this answer)" in item
        assert "<td>demo-judge-a (scripted)</td>" in item and "<td>smollm2</td>" in item  # the real judge unmarked
        assert 'class="badge correct"' not in item
    assert "LLM-judge panel score (1-5) (scripted) (<code>judge_panel_score</code>)" in page


def test_the_demo_s_synthetic_data_is_shown_not_hidden(demo_report):
    page = (demo_report / "report.html").read_text()
    assert "ZEBRA-SYNTHETIC-QUESTION" in page and "[private data, hidden" not in page
    results = (demo_report / "results.md").read_text()
    assert "`emsqa_private`, `medicationqa`: the data is synthetic" in results
    assert "the model is scripted (the demo's: answers from a table)" in results


def test_the_marker_in_the_results_file_works_as_the_file_beside_it(tmp_path):
    demo_run(tmp_path / "run" / "m", {"scripted_judges": True, "synthetic_data": True}, embedded=True)
    build_report([tmp_path / "run"], tmp_path / "r", figures=False, html=True)
    page = (tmp_path / "r" / "report.html").read_text()
    assert "ZEBRA-SYNTHETIC-QUESTION" in page and "<td>smollm2 (scripted)</td>" in page


def test_the_figures_titles_say_scripted(tmp_path, monkeypatch):
    from medeval_metrics.report import figures

    titles = []
    original = figures.fit_title
    monkeypatch.setattr(figures, "fit_title", lambda fig, text, **kw: titles.append(text) or original(fig, text, **kw))
    demo_run(tmp_path / "run" / "m", DEMO)
    build_report([tmp_path / "run"], tmp_path / "r", figures=True)
    judged = [t for t in titles if "medicationqa" in t]
    assert "Judge scores (scripted judges): medicationqa, medeval-demo-scripted" in judged
    assert "LLM-judge panel score (1-5) (scripted) by question type: medicationqa, medeval-demo-scripted" in judged


def test_without_the_marker_nothing_is_labelled_and_private_data_stays_hidden(tmp_path):
    demo_run(tmp_path / "run" / "m", None)
    build_report([tmp_path / "run"], tmp_path / "r", figures=False, html=True)
    assert "(scripted)" not in (tmp_path / "r" / "results.md").read_text()
    page = (tmp_path / "r" / "report.html").read_text()
    assert "ZEBRA-SYNTHETIC-QUESTION" not in page and "[private data, hidden" in page
    assert "(scripted" not in page and 'class="badge scripted"' not in page and "item scripted" not in page


def test_scripted_true_marks_every_judge(tmp_path):
    demo_run(tmp_path / "run" / "m", {"scripted_judges": True})
    build_report([tmp_path / "run"], tmp_path / "r", figures=False, html=True)
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<td>demo-judge-a (scripted)</td>" in page and "<td>smollm2 (scripted)</td>" in page
    assert "[private data, hidden" in page  # synthetic_data not said: the private set stays hidden


@pytest.mark.parametrize(
    "marker, embedded, field",
    [
        ({"scripted_judges": "yes"}, False, "medeval_demo.json: 'scripted_judges' is text"),
        ({"scripted_judges": [1]}, False, "medeval_demo.json: 'scripted_judges' is a list"),
        ({"synthetic_data": 1}, False, "medeval_demo.json: 'synthetic_data' is a number"),
        ({"scripted_model": "no"}, False, "medeval_demo.json: 'scripted_model' is text"),
        (["scripted"], False, "medeval_demo.json: the note is a list"),
        ({"scripted_judges": "yes"}, True, f"results_{DATE}.json: 'medeval_demo.scripted_judges' is text"),
        (["scripted"], True, f"results_{DATE}.json: 'medeval_demo' is a list"),
    ],
)
def test_a_bad_marker_is_one_line_naming_the_file_and_field(tmp_path, capsys, marker, embedded, field):
    demo_run(tmp_path / "run" / "m", marker, embedded=embedded)
    proc = run_medeval(["report", str(tmp_path / "run"), "--output", str(tmp_path / "r"), "--no-figures"], capsys)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and field in proc.stderr, proc.stderr
    assert not (tmp_path / "r" / "results.md").exists()


def test_a_demo_note_that_is_not_json_is_one_line(tmp_path, capsys):
    demo_run(tmp_path / "run" / "m", None)
    (tmp_path / "run" / "m" / "medeval_demo.json").write_text("{not json")
    proc = run_medeval(["report", str(tmp_path / "run"), "--output", str(tmp_path / "r"), "--no-figures"], capsys)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "medeval_demo.json: not a readable medeval demo note" in proc.stderr
