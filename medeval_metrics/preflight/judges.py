"""The judge panel of the judged tasks, checked before the model is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def check_judge_panel(metadata: dict[str, Any]) -> None:
    """The judge panel (``--metadata medeval_judges`` or ``$MEDEVAL_JUDGES``), validated completely
    (``judge.config.validate_panel``: backends, base URLs, key variables, cache path, rubric file)."""
    from medeval_metrics.judge import config

    config.panel_for_task(metadata)


def needs_judges(tasks: Sequence[str]) -> bool:
    from medeval_metrics import registry

    return any(registry.judging_for(t) is not None for t in tasks)
