"""A fourth benchmark is added by writing its three folders, ``tasks/<name>/``, ``medeval_metrics/<name>/`` and
``tests/<name>/``, as CONTRIBUTING.md says, with no edit to a generic module.

The example's code is taken from CONTRIBUTING.md itself (so the guide and the pack cannot drift apart) and,
with a task YAML, a README and a test, written into the three folders of a scratch copy of the checkout. The
shared checks then pass in that copy (``TOUCHED`` lists every file that took: the three folders, and what
outside them still has to be regenerated or edited by hand), and the toy benchmark shows in
``medeval list``, ``medeval breakdown``, ``medeval judge`` and ``medeval report``.
"""

from __future__ import annotations

import filecmp
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT

import medeval_metrics
from medeval_metrics import registry

THREE_FOLDERS = ("medeval_metrics/toyqa/", "tasks/toyqa/", "tests/toyqa/")
TOY_FILES = {  # beside CONTRIBUTING.md's example code: what the benchmark's folders hold besides
    "tasks/toyqa/toyqa_open.yaml": """\
task: toyqa_open
tag: medeval
dataset_path: json
dataset_kwargs:
  data_files: toyqa.json
test_split: test
output_type: generate_until
doc_to_text: "{{question}}"
doc_to_target: answer
filter_list:
  - name: none
    filter:
      - function: !function medeval_metrics.judge.filter.JudgeFilter
        rubric: medeval_metrics.toyqa.RUBRIC
        question_field: question
        reference_field: answer
process_results: !function medeval_metrics.toyqa.process_results
metric_list:
  - metric: exact
    aggregation: mean
    higher_is_better: true
  - metric: judge_panel_score
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1
""",
    "tasks/toyqa/README.md": "# ToyQA\n\nOpen questions with short answers, exact match and a judge panel.\n",
    "tests/toyqa/test_toyqa_scoring.py": """\
import pytest

from medeval_metrics import toyqa


@pytest.mark.parametrize("output, exact", [("Yes", 1.0), (" yes ", 1.0), ("Yes, it is.", 0.0), ("", 0.0)])
def test_exact_match(output, exact):
    assert toyqa.process_results({"answer": "yes"}, [output])["exact"] == exact
""",
}
# Files outside the three folders that adding a benchmark still has to change (issue 19 removes the need:
# manifest.json generated and never committed, the README's task table generated, the module map and the
# BibTeX entry out of README.md). When one goes, drop it here: the test fails until this list is exact.
TOUCHED_OUTSIDE = {
    "medeval_metrics/manifest.json": "python -m medeval_metrics.manifest --write",
    "README.md": "scripts/readme_tasks_table.py --write; the BibTeX entry",
    "CONTRIBUTING.md": "a module-map line per module",
    "pyproject.toml": "the package named in the import contracts (the benchmarks layer, the tasks' runtime)",
}
SHARED_CHECKS = [
    "tests/core/test_registry.py",
    "tests/core/test_packaging.py",
    "tests/core/test_contributing_module_map.py",
    "tests/core/test_report_readme_table.py",
    "tests/core/test_cli_list.py",
    "tests/core/test_import_layers.py",  # the new package named in the contracts holds to them
    "tests/core/test_settings.py",
    "tests/toyqa",
]


@pytest.mark.e2e  # pip builds the scratch copy's wheel in a subprocess
def test_the_wheel_ships_the_new_benchmark_without_a_package_list_entry(scratch, tmp_path):
    source = tmp_path / "src"  # pip builds in the tree (build/, *.egg-info): not in the scratch copy itself
    shutil.copytree(scratch, source, ignore=IGNORED)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    names = set(zipfile.ZipFile(next(tmp_path.glob("medeval_metrics-*.whl"))).namelist())
    assert {
        "medeval_metrics/toyqa/__init__.py",
        "medeval_metrics/toyqa/spec.py",
        "medeval_metrics/toyqa/data.py",
        "medeval_metrics/tasks/toyqa/toyqa_open.yaml",
        "medeval_metrics/tasks/toyqa/README.md",
    } <= names
    assert not any(name.startswith(("medeval_metrics/tests/", "tests/")) for name in names)


DATE = "2026-03-01T10-00-00.000000"
DOCS = [  # kind "yesno": 1 of 2 exact; kind "number": 2 of 2
    {"question": "Is water wet?", "answer": "yes", "kind": "yesno"},
    {"question": "Is fire cold?", "answer": "no", "kind": "yesno"},
    {"question": "2+2?", "answer": "4", "kind": "number"},
    {"question": "3+3?", "answer": "6", "kind": "number"},
]
ANSWERS = ["Yes", "maybe", "4", " 6 "]


def example_files() -> dict[str, str]:
    """{path in the checkout: code} of CONTRIBUTING.md's example blocks."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n# (medeval_metrics/\S+)\n(.*?)```", text, re.DOTALL)
    return {path: code for path, code in blocks}


IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*cache*", ".hypothesis"
)


def _readme_edits(readme: str) -> str:
    """What README.md still needs by hand for a new benchmark: its BibTeX entry."""
    return readme + "\n```bibtex\n@misc{doe2026toyqa,\n  title = {ToyQA},\n  year = {2026}\n}\n```\n"


def _module_map_edits(guide: str) -> str:
    """What CONTRIBUTING.md still needs by hand for a new benchmark: its modules in the module map."""
    modules = "".join(f"| `toyqa/{name}` | ToyQA |\n" for name in ("__init__.py", "data.py", "spec.py"))
    head, rest = guide.split("\n## Module map\n", 1)
    table_end = rest.find("\n\n", rest.index("| `"))  # the map may be the guide's last section
    table_end = len(rest.rstrip("\n")) if table_end < 0 else table_end
    return head + "\n## Module map\n" + rest[:table_end] + "\n" + modules.rstrip("\n") + rest[table_end:]


def _pyproject_edits(pyproject: str) -> str:
    """What pyproject.toml needs by hand for a new benchmark: its package in the benchmarks layer and in the runtime
    the tools are kept from (CONTRIBUTING.md, step 3)."""
    layer = '"medeval_metrics.emsqa | medeval_metrics.medicationqa | medeval_metrics.emrqa"'
    assert layer in pyproject
    pyproject = pyproject.replace(layer, layer[:-1] + ' | medeval_metrics.toyqa"')
    runtime = '  "medeval_metrics.emrqa",\n'
    return pyproject.replace(runtime, runtime + '  "medeval_metrics.toyqa",\n', 1)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A scratch copy of the checkout with the toy benchmark added the contributor's way."""
    root = tmp_path_factory.mktemp("toy-checkout") / "repo"
    shutil.copytree(REPO_ROOT, root, ignore=IGNORED)
    files = {**example_files(), **TOY_FILES}
    assert set(example_files()) == {
        "medeval_metrics/toyqa/data.py",
        "medeval_metrics/toyqa/__init__.py",
        "medeval_metrics/toyqa/spec.py",
    }
    for path, code in files.items():
        assert path.startswith(THREE_FOLDERS), path
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(code, encoding="utf-8")
    return root


@pytest.fixture
def toyqa(scratch, monkeypatch):
    # the scratch package folder is one more home of medeval_metrics' subpackages: toyqa/ is found there,
    # every other subpackage still in this checkout (listed first)
    monkeypatch.setattr(medeval_metrics, "__path__", [*medeval_metrics.__path__, str(scratch / "medeval_metrics")])
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    importlib.invalidate_caches()
    registry.reload()
    yield
    for name in [m for m in sys.modules if m == "medeval_metrics.toyqa" or m.startswith("medeval_metrics.toyqa.")]:
        del sys.modules[name]
    registry.reload()


def _changed_files(before: Path, after: Path) -> set[str]:
    """Paths (relative) that differ between two trees, or exist in only one."""
    changed = set()
    for path in after.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and ".pytest_cache" not in path.parts:
            relative = path.relative_to(after)
            if not (before / relative).is_file() or not filecmp.cmp(before / relative, path, shallow=False):
                changed.add(relative.as_posix())
    return changed


@pytest.mark.e2e  # the shared checks in a subprocess, on the scratch copy
def test_a_benchmark_is_its_three_folders_and_the_shared_checks_pass(scratch):
    env = {**os.environ, "PYTHONPATH": str(scratch)}
    run = [sys.executable, "-m"]
    subprocess.run([*run, "medeval_metrics.manifest", "--write"], cwd=scratch, env=env, check=True, capture_output=True)
    readme = scratch / "README.md"
    readme.write_text(_readme_edits(readme.read_text(encoding="utf-8")), encoding="utf-8")
    guide = scratch / "CONTRIBUTING.md"
    guide.write_text(_module_map_edits(guide.read_text(encoding="utf-8")), encoding="utf-8")
    pyproject = scratch / "pyproject.toml"
    pyproject.write_text(_pyproject_edits(pyproject.read_text(encoding="utf-8")), encoding="utf-8")
    subprocess.run(
        [sys.executable, "scripts/readme_tasks_table.py", "--write"],
        cwd=scratch,
        env=env,
        check=True,
        capture_output=True,
    )

    touched = _changed_files(REPO_ROOT, scratch)
    inside = {p for p in touched if p.startswith(THREE_FOLDERS)}
    assert inside == set(example_files()) | set(TOY_FILES)
    assert touched - inside == set(TOUCHED_OUTSIDE), "files outside the three folders that adding a benchmark changed"

    # an editable install of this checkout would shadow the scratch copy's package folder: drop its finder
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in getattr(f, '__module__', '')];"
        " import medeval_metrics, pytest; assert medeval_metrics.__file__.startswith(sys.argv[1]), medeval_metrics.__file__;"
        " sys.exit(pytest.main(sys.argv[2:]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(scratch), "-q", "-p", "no:cacheprovider", "-m", "not e2e", *SHARED_CHECKS],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b[1-9]\d* passed", proc.stdout) and " failed" not in proc.stdout


def write_run(folder, judged_answers=True):
    """A run of toyqa_open as lm-eval writes it: results and samples (``exact`` scored per item)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"samples_toyqa_open_{DATE}.jsonl").open("w") as handle:
        for i, (doc, answer) in enumerate(zip(DOCS, ANSWERS)):
            exact = float(answer.strip().lower() == doc["answer"])
            handle.write(
                json.dumps(
                    {
                        "doc_id": i,
                        "doc": doc,
                        "resps": [[answer]],
                        "filtered_resps": [answer],
                        "filter": "none",
                        "exact": exact,
                    }
                )
                + "\n"
            )
    results = {
        "results": {"toyqa_open": {"alias": "toyqa_open", "exact,none": 0.75, "exact_stderr,none": 0.25}},
        "versions": {"toyqa_open": 1},
        "n-shot": {"toyqa_open": 0},
        "n-samples": {"toyqa_open": {"original": 4, "effective": 4}},
        "config": {"model": "hf", "model_args": "pretrained=org/toy-model", "limit": None},
    }
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
    assert (
        "| `toyqa_open` | generate_until | test | 4 | exact, judge_panel_score | Hub `example/toyqa`, or local file via `toyqa_path` |"
        in (capsys.readouterr().out)
    )


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
        panel = panel_from_obj(
            {
                "judges": [{"name": "a", "backend": "local-chat-completions", "model": "m1", "base_url": server.url}],
                "cache": None,
            },
            "t",
        )
        (entry,) = judge_output(run, panel, progress=False)
    assert entry["task"] == "toyqa_open" and entry["summary"]["exact"]["value"] == 0.75
    report = build_report([run], tmp_path / "report", figures=False)
    assert report["runs"][0]["results_file"].endswith("_judged.json")
    results_md = (tmp_path / "report" / "results.md").read_text()
    assert "| `toyqa_open` | 1 | none | 0 | Exact match (`exact`) | 0.7500 |" in results_md
    index = yaml.safe_load((tmp_path / "report" / "model_index.yaml").read_text())["model-index"][0]["results"][0]
    assert index["dataset"]["type"] == "example/toyqa" and index["dataset"]["name"] == "ToyQA (toyqa_open)"
    assert [(m["type"], m["value"]) for m in index["metrics"]] == [("exact_match", 0.75)]
    kinds = json.loads((tmp_path / "report" / "breakdowns.json").read_text())["org/toy-model"]["toyqa_open"]["none"][
        "kind"
    ]
    assert kinds["yesno"]["exact"]["value"] == 0.5 and kinds["number"]["exact"]["n"] == 2


def test_after_the_fixture_the_toy_benchmark_is_gone():
    assert registry.benchmark_of("toyqa_open") is None
    assert [s.name for s in registry.benchmarks()] == ["emsqa", "medicationqa", "emrqa"]
