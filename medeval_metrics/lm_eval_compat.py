"""Patches of lm-eval internals, each saying what it works around and for which lm-eval versions.

(Other engineers add their patches to this module; each function is self-contained.)
"""

from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def pack_only_task_index() -> Iterator[None]:
    """While active, every ``TaskManager`` indexes only the folders it is given (no built-in tasks).

    Works around: lm-eval 0.4.13's CLI always builds the full index of its ~14k built-in tasks
    (about 4 s, and most of a short run's start-up), with no flag to skip it; ``TaskManager``'s
    ``include_defaults`` argument is not reachable from the command line. ``medeval run`` uses this
    only when every requested task is the pack's and the user gave no ``--include_path``, so the
    pack's folder (added by the pack's own TaskManager hook) is all that is needed.
    Versions: lm-eval 0.4.13 (``TaskManager.__init__(..., include_defaults=True, ...)``).
    Test: tests/test_cli_run_checks.py notices when ``include_defaults`` disappears or when the
    CLI grows its own way to skip the defaults.
    """
    from lm_eval.tasks import TaskManager

    wrapped = TaskManager.__init__

    def init_without_defaults(self, *args, include_defaults=True, **kwargs):  # noqa: ARG001
        wrapped(self, *args, include_defaults=False, **kwargs)

    TaskManager.__init__ = init_without_defaults  # type: ignore[method-assign]
    try:
        yield
    finally:
        TaskManager.__init__ = wrapped  # type: ignore[method-assign]
