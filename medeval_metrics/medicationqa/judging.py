"""MedicationQA judging spec: the rubric the judge panel scores answers with (``rubric.yaml``)."""

from __future__ import annotations

from pathlib import Path

from medeval_metrics.judge.rubric import load_rubric_file

RUBRIC_FILE = Path(__file__).with_name("rubric.yaml")
RUBRIC = load_rubric_file(RUBRIC_FILE)
