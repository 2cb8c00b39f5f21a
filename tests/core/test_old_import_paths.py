"""The import paths that moved in issue 19 still work for users' code and task YAMLs: each old name is the
same module object as the new one (not a copy), and lm-eval's ``!function`` resolves through it."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

MOVED = {
    "medeval_metrics.retrieval": "medeval_metrics.emsqa.retrieval",
    "medeval_metrics.retrieval.index": "medeval_metrics.emsqa.retrieval.index",
    "medeval_metrics.retrieval.corpus": "medeval_metrics.emsqa.retrieval.corpus",
    "medeval_metrics.retrieval.retrievers": "medeval_metrics.emsqa.retrieval.retrievers",
    "medeval_metrics.retrieval.cache": "medeval_metrics.emsqa.retrieval.cache",
    "medeval_metrics.retrieval.precomputed": "medeval_metrics.emsqa.retrieval.precomputed",
    "medeval_metrics.testing.emrqa_synthetic": "medeval_metrics.emrqa.synthetic",
    "medeval_metrics.evaluate_modules.emrqa_inputs": "medeval_metrics.emrqa.evaluate_modules.inputs",
}


@pytest.mark.parametrize("old, new", MOVED.items())
def test_the_old_module_path_is_the_new_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_every_retrieval_submodule_has_its_old_name():
    new = importlib.import_module("medeval_metrics.emsqa.retrieval")
    names = {f"medeval_metrics.emsqa.retrieval.{m.name}" for m in pkgutil.iter_modules(new.__path__)}
    assert names == {n for n in MOVED.values() if n.startswith("medeval_metrics.emsqa.retrieval.")}


def test_a_task_yaml_function_on_an_old_path_resolves_to_the_same_function(tmp_path):
    from lm_eval.tasks._yaml_loader import load_yaml  # what lm-eval 0.4.13 reads task YAMLs with

    from medeval_metrics.emrqa.synthetic import write_synthetic
    from medeval_metrics.emsqa.retrieval import open_index, read_retrievals

    (tmp_path / "user_task.yaml").write_text(
        "task: user_task\n"
        "build: !function medeval_metrics.retrieval.open_index\n"
        "read: !function medeval_metrics.retrieval.precomputed.read_retrievals\n"
        "notes: !function medeval_metrics.testing.emrqa_synthetic.write_synthetic\n"
    )
    config = load_yaml(tmp_path / "user_task.yaml")
    assert config["build"] is open_index and config["read"] is read_retrievals and config["notes"] is write_synthetic


@pytest.mark.e2e  # a fresh interpreter: the old names imported first, before anything loaded the new ones
def test_old_paths_imported_first_in_a_fresh_process_load_no_second_copy():
    code = (
        "import sys\n"
        "from medeval_metrics.retrieval.retrievers import BM25Retriever\n"
        "import medeval_metrics.testing.emrqa_synthetic as old_synthetic\n"
        "import medeval_metrics.emsqa.retrieval.retrievers as retrievers, medeval_metrics.emrqa.synthetic as synthetic\n"
        "assert BM25Retriever is retrievers.BM25Retriever and old_synthetic is synthetic\n"
        "copies = [n for n, m in sys.modules.items() if getattr(m, '__file__', None) == retrievers.__file__]\n"
        "assert sorted(copies) == ['medeval_metrics.emsqa.retrieval.retrievers', 'medeval_metrics.retrieval.retrievers']\n"
        "assert sys.modules[copies[0]] is sys.modules[copies[1]]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
