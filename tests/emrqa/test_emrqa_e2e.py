"""emrQA end to end through lm-eval: a scripted perfect model, and the tiny model via `medeval run`."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import pytest
from conftest import SHARED_DATA, find_results, run_cli, run_medeval

from medeval_metrics.emrqa import tasks as emrqa_tasks
from medeval_metrics.emrqa.synthetic import gold_evidence_output, write_synthetic
from medeval_metrics.manifest import build_manifest

TEMPLATES = SHARED_DATA / "emrqa" / "templates-all.csv"
EVIDENCE_TASKS = ("emrqa_medication", "emrqa_relations", "emrqa_risk", "emrqa_evidence_window")
ALL_TASKS = (
    "emrqa_emrql_1",
    "emrqa_emrql_2",
    "emrqa_medication",
    "emrqa_relations",
    "emrqa_risk",
    "emrqa_smoking",
    "emrqa_obesity",
    "emrqa_evidence_window",
)


@pytest.fixture(scope="module")
def metadata(tmp_path_factory):
    info = write_synthetic(
        tmp_path_factory.mktemp("emrqa-e2e"), templates_csv=TEMPLATES if TEMPLATES.exists() else None
    )
    return {
        "emrqa_data_json": str(info.data_json),
        "emrqa_data_ql_csv": str(info.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path_factory.mktemp("emrqa-cache")),
    }


def _perfect_table(metadata: dict) -> dict:
    """What a perfect model says for every test doc of every emrQA task, keyed by qa_id."""
    answers: dict[str, str] = {}
    loaders = {
        "emrqa_medication": partial(emrqa_tasks.load_evidence, "medication"),
        "emrqa_relations": partial(emrqa_tasks.load_evidence, "relations"),
        "emrqa_risk": partial(emrqa_tasks.load_evidence, "risk"),
        "emrqa_evidence_window": emrqa_tasks.load_evidence_window,
    }
    for loader in loaders.values():
        for doc in loader(**metadata)["test"]:
            answers[doc["qa_id"]] = gold_evidence_output(doc)
    for loader in (
        partial(emrqa_tasks.load_classification, "smoking"),
        partial(emrqa_tasks.load_classification, "obesity"),
    ):
        for doc in loader(**metadata)["test"]:
            answers[doc["qa_id"]] = f"{doc['label']}"
    for loader in (
        partial(emrqa_tasks.load_logical_forms, "emrql_1"),
        partial(emrqa_tasks.load_logical_forms, "emrql_2"),
    ):
        for doc in loader(**metadata)["test"]:
            answers[doc["qa_id"]] = doc["logical_form"]
    return {"key": "qa_id", "generate": answers, "default": ""}


@pytest.mark.e2e
def test_scripted_perfect_model_scores_one_everywhere(metadata):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    import medeval_metrics.testing.scripted

    manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path(), metadata=metadata)
    out = simple_evaluate(
        model="medeval-scripted",
        model_args={"table": _perfect_table(metadata)},
        tasks=["emrqa", "emrqa_evidence_window"],
        task_manager=manager,
    )
    results = out["results"]
    for task in EVIDENCE_TASKS:
        assert results[task]["relaxed_em,none"] == 1.0, task
        assert results[task]["strict_em,none"] == 1.0 and results[task]["f1,none"] == 1.0, task
        assert results[task]["prompt_too_long,none"] == 0.0  # the scripted model reports no length: 2048 estimate
    for task in ("emrqa_smoking", "emrqa_obesity"):
        assert results[task]["acc,none"] == 1.0 and results[task]["macro_f1,none"] == 1.0
        assert results[task]["unparseable,none"] == 0.0
    for task in ("emrqa_emrql_1", "emrqa_emrql_2"):
        assert results[task]["lf_acc,none"] == 1.0 and results[task]["template_acc,none"] == 1.0
    for task in ALL_TASKS:
        for key, value in results[task].items():
            if key.endswith(",none") and "_stderr" not in key:
                stderr = results[task][key.replace(",none", "_stderr,none")]
                if key == "macro_f1,none":  # lm-eval's own rule for an aggregation it does not know
                    assert stderr == "N/A", (task, stderr)
                    continue
                assert isinstance(stderr, float) and not math.isnan(stderr), (task, key, stderr)
    # which file each task scored: its name and sha256 (from the preparation), never its folder
    import hashlib

    for task in ALL_TASKS:
        scored = out["configs"][task]["metadata"]["scored_data"]
        source = Path(metadata["emrqa_data_ql_csv" if task.startswith("emrqa_emrql") else "emrqa_data_json"])
        assert scored["files"] == [{"file": source.name, "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}]
        assert scored["items"] == out["n-samples"][task]["effective"] and str(source.parent) not in json.dumps(scored)


@pytest.mark.e2e
def test_macro_f1s_stderr_is_lm_evals_na_and_the_logged_pairs_give_the_bootstrap(metadata):
    """macro_f1 is corpus-level: lm-eval, left as it is, reports its stderr as "N/A"; the logged samples carry
    each item's (gold, predicted) pair, from which the seeded bootstrap stderr is computed
    (``emrqa.tasks.macro_f1_stderr``, what a reader of the samples such as the report uses)."""
    from lm_eval import evaluator_utils, simple_evaluate
    from lm_eval.api.metrics import stderr_for_metric
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    import medeval_metrics.testing.scripted

    docs = list(emrqa_tasks.load_classification("obesity", **metadata)["test"])
    labels = docs[0]["labels"]
    # Right on even items, a fixed wrong label on odd ones: macro-F1 strictly between 0 and 1.
    table = {
        "key": "qa_id",
        "default": "",
        "generate": {
            d["qa_id"]: d["label"] if i % 2 == 0 else next(l for l in labels if l != d["label"])
            for i, d in enumerate(docs)
        },
    }
    manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path(), metadata=metadata)
    out = simple_evaluate(
        model="medeval-scripted",
        model_args={"table": table},
        tasks=["emrqa_obesity"],
        task_manager=manager,
        log_samples=True,
    )
    result = out["results"]["emrqa_obesity"]
    assert 0.0 < result["macro_f1,none"] < 1.0
    assert result["macro_f1_stderr,none"] == "N/A" and evaluator_utils.stderr_for_metric is stderr_for_metric
    pairs = [sample["macro_f1"] for sample in out["samples"]["emrqa_obesity"]]
    assert len(pairs) == len(docs) and emrqa_tasks.aggregate_macro_f1(pairs) == result["macro_f1,none"]
    assert emrqa_tasks.macro_f1_stderr(pairs) > 0.0


@pytest.mark.e2e
def test_tiny_model_run_prints_every_metric_with_stderr(metadata, tiny_model, tmp_path, capsys):
    # `medeval run` as a subprocess: what reaches the console (no note text) is checked
    output = tmp_path / "out"
    result = run_cli(
        [
            "run",
            "--tasks",
            "emrqa",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model}",
            "--limit",
            "5",
            "--gen_kwargs",
            "max_gen_toks=8",
            "--metadata",
            json.dumps(metadata),
            "--output_path",
            str(output),
            "--log_samples",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results, samples = find_results(output)
    manifest_metrics = {t["task"]: t["metrics"] for t in build_manifest()["tasks"] if t["benchmark"] == "emrqa"}
    for task in ALL_TASKS[:-1]:
        for metric in manifest_metrics[task]:
            if metric.endswith("_stderr"):
                continue
            assert metric in result.stdout  # printed in the table
            value, stderr = (
                results["results"][task][f"{metric},none"],
                results["results"][task][f"{metric}_stderr,none"],
            )
            # macro_f1: lm-eval's "N/A" (its stderr comes from the logged samples' pairs)
            assert 0.0 <= value <= 1.0 and (isinstance(stderr, float) or metric == "macro_f1"), (task, metric, stderr)
    # The tiny model has 1024 positions: whole risk notes do not fit, and the count says so.
    assert results["results"]["emrqa_risk"]["prompt_too_long,none"] == 1.0
    risk_doc = samples["emrqa_risk"][0]["doc"]
    assert risk_doc["context_check"].startswith("tokenizer") and risk_doc["prompt_tokens"] > 768
    # Note text stays out of lm-eval's console log.
    first_note_line = risk_doc["note"].splitlines()[1]
    assert first_note_line not in result.stdout and first_note_line not in result.stderr

    breakdown = run_medeval(["breakdown", str(output)], capsys)
    assert breakdown.returncode == 0, breakdown.stderr
    assert (
        "**emrqa_risk** by lf_template" in breakdown.stdout and "**emrqa_emrql_1** by lf_template" in breakdown.stdout
    )
    assert "**emrqa_medication** by answer_type" in breakdown.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("requested", ["emrqa_emrql_2", "emrql_2"])  # emrql_2: the old name (issue 19), a group of it
def test_emrql_2_runs_five_shot_on_a_filtered_data_ql_csv(tmp_path, requested):
    """Issue 10: a pool of two templates crashed lm-eval's sampler with a bare ValueError."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from test_emrqa_fewshot import _tiny_ql

    import medeval_metrics
    import medeval_metrics.testing.scripted

    info = write_synthetic(tmp_path / "data", notes_per_subset=2, questions_per_note=3)
    meta = {
        "emrqa_data_json": str(info.data_json),
        "emrqa_data_ql_csv": str(_tiny_ql(tmp_path, 40)),
        "emrqa_cache_dir": str(tmp_path / "cache"),
    }
    assert (
        len(emrqa_tasks.load_logical_forms("emrql_2", **meta)["train"].filter(lambda r: r["fewshot_role"] == "pool"))
        < 5
    )
    manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path(), metadata=meta)
    out = simple_evaluate(
        model="medeval-scripted",
        model_args={"table": {"key": "qa_id", "generate": {}, "default": ""}},
        tasks=[requested],
        task_manager=manager,
        log_samples=True,
    )
    sample = out["samples"]["emrqa_emrql_2"][0]
    prompt = sample["arguments"][0][0]
    assert prompt.count("Logical form:") == 6  # five examples and the question
    assert out["results"]["emrqa_emrql_2"]["lf_acc,none"] == 0.0
    assert (
        out["versions"]["emrqa_emrql_2"] == 1
        and len(out["samples"]["emrqa_emrql_2"]) == out["n-samples"]["emrqa_emrql_2"]["effective"]
    )


@pytest.mark.e2e
def test_gen_kwargs_budget_is_what_prompt_too_long_counts(metadata):
    """Issue 9: the budget is read from the task config, and --gen_kwargs max_gen_toks is honoured."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    import medeval_metrics.testing.scripted

    def too_long(**extra):
        manager = TaskManager(
            include_defaults=False,
            include_path=medeval_metrics.tasks_path(),
            metadata={**metadata, "emrqa_sample_size": 4},
        )
        out = simple_evaluate(
            model="medeval-scripted",
            model_args={"table": {"key": "qa_id", "generate": {}, "default": ""}},
            tasks=["emrqa_medication"],
            task_manager=manager,
            **extra,
        )
        return out["results"]["emrqa_medication"]["prompt_too_long,none"]

    # The scripted model reports no length: the 2,048-token estimate. Synthetic notes (~500 tokens) fit with
    # the YAML's 256 generated tokens, not with 2,000 (48 left for the prompt).
    assert too_long() == 0.0
    assert too_long(gen_kwargs="max_gen_toks=2000") == 1.0


@pytest.mark.e2e
def test_a_task_dict_evaluated_twice_counts_with_the_settings_its_task_holds(metadata, tiny_model):
    """The count reads the model settings from the task's metadata (where lm-eval's command line merges
    ``--model_args``) and the budget from its ``generation_kwargs`` when the items are scored. A task object
    evaluated twice (a sweep in one process) with its ``max_length`` changed in between counts each run with the
    settings it held, exactly as lm-eval's HF backend encodes the prompt, and each run's logged samples keep their
    own counts. (A model object given to ``evaluate`` is not read: the settings are the task's.)"""
    from lm_eval import evaluator
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager, get_task_dict

    import medeval_metrics

    manager = TaskManager(
        include_defaults=False,
        include_path=medeval_metrics.tasks_path(),
        metadata={**metadata, "emrqa_sample_size": 2, "pretrained": str(tiny_model)},
    )
    task_dict = get_task_dict(["emrqa_medication"], manager)
    task_dict["emrqa_medication"]._config.generation_kwargs["max_gen_toks"] = 4  # as --gen_kwargs does
    seen = []
    for max_length in (1024, 64):
        task_dict["emrqa_medication"]._config.metadata["max_length"] = max_length  # as --model_args max_length=N
        lm = HFLM(pretrained=str(tiny_model), device="cpu", batch_size=2, max_length=max_length)
        out = evaluator.evaluate(lm, task_dict, log_samples=True)
        samples = out["samples"]["emrqa_medication"]
        for sample in samples:
            doc = sample["doc"]
            assert doc["context_counter"] == "emrqa_medication"
            assert doc["prompt_tokens"] == len(lm.tok_encode(sample["arguments"][0][0]))  # as lm-eval encodes it
            assert doc["context_check"] == f"tokenizer {tiny_model.name}, limit {max_length} incl. 4 generated"
            assert sample["prompt_too_long"] == float(doc["prompt_tokens"] + 4 > max_length)
        seen.append(samples)
    # read after both runs: each run's logged samples keep their own counts
    assert [sorted({s["doc"]["context_limit"] for s in samples}) for samples in seen] == [[1024], [64]]


@pytest.mark.e2e
def test_a_model_object_without_a_name_in_the_metadata_is_counted_by_the_labelled_estimate(metadata, tiny_model):
    """``simple_evaluate(model=<an HFLM object>, task_manager=...)``: nothing names the model in the tasks'
    metadata, so the prompt is estimated at 4 characters per token against 2,048 and each logged doc says so."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    import medeval_metrics

    manager = TaskManager(
        include_defaults=False, include_path=medeval_metrics.tasks_path(), metadata={**metadata, "emrqa_sample_size": 2}
    )
    lm = HFLM(pretrained=str(tiny_model), device="cpu", batch_size=2, max_length=1024)
    out = simple_evaluate(model=lm, tasks=["emrqa_medication"], task_manager=manager, log_samples=True, limit=2)
    for sample in out["samples"]["emrqa_medication"]:
        doc = sample["doc"]
        assert doc["context_check"].startswith("estimate: characters/4 against max_length 2048")
        assert doc["prompt_tokens"] == (len(sample["arguments"][0][0]) + 3) // 4 and doc["context_limit"] == 2048


@pytest.mark.e2e
def test_a_users_task_over_the_packs_counts_its_own_prompt_and_name(metadata, tiny_model, tmp_path):
    """A user's YAML including the pack's task with its own name and a shorter ``doc_to_text``: the counts are of
    the prompt lm-eval renders (the pack's long-note prompt was counted before), under the user's task name; a
    --predict_only run (nothing scored) drops the prompts it noted when its task goes."""
    import gc

    from lm_eval import evaluator
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager, get_task_dict

    import medeval_metrics
    from medeval_metrics.context_fit import PromptCounter

    pack_yaml = Path(medeval_metrics.tasks_path()) / "emrqa" / "emrqa_medication.yaml"
    (tmp_path / "mine.yaml").write_text(
        f'include: {pack_yaml}\ntask: my_short_emrqa\ndoc_to_text: "Question: {{{{question}}}}\\nEvidence:"\n'
    )
    manager = TaskManager(
        include_defaults=False,
        include_path=[medeval_metrics.tasks_path(), str(tmp_path)],
        # as lm-eval's command line merges --model_args into every task's metadata
        metadata={**metadata, "emrqa_sample_size": 2, "pretrained": str(tiny_model), "max_length": 1024},
    )
    lm = HFLM(pretrained=str(tiny_model), device="cpu", batch_size=2, max_length=1024)
    task_dict = get_task_dict(["my_short_emrqa"], manager)  # built first, as simple_evaluate does
    out = evaluator.evaluate(lm, task_dict, log_samples=True)
    samples = out["samples"]["my_short_emrqa"]
    assert len(samples) == 2
    for sample in samples:
        prompt = sample["arguments"][0][0]
        assert prompt == f"Question: {sample['doc']['question']}\nEvidence:"  # the user's prompt, not the note
        assert sample["doc"]["context_counter"] == "my_short_emrqa"
        assert sample["doc"]["prompt_tokens"] == len(lm.tok_encode(prompt))
        assert sample["doc"]["context_check"].endswith("limit 1024 incl. 256 generated")

    task_dict = get_task_dict(["emrqa_medication"], manager)  # the pack's prompt, which notes what it renders
    task_dict["emrqa_medication"].override_metric("bypass")  # what simple_evaluate(predict_only=True) does
    evaluator.evaluate(lm, task_dict, log_samples=True)
    counter = PromptCounter.of({"context_counter": "emrqa_medication"}, "context_counter")
    assert len(counter.noted) == 2  # rendered, never scored
    del task_dict
    gc.collect()
    assert counter.noted == []
