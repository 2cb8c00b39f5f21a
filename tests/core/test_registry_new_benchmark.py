"""A fourth benchmark added as CONTRIBUTING.md says, with no edit to a generic module.

The example files are taken from CONTRIBUTING.md itself and written into a scratch folder that joins
the ``medeval_metrics`` package path, so the guide and the pack cannot drift apart. The toy benchmark
must then show in ``medeval list``, ``medeval breakdown``, ``medeval judge`` and ``medeval report``.
"""

from __future__ import annotations

import importlib
import json
import re
import sys

import pytest
import yaml

import medeval_metrics
from conftest import REPO_ROOT
from medeval_metrics import registry

DATE = "2026-03-01T10-00-00.000000"
DOCS = [  # kind "yesno": 1 of 2 exact; kind "number": 2 of 2
    {"question": "Is water wet?", "answer": "yes", "kind": "yesno"},
    {"question": "Is fire cold?", "answer": "no", "kind": "yesno"},
    {"question": "2+2?", "answer": "4", "kind": "number"},
    {"question": "3+3?", "answer": "6", "kind": "number"},
]
ANSWERS = ["Yes", "maybe", "4", " 6 "]


def example_files() -> dict[str, str]:
    """{path under medeval_metrics/: code} of CONTRIBUTING.md's example blocks."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n# medeval_metrics/(\S+)\n(.*?)```", text, re.DOTALL)
    return {path: code for path, code in blocks}


@pytest.fixture
def toyqa(tmp_path, monkeypatch):
    files = example_files()
    assert set(files) == {"toyqa/data.py", "toyqa/__init__.py", "toyqa/spec.py"}
    extension = tmp_path / "package_extension"
    for path, code in files.items():
        (extension / path).parent.mkdir(parents=True, exist_ok=True)
        (extension / path).write_text(code, encoding="utf-8")
    # the scratch folder is one more home of medeval_metrics' subpackages, as if toyqa/ sat in the checkout
    monkeypatch.setattr(medeval_metrics, "__path__", [*medeval_metrics.__path__, str(extension)])
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    importlib.invalidate_caches()
    registry.reload()
    yield
    for name in [m for m in sys.modules if m == "medeval_metrics.toyqa" or m.startswith("medeval_metrics.toyqa.")]:
        del sys.modules[name]
    registry.reload()


def write_run(folder, judged_answers=True):
    """A run of toyqa_open as lm-eval writes it: results and samples (``exact`` scored per item)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"samples_toyqa_open_{DATE}.jsonl").open("w") as handle:
        for i, (doc, answer) in enumerate(zip(DOCS, ANSWERS)):
            exact = float(answer.strip().lower() == doc["answer"])
            handle.write(json.dumps({"doc_id": i, "doc": doc, "resps": [[answer]], "filtered_resps": [answer],
                                     "filter": "none", "exact": exact}) + "\n")
    results = {"results": {"toyqa_open": {"alias": "toyqa_open", "exact,none": 0.75, "exact_stderr,none": 0.25}},
               "versions": {"toyqa_open": 1}, "n-shot": {"toyqa_open": 0},
               "n-samples": {"toyqa_open": {"original": 4, "effective": 4}},
               "config": {"model": "hf", "model_args": "pretrained=org/toy-model", "limit": None}}
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    return folder


def test_the_spec_is_found_and_lists(toyqa, capsys):
    from medeval_metrics.cli import main

    assert "medeval_metrics.toyqa.spec" in registry.spec_module_names()
    assert registry.benchmark_of("toyqa_open").name == "toyqa"
    assert [s.name for s in registry.benchmarks()][-1] == "toyqa"  # after the pack's own (listing_position)
    assert main(["list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("toyqa_open"))
    assert row.split()[:3] == ["toyqa_open", "generate", "4"]
    assert "public: example/toyqa" in row
    assert main(["list", "--markdown"]) == 0
    assert "| `toyqa_open` | generate_until | test | 4 | exact, judge_panel_score | Hub `example/toyqa`, or local file via `toyqa_path` |" in (
        capsys.readouterr().out)


def test_breakdown_of_its_samples(toyqa, tmp_path, capsys):
    from medeval_metrics.cli import main

    run = write_run(tmp_path / "run")
    assert main(["breakdown", str(run)]) == 0
    assert "**toyqa_open** by kind (filter `none`)" in capsys.readouterr().out
    kinds = json.loads((run / "medeval_breakdowns.json").read_text())["toyqa_open"]["none"]["kind"]
    assert kinds["yesno"]["exact"] == {"value": 0.5, "stderr": 0.5, "n": 2}
    assert kinds["number"]["exact"] == {"value": 1.0, "stderr": 0.0, "n": 2}


def test_judge_and_report(toyqa, tmp_path):
    """`medeval judge` finds the task through its spec and recomputes its metrics with the panel;
    `medeval report` names and publishes its metrics as the spec says and breaks it down from the
    judged samples."""
    from medeval_metrics.judge.cli import judge_output
    from medeval_metrics.judge.config import panel_from_obj
    from medeval_metrics.report import build_report
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    run = write_run(tmp_path / "run")
    with FakeJudgeServer() as server:
        panel = panel_from_obj({"judges": [{"name": "a", "backend": "local-chat-completions", "model": "m1",
                                            "base_url": server.url}], "cache": None}, "t")
        (entry,) = judge_output(run, panel, progress=False)
    assert entry["task"] == "toyqa_open" and entry["summary"]["exact"]["value"] == 0.75
    report = build_report([run], tmp_path / "report", figures=False)
    assert report["runs"][0]["results_file"].endswith("_judged.json")
    results_md = (tmp_path / "report" / "results.md").read_text()
    assert "| `toyqa_open` | 1 | none | 0 | Exact match (`exact`) | 0.7500 |" in results_md
    index = yaml.safe_load((tmp_path / "report" / "model_index.yaml").read_text())["model-index"][0]["results"][0]
    assert index["dataset"]["type"] == "example/toyqa" and index["dataset"]["name"] == "ToyQA (toyqa_open)"
    assert [(m["type"], m["value"]) for m in index["metrics"]] == [("exact_match", 0.75)]
    kinds = json.loads((tmp_path / "report" / "breakdowns.json").read_text())["org/toy-model"]["toyqa_open"]["none"]["kind"]
    assert kinds["yesno"]["exact"]["value"] == 0.5 and kinds["number"]["exact"]["n"] == 2


def test_after_the_fixture_the_toy_benchmark_is_gone():
    assert registry.benchmark_of("toyqa_open") is None
    assert [s.name for s in registry.benchmarks()] == ["emsqa", "medicationqa", "emrqa"]
