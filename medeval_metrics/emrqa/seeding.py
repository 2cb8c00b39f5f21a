"""The seeded coin behind every emrQA split and sample: a number fixed by its key, not by file order."""

from __future__ import annotations

import hashlib
from typing import Any

DEFAULT_SEED = 1234
TEST_FRACTION = 0.2


def stable_fraction(*parts: Any) -> float:
    """A number in [0, 1) fixed by its key: the seeded coin used for every split and sample."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_test(seed: int, kind: str, key: str) -> bool:
    return stable_fraction(seed, kind, key) < TEST_FRACTION
