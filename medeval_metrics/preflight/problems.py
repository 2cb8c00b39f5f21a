"""Problems found before a run, reported together: one line each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from medeval_metrics.data import MedevalDataError


class RunProblems(MedevalDataError):
    """Several problems found at once; ``problems`` holds each (the command prints one line per problem)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"{len(self.problems)} problems, fix them all before the run:"
            + "".join(f"\n  - {p}" for p in self.problems)
        )


def raise_problems(problems: Sequence[str]) -> None:
    """One problem: its line; several: one error listing each on its own line (``RunProblems``). A problem
    two checks found (a setting both the option check and the data loader read) is listed once."""
    problems = list(dict.fromkeys(problems))
    if len(problems) == 1:
        raise MedevalDataError(problems[0])
    if problems:
        raise RunProblems(problems)


def collect(problems: list[str], check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``check(*args)``; a MedevalDataError it raises becomes more entries of ``problems`` (one per problem it
    carries in ``problems``, as a check of several files does), and None is returned."""
    try:
        return check(*args, **kwargs)
    except MedevalDataError as exc:
        problems.extend(getattr(exc, "problems", None) or [str(exc)])
        return None
