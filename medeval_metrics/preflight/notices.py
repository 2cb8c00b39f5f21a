"""Notices ``medeval run`` prints once its checks pass, before lm-eval builds the model: what the run will not
compute although it runs, said while there is still time to change the command (after generation it is the
end of a long run)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from medeval_metrics.preflight.argv import RunSettings


def judge_panel_notice(settings: RunSettings, judged_tasks: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """One line for judged tasks run without a judge panel (neither ``medeval_judges`` in ``--metadata``, nor
    ``$MEDEVAL_JUDGES``, nor the judge flags): their judge scores will not be computed, how to add a panel, and
    that ``medeval judge`` can score the saved answers later."""
    from medeval_metrics.preflight.catalogue import JUDGES_KEY
    from medeval_metrics.preflight.keys import environment_variable

    if not judged_tasks or settings.metadata.get(JUDGES_KEY) or environ.get(environment_variable(JUDGES_KEY)):
        return None
    if settings.output_path and settings.writes_samples:
        later = f"`medeval judge {settings.output_path} --judges judges.yaml` scores this run's saved answers later"
    else:
        later = "`medeval judge DIR --judges judges.yaml` scores saved answers later (run with --output_path DIR --log_samples)"
    return (
        f"{', '.join(judged_tasks)}: no judge panel, so judge scores will not be computed (reference-overlap metrics "
        f"only). Add --judges judges.yaml or --judge-model MODEL (or MEDEVAL_JUDGES), or {later}."
    )


def pre_run_notices(settings: RunSettings, pack_tasks: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """The notices for a run whose checks passed (each one line, without the ``medeval: note:`` prefix)."""
    from medeval_metrics.preflight.judges import needs_judges

    judged = [task for task in pack_tasks if needs_judges([task])]
    return [notice for notice in [judge_panel_notice(settings, judged, environ)] if notice]


def print_notice(notice: str) -> None:
    print(f"medeval: note: {notice}", file=sys.stderr, flush=True)


Notify = Callable[[str], Any]
