"""Issue 23.11: `medeval report --html` writes one self-contained page: the tables, the figures embedded, every
logged item with its prompt, output, extracted answer, gold, score and judges, filterable; private text hidden
unless asked. Parsed here; rendered in headless Chromium in test_report_html_browser.py (e2e)."""

from __future__ import annotations

import json
import os
import stat
from html.parser import HTMLParser
from pathlib import Path

import pytest

from medeval_metrics.report import build_report

NOTE = "Record risk-7: ZEBRA-NOTE-LINE patient walked in"  # emrQA note text: never shown unless asked
PRIVATE_Q = "which drug is ZEBRA-PRIVATE-QUESTION given first?"
STAMP = "2026-01-01T00-00-00.000001"


def emsqa_sample(doc_id, question, reply, letters, gold, acc, unparseable=0.0):
    doc = {
        "id": str(doc_id),
        "question": question,
        "choices": ["a. one", "b. two"],
        "letters": ["a", "b"],
        "gold": gold,
        "level": ["emt"],
        "category": ["trauma" if doc_id else "pharmacology"],
    }
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": json.dumps(gold),
        "arguments": {"gen_args_0": {"arg_0": f"Question: {question}\nA. one\nB. two\nAnswer:", "arg_1": {}}},
        "resps": [[reply]],
        "filtered_resps": [letters],
        "filter": "flexible-extract",
        "acc": acc,
        "f1": acc,
        "unparseable": unparseable,
        "invalid_letter": 0.0,
    }


def medicationqa_sample(doc_id, reply, score):
    verdict = {
        "scores": {"accuracy": 4, "completeness": 3, "clarity": 5},
        "reasons": {"accuracy": "matches the label", "completeness": "omits food", "clarity": "plain words"},
        "unscored_reason": None,
        "requests": 1,
    }
    filtered = {
        "answer": reply,
        "verdicts": {
            "judge-a": verdict,
            "judge-b": {**verdict, "scores": {}, "reasons": {}, "unscored_reason": "no JSON in reply"},
        },
    }
    return {
        "doc_id": doc_id,
        "doc": {
            "question": f"Can I take drug{doc_id} with food?",
            "question_type": "Usage",
            "answer": "Yes, with or without food.",
        },
        "target": "Yes, with or without food.",
        "arguments": {"gen_args_0": {"arg_0": f"Question: drug{doc_id}?"}},
        "resps": [[reply]],
        "filtered_resps": [repr(filtered)],
        "filter": "scored",
        "rougeL": 0.5,
        "judge_panel_score": score,
    }


def emrqa_sample(doc_id, relaxed):
    doc = {
        "qa_id": f"risk/7#{doc_id}",
        "question": "What were the results of the x-ray",
        "note": NOTE,
        "subset": "risk",
        "lf_template": "LabEvent (|test|)",
        "answers_json": json.dumps([{"entity_type": "single"}]),
    }
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": "ZEBRA-NOTE-LINE patient walked in",
        "arguments": {"gen_args_0": {"arg_0": f"Clinical note:\n{NOTE}\nQuestion: x-ray?"}},
        "resps": [["ZEBRA-NOTE-LINE patient walked in"]],
        "filtered_resps": ["ZEBRA-NOTE-LINE patient walked in"],
        "filter": "none",
        "relaxed_em": relaxed,
        "f1": relaxed,
        "strict_em": relaxed,
        "prompt_too_long": 0.0,
    }


SAMPLES = {
    "emsqa_private": [
        emsqa_sample(0, PRIVATE_Q, "The answer is B.", ["b"], ["b"], 1.0),
        emsqa_sample(1, "second question", "The answer is A.", ["a"], ["b"], 0.0),
        emsqa_sample(2, "third question", "I cannot tell.", [], ["a"], 0.0, unparseable=1.0),
    ],
    "medicationqa": [
        medicationqa_sample(0, "Yes, it can be taken with food.", 4.0),
        medicationqa_sample(1, "Ask a doctor.", 2.0),
    ],
    "emrqa_risk": [emrqa_sample(0, 1.0)],
}


def write_run(folder: Path) -> Path:
    results = {
        "results": {},
        "versions": {},
        "n-shot": {},
        "n-samples": {},
        "configs": {},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": None},
        "date": 1.0,
    }
    for task, samples in SAMPLES.items():
        metric = {
            "emsqa_private": "acc,flexible-extract",
            "medicationqa": "judge_panel_score,scored",
            "emrqa_risk": "relaxed_em,none",
        }[task]
        value = 3.5 if task == "medicationqa" else 0.5  # each in its metric's range (judge scores: 1-5)
        results["results"][task] = {"alias": task, metric: value, metric.replace(",", "_stderr,"): 0.1}
        results["n-samples"][task] = {"original": len(samples), "effective": len(samples)}
        results["versions"][task] = 1
        with open(folder / f"samples_{task}_{STAMP}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(s) + "\n" for s in samples)
    (folder / f"results_{STAMP}.json").write_text(json.dumps(results))
    return folder


class Page(HTMLParser):
    """The page's elements: tags with their attributes, and the text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag: str, **attrs) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    (root / "run" / "org__model").mkdir(parents=True)
    write_run(root / "run" / "org__model")
    build_report([root / "run"], root / "report", figures=True, html=True)
    return root / "report"


def test_the_page_is_self_contained(report):
    text = (report / "report.html").read_text(encoding="utf-8")
    page = Page(text)
    assert not page.all("link") and not page.all("iframe") and not page.all("object")
    for tag, attrs in page.tags:  # nothing is fetched: every image is a data URI, no script has a src
        assert not attrs.get("src", "data:").split(":")[0] in ("http", "https", "file", "//"), (tag, attrs)
        assert tag != "script" or "src" not in attrs
    images = page.all("img")
    figures = json.loads((report / "report.json").read_text())["figures"]
    assert len(images) == len(figures) > 0 and all(i["src"].startswith("data:image/png;base64,") for i in images)
    assert "http://" not in text.replace("http-equiv", "") and "https://" not in text
    assert "report.html" in json.loads((report / "report.json").read_text())["written"]


def test_every_item_is_there_with_its_result_and_categories(report):
    page = Page((report / "report.html").read_text(encoding="utf-8"))
    items = page.all("details")
    assert [(i["data-task"], i["data-status"]) for i in items] == [
        ("emrqa_risk", "correct"),
        ("emsqa_private", "correct"),
        ("emsqa_private", "wrong"),
        ("emsqa_private", "unparseable"),
        ("medicationqa", "correct"),
        ("medicationqa", "wrong"),
    ]  # 4 of 5: at least the scale's middle (3)
    assert items[1]["data-categories"].split("\x1f") == ["level: emt", "subject area: pharmacology"]
    selects = {s["name"] for s in page.all("select")}
    assert selects == {"task", "category", "status"}
    options = [a.get("value") for t, a in page.tags if t == "option"]
    assert {"correct", "wrong", "unparseable", "emsqa_private", "subject area: trauma"} <= set(options)


def test_public_items_show_prompt_output_answer_gold_and_each_judge(report):
    text = " ".join(Page((report / "report.html").read_text(encoding="utf-8")).text)
    for shown in (
        "Question: drug0?",
        "Yes, it can be taken with food.",
        "Yes, with or without food.",
        "accuracy 4, completeness 3, clarity 5",
        "accuracy: matches the label; completeness: omits food",
        "no score (unscored: no JSON in reply)",
    ):
        assert shown in text, shown


def test_private_text_is_hidden_by_default_and_shown_when_asked(report, tmp_path):
    text = (report / "report.html").read_text(encoding="utf-8")
    assert "ZEBRA-NOTE-LINE" not in text and "ZEBRA-PRIVATE-QUESTION" not in text
    assert "The text of emrqa_risk, emsqa_private is hidden" in text
    assert text.count("[private data, hidden:") >= 4 * 4  # prompt, output, answer, gold of each private item
    previous = os.umask(0o022)  # the page with private text is the user's alone whatever the umask (issue 32)
    try:
        build_report([report.parent / "run"], tmp_path / "shown", figures=False, html=True, html_show_private=True)
    finally:
        os.umask(previous)
    page = tmp_path / "shown" / "report.html"
    shown = page.read_text(encoding="utf-8")
    assert "ZEBRA-NOTE-LINE" in shown and "ZEBRA-PRIVATE-QUESTION" in shown and "[private data, hidden:" not in shown
    assert stat.S_IMODE(page.stat().st_mode) == 0o600


def test_a_credential_in_an_output_is_redacted(tmp_path):
    folder = tmp_path / "run" / "m"
    folder.mkdir(parents=True)
    write_run(folder)
    path = next(folder.glob("samples_medicationqa_*.jsonl"))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["resps"] = [["my key is sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_report([tmp_path / "run"], tmp_path / "r", figures=False, html=True)
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz" not in (tmp_path / "r" / "report.html").read_text()


def test_the_cli_writes_it_on_request_only(tmp_path, capsys):
    from conftest import run_medeval

    folder = tmp_path / "run" / "m"
    folder.mkdir(parents=True)
    write_run(folder)
    assert (
        run_medeval(
            ["report", str(tmp_path / "run"), "--output", str(tmp_path / "a"), "--no-figures"], capsys
        ).returncode
        == 0
    )
    assert not (tmp_path / "a" / "report.html").exists()
    proc = run_medeval(
        ["report", str(tmp_path / "run"), "--output", str(tmp_path / "b"), "--no-figures", "--html"], capsys
    )
    assert proc.returncode == 0 and (tmp_path / "b" / "report.html").is_file()
    assert f"browse the items in {tmp_path / 'b' / 'report.html'}" in proc.stdout
