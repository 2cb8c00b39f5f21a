"""``JudgeFilter``: an lm-eval Filter that judges every answer of a task in one concurrent batch.

lm-eval hands a Filter all of a task's responses at once, which is what lets the panel run
concurrently (a ``process_results`` hook sees one document at a time). Filters do not receive the
task's metadata, so the panel is the one the task's data loader took from ``--metadata
medeval_judges``, else ``$MEDEVAL_JUDGES`` (see ``judge.config``). Without either, the filter passes
the answers through with ``verdicts: None`` and logs plainly that no judge scores were computed.
lm-eval applies filters under ``--predict_only`` too: leave the panel unset there and judge later
with ``medeval judge``. YAML::

    filter_list:
      - name: judge
        filter:
          - function: !function medeval_metrics.judge.filter.JudgeFilter
            rubric: medeval_metrics.<benchmark>.RUBRIC
            question_field: question
            reference_field: answer
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Iterable

from lm_eval.api.filter import Filter

from medeval_metrics.judge.rubric import Rubric

log = logging.getLogger("medeval.judge")
NO_JUDGE_MESSAGE = (
    "no judge panel configured (set MEDEVAL_JUDGES to inline JSON or a judges file): judge scores were "
    "NOT computed; only the reference-overlap metrics are reported"
)


def load_rubric(path: str | Rubric) -> Rubric:
    if isinstance(path, Rubric):
        return path
    module_name, _, attribute = path.replace(":", ".").rpartition(".")
    rubric = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(rubric, Rubric):
        raise TypeError(f"{path} is a {type(rubric).__name__}, not a medeval_metrics.judge.rubric.Rubric")
    return rubric


def judge_answers(
    answers: list[str], docs: list[dict[str, Any]], rubric: Rubric, question_field: str, reference_field: str,
    panel: Any = None, progress: bool = True,
) -> list[dict[str, Any]]:
    """Per doc ``{"answer", "verdicts" ({judge: verdict} or None), "judges"}``; used by the filter and the CLI."""
    from medeval_metrics.judge.config import load_panel
    from medeval_metrics.judge.runner import JudgeItem, PanelRunner

    panel = panel if panel is not None else load_panel()
    if panel is None:
        log.warning(NO_JUDGE_MESSAGE)
        return [{"answer": a, "verdicts": None, "judges": None} for a in answers]
    items = [JudgeItem(str(d.get(question_field, "")), str(d.get(reference_field, "")), a) for a, d in zip(answers, docs)]
    verdicts = PanelRunner(panel, rubric).judge(items, progress=progress)
    return [{"answer": a, "verdicts": v, "judges": panel.judge_names} for a, v in zip(answers, verdicts)]


class JudgeFilter(Filter):
    def __init__(self, rubric: str, question_field: str = "question",
                 reference_field: str = "answer", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rubric = load_rubric(rubric)
        self.question_field, self.reference_field = question_field, reference_field

    def apply(self, resps: Iterable[list[str]], docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        resps, docs = list(resps), list(docs)
        # the first response per doc: judging repeats would multiply the bill
        answers = [str(r[0]) if r else "" for r in resps]
        return judge_answers(answers, docs, self.rubric, self.question_field, self.reference_field)
