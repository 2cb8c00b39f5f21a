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
``scoring``, ``rouge`` (ROUGE-L with rouge-score's exact scores, faster), ``spec``. The names the task
YAML uses are re-exported here.
"""

import importlib
from typing import Any

# Re-exported lazily: the spec (read by `medeval list`) imports `data` only, and `scoring` pulls in lm-eval.
_EXPORTS = {
    **dict.fromkeys(
        (
            "COLUMNS",
            "HUB_SPLIT",
            "REQUIRED",
            "SHEET",
            "SOURCE",
            "load_medicationqa",
            "load_rows",
            "normalise_rows",
            "read_local",
        ),
        "data",
    ),
    "RUBRIC": "judging",
    **dict.fromkeys(("INSTRUCTION", "doc_to_text"), "prompts"),
    **dict.fromkeys(("bleu", "process_results", "rouge_l"), "scoring"),
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
