"""Files and folders as the pack finds them: whether a folder can be written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def unwritable_reason(folder: Path) -> str | None:
    """Why files cannot be written into ``folder`` (created as needed), or None. Checked by really creating (and
    removing) a folder in its nearest existing ancestor: permission bits do not tell for root or for /proc."""
    folder = Path(folder).expanduser()
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".medeval-write-check-", dir=existing))
    except OSError as exc:
        return f"{existing} is not writable ({exc.strerror or type(exc).__name__})"
    return None
