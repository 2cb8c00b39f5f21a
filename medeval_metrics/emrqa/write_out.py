"""lm-eval's ``--write_out`` prints whole prompts, which hold note text: the loaders warn once when it is given."""

from __future__ import annotations

import logging
from functools import lru_cache

logger = logging.getLogger("medeval.emrqa")

WRITE_OUT_WARNING = (
    "emrQA: --write_out prints whole prompts to the console, and emrQA prompts hold patient-note text. "
    "Keep that console output private (it is covered by the n2c2 data-use agreement), or run without --write_out."
)


def writes_out(argv: list[str]) -> bool:
    """Whether an lm-eval command line asks for ``--write_out`` (``-w``)."""
    return any(arg in ("--write_out", "-w") or arg.startswith("--write_out=") for arg in argv)


@lru_cache(maxsize=1)
def warn_write_out() -> None:
    logger.warning(WRITE_OUT_WARNING)  # once per process, however many note tasks are loaded
