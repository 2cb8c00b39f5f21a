"""`medeval report` on the outputs of real lm-eval runs (scripted backend and the tiny model):
golden values hand-computed from the synthetic fixture, model-index parsed by huggingface_hub,
figures opened as PNG, secrets kept out of every file written. The runs start lm-eval, so the
tests that read them are e2e; the report's own units are in test_report_card.py."""

import json
import shutil

import pytest
import yaml
from conftest import EMSQA_ITEMS as ITEMS
from conftest import EMSQA_SYNTHETIC as SYNTHETIC
from conftest import emsqa_gold as gold
from conftest import run_cli, run_medeval

SECRET = "sk-live-ABCDEF0123456789abcdef"


def task_version(task):
    """The task's version as the manifest (generated from the YAML) states it: a bump needs no edit here."""
    from medeval_metrics.manifest import build_manifest

    return next(t["version"] for t in build_manifest()["tasks"] if t["task"] == task)


def published():
    """The (metric type, filter) pairs the model-index holds for an EMSQA generative task, as its spec says: each
    published metric under each reading, one the same under every reading once (under the headline reading)."""
    from medeval_metrics import registry
    from medeval_metrics.report.metric_info import headline_filter

    reporting = registry.benchmark("emsqa").reporting
    filters = ["flexible-extract", "strict-match"]
    headline = headline_filter("emsqa", filters)
    pairs = set()
    for metric in registry.task("emsqa_private").metrics:
        info = reporting.info(metric)
        if info is not None and info.in_model_index:
            pairs |= {(info.hub_type, f) for f in ([headline] if info.across_readings else filters)}
    return pairs


def write_run(out, model_name, answers, extra_model_args=""):
    """Run emsqa_private in-process through lm-eval with the scripted backend and save the
    results and samples as lm-eval's CLI does (EvaluationTracker)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    import medeval_metrics.testing.scripted  # noqa: F401  (registers medeval-scripted)
    from medeval_metrics import tasks_path

    table = out.parent / f"{model_name}_table.json"
    table.write_text(json.dumps({"key": "question", "generate": answers}))
    manager = TaskManager(
        include_defaults=False, include_path=tasks_path(), metadata={"emsqa_private_path": str(SYNTHETIC)}
    )
    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(
        model="medeval-scripted",
        model_args=f"model={model_name},table={table}{extra_model_args}",
        tasks=["emsqa_private"],
        task_manager=manager,
        log_samples=True,
        evaluation_tracker=tracker,
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    tracker.save_results_samples(task_name="emsqa_private", samples=samples["emsqa_private"])
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A: items 0, 3, 6, 9 answered exactly, the rest ["a"] (acc 6/12, f1 8.1667/12);
    its model_args carry an API key that must never reach a report. Run B: every item exact."""
    root = tmp_path_factory.mktemp("runs")
    mixed = {item["question"]: json.dumps(gold(item) if i % 3 == 0 else ["a"]) for i, item in enumerate(ITEMS)}
    perfect = {item["question"]: json.dumps(gold(item)) for item in ITEMS}
    a = write_run(root / "a", "scripted-a", mixed, extra_model_args=f",api_key={SECRET}")
    b = write_run(root / "b", "scripted-b", perfect)
    return a, b


@pytest.fixture(scope="module")
def report_a(runs, tmp_path_factory):
    from medeval_metrics.report import build_report

    out = tmp_path_factory.mktemp("report-a")
    return out, build_report([runs[0]], out)


ACC_A, F1_A = 6 / 12, (6 + 0.5 + 2 / 3 + 0.5 + 0.5) / 12
ACC_STDERR_A = ((12 * 0.25 / 11) ** 0.5) / 12**0.5  # six 1s and six 0s


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_run_a_is_what_the_golden_values_assume(runs):
    results = json.loads(next(runs[0].rglob("results_*.json")).read_text())["results"]["emsqa_private"]
    assert results["acc,flexible-extract"] == pytest.approx(ACC_A)
    assert results["f1,flexible-extract"] == pytest.approx(F1_A)


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_model_index_parses_with_huggingface_hub(report_a, tmp_path):
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard import metadata_load
    from huggingface_hub.repocard_data import model_index_to_eval_results

    out, _ = report_a
    text = (out / "model_index.yaml").read_text()
    readme = tmp_path / "README.md"
    readme.write_text(f"---\n{text}---\n\n# card\n")
    name, results = model_index_to_eval_results(metadata_load(readme)["model-index"])
    assert name == "scripted-a"
    by_metric = {(r.metric_type, r.metric_config): r for r in results}
    # both readings' accuracy and F1 (every reply is the requested JSON list: the two read alike)
    assert {("accuracy", "flexible-extract"), ("accuracy", "strict-match"), ("f1", "strict-match")} <= set(by_metric)
    assert set(by_metric) == published()
    for reading in ("flexible-extract", "strict-match"):
        assert by_metric[("accuracy", reading)].metric_value == pytest.approx(ACC_A)
        assert by_metric[("f1", reading)].metric_value == pytest.approx(F1_A, abs=1e-6)
    acc = by_metric[("accuracy", "flexible-extract")]
    assert (acc.task_type, acc.task_name, acc.dataset_type, acc.dataset_split) == (
        "multiple-choice",
        "emsqa_private",
        "medeval/emsqa_private",
        "test",
    )
    assert acc.metric_name == "Exact set-match accuracy (flexible-extract)"  # the Hub shows names: the reading in it
    assert acc.source_url.startswith("https://")
    assert acc.dataset_args == {"num_few_shot": 0}
    card = ModelCard.load(readme)
    assert len(card.data.eval_results) == len(published())


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_results_markdown_has_values_stderr_counts_and_settings(report_a):
    out, _ = report_a
    text = (out / "results.md").read_text()
    version = task_version("emsqa_private")
    for reading in ("flexible-extract (headline)", "strict-match"):
        assert (
            f"| `emsqa_private` | {version} | {reading} | 0 | Exact set-match accuracy (`acc`) | 0.5000 | "
            f"{ACC_STDERR_A:.4f} | 0.254–0.746 (Wilson) | 12 |"  # 6 of 12, by hand: centre 0.5, half-width 0.246
        ) in text
    # the readings side by side: accuracy under flexible-extract (the headline), then strict-match
    assert f"| `emsqa_private` | {version} | 0 | 0.5000 ± {ACC_STDERR_A:.4f} | 0.5000 ± {ACC_STDERR_A:.4f} |" in text
    assert f"| Set F1 (per item, averaged) (`f1`) | {F1_A:.4f} |" in text
    # 0 of 12: an interval, not a point at 0
    assert "| Unparseable answer rate (`unparseable`) | 0.0000 | 0.0000 | 0.000–0.242 (Wilson) | 12 |" in text
    for setting in (
        "| chat template | not applied |",
        "| limit | none (full test sets) |",
        "| lm-eval version | 0.4.13 |",
        "| model | medeval-scripted (model=scripted-a) |",
        "max_gen_toks=256",
    ):
        assert setting in text, setting
    assert (out / "card_section.md").read_text().startswith("## Medical QA evaluation (medeval)")


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_no_secret_or_private_path_in_any_file_written(report_a, runs):
    out, _ = report_a
    # lm-eval copies model_args into the results JSON, key and all (the pack blanks nothing in lm-eval's files
    # since it stopped patching lm-eval; `medeval run` refuses a key there): the report reads it and copies none
    raw = next(runs[0].rglob("results_*.json")).read_text()
    assert SECRET in raw
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".yaml", ".json"):
            text = path.read_text()
            assert SECRET not in text and "api_key" not in text, path
            if path.name != "report.json":  # report.json lists the input files by path
                assert "emsqa_synthetic.json" not in text and str(runs[0]) not in text, path


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_breakdowns_are_the_pack_breakdowns_of_the_logged_samples(report_a, runs):
    from medeval_metrics.breakdown import compute_breakdown, read_samples, spec_for_task

    out, report = report_a
    breakdowns = json.loads((out / "breakdowns.json").read_text())["scripted-a"]["emsqa_private"]["flexible-extract"]
    # EMR items are 0, 4, 7, 9, 10: answered right 0, 7, 9 -> 3 of 5.
    assert breakdowns["level"]["emr"]["acc"] == {
        "value": pytest.approx(0.6),
        "stderr": pytest.approx((0.3 / 5) ** 0.5),
        "n": 5,
    }
    samples = read_samples(next(runs[0].rglob("samples_emsqa_private_*.jsonl")))
    assert (
        breakdowns
        == json.loads(json.dumps(compute_breakdown(samples, spec_for_task("emsqa_private"))))["flexible-extract"]
    )
    assert "| emr | 5 | 0.6000 ±" in (out / "breakdowns.md").read_text()


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_figures_are_pngs_of_the_expected_size(report_a):
    from PIL import Image

    from medeval_metrics.report.figures import figure_size

    out, report = report_a
    expected = {"level": 4, "subject_area": 10}
    for dimension, categories in expected.items():
        path = out / "figures" / "scripted-a" / f"emsqa_private__{dimension}.png"
        with Image.open(path) as image:
            assert image.format == "PNG"
            assert image.size == figure_size(categories)
    # the headline reading's figures keep the plain name; the other reading's name it
    assert sorted(report["figures"]) == sorted(
        f"figures/scripted-a/emsqa_private__{d}{suffix}.png"
        for d in ("level", "subject_area", "level_x_subject_area")
        for suffix in ("", "__strict-match")
    )


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_comparison_of_two_models(runs, tmp_path):
    from PIL import Image

    from medeval_metrics.report import build_report
    from medeval_metrics.report.figures import figure_size

    report = build_report(list(runs), tmp_path)
    comparison = (tmp_path / "comparison.md").read_text()
    assert "| Task | Metric | Filter | scripted-a | scripted-b |" in comparison
    assert (
        f"| `emsqa_private` | acc | flexible-extract (headline) | 0.5000 ± {ACC_STDERR_A:.4f} (n=12) | 1.0000 ± 0.0000 "
        "(n=12) |" in comparison
    )
    assert f"| `emsqa_private` | acc | strict-match | 0.5000 ± {ACC_STDERR_A:.4f} (n=12) |" in comparison
    # one model-index per model
    assert report["model_index_files"] == {
        "scripted-a": "model_index_scripted-a.yaml",
        "scripted-b": "model_index_scripted-b.yaml",
    }
    index_b = yaml.safe_load((tmp_path / "model_index_scripted-b.yaml").read_text())["model-index"]
    scores = [m["value"] for m in index_b[0]["results"][0]["metrics"] if m["type"] in ("accuracy", "f1")]
    assert scores == [1.0, 1.0, 1.0, 1.0]  # accuracy and F1 under each reading
    with Image.open(tmp_path / "comparison__emsqa.png") as image:
        assert image.format == "PNG" and image.size == figure_size(2, legend_rows=2)


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_judge_scores_in_samples_give_a_table_and_a_distribution_figure(runs, tmp_path):
    """Samples that carry the documented `judge_scores` field (as MedicationQA's will)."""
    from PIL import Image

    from medeval_metrics.report import build_report
    from medeval_metrics.report.figures import figure_size

    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    samples_path = next(run.rglob("samples_*.jsonl"))
    records = [json.loads(line) for line in samples_path.read_text().splitlines()]
    for record in records:  # each doc's scores, under each reading (lm-eval logs a doc once per filter)
        i = record["doc_id"]
        scores = {
            "judge-x": {"accuracy": 5 if i < 6 else 3, "clarity": 4},
            "judge-y": {"accuracy": None if i == 0 else 2, "clarity": 4},
        }
        record["judge_scores"] = scores if i % 2 else json.dumps(scores)  # a dict or a JSON string
    samples_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    build_report([run], tmp_path / "report")
    judges = json.loads((tmp_path / "report" / "judges.json").read_text())["scripted-a"]["emsqa_private"]
    assert judges["judge-x"]["accuracy"]["value"] == pytest.approx(4.0)
    assert judges["judge-x"]["accuracy"]["n"] == 12
    assert judges["judge-y"]["accuracy"] == {"value": 2.0, "stderr": 0.0, "n": 11, "missing": 1}
    assert "| judge-y | 2.000 ± 0.000 (11) | 4.000 ± 0.000 (12) |" in (tmp_path / "report" / "judges.md").read_text()
    # scores 2, 3, 4, 5 and 'none' per dimension, two dimensions
    with Image.open(tmp_path / "report" / "figures" / "scripted-a" / "emsqa_private__judge_scores.png") as image:
        assert image.size == figure_size(5, 2)


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_card_update_from_the_cli_is_idempotent(runs, tmp_path, capsys):
    card = tmp_path / "README.md"
    card.write_text("---\nlicense: mit\n---\n\n# A model\n\nOwner's text.\n")
    first = run_medeval(
        ["report", str(runs[0]), "--output", str(tmp_path / "r"), "--update-card", str(card), "--no-figures"], capsys
    )
    assert first.returncode == 0, first.stderr[-2000:]
    assert "model card" in first.stdout and "updated" in first.stdout
    after_first = card.read_text()
    assert after_first.startswith("---\nlicense: mit\nmodel-index:\n") and "# A model\n\nOwner's text.\n" in after_first
    assert not (tmp_path / "r" / "figures").exists()
    second = run_medeval(
        ["report", str(runs[0]), "--output", str(tmp_path / "r"), "--update-card", str(card), "--no-figures"], capsys
    )
    assert second.returncode == 0 and "already up to date" in second.stdout
    assert card.read_text() == after_first


def test_report_errors_name_the_folder_and_the_fix(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_medeval(["report", str(empty), "--output", str(tmp_path / "r")], capsys)
    assert proc.returncode == 2 and "no results_*.json found" in proc.stderr and "--output_path" in proc.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {"arc_easy": {"acc,none": 0.5}}}))
    proc = run_medeval(["report", str(foreign), "--output", str(tmp_path / "r")], capsys)
    assert proc.returncode == 2 and "no medeval task in these results" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_tiny_model_run_to_card(tmp_path, tiny_model, shared_data, capsys):
    """`medeval run` with the tiny model, a chat template, a system instruction and a limit, then
    `medeval report` (both in this process): the settings that change scores are all in the card section."""
    out = tmp_path / "out"
    proc = run_medeval(
        [
            "run",
            "--tasks",
            "emsqa_public",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model},trust_remote_code=False",
            "--limit",
            "6",
            "--device",
            "cpu",
            "--batch_size",
            "6",
            "--gen_kwargs",
            "max_gen_toks=8",
            "--num_fewshot",
            "1",
            "--apply_chat_template",
            "--system_instruction",
            "Answer as an EMS instructor.",
            "--metadata",
            json.dumps({"emsqa_public_path": str(shared_data / "emsqa")}),
            "--output_path",
            str(out),
            "--log_samples",
        ],
        capsys,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    card = tmp_path / "README.md"
    card.write_text("# tiny\n")
    # a partial run (--limit) is not published on a card unless asked for
    refused = run_medeval(["report", str(out), "--output", str(tmp_path / "r"), "--update-card", str(card)], capsys)
    assert refused.returncode == 2 and "--include-partial-runs" in refused.stderr
    assert card.read_text() == "# tiny\n" and not (tmp_path / "r" / "model_index.yaml").exists()
    report = run_medeval(
        ["report", str(out), "--output", str(tmp_path / "r"), "--update-card", str(card), "--include-partial-runs"],
        capsys,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    acc = results["results"]["emsqa_public"]["acc,flexible-extract"]
    section = (tmp_path / "r" / "card_section.md").read_text()
    assert "#### tiny-lm" in section
    assert (
        f"| `emsqa_public` | {task_version('emsqa_public')} | flexible-extract (headline) | 1 | Exact set-match "
        f"accuracy (`acc`) | {acc:.4f} |" in section
    )
    strict = results["results"]["emsqa_public"]["acc,strict-match"]
    assert f"| `emsqa_public` | {task_version('emsqa_public')} | 1 | {acc:.4f} ± " in section  # readings side by side
    assert f"| strict-match | 1 | Exact set-match accuracy (`acc`) | {strict:.4f} |" in section
    assert "| 6 of 3,721 items, partial |" in section
    assert "Unparseable answer rate (`unparseable`)" in section  # a generative task's unparseable rate on the card
    assert "| few-shot as multi-turn |" in section  # a 1-shot run: the setting applies
    assert "| chat template | applied (sha256 " in section
    assert "| system instruction | Answer as an EMS instructor. (sha256 " in section
    assert "| limit | 6 (partial run: not comparable with full runs) |" in section
    assert "max_gen_toks=8" in section and "trust_remote_code" not in section
    index = yaml.safe_load(card.read_text().split("---\n")[1])["model-index"][0]
    assert index["results"][0]["dataset"]["type"] == "Xueren/EMS-MCQA"
    assert index["results"][0]["dataset"]["name"] == "EMSQA (emsqa_public) (6 of 3,721 items, partial)"
    assert index["results"][0]["dataset"]["args"] == {"num_few_shot": 1}
    assert index["results"][0]["metrics"][0]["value"] == pytest.approx(acc, abs=1e-6)
    assert card.read_text().endswith("<!-- medeval:results:end -->\n") and "\n# tiny\n" in card.read_text()


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_a_run_without_logged_samples_still_reports(runs, tmp_path):
    from medeval_metrics.report import build_report

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(next(runs[1].rglob("results_*.json")), run)
    report = build_report([run], tmp_path / "r")
    assert sorted(report["written"]) == ["card_section.md", "model_index.yaml", "results.md"]
    assert (
        f"| `emsqa_private` | {task_version('emsqa_private')} | flexible-extract (headline) | 0 | Exact set-match "
        "accuracy (`acc`) | 1.0000 | 0.0000 | 0.758–1.000 (Wilson) | 12 |"
        in (tmp_path / "r" / "results.md").read_text()
    )
    assert report["figures"] == [] and not (tmp_path / "r" / "breakdowns.json").exists()


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_output_path_given_as_a_json_name(runs, tmp_path):
    """`--output_path out/run.json` makes lm-eval write out/run_<date>.json and samples beside it;
    the report takes the same path."""
    from medeval_metrics.report import build_report
    from medeval_metrics.report.runs import load_runs

    results = next(runs[0].rglob("results_*.json"))
    date = results.stem[len("results_") :]
    shutil.copy(results, tmp_path / f"run_{date}.json")
    shutil.copy(next(runs[0].rglob("samples_*.jsonl")), tmp_path)
    (loaded,) = load_runs([tmp_path / "run.json"])
    assert loaded.date == date and set(loaded.sample_paths) == {"emsqa_private"}
    report = build_report([tmp_path / f"run_{date}.json"], tmp_path / "r", figures=False)
    assert "breakdowns.json" in report["written"]


@pytest.mark.e2e  # the runs fixture starts lm-eval (scripted, in this process)
def test_without_matplotlib_the_cli_says_which_extra_to_install(runs, tmp_path):
    # a subprocess: a fresh interpreter where matplotlib cannot be imported
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib is not installed')\n")
    env = {"PYTHONPATH": str(tmp_path / "blocker")}
    proc = run_cli(["report", str(runs[0]), "--output", str(tmp_path / "r")], cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "medeval-metrics[report]" in proc.stderr and "--no-figures" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()  # nothing half-written
    proc = run_cli(["report", str(runs[0]), "--output", str(tmp_path / "r"), "--no-figures"], cwd=tmp_path, env=env)
    assert proc.returncode == 0 and (tmp_path / "r" / "model_index.yaml").is_file()
