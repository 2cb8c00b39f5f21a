"""MedicationQA scoring: ROUGE-L and BLEU always, the judge panel's per-item scores when it ran."""

from __future__ import annotations

from typing import Any

from medeval_metrics.judge.aggregate import item_metrics, structured_verdicts
from medeval_metrics.medicationqa.judging import RUBRIC
from medeval_metrics.medicationqa.rouge import rouge_l_f


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
        from medeval_metrics.medicationqa.bertscore import bertscore_f1, model_of_doc

        out["bertscore_f1"] = bertscore_f1(answer, doc["answer"], model_of_doc(doc))
    if record.get("verdicts") is not None:
        rubric = record.get("rubric") or {}  # the panel's rubric file, when it named one
        dimensions = list(rubric.get("dimensions") or RUBRIC.dimensions)
        low, high = rubric.get("scale") or (RUBRIC.scale_min, RUBRIC.scale_max)
        out.update(item_metrics(record["verdicts"], dimensions, record["judges"], high, low))
        out["judge_verdicts"] = structured_verdicts(record["verdicts"], record["judges"])
    return out
