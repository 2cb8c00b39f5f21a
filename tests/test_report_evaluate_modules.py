"""The pack's `evaluate` modules: loaded offline by path, hand-computed values, and exactly the
values the lm-eval tasks report on the same inputs."""

import json
import socket
import subprocess
import sys
import zipfile

import pytest

from conftest import FIXTURES, REPO_ROOT

from medeval_metrics import evaluate_modules

SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
ITEMS = json.loads(SYNTHETIC.read_text())


@pytest.fixture(scope="module")
def no_network():
    """Any attempt to open a connection fails the test (evaluate must not reach the Hub)."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:2]}")

    patcher = pytest.MonkeyPatch()
    patcher.setattr(socket.socket, "connect", refuse)
    patcher.setattr(socket, "create_connection", refuse)
    yield
    patcher.undo()


@pytest.fixture(scope="module")
def modules(no_network):
    import evaluate

    return {name: evaluate.load(evaluate_modules.path(name)) for name in evaluate_modules.available()}


# (module, result key, predictions, references, expected) -- values computed by hand.
CASES = [
    ("emsqa_set_accuracy", "accuracy", [["a"], ["a", "c"], ["c", "a"]], [["a"], ["a", "c"], ["a", "c"]], 1.0),
    ("emsqa_set_accuracy", "accuracy", [["a"], ["a", "b"], []], [["a", "b"], ["a", "b"], ["c"]], 1 / 3),
    ("emsqa_set_accuracy", "accuracy", [["B"]], [["b"]], 1.0),  # letters are case-insensitive
    ("emsqa_set_f1", "f1", [["a"], ["a", "c"], []], [["a", "b"], ["a", "c"], ["b"]], (2 / 3 + 1 + 0) / 3),
    ("emsqa_set_f1", "f1", [["a", "b", "c"]], [["a"]], 0.5),
    ("emsqa_set_f1", "f1", [["d"]], [["a", "b"]], 0.0),
]


def test_the_shipped_modules_are_listed():
    assert evaluate_modules.available() == ["emsqa_set_accuracy", "emsqa_set_f1"]
    with pytest.raises(KeyError, match="available: emsqa_set_accuracy, emsqa_set_f1"):
        evaluate_modules.path("emrqa_unknown")


@pytest.mark.parametrize("name, key, predictions, references, expected", CASES)
def test_hand_computed_values(modules, name, key, predictions, references, expected):
    result = modules[name].compute(predictions=predictions, references=references)
    assert result[key] == pytest.approx(expected)
    assert set(result) == {key, f"{key}_stderr"}


def test_empty_input_is_an_error(modules):
    with pytest.raises(ValueError):
        modules["emsqa_set_f1"].compute(predictions=[], references=[])


def test_load_by_name_helper_works_offline(no_network):
    metric = evaluate_modules.load("emsqa_set_accuracy")
    assert metric.compute(predictions=[["a"]], references=[["b"]])["accuracy"] == 0.0


def test_modules_equal_what_the_task_reports(modules):
    """Run emsqa_private through lm-eval (scripted answers of every kind the extractor handles, and
    an unparseable one), then feed the extracted answers to the modules."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.emsqa import extract_answer
    from medeval_metrics.testing.scripted import ScriptedLM

    def gold(item):
        return [item["answer"]] if isinstance(item["answer"], str) else item["answer"]

    styles = [
        lambda g: json.dumps(g), lambda g: f"The answer is ({g[0].upper()})", lambda g: "A and B",
        lambda g: '{"answer": ["a", "b", "d"]}', lambda g: "I am not sure.", lambda g: f"**{g[-1].upper()}**",
    ]
    answers = {item["question"]: styles[i % len(styles)](gold(item)) for i, item in enumerate(ITEMS)}
    manager = TaskManager(include_defaults=False, include_path=tasks_path(), metadata={"emsqa_private_path": str(SYNTHETIC)})
    results = lm_eval.simple_evaluate(
        model=ScriptedLM({"key": "question", "generate": answers}), tasks=["emsqa_private"], task_manager=manager, log_samples=True
    )
    reported = results["results"]["emsqa_private"]
    samples = results["samples"]["emsqa_private"]
    predictions = [extract_answer(s["resps"][0][0], s["doc"]["letters"]) or [] for s in samples]
    references = [s["doc"]["gold"] for s in samples]
    assert 0 < reported["acc,extract_answer"] < reported["f1,extract_answer"] < 1
    accuracy = modules["emsqa_set_accuracy"].compute(predictions=predictions, references=references)
    f1 = modules["emsqa_set_f1"].compute(predictions=predictions, references=references)
    assert accuracy["accuracy"] == reported["acc,extract_answer"]
    assert f1["f1"] == reported["f1,extract_answer"]
    assert accuracy["accuracy_stderr"] == pytest.approx(reported["acc_stderr,extract_answer"], rel=1e-12)
    assert f1["f1_stderr"] == pytest.approx(reported["f1_stderr,extract_answer"], rel=1e-12)


def test_wheel_ships_the_report_and_the_evaluate_modules(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True, capture_output=True,
    )
    names = set(zipfile.ZipFile(next(tmp_path.glob("medeval_metrics-*.whl"))).namelist())
    for name in evaluate_modules.available():
        assert f"medeval_metrics/evaluate_modules/{name}/{name}.py" in names
        assert f"medeval_metrics/evaluate_modules/{name}/README.md" in names
    assert "medeval_metrics/evaluate_modules/base.py" in names
    assert "medeval_metrics/report/model_card.py" in names
    metadata = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(next(tmp_path.glob("medeval_metrics-*.whl"))).read(metadata).decode()
    assert "Provides-Extra: report" in text and "matplotlib" in text


def test_the_pattern_for_a_metric_with_an_extra_input_column(tmp_path, no_network):
    """What an emrQA logical-form module looks like: a third column reaches the per-item scorer."""
    import evaluate

    folder = tmp_path / "lf_demo"
    folder.mkdir()
    (folder / "lf_demo.py").write_text(
        "import datasets\n"
        "import medeval_metrics.evaluate_modules.base as base\n\n\n"
        "class LfDemo(base.PerItemMeanMetric):\n"
        "    result_key = 'lf_acc'\n"
        "    features = datasets.Features({'predictions': datasets.Value('string'), 'references': datasets.Value('string'),\n"
        "                                  'templates': datasets.Value('string')})\n"
        "    per_item = staticmethod(lambda p, r, templates: float(p.strip() == r and templates.startswith('MedicationEvent')))\n"
    )
    metric = evaluate.load(str(folder))
    assert type(metric).__name__ == "LfDemo"
    result = metric.compute(predictions=["MedicationEvent(x)", "MedicationEvent(y)", "LabEvent(z) "],
                            references=["MedicationEvent(x)", "MedicationEvent(x)", "LabEvent(z)"],
                            templates=["MedicationEvent(|m|)", "MedicationEvent(|m|)", "LabEvent(|l|)"])
    assert result["lf_acc"] == pytest.approx(1 / 3)
