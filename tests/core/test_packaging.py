"""The pack as users install and find it: wheel contents, task index, manifest, CLI, opt-in discovery."""

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import EMSQA_SYNTHETIC, REPO_ROOT, run_medeval

import medeval_metrics
from medeval_metrics.manifest import build_manifest


class _TaskYamlLoader(yaml.SafeLoader):
    """Reads task YAMLs without resolving `!function` (as lm-eval's index does)."""


_TaskYamlLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def read_task_yamls():
    """{task or group name: merged config} for every YAML of the pack, following `include:`."""
    root = Path(medeval_metrics.tasks_path())
    configs = {}
    for path in root.rglob("*.yaml"):
        config = yaml.load(path.read_text(), Loader=_TaskYamlLoader)
        while "include" in config:
            includes = config.pop("include")
            base = {}
            for include in includes if isinstance(includes, list) else [includes]:  # lm-eval merges a list in order
                base.update(yaml.load((path.parent / include).read_text(), Loader=_TaskYamlLoader))
            config = {**base, **config}
        configs[config["group"] if "group" in config else config["task"]] = config
    return configs


@pytest.mark.e2e  # builds the wheel (pip in a subprocess), once per session
def test_wheel_ships_every_task_file(built_wheel):
    wheel = built_wheel
    names = set(zipfile.ZipFile(wheel).namelist())
    source_files = [p for p in (REPO_ROOT / "tasks").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert source_files
    for path in source_files:
        assert f"medeval_metrics/tasks/{path.relative_to(REPO_ROOT / 'tasks').as_posix()}" in names
    assert "medeval_metrics/manifest.json" in names
    # Every file of the package's source tree (code, evaluate modules' READMEs, JSON) is shipped.
    package_root = REPO_ROOT / "medeval_metrics"
    package_files = [p for p in package_root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    missing = [
        p.relative_to(REPO_ROOT).as_posix() for p in package_files if p.relative_to(REPO_ROOT).as_posix() not in names
    ]
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[lm_eval.tasks]" in text and "medeval = medeval_metrics.tasks" in text
    assert "medeval = medeval_metrics.cli:main" in text


def test_manifest_matches_the_task_yamls():
    configs = read_task_yamls()
    manifest = build_manifest()
    listed = {t["task"] for t in manifest["tasks"]}
    yaml_tasks = {name for name, c in configs.items() if "task" in c and "group" not in c}
    assert listed == yaml_tasks
    for task in manifest["tasks"]:
        config = configs[task["task"]]
        assert config["metadata"]["version"] == task["version"], task["task"]
        assert config.get("output_type", "generate_until") == task["output_type"], task["task"]
        assert [m["metric"] for m in config["metric_list"]] == task["metrics"], task["task"]
        assert config["test_split"] == task["split"], task["task"]
        assert task["source"] in manifest["benchmarks"][task["benchmark"]]["sources"]
    for group in manifest["groups"]:
        assert configs[group["group"]]["task"] == group["tasks"]


def test_every_task_has_a_version_and_the_medeval_tag():
    for name, config in read_task_yamls().items():
        assert "version" in config.get("metadata", {}), name
        if "group" not in config:
            assert "medeval" in ([config["tag"]] if isinstance(config.get("tag"), str) else config.get("tag", [])), name


def test_lm_eval_indexes_the_pack_quickly_and_completely():
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path())
    names = set(manager.all_tasks)
    for task in build_manifest()["tasks"]:
        assert task["task"] in names
    assert {"emsqa", "emsqa_public_variants", "medeval"} <= names


def test_every_emsqa_task_builds(shared_data):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(
        include_defaults=False,
        include_path=medeval_metrics.tasks_path(),
        metadata={
            "emsqa_public_path": str(shared_data / "emsqa"),
            "emsqa_private_path": str(shared_data / "emsqa" / "test_open.json"),
        },
    )
    loaded = manager.load(["emsqa"])
    # every EMSQA task without retrieval (those are built in tests/emsqa/test_emsqa_rag_e2e.py: they need the knowledge base)
    expected = {t["task"] for t in build_manifest()["tasks"] if t["benchmark"] == "emsqa" and not t.get("also_reads")}
    assert set(loaded["tasks"]) == expected
    assert {"emsqa", "emsqa_public_variants", "emsqa_private_variants"} <= set(loaded["groups"])
    assert len(loaded["tasks"]["emsqa_public"].eval_docs) == 3721
    assert len(loaded["tasks"]["emsqa_private_mc"].eval_docs) == 3721


def test_cli_lists_tasks_and_prints_the_tasks_folder(capsys):
    listing = run_medeval(["list"], capsys)
    assert listing.returncode == 0
    assert "emsqa_public" in listing.stdout and "3,721" in listing.stdout and "Xueren/EMS-MCQA" in listing.stdout
    path = run_medeval(["tasks-path"], capsys).stdout.strip()
    assert Path(path, "emsqa", "emsqa_public.yaml").is_file()


def test_cli_reports_data_errors_without_a_traceback(tmp_path, capsys):
    # the pre-flight check stops the run before lm-eval starts: no evaluation, so in this process
    proc = run_medeval(
        [
            "run",
            "--tasks",
            "emsqa_private",
            "--model",
            "medeval-scripted",
            "--metadata",
            json.dumps({"emsqa_private_path": str(tmp_path / "missing.json")}),
        ],
        capsys,
    )
    assert proc.returncode == 2
    assert "medeval: error:" in proc.stderr and "missing.json, which does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_opt_in_copy_is_indexed_and_reversible(tmp_path):
    from lm_eval.tasks import TaskManager

    from medeval_metrics import lm_eval_link

    target = tmp_path / "lm_eval_tasks"
    target.mkdir()
    (target / "other").mkdir()
    assert lm_eval_link.status(target)["enabled"] is False
    folder = lm_eval_link.enable(target)
    assert lm_eval_link.status(target) == {
        "enabled": True,
        "folder": str(folder),
        "version": medeval_metrics.__version__,
        "current": True,
    }
    # lm-eval's own index scans its tasks folder like this one.
    assert "emsqa_public" in TaskManager(include_defaults=False, include_path=str(target)).all_tasks
    lm_eval_link.enable(target)  # idempotent
    assert lm_eval_link.disable(target) is True
    assert not folder.exists() and (target / "other").is_dir()
    assert lm_eval_link.disable(target) is False


def test_opt_in_never_overwrites_a_foreign_folder(tmp_path):
    from medeval_metrics import lm_eval_link

    (tmp_path / "medeval").mkdir()
    with pytest.raises(RuntimeError, match="not made by medeval"):
        lm_eval_link.enable(tmp_path)
    with pytest.raises(RuntimeError, match="not made by medeval"):
        lm_eval_link.disable(tmp_path)


@pytest.mark.e2e  # a fresh interpreter (subprocess) is the point
def test_import_is_cheap():
    code = "import sys, medeval_metrics; print(sorted(m for m in ('torch','datasets','lm_eval','transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_readme_task_table_is_generated_from_the_manifest():
    from medeval_metrics.manifest import tasks_table

    readme = (REPO_ROOT / "README.md").read_text()
    start, end = "<!-- medeval:tasks-table:start -->\n", "<!-- medeval:tasks-table:end -->"
    table = readme[readme.index(start) + len(start) : readme.index(end)].strip()
    assert table == tasks_table(build_manifest(), markdown=True), "regenerate with `medeval list --markdown`"


@pytest.mark.e2e  # an lm-eval run (in this process), indexing lm-eval's own tasks too
def test_medeval_run_keeps_the_users_own_include_path(tmp_path, capsys):
    """The pack's tasks are added next to a user's --include_path, not instead of it."""
    own = tmp_path / "own_tasks"
    own.mkdir()
    (own / "data.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n')
    (own / "own_task.yaml").write_text(
        "task: own_arith\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {own / 'data.jsonl'}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: '{{question}}'\ndoc_to_target: answer\n"
        "metric_list:\n  - metric: exact_match\nmetadata:\n  version: 1\n"
    )
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {"2+2?": "4"}, "default": '["a"]'}))
    proc = run_medeval(
        [
            "run",
            "--include_path",
            str(own),
            "--tasks",
            "own_arith,emsqa_private",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={table}",
            "--metadata",
            json.dumps({"emsqa_private_path": str(EMSQA_SYNTHETIC)}),
        ],
        capsys,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "own_arith" in proc.stdout and "emsqa_private" in proc.stdout
    # Gold {a} on 3 of the 12 synthetic items: acc = 3/12. F1 adds the multi-answer items holding a:
    # {a,b,d} 0.5, {a,c} 2/3, {a,b,c} 0.5 twice -> (3 + 0.5 + 2/3 + 0.5 + 0.5) / 12 = 0.4306.
    assert re.search(r"\|emsqa_private\s*\|[^\n]*\|acc\s*\|↑\s*\|0\.2500\|", proc.stdout), proc.stdout
    assert re.search(r"\|\s*\|\s*\|flexible-extract\|\s*0\|f1\s*\|↑\s*\|0\.4306\|", proc.stdout), proc.stdout
