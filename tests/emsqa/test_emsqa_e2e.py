"""EMSQA end to end through real lm-eval: a scripted model with known answers, then the tiny model
through the documented commands; scores are recomputed independently from the logged samples."""

import json
import re
import shlex

import pytest
from conftest import FIXTURES, REPO_ROOT, find_results, run_cli, run_lm_eval_cli

# Every test here runs lm-eval (in-process with the scripted model, or the documented commands).
pytestmark = pytest.mark.e2e

SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
ITEMS = json.loads(SYNTHETIC.read_text())


def evaluate(task, generate=None, choose=None, limit=None, num_fewshot=None):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.testing.scripted import ScriptedLM

    manager = TaskManager(
        include_defaults=False, include_path=tasks_path(), metadata={"emsqa_private_path": str(SYNTHETIC)}
    )
    model = ScriptedLM({"key": "question", "generate": generate or {}, "choose": choose or {}})
    results = lm_eval.simple_evaluate(
        model=model, tasks=[task], task_manager=manager, limit=limit, num_fewshot=num_fewshot, log_samples=True
    )
    return results, model


def gold(item):
    answer = item["answer"]
    return [answer] if isinstance(answer, str) else answer


def test_perfect_answers_score_one():
    answers = {item["question"]: json.dumps(gold(item)) for item in ITEMS}
    results, _ = evaluate("emsqa_private", generate=answers)
    metrics = results["results"]["emsqa_private"]
    assert metrics["acc,flexible-extract"] == 1.0
    assert metrics["f1,flexible-extract"] == 1.0
    assert metrics["unparseable,flexible-extract"] == 0.0
    assert metrics["acc_stderr,flexible-extract"] == 0.0
    # every reply is the requested JSON list: the strict reading is the same
    assert metrics["acc,strict-match"] == 1.0 and metrics["requested_format,strict-match"] == 1.0


def test_wrong_answers_score_zero_and_unparseable_is_counted_apart():
    answers = {}
    for index, item in enumerate(ITEMS):
        wrong = next(c[0] for c in item["choices"] if c[0] not in gold(item))
        answers[item["question"]] = f"The answer is ({wrong.upper()})" if index % 2 else "I cannot tell."
    results, _ = evaluate("emsqa_private", generate=answers)
    metrics = results["results"]["emsqa_private"]
    assert metrics["acc,flexible-extract"] == 0.0
    assert metrics["f1,flexible-extract"] == 0.0
    assert metrics["unparseable,flexible-extract"] == pytest.approx(0.5)
    assert metrics["unparseable,strict-match"] == 1.0 and metrics["requested_format,flexible-extract"] == 0.0


def test_partially_right_multi_answer_items_get_the_hand_computed_f1():
    # Item 1 gold {a,b,d}: answer {a,b} -> P=1, R=2/3, F1=0.8. Item 4 gold {a,c}: answer {a,c,e} -> P=2/3, R=1, F1=0.8.
    # Item 8 gold {a,b,c}: answer {a} -> F1=0.5. The other 9 items are answered exactly.
    answers = {item["question"]: json.dumps(gold(item)) for item in ITEMS}
    answers[ITEMS[1]["question"]] = "A and B"
    answers[ITEMS[4]["question"]] = '{"answer": ["a", "c", "e"]}'
    answers[ITEMS[8]["question"]] = "**A**"
    results, _ = evaluate("emsqa_private", generate=answers)
    metrics = results["results"]["emsqa_private"]
    assert metrics["acc,flexible-extract"] == pytest.approx(9 / 12)
    assert metrics["f1,flexible-extract"] == pytest.approx((9 + 0.8 + 0.8 + 0.5) / 12)
    # stderr is lm-eval's closed form for a mean: sample sd / sqrt(n).
    accs = [1.0] * 9 + [0.0] * 3
    mean = sum(accs) / 12
    sd = (sum((a - mean) ** 2 for a in accs) / 11) ** 0.5
    assert metrics["acc_stderr,flexible-extract"] == pytest.approx(sd / 12**0.5)
    # strict: "A and B", "**A**" and the CoT object are not the requested list; the 9 exact lists are
    assert metrics["acc,strict-match"] == metrics["f1,strict-match"] == pytest.approx(9 / 12)
    assert metrics["unparseable,strict-match"] == pytest.approx(3 / 12)
    assert (
        metrics["requested_format,strict-match"]
        == metrics["requested_format,flexible-extract"]
        == pytest.approx(9 / 12)
    )


def test_cot_and_expert_cot_prompts_and_scoring():
    answers = {item["question"]: 'Let me think.\n{"answer": ' + json.dumps(gold(item)) + "}" for item in ITEMS}
    results, model = evaluate("emsqa_private_expert_cot", generate=answers, limit=4)
    assert results["results"]["emsqa_private_expert_cot"]["acc,flexible-extract"] == 1.0
    assert results["results"]["emsqa_private_expert_cot"]["acc,strict-match"] == 1.0  # the final object line
    prompt = model.requests_seen[1].args[0]
    assert "certified Emergency Medical Technician (EMT)" in prompt and "trauma, cardiology and resuscitation" in prompt
    results, model = evaluate("emsqa_private_cot", generate=answers, limit=2)
    assert results["results"]["emsqa_private_cot"]["f1,flexible-extract"] == 1.0
    assert "Think step by step" in model.requests_seen[0].args[0]
    assert "certified" not in model.requests_seen[0].args[0]


def test_multiple_choice_variant_scores_the_argmax_as_a_set():
    # Choose the first gold letter everywhere: single-answer items are right; multi-answer ones are not.
    choose = {item["question"]: gold(item)[0].upper() for item in ITEMS}
    results, _ = evaluate("emsqa_private_mc", choose=choose)
    metrics = results["results"]["emsqa_private_mc"]
    multi_f1 = [2 * (1 / 3) / (1 + 1 / 3), 2 * 0.5 / 1.5, 2 * (1 / 3) / (1 + 1 / 3), 2 * (1 / 3) / (1 + 1 / 3)]
    assert metrics["acc,none"] == pytest.approx(8 / 12)
    assert metrics["f1,none"] == pytest.approx((8 + sum(multi_f1)) / 12)


def test_few_shot_examples_show_the_answer_format():
    answers = {item["question"]: '["a"]' for item in ITEMS}
    _, model = evaluate("emsqa_private", generate=answers, limit=1, num_fewshot=2)
    prompt = model.requests_seen[0].args[0]
    assert prompt.count("Question:") == 3
    assert re.search(r'Answer: \[".*"\]\n\nQuestion:', prompt)


def recompute(samples):
    """The paper's definitions applied to the logged model outputs, independently of the pack's scorer."""
    accs, f1s = [], []
    for sample in samples:
        doc = sample["doc"]
        raw = sample["resps"][0][0]
        found = re.findall(r"\[[^\[\]]*\]", raw)
        letters = set(json.loads(found[-1])) & set(doc["letters"]) if found else set()
        gold_set = set(doc["gold"])
        accs.append(float(letters == gold_set))
        tp = len(letters & gold_set)
        f1s.append(1.0 if not letters and not gold_set else (2 * tp / (len(letters) + len(gold_set)) if tp else 0.0))
    return sum(accs) / len(accs), sum(f1s) / len(f1s)


def test_medeval_run_with_scripted_model_matches_recomputation(tmp_path):
    # Mixed answers through the CLI: the results JSON must equal the definitions recomputed from samples.
    table = {"key": "question", "generate": {}}
    for index, item in enumerate(ITEMS):
        letters = gold(item) if index % 3 == 0 else [item["choices"][0][0], item["choices"][1][0]]
        table["generate"][item["question"]] = "Reasoning...\n" + json.dumps(letters)
    (tmp_path / "table.json").write_text(json.dumps(table))
    out = tmp_path / "out"
    proc = run_cli(
        [
            "run",
            "--tasks",
            "emsqa_private",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={tmp_path / 'table.json'}",
            "--metadata",
            json.dumps({"emsqa_private_path": str(SYNTHETIC)}),
            "--output_path",
            str(out),
            "--log_samples",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = find_results(out)
    acc, f1 = recompute(samples["emsqa_private"])
    reported = results["results"]["emsqa_private"]
    assert reported["acc,flexible-extract"] == pytest.approx(acc)
    assert reported["f1,flexible-extract"] == pytest.approx(f1)
    assert 0 < acc < 1
    # "Reasoning..." before the list: never the requested format, so the strict reading reads nothing
    assert reported["acc,strict-match"] == 0.0 and reported["unparseable,strict-match"] == 1.0
    assert reported["requested_format,strict-match"] == reported["requested_format,flexible-extract"] == 0.0
    # The breakdown files are written next to the results after a logged run, one per reading.
    breakdown = json.loads(next(out.rglob("medeval_breakdowns.json")).read_text())
    assert breakdown["emsqa_private"]["strict-match"]["level"]["emr"]["acc"]["value"] == 0.0
    by_level = breakdown["emsqa_private"]["flexible-extract"]["level"]
    flexible = [s for s in samples["emsqa_private"] if s["filter"] == "flexible-extract"]
    emr_items = [s for s in flexible if "emr" in s["doc"]["level"]]
    assert by_level["emr"]["acc"]["n"] == len(emr_items) == 5
    assert by_level["emr"]["acc"]["value"] == pytest.approx(sum(s["acc"] for s in emr_items) / 5)
    assert f"medeval report {out} --output" in proc.stdout


@pytest.fixture
def emsqa_public_dir(tmp_path):
    """The real public files where ../shared/data is present, else the synthetic items in the same layout."""
    from conftest import SHARED_DATA

    if (SHARED_DATA / "emsqa" / "test_open.json").exists():
        return SHARED_DATA / "emsqa"
    folder = tmp_path / "emsqa_synthetic_public"
    folder.mkdir()
    (folder / "test_open.json").write_text(SYNTHETIC.read_text())
    (folder / "val_open.json").write_text(SYNTHETIC.read_text())
    return folder


def documented_smoke_run(tiny_model, public_dir, output_path) -> list[str]:
    """The `medeval run` arguments of docs/offline.md's smoke run, on this rig's model, data and output."""
    block = re.search(r"## A smoke run.*?```bash\n(.*?)```", (REPO_ROOT / "docs" / "offline.md").read_text(), re.DOTALL)
    lines = block.group(1).replace("\\\n", " ").splitlines()
    assert "medeval make-tiny-model /tmp/tiny-lm" in lines  # what the tiny_model fixture builds
    args = shlex.split(next(line for line in lines if line.startswith("medeval run ")))[2:]
    replace = {
        "--model_args": ("pretrained=/tmp/tiny-lm", f"pretrained={tiny_model}"),
        "--metadata": (
            '{"emsqa_public_path": "/path/to/EMSQA/data/final"}',
            json.dumps({"emsqa_public_path": str(public_dir)}),
        ),
        "--output_path": ("/tmp/medeval-smoke", str(output_path)),
    }
    for flag, (documented, here) in replace.items():
        assert args[args.index(flag) + 1] == documented, flag
        args[args.index(flag) + 1] = here
    return args


def test_documented_commands_with_the_tiny_model(tmp_path, tiny_model, emsqa_public_dir):
    """docs/offline.md's smoke run through `medeval run` and through plain `lm_eval --include_path`:
    both finish and print acc and f1 with stderr."""
    via_medeval = run_cli(["run", *documented_smoke_run(tiny_model, emsqa_public_dir, tmp_path / "a")], cwd=tmp_path)
    assert via_medeval.returncode == 0, via_medeval.stderr[-3000:]
    tasks_dir = run_cli(["tasks-path"], cwd=tmp_path).stdout.strip()
    via_lm_eval = run_lm_eval_cli(
        [*documented_smoke_run(tiny_model, emsqa_public_dir, tmp_path / "b"), "--include_path", tasks_dir], cwd=tmp_path
    )
    assert via_lm_eval.returncode == 0, via_lm_eval.stderr[-3000:]
    for proc in (via_medeval, via_lm_eval):
        table = proc.stdout
        for metric in ("acc", "f1", "unparseable"):
            row = re.search(rf"\|\s*{metric}\s*\|[^|]*\|\s*([0-9.]+)\s*\|±\s*\|\s*([0-9.]+)\s*\|", table)
            assert row, f"no {metric} row with numeric stderr in:\n{table}"
    results_a, samples_a = find_results(tmp_path / "a")
    results_b, _ = find_results(tmp_path / "b")
    assert (
        results_a["results"]["emsqa_public"]["acc,flexible-extract"]
        == results_b["results"]["emsqa_public"]["acc,flexible-extract"]
    )
    expected_items = min(20, len(json.loads((emsqa_public_dir / "test_open.json").read_text())))
    for reading in ("strict-match", "flexible-extract"):  # lm-eval logs each item once per filter
        assert sum(s["filter"] == reading for s in samples_a["emsqa_public"]) == expected_items
    assert len(samples_a["emsqa_public"]) == 2 * expected_items
    assert results_a["versions"]["emsqa_public"] == 7  # version 7: two readings (tasks/emsqa/README.md)


def test_results_name_the_scored_file_and_are_identical_across_runs(tmp_path, capsys, monkeypatch):
    # The private path comes from the environment (not --metadata): the results still say which file
    # was scored (its name and sha256, never its folder); two identical runs write identical configs
    # (no function addresses).
    from conftest import run_medeval

    from medeval_metrics.data import file_sha256

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": '["a"]'}))
    configs = []
    for run in ("one", "two"):
        out = run_medeval(
            [
                "run",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={table}",
                "--tasks",
                "emsqa_private",
                "--output_path",
                str(tmp_path / run),
            ],
            capsys,
            monkeypatch,
            env={"MEDEVAL_EMSQA_PRIVATE_PATH": str(SYNTHETIC)},
        )
        assert out.returncode == 0, out.stderr
        results, _ = find_results(tmp_path / run)
        configs.append(results["configs"]["emsqa_private"])
    scored = configs[0]["metadata"]["scored_data"]
    assert scored == {
        "description": "the EMSQA private set",
        "items": len(ITEMS),
        "files": [{"file": SYNTHETIC.name, "sha256": file_sha256(SYNTHETIC)}],
    }
    assert str(SYNTHETIC.parent) not in json.dumps(scored)
    assert " at 0x" not in json.dumps(configs[0]) and configs[0] == configs[1]
