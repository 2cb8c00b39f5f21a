"""Every patch of lm-eval internals the pack needs, each self-contained, with why and for which versions.

Each function here has a test (``tests/test_lm_eval_compat*.py``) that fails when lm-eval's
behaviour changes so that the patch is no longer needed or no longer works.
"""

from __future__ import annotations

import sys
from typing import Any


def loading_task_config() -> Any | None:
    """The ``TaskConfig`` of the task whose ``custom_dataset`` loader is running now, else ``None``.

    Why: lm-eval calls ``custom_dataset(**config.metadata, **config.dataset_kwargs)`` with copies,
    so a loader cannot record what it found while loading (the retrieval corpus's version, the
    settings it resolved) in the config that lm-eval writes to the results JSON
    (``results["configs"][task]``). The caller's frame holds the task as ``self``; writing into
    its ``config.metadata`` puts the values there.

    Needed for lm-eval 0.4.x up to at least 0.4.13 (``ConfigurableTask.download`` calls the loader
    directly). Returns ``None`` when called any other way (a loader used outside lm-eval).
    """
    frame = sys._getframe(1)
    for _ in range(8):  # the loader, maybe a wrapper or two, then ConfigurableTask.download
        frame = frame.f_back
        if frame is None:
            return None
        task = frame.f_locals.get("self")
        if frame.f_code.co_name == "download" and getattr(getattr(task, "config", None), "custom_dataset", None):
            return task.config
    return None
