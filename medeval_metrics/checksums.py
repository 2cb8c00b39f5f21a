"""The published files' pins (declared on each ``DataSource``) and the one file digest of the pack."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import DATA_CHECKSUMS, excerpt

log = logging.getLogger("medeval.data")

CHECKSUM_ENV = DATA_CHECKSUMS.name  # "warn" (default), "error", or "off"
_PINS: dict[str, str] = {}  # file name -> sha256, from every DataSource defined so far (DataSource.sha256)


def pin(sha256: Mapping[str, str]) -> None:
    """Add published files' digests (file name -> sha256): each ``DataSource`` pins its own."""
    _PINS.update(sha256)


def known_checksums() -> dict[str, str]:
    """File name -> sha256 of every pinned public file: the ``sha256`` of each ``DataSource`` defined.

    A file is read through the source that defines its pins, so its pins are known before it is checked.
    """
    return dict(_PINS)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks (the one file digest of the pack)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256, so a file is hashed once


def check_known_checksum(path: Path, mode: str | None = None) -> str:
    """Compare a local file named like a pinned public file (``test_open.json``,
    ``MedInfo2019-QA-Medications.xlsx``...) with its source's pinned sha256.

    Returns "match", "mismatch" or "unpinned" (a name no source pins, a folder, or
    checking off). A mismatch means the scores will not be comparable with published ones: by
    default a warning (once per file) naming the file and both digests; ``MEDEVAL_DATA_CHECKSUMS=error``
    makes it a ``MedevalDataError``, ``=off`` skips the check (``mode`` overrides the variable).
    """
    path = Path(path)
    mode = (mode or os.environ.get(CHECKSUM_ENV) or "warn").strip().lower()
    if mode not in ("warn", "error", "off"):
        raise MedevalDataError(f"{CHECKSUM_ENV}={excerpt(mode)}: use 'warn' (the default), 'error' or 'off'.")
    expected = _PINS.get(path.name)
    if mode == "off" or expected is None or not path.is_file():
        return "unpinned"
    stat = path.stat()
    first_time = (str(path.resolve()), stat.st_size, stat.st_mtime_ns) not in _digests
    actual = file_digest(path)
    if actual == expected:
        return "match"
    if mode == "error":
        raise MedevalDataError(
            f"{path}: not the published {path.name} (sha256 {actual}, expected {expected}); scores on it would not "
            f"be comparable with published ones. Download it again, or set {CHECKSUM_ENV}=warn to use it anyway."
        )
    if first_time:
        log.warning(
            "medeval: %s is not the published %s (sha256 %s, expected %s); scores on it are not comparable with "
            "published ones. Download it again if that is unintended (%s=error makes this an error, =off silences it).",
            path,
            path.name,
            actual,
            expected,
            CHECKSUM_ENV,
        )
    return "mismatch"


def file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        _digests[key] = file_sha256(path)
    return _digests[key]
