"""``JudgeFilter``: an lm-eval Filter that judges every answer of a task in one concurrent batch.

lm-eval hands a Filter all of a task's responses at once, which is what lets the panel run
concurrently (a ``process_results`` hook sees one document at a time). The panel reaches the
filter explicitly: as its ``panel`` argument (inline JSON or a judges file in the task YAML), or by
the key in the documents' ``judge_panel_key`` field, which a judged task's loader sets after
checking the panel of ``--metadata medeval_judges`` / ``$MEDEVAL_JUDGES`` and registering it
(``judge.config.register_panel``; lm-eval gives filters no metadata, and a document carries only that
key). Without a panel the filter passes the answers through with ``verdicts: None`` and logs plainly
that no judge scores were computed. Each run's per-judge outcome is kept for ``medeval run``'s exit
code (``panel_outcomes_since``). lm-eval applies filters under ``--predict_only`` too: leave the panel unset
there and judge later with ``medeval judge``. YAML::

    filter_list:
      - name: judge
        filter:
          - function: !function medeval_metrics.judge.filter.JudgeFilter
            rubric: my_pack.my_benchmark.RUBRIC   # a dotted path to a Rubric, or a rubric YAML file
            question_field: question
            reference_field: answer
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from lm_eval.api.filter import Filter

from medeval_metrics.judge.config import PANEL_FIELD, PanelConfig, load_panel, registered_panel
from medeval_metrics.judge.rubric import Rubric, load_rubric

log = logging.getLogger("medeval.judge")
NO_JUDGE_MESSAGE = (
    "medeval: no judge panel configured: judge scores were NOT computed; only the reference-overlap metrics are "
    'reported. Give a panel with --metadata \'{"medeval_judges": "judges.yaml"}\' (a judges file or inline '
    "JSON) or the environment variable MEDEVAL_JUDGES; `medeval judge OUTPUT_PATH --judges judges.yaml` scores the "
    "answers a run saved with --output_path and --log_samples"
)


# (time, {judge: panel_summary entry}) of each panel run by a JudgeFilter in this process, newest last:
# ``medeval run`` names the judges that scored nothing from these where the run logged no samples.
_OUTCOMES: list[tuple[float, dict[str, dict[str, Any]]]] = []
_OUTCOMES_KEPT = 64
_outcomes_lock = threading.Lock()


def _note_outcome(per_judge: dict[str, dict[str, Any]]) -> None:
    with _outcomes_lock:
        _OUTCOMES.append((time.time(), per_judge))
        del _OUTCOMES[:-_OUTCOMES_KEPT]


def panel_outcomes_since(started: float) -> list[dict[str, dict[str, Any]]]:
    """The per-judge summaries (``runner.panel_summary``) of the judge filters that ran in this process since
    ``started`` (a ``time.time()``, e.g. lm-eval's results ``date``)."""
    with _outcomes_lock:
        return [per_judge for at, per_judge in _OUTCOMES if at >= started]


def rubric_for(task_rubric: Rubric, panel: PanelConfig | None) -> Rubric:
    """The panel's own rubric file if it names one, else the task's."""
    return load_rubric(panel.rubric) if panel is not None and panel.rubric else task_rubric


def judge_answers(
    answers: list[str],
    docs: list[dict[str, Any]],
    rubric: Rubric,
    question_field: str,
    reference_field: str,
    panel: PanelConfig | None,
    progress: bool = True,
    retry_unscored: bool = False,
    record_outcome: bool = False,
) -> list[dict[str, Any]]:
    """Per doc ``{"answer", "verdicts" ({judge: verdict} or None), "judges", "rubric"}``; used by the filter and the CLI.
    ``record_outcome``: keep the per-judge summary for ``panel_outcomes_since`` (the filter does)."""
    from medeval_metrics.judge.runner import JudgeItem, PanelRunner, panel_summary, summary_lines

    if panel is None:
        log.warning(NO_JUDGE_MESSAGE)
        return [{"answer": a, "verdicts": None, "judges": None, "rubric": None} for a in answers]
    rubric = rubric_for(rubric, panel)
    items = [
        JudgeItem(str(d.get(question_field, "")), str(d.get(reference_field, "")), a) for a, d in zip(answers, docs)
    ]
    verdicts = PanelRunner(panel, rubric, retry_unscored=retry_unscored).judge(items, progress=progress)
    summary = panel_summary(verdicts, panel.judge_names)
    if record_outcome:
        _note_outcome(summary)
    for (name, stats), line in zip(summary.items(), summary_lines(summary)):
        # seen in a default lm-eval run when something went unscored, quiet otherwise
        log.log(logging.WARNING if stats["unscored"] else logging.INFO, line)
    described = {
        "name": rubric.name,
        "version": rubric.version,
        "hash": rubric.content_hash(),
        "dimensions": list(rubric.dimensions),
        "scale": [rubric.scale_min, rubric.scale_max],
    }
    return [
        {"answer": a, "verdicts": v, "judges": panel.judge_names, "rubric": described}
        for a, v in zip(answers, verdicts)
    ]


class JudgeFilter(Filter):
    def __init__(
        self,
        rubric: str | Rubric,
        question_field: str = "question",
        reference_field: str = "answer",
        panel: str | dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.rubric = load_rubric(rubric)
        self.question_field, self.reference_field = question_field, reference_field
        if isinstance(panel, dict):
            panel = json.dumps(panel)
        self.panel = load_panel(panel, where="judge filter panel") if panel else None

    def panel_for(self, docs: list[dict[str, Any]]) -> PanelConfig | None:
        if self.panel is not None:
            return self.panel
        key = next((d.get(PANEL_FIELD) for d in docs if isinstance(d, dict) and d.get(PANEL_FIELD)), None)
        if key:
            return registered_panel(key, where="judge filter")
        return load_panel()  # a task whose loader names no panel: the environment's, if any

    def apply(self, resps: Iterable[list[str]], docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        resps, docs = list(resps), list(docs)
        # the first response per doc: judging repeats would multiply the bill
        answers = [str(r[0]) if r else "" for r in resps]
        return judge_answers(
            answers,
            docs,
            self.rubric,
            self.question_field,
            self.reference_field,
            panel=self.panel_for(docs),
            record_outcome=True,
        )
