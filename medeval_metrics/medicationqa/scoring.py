"""MedicationQA scoring: ROUGE-L and BLEU always, the judge panel's per-item scores when it ran."""

from __future__ import annotations

from typing import Any

from medeval_metrics.judge.aggregate import PER_JUDGE_METRIC_FAMILIES, item_metrics, structured_verdicts
from medeval_metrics.lm_eval_compat import aggregate_metric_families
from medeval_metrics.medicationqa.judging import RUBRIC
from medeval_metrics.medicationqa.rouge import rouge_l_f
from medeval_metrics.stats import install_stderr_hook


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score's tokens and Porter stemming, the same floats; see ``rouge``), 0-1."""
    if not prediction.strip() or not reference.strip():
        return 0.0
    return float(rouge_l_f(reference, prediction))


def bleu(prediction: str, reference: str) -> float:
    """Sentence BLEU (sacrebleu defaults: 13a tokenisation, exponential smoothing), 0-100."""
    import sacrebleu

    if not prediction.strip():
        return 0.0
    return float(sacrebleu.sentence_bleu(prediction, [reference]).score)


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    record = results[0]
    if not isinstance(record, dict):  # a filter other than the judge filter: plain text
        record = {"answer": str(record), "verdicts": None, "judges": None}
    answer = str(record.get("answer") or "").strip()
    out: dict[str, Any] = {
        "rougeL": rouge_l(answer, doc["answer"]),
        "bleu": bleu(answer, doc["answer"]),
        "judge_computed": 0.0 if record.get("verdicts") is None else 1.0,
    }
    if doc.get("bertscore_model"):  # opt-in (medicationqa.bertscore)
        from medeval_metrics.medicationqa.bertscore import bertscore_f1

        out["bertscore_f1"] = bertscore_f1(answer, doc["answer"], doc["bertscore_model"])
    if record.get("verdicts") is not None:
        rubric = record.get("rubric") or {}  # the panel's rubric file, when it named one
        dimensions = list(rubric.get("dimensions") or RUBRIC.dimensions)
        low, high = rubric.get("scale") or (RUBRIC.scale_min, RUBRIC.scale_max)
        out.update(item_metrics(record["verdicts"], dimensions, record["judges"], high, low))
        out["judge_verdicts"] = structured_verdicts(record["verdicts"], record["judges"])
    return out


process_results.metric_families = PER_JUDGE_METRIC_FAMILIES  # judge_success_<judge>: mean, higher is better


def _install_hooks() -> None:
    """Give the agreement aggregation a real stderr in lm-eval's table (see judge.aggregate), and the
    per-judge ``judge_success_<judge>`` metrics their declared aggregation (not lm-eval's warning)."""
    try:
        install_stderr_hook()
        aggregate_metric_families()
    except ImportError:  # lm-eval absent: only the loader/metrics are being used
        pass


_install_hooks()
