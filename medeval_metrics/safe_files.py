"""Every file the pack writes goes through here: whole or not at all, and never through a link.

A write creates a temporary file beside the target, exclusively (``O_EXCL``: a random name nobody
else holds, ``O_NOFOLLOW``: a link planted there is refused, not followed), writes, flushes and
fsyncs it, then renames it over the target. So a reader (or a later step of the pack) sees the old
file or the new one, never half of one; a failed write (disk full, quota, permissions) leaves no
partial file and is a ``MedevalWriteError`` naming the file. A target that is itself a link is
replaced by a regular file, not written through (the model card has its own rule: ``card_target``).

Private files (note text, private-set questions, model answers, judge verdicts) are written with
``private=True``, or created with ``create_private_file`` (a SQLite database, a log appended to): mode
0600 in folders this module creates 0700 (``private_folder``), whatever the process's umask.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from medeval_metrics.errors import MedevalDataError

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
PRIVATE_FILE_MODE = 0o600  # the owner reads and writes; nobody else
PRIVATE_FOLDER_MODE = 0o700


class MedevalWriteError(MedevalDataError):
    """A file the pack could not write; nothing partial was left at ``path``."""

    def __init__(self, path: Path | str, exc: BaseException) -> None:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        super().__init__(
            f"could not write {path} ({reason}); nothing was written there. Free space or choose "
            "another folder, then run again."
        )
        self.path = Path(path)


def _mode_for(path: Path) -> int | None:
    """The permissions to keep: those of the regular file being replaced, else None (the umask's)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    import stat

    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def private_folder(folder: Path | str) -> Path:
    """``folder``, created with its missing parents; each folder this call creates is 0700 (set after ``mkdir``,
    whose mode the umask cuts). A folder that exists keeps its permissions: it is the user's."""
    folder = Path(folder)
    missing = []
    here = folder
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for created in reversed(missing):
        try:
            os.mkdir(created, PRIVATE_FOLDER_MODE)
        except FileExistsError:  # another process made it meanwhile: its mode is its own
            continue
        os.chmod(created, PRIVATE_FOLDER_MODE)
    return folder


def create_private_file(path: Path | str) -> bool:
    """Create ``path`` empty and 0600 (in a ``private_folder``) unless it exists; True when this call created it.
    For files other code then opens itself: create the database before ``sqlite3.connect`` (SQLite gives its
    ``-wal``, ``-shm`` and journal files the database's permissions). Never follows a link planted at ``path``."""
    path = Path(path)
    private_folder(path.parent)
    try:
        fd = os.open(path, _FLAGS, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return True


def _exclusive_temporary(path: Path, attempts: int = 8, mode: int = 0o666) -> tuple[Path, int]:
    """A new file beside ``path`` that this call created (never an existing file or a link's target)."""
    for attempt in range(attempts):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return temporary, os.open(temporary, _FLAGS, mode)
        except FileExistsError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def atomic_open(
    path: Path | str, mode: str = "w", encoding: str | None = "utf-8", private: bool = False
) -> Iterator[IO]:
    """Write ``path`` through ``with atomic_open(path) as handle: ...`` (``mode`` "w" or "wb").

    On any error inside the block or while finishing, the temporary file is removed and the target
    is left as it was; an ``OSError`` becomes a ``MedevalWriteError`` naming ``path``. ``private``: the
    file is 0600 (a replaced file's looser mode is not kept) in folders created 0700, whatever the umask;
    it is 0600 from its creation, never readable by others while it is written."""
    path = Path(path)
    keep_mode = PRIVATE_FILE_MODE if private else _mode_for(path)
    try:
        if private:
            private_folder(path.parent)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        temporary, fd = _exclusive_temporary(path, mode=PRIVATE_FILE_MODE if private else 0o666)
    except OSError as exc:
        raise MedevalWriteError(path, exc) from exc
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if keep_mode is not None:
            os.chmod(temporary, keep_mode)
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise MedevalWriteError(path, exc) from exc
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a power cut once the folder is synced (best effort: not every
    file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: Path | str, data: bytes, private: bool = False) -> Path:
    with atomic_open(path, "wb", private=private) as handle:
        handle.write(data)
    return Path(path)


def atomic_write_text(path: Path | str, text: str, encoding: str = "utf-8", private: bool = False) -> Path:
    """``text`` written whole to ``path``; ``private``: 0600 in folders created 0700 (see ``atomic_open``)."""
    with atomic_open(path, "w", encoding=encoding, private=private) as handle:
        handle.write(text)
    return Path(path)


def _repository_root(folder: Path) -> Path | None:
    """The nearest folder at or above ``folder`` holding ``.git`` (a model repository), else None."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def card_target(card: Path) -> tuple[Path, str | None]:
    """Where an update of the model card ``card`` may write, and a line to print when that is not
    ``card`` itself. A card that is a link (git stores links, so a cloned model repository can carry
    one) is written through only when its target lies inside the same repository (or, outside any
    repository, the card's own folder): then the target is updated. A link elsewhere is refused,
    so that no file outside the repository is overwritten or copied into a card the user pushes."""
    card = Path(card)
    if not card.is_symlink():
        return card, None
    folder = card.parent.resolve()
    boundary = _repository_root(folder) or folder
    target = card.resolve()
    if target != boundary and boundary in target.parents and not target.is_dir():
        return (
            target,
            f"{card} is a link; updating its target {target} (inside {boundary}).",
        )
    raise MedevalDataError(
        f"--update-card {card}: the card is a link to {os.readlink(card)}, outside {boundary}; refusing to write "
        "through it. Replace the link with the card file itself (or point --update-card at the real file). "
        "The report itself is written."
    )
