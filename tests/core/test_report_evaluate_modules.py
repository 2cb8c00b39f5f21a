"""The pack's `evaluate` modules: loaded offline by path, hand-computed values, and exactly the
values the lm-eval tasks report on the same inputs."""

import json
import re
import socket
import traceback
import zipfile
from functools import partial
from pathlib import Path

import pytest
from conftest import EMSQA_ITEMS as ITEMS
from conftest import EMSQA_SYNTHETIC as SYNTHETIC
from conftest import emsqa_gold

import medeval_metrics
from medeval_metrics import evaluate_modules


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
    assert evaluate_modules.available() == [
        "emrqa_evidence_f1",
        "emrqa_logical_form_accuracy",
        "emrqa_relaxed_em",
        "emrqa_strict_em",
        "emrqa_template_accuracy",
        "emsqa_set_accuracy",
        "emsqa_set_f1",
    ]
    with pytest.raises(KeyError, match="available: emrqa_evidence_f1, .*, emsqa_set_f1"):
        evaluate_modules.path("emrqa_unknown")


def test_each_module_lives_in_its_benchmarks_package():
    for name in evaluate_modules.available():
        folder = Path(evaluate_modules.path(name))
        assert folder.parent.name == "evaluate_modules" and folder.parent.parent.name == name.split("_")[0], folder


def test_modules_are_found_in_any_package_and_a_name_twice_is_an_error(tmp_path, monkeypatch):
    for package, name in [("toyqa", "toyqa_exact"), ("other", "other_f1"), ("other", "not_a_module")]:
        folder = tmp_path / package / "evaluate_modules" / name
        folder.mkdir(parents=True)
        if name != "not_a_module":  # a folder without <name>/<name>.py is not a module
            (folder / f"{name}.py").write_text("")
    (tmp_path / "evaluate_modules").mkdir()  # the shared package itself holds no module folders
    monkeypatch.setattr(evaluate_modules.resources, "files", lambda package: tmp_path)
    assert evaluate_modules.available() == ["other_f1", "toyqa_exact"]
    assert evaluate_modules.path("toyqa_exact") == str(tmp_path / "toyqa" / "evaluate_modules" / "toyqa_exact")
    (tmp_path / "other" / "evaluate_modules" / "toyqa_exact").mkdir()
    (tmp_path / "other" / "evaluate_modules" / "toyqa_exact" / "toyqa_exact.py").write_text("")
    with pytest.raises(ValueError, match="evaluate module 'toyqa_exact' is in both .* rename one"):
        evaluate_modules.available()


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


@pytest.mark.e2e  # an lm-eval run (scripted backend, in this process)
def test_modules_equal_what_the_task_reports(modules):
    """Run emsqa_private through lm-eval (scripted answers of every kind the extractor handles, and
    an unparseable one), then feed the extracted answers to the modules."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.emsqa import extract_answer
    from medeval_metrics.testing.scripted import ScriptedLM

    styles = [
        lambda g: json.dumps(g),
        lambda g: f"The answer is ({g[0].upper()})",
        lambda g: "A and B",
        lambda g: '{"answer": ["a", "b", "d"]}',
        lambda g: "I am not sure.",
        lambda g: f"**{g[-1].upper()}**",
    ]
    answers = {item["question"]: styles[i % len(styles)](emsqa_gold(item)) for i, item in enumerate(ITEMS)}
    manager = TaskManager(
        include_defaults=False, include_path=tasks_path(), metadata={"emsqa_private_path": str(SYNTHETIC)}
    )
    results = lm_eval.simple_evaluate(
        model=ScriptedLM({"key": "question", "generate": answers}),
        tasks=["emsqa_private"],
        task_manager=manager,
        log_samples=True,
    )
    reported = results["results"]["emsqa_private"]
    # lm-eval logs each doc once per filter: the headline reading's (flexible-extract) answers, as its filter read them
    samples = [s for s in results["samples"]["emsqa_private"] if s["filter"] == "flexible-extract"]
    assert len(samples) == len(ITEMS)
    predictions = [s["filtered_resps"][0] or [] for s in samples]
    # the filter's reading is the pack's reader's wherever the reply is not the requested JSON list
    assert [p for p, s in zip(predictions, samples) if not s["resps"][0][0].startswith("[")] == [
        extract_answer(s["resps"][0][0], s["doc"]["letters"]) or []
        for s in samples
        if not s["resps"][0][0].startswith("[")
    ]
    references = [s["doc"]["gold"] for s in samples]
    assert 0 < reported["acc,flexible-extract"] < reported["f1,flexible-extract"] < 1
    accuracy = modules["emsqa_set_accuracy"].compute(predictions=predictions, references=references)
    f1 = modules["emsqa_set_f1"].compute(predictions=predictions, references=references)
    assert accuracy["accuracy"] == reported["acc,flexible-extract"]
    assert f1["f1"] == reported["f1,flexible-extract"]
    assert accuracy["accuracy_stderr"] == pytest.approx(reported["acc_stderr,flexible-extract"], rel=1e-12)
    assert f1["f1_stderr"] == pytest.approx(reported["f1_stderr,flexible-extract"], rel=1e-12)


@pytest.mark.e2e  # builds the wheel (pip in a subprocess), once per session
def test_wheel_ships_the_report_and_the_evaluate_modules(built_wheel):
    names = set(zipfile.ZipFile(built_wheel).namelist())
    for name in evaluate_modules.available():
        # medeval_metrics/<benchmark>/evaluate_modules/<name>, whether the pack is installed or a checkout
        path = Path(evaluate_modules.path(name))
        folder = path.relative_to(Path(medeval_metrics.__file__).parent.parent).as_posix()
        assert f"{folder}/{name}.py" in names
        assert f"{folder}/README.md" in names
    assert "medeval_metrics/evaluate_modules/base.py" in names
    assert "medeval_metrics/emrqa/evaluate_modules/inputs.py" in names
    assert "medeval_metrics/emrqa/metrics.py" in names  # the emrQA modules' scorers
    assert "medeval_metrics/report/model_card.py" in names
    metadata = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(built_wheel).read(metadata).decode()
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
    result = metric.compute(
        predictions=["MedicationEvent(x)", "MedicationEvent(y)", "LabEvent(z) "],
        references=["MedicationEvent(x)", "MedicationEvent(x)", "LabEvent(z)"],
        templates=["MedicationEvent(|m|)", "MedicationEvent(|m|)", "LabEvent(|l|)"],
    )
    assert result["lf_acc"] == pytest.approx(1 / 3)


# --- emrQA ---------------------------------------------------------------------------------------

# Offsets, counted by hand: line 2 is [15, 52), line 3 [53, 69), line 4 [70, 92), line 5 [93, 109).
NOTE = (
    "Admission note\n"
    "Patient takes lisinopril 10 mg daily.\n"
    "BP stable today.\n"
    "History of chest pain.\n"
    "Pulse 72, normal\n"
)
MED = {
    "evidence": "Patient takes lisinopril 10 mg daily.",
    "evidence_start": 15,
    "entity_type": "single",
    "entities": ["lisinopril"],
}
BP = {"evidence": "BP stable today.", "evidence_start": 53, "entity_type": "empty", "entities": []}
BP_UNLOCATED = {**BP, "evidence_start": -1}
TWO_LINES = {
    "evidence": "BP stable today.\nHistory of chest pain.",
    "evidence_start": 53,
    "entity_type": "empty",
    "entities": [],
}
COMPLEX = {
    "evidence": "History of chest pain.",
    "evidence_start": 70,
    "entity_type": "complex",
    "entities": ["chest pain", "history"],
}

# (model output, gold answers, relaxed_em, f1, strict_em) -- on NOTE, computed by hand.
EVIDENCE_CASES = [
    ("Patient takes lisinopril 10 mg daily.", [MED], 1.0, 1.0, 1.0),
    # entity rule; F1 tokens {lisinopril, 10, mg} of 6: P 1, R 1/2
    ("lisinopril 10 mg", [MED], 1.0, 2 / 3, 0.0),
    # not in the note, holds the entity: P 2/4 (patient, lisinopril; "the" dropped), R 2/6
    ("The patient is on lisinopril.", [MED], 1.0, 0.4, 0.0),
    # position rule alone (no entity): found at [53, 62), within 20 of [53, 69); P 1, R 2/3
    ("BP stable", [BP], 1.0, 0.8, 0.0),
    # same length as the gold (16 characters) but in the wrong place: by position, not by length
    ("Pulse 72, normal", [BP], 0.0, 0.0, 0.0),
    # not in the note (punctuation differs) and no entity to contain: token F1 still 1
    ("BP stable today!", [BP], 0.0, 1.0, 0.0),
    # gold position unknown: the position rule cannot apply; strict EM and F1 still do
    ("BP stable today.", [BP_UNLOCATED], 0.0, 1.0, 1.0),
    # two-line evidence matched by two output lines adjacent in the note
    ("BP stable today.\nHistory of chest pain.", [TWO_LINES], 1.0, 1.0, 1.0),
    # chat-style list marker and quotes are dropped when locating a line
    ('- Patient takes lisinopril 10 mg daily.\n"BP stable today."', [MED, BP], 1.0, 1.0, 1.0),
    # two gold answers, one found: averaged over gold answers
    ("Patient takes lisinopril 10 mg daily.", [MED, BP], 0.5, 0.5, 0.5),
    # complex: every entity needed; P 3/4, R 3/4
    ("chest pain history noted", [COMPLEX], 1.0, 0.75, 0.0),
    # one entity of two and not in the note: {pain, chest} of 3 and 4 tokens: P 2/3, R 1/2
    ("pain in the chest", [COMPLEX], 0.0, 4 / 7, 0.0),
    ("", [MED], 0.0, 0.0, 0.0),
    # only the first 10 lines count
    ("\n".join(["Admission note"] * 10 + ["Patient takes lisinopril 10 mg daily."]), [MED], 0.0, 0.0, 0.0),
]
EVIDENCE_MODULES = {"emrqa_relaxed_em": "relaxed_em", "emrqa_evidence_f1": "f1", "emrqa_strict_em": "strict_em"}


@pytest.mark.parametrize("output, golds, relaxed_em, f1, strict_em", EVIDENCE_CASES)
def test_emrqa_evidence_hand_computed_values(modules, output, golds, relaxed_em, f1, strict_em):
    expected = {"relaxed_em": relaxed_em, "f1": f1, "strict_em": strict_em}
    for name, key in EVIDENCE_MODULES.items():
        result = modules[name].compute(predictions=[output], references=[json.dumps(golds)], notes=[NOTE])
        assert result == {key: pytest.approx(expected[key]), f"{key}_stderr": 0.0}, name


@pytest.mark.parametrize("name, key", EVIDENCE_MODULES.items())
def test_emrqa_evidence_mean_over_questions_and_every_reference_form(modules, name, key):
    """The mean over the table's questions, with references as JSON, as dicts and as GoldAnswer objects."""
    from medeval_metrics.emrqa.metrics import GoldAnswer

    column = {"relaxed_em": 2, "f1": 3, "strict_em": 4}[key]
    expected = sum(case[column] for case in EVIDENCE_CASES) / len(EVIDENCE_CASES)
    outputs = [case[0] for case in EVIDENCE_CASES]
    notes = [NOTE] * len(EVIDENCE_CASES)
    as_json = [json.dumps(case[1]) for case in EVIDENCE_CASES]
    as_dicts = [case[1] for case in EVIDENCE_CASES]
    as_objects = [[GoldAnswer.from_dict(g) for g in case[1]] for case in EVIDENCE_CASES]
    results = [
        modules[name].compute(predictions=outputs, references=refs, notes=notes)
        for refs in (as_json, as_dicts, as_objects)
    ]
    assert results[0][key] == pytest.approx(expected)
    assert results[0] == results[1] == results[2]
    metric = modules[name]  # item by item, as in a training loop
    for output, golds in zip(outputs, as_dicts):
        metric.add(prediction=output, reference=golds, notes=NOTE)
    assert metric.compute() == results[0]


GOLD_LF, GOLD_TEMPLATE = "MedicationEvent (lisinopril) [dosage=x]", "MedicationEvent (|medication|) [dosage=x]"

# (model output, gold logical form, gold template, lf_acc, template_acc) -- by hand.
LOGICAL_FORM_CASES = [
    (GOLD_LF, GOLD_LF, GOLD_TEMPLATE, 1.0, 1.0),
    ("MedicationEvent(lisinopril) [ dosage = x ]", GOLD_LF, GOLD_TEMPLATE, 1.0, 1.0),  # spacing is normalised
    ("\n  MedicationEvent (lisinopril) [dosage=x]\nThe dosage.", GOLD_LF, GOLD_TEMPLATE, 1.0, 1.0),  # first line
    ("MedicationEvent (metformin) [dosage=x]", GOLD_LF, GOLD_TEMPLATE, 0.0, 1.0),  # right form, wrong slot
    ("medicationevent (lisinopril) [dosage=x]", GOLD_LF, GOLD_TEMPLATE, 0.0, 0.0),  # case matters
    ("MedicationEvent (lisinopril)", GOLD_LF, GOLD_TEMPLATE, 0.0, 0.0),
    ("MedicationEvent (a (b)) [dosage=x]", GOLD_LF, GOLD_TEMPLATE, 0.0, 0.0),  # a slot value holds no brackets
    ("LabEvent (lisinopril) [date=x]", GOLD_LF, GOLD_TEMPLATE, 0.0, 0.0),
    ("", GOLD_LF, GOLD_TEMPLATE, 0.0, 0.0),
    # the exact gold form has the right structure even where a slot value has brackets
    ("MedicationEvent (vitamin (d)) [dosage=x]", "MedicationEvent (vitamin (d)) [dosage=x]", GOLD_TEMPLATE, 1.0, 1.0),
]


@pytest.mark.parametrize("output, gold_lf, template, lf_acc, template_acc", LOGICAL_FORM_CASES)
def test_emrqa_logical_form_hand_computed_values(modules, output, gold_lf, template, lf_acc, template_acc):
    assert modules["emrqa_logical_form_accuracy"].compute(predictions=[output], references=[gold_lf]) == {
        "lf_acc": lf_acc,
        "lf_acc_stderr": 0.0,
    }
    assert modules["emrqa_template_accuracy"].compute(
        predictions=[output], references=[gold_lf], templates=[template]
    ) == {"template_acc": template_acc, "template_acc_stderr": 0.0}


def test_emrqa_logical_form_means(modules):
    outputs, golds, templates = ([case[i] for case in LOGICAL_FORM_CASES] for i in range(3))
    lf = modules["emrqa_logical_form_accuracy"].compute(predictions=outputs, references=golds)
    template = modules["emrqa_template_accuracy"].compute(predictions=outputs, references=golds, templates=templates)
    assert lf["lf_acc"] == pytest.approx(4 / 10) and template["template_acc"] == pytest.approx(5 / 10)
    # sample standard deviation over sqrt(n), as lm-eval's mean: 4 ones in 10 -> sqrt(0.4 * 0.6 * 10 / 9 / 10)
    assert lf["lf_acc_stderr"] == pytest.approx((0.4 * 0.6 / 9) ** 0.5)


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"predictions": [["Patient takes"]], "references": [[MED]], "notes": [NOTE]}, "expected format"),
        ({"predictions": ["x"], "references": [[MED]], "notes": [NOTE.splitlines()]}, "expected format"),
        ({"predictions": ["x", "y"], "references": [[MED]], "notes": [NOTE]}, "Mismatch in the number"),
        ({"predictions": ["x"], "references": [MED], "notes": [NOTE]}, "not a dict"),
        (
            {"predictions": ["x"], "references": [json.dumps(MED)], "notes": [NOTE]},
            "item 0: .*not a list of gold answers",
        ),
        ({"predictions": ["x"], "references": ["[]"], "notes": [NOTE]}, "item 0: .*at least one gold answer"),
        (
            {"predictions": ["x"], "references": [[{"evidence": "BP stable today."}]], "notes": [NOTE]},
            "item 0: KeyError",
        ),
        ({"predictions": ["x"], "references": [[MED]]}, "inputs are missing"),
    ],
)
def test_emrqa_bad_input_is_an_error_that_quotes_no_note_text(modules, inputs, message):
    with pytest.raises(ValueError, match=message) as error:
        modules["emrqa_relaxed_em"].compute(**inputs)
    shown = "".join(traceback.format_exception(error.value))  # what the user sees, chained errors included
    for words in ("Patient takes", "lisinopril", "BP stable", "chest pain", "Pulse 72"):
        assert words not in shown


@pytest.fixture(scope="module")
def emrqa_metadata(tmp_path_factory):
    from medeval_metrics.emrqa.synthetic import write_synthetic

    info = write_synthetic(tmp_path_factory.mktemp("emrqa-modules"), notes_per_subset=8)
    return {
        "emrqa_data_json": str(info.data_json),
        "emrqa_data_ql_csv": str(info.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path_factory.mktemp("emrqa-modules-cache")),
    }


def _scripted_emrqa_outputs(metadata):
    """Model outputs of every kind the scorers tell apart, keyed by qa_id."""
    from medeval_metrics.emrqa import tasks as emrqa_tasks
    from medeval_metrics.emrqa.synthetic import gold_evidence_output

    def evidence_styles(doc):
        golds = json.loads(doc["answers_json"])
        first, lines = golds[0], doc["note"].splitlines()
        words = first["evidence"].split()
        return [
            gold_evidence_output(doc),
            f"- {first['evidence']}",
            lines[0],
            "",
            " ".join(words[: len(words) // 2]),
            f"{first['evidence']}\n{lines[-1]}",
            f"The note says: {' and '.join(first['entities']) or 'nothing'}.",
            "\n".join(lines[:12]),
        ]

    def logical_form_styles(doc):
        template = doc["lf_template"]
        return [
            doc["logical_form"],
            doc["logical_form"].replace(" ", "  ").replace("(", " ( "),
            re.sub(r"\|[^|]*\|", "zzz", template),
            "LabEvent (x)",
            "",
            f"\n{doc['logical_form']}\nextra",
        ]

    outputs = {}
    for loader, styles in (
        (partial(emrqa_tasks.load_evidence, "medication"), evidence_styles),
        (partial(emrqa_tasks.load_evidence, "risk"), evidence_styles),
        (emrqa_tasks.load_evidence_window, evidence_styles),
        (partial(emrqa_tasks.load_logical_forms, "emrql_2"), logical_form_styles),
    ):
        for i, doc in enumerate(loader(**metadata)["test"]):
            choices = styles(doc)
            outputs[doc["qa_id"]] = choices[i % len(choices)]
    return outputs


@pytest.mark.e2e  # an lm-eval run (scripted backend, in this process)
def test_emrqa_modules_equal_what_the_tasks_report(modules, emrqa_metadata):
    """Run emrQA evidence and logical-form tasks through lm-eval with scripted outputs, then feed the
    logged samples to the modules: the same values as lm-eval's results."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.testing.scripted import ScriptedLM

    evidence_tasks = ["emrqa_medication", "emrqa_risk", "emrqa_evidence_window"]
    table = {"key": "qa_id", "generate": _scripted_emrqa_outputs(emrqa_metadata), "default": ""}
    manager = TaskManager(include_defaults=False, include_path=tasks_path(), metadata=emrqa_metadata)
    results = lm_eval.simple_evaluate(
        model=ScriptedLM(table), tasks=[*evidence_tasks, "emrqa_emrql_2"], task_manager=manager, log_samples=True
    )
    checked = []
    for task in evidence_tasks:
        reported, samples = results["results"][task], results["samples"][task]
        columns = {
            "predictions": [s["filtered_resps"][0] for s in samples],
            "references": [s["doc"]["answers_json"] for s in samples],
            "notes": [s["doc"]["note"] for s in samples],
        }
        for name, key in EVIDENCE_MODULES.items():
            assert 0 < reported[f"{key},none"] < 1, (task, key)  # a comparison that could fail
            value = modules[name].compute(**columns)
            assert value[key] == reported[f"{key},none"], (task, name)
            assert value[f"{key}_stderr"] == pytest.approx(reported[f"{key}_stderr,none"], rel=1e-12), (task, name)
            checked.append((task, name))
    reported, samples = results["results"]["emrqa_emrql_2"], results["samples"]["emrqa_emrql_2"]
    predictions = [s["filtered_resps"][0] for s in samples]
    references = [s["doc"]["logical_form"] for s in samples]
    lf = modules["emrqa_logical_form_accuracy"].compute(predictions=predictions, references=references)
    template = modules["emrqa_template_accuracy"].compute(
        predictions=predictions, references=references, templates=[s["doc"]["lf_template"] for s in samples]
    )
    assert 0 < reported["lf_acc,none"] < reported["template_acc,none"] < 1
    assert lf["lf_acc"] == reported["lf_acc,none"] and template["template_acc"] == reported["template_acc,none"]
    assert lf["lf_acc_stderr"] == pytest.approx(reported["lf_acc_stderr,none"], rel=1e-12)
    assert template["template_acc_stderr"] == pytest.approx(reported["template_acc_stderr,none"], rel=1e-12)
    assert len(checked) == 9


@pytest.mark.parametrize("name", [n for n in evaluate_modules.available() if n.startswith("emrqa_")])
def test_emrqa_module_readmes_say_what_they_compute_and_cite_the_paper(name):
    readme = (Path(evaluate_modules.path(name)) / "README.md").read_text()
    assert readme.startswith(f"---\ntitle: {name}\n") and f'evaluate_modules.path("{name}")' in readme
    assert "## What it computes" in readme and "## Inputs" in readme
    assert "Pampari" in readme and "arXiv:1809.00732" in readme
    if name == "emrqa_relaxed_em":
        assert "by position, not by length" in readme and "20 characters" in readme
