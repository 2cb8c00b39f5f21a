"""The card section lists the headline metrics a reader compares models by (issues 23.8 and 33); the rest stays in
results.md."""

from __future__ import annotations

import json
import re

from medeval_metrics.report import build_report

SCORES = {
    "rougeL": 0.21,
    "bleu": 3.5,
    "judge_panel_score": 3.25,
    "judge_reward": 0.56,
    "judge_accuracy": 3.5,
    "judge_completeness": 3.0,
    "judge_clarity": 3.25,
}
HEADLINE = {
    "judge_panel_score",
    "judge_accuracy",
    "judge_completeness",
    "judge_clarity",
    "judge_unscored_rate",
    "judge_agreement",
}
BOOKKEEPING = {
    "judge_computed": 1.0,
    "judge_unscored_rate": 0.0,
    "judge_id_echo_rate": 0.0,
    "judge_success_a": 1.0,
    "judge_success_b": 1.0,
    "judge_agreement": 0.4,
}


def write_run(folder):
    metrics = {"alias": "medicationqa"}
    for name, value in {**SCORES, **BOOKKEEPING}.items():
        metrics[f"{name},scored"] = value
        metrics[f"{name}_stderr,scored"] = 0.01
    results = {
        "results": {"medicationqa": metrics},
        "versions": {"medicationqa": 3},
        "n-shot": {"medicationqa": 0},
        "n-samples": {"medicationqa": {"original": 690, "effective": 690}},
        "configs": {"medicationqa": {"task": "medicationqa", "metadata": {"version": 3}}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": None},
        "date": 1.0,
    }
    folder.mkdir(parents=True)
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results))


def table_metrics(text: str) -> set[str]:
    return set(re.findall(r"\(`([a-z_A-Z0-9]+)`\) \|", text))


def test_the_card_shows_the_comparison_metrics_and_results_md_keeps_the_rest(tmp_path):
    write_run(tmp_path / "run" / "org__model")
    build_report([tmp_path / "run"], tmp_path / "report", figures=False)
    card = (tmp_path / "report" / "card_section.md").read_text()
    results = (tmp_path / "report" / "results.md").read_text()
    # the headline (issue 33): the panel score, its three dimensions, the unscored rate and the agreement
    assert table_metrics(card) == HEADLINE
    assert "7 bookkeeping and diagnostic metrics" in card and "results.md" in card
    assert set(SCORES) | {"judge_id_echo_rate", "judge_success_a", "judge_agreement"} <= table_metrics(results)
