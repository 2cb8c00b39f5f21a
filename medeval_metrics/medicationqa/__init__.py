"""MedicationQA (Ben Abacha et al., MedInfo 2019): consumer medication questions, judged by a panel.

Data: the 690 rows of ``MedInfo2019-QA-Medications.xlsx`` (all of them are the test set), from the
Hub mirror ``truehealth/medicationqa`` (split ``train``) or the user's local copy: the original
spreadsheet, or a JSON / JSON Lines / CSV export with the same columns (spreadsheet headers or
snake_case). Point at a local copy with ``--metadata '{"medicationqa_path": ...}'`` or
``MEDEVAL_MEDICATIONQA_PATH``.

Scores: ROUGE-L and sentence BLEU against the reference answer, always; the judge panel's
accuracy / completeness / clarity (1-5), HELM panel score, MedARC reward, unscored rate, per-judge
success rate and agreement when a panel is configured (``medeval_metrics.judge``).

Modules: ``data`` (sources, readers, validation), ``prompts``, ``judging`` (the rubric),
``scoring``, ``rouge`` (ROUGE-L with rouge-score's exact scores, faster). The names the task YAML uses are re-exported here.
"""

from medeval_metrics.medicationqa.data import (
    COLUMNS,
    HUB_SPLIT,
    REQUIRED,
    SHEET,
    SOURCE,
    load_medicationqa,
    load_rows,
    normalise_rows,
    read_local,
)
from medeval_metrics.medicationqa.judging import RUBRIC
from medeval_metrics.medicationqa.prompts import INSTRUCTION, doc_to_text
from medeval_metrics.medicationqa.scoring import bleu, process_results, rouge_l

__all__ = [
    "COLUMNS", "HUB_SPLIT", "REQUIRED", "SHEET", "SOURCE", "load_medicationqa", "load_rows", "normalise_rows",
    "read_local", "RUBRIC", "INSTRUCTION", "doc_to_text", "bleu", "process_results", "rouge_l",
]
