"""The emrQA cache: one folder per (inputs, seed, preparation version), prepared on first use.

The cache holds note text: its folders are created 0700 and its files made 0600 once prepared, whatever the umask.
A cache folder the user cannot use (another user's, or its permissions changed) is one error naming it and the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError, file_sha256
from medeval_metrics.emrqa.sources import CACHE_DIR_KEY, cache_root, resolve_inputs, split_seed
from medeval_metrics.emrqa.splits import PREP_VERSION, prepare
from medeval_metrics.safe_files import PRIVATE_FILE_MODE, PRIVATE_FOLDER_MODE, private_folder

_digests: dict[tuple[Any, ...], str] = {}


def _fingerprint(path: Path) -> dict[str, Any]:
    """The input as the cache key sees it: its path and its content's sha256. Size and modification
    time alone let a relabelled file of the same size with its time restored (``cp -p``, ``rsync -a``,
    ``touch -r``) be scored from the old splits. The digest is computed once per process for a file
    whose size, times and inode are unchanged (every emrQA task of a run asks for it)."""
    try:
        stat = path.stat()
        memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
        if memo not in _digests:
            _digests[memo] = file_sha256(path)
    except OSError as exc:
        raise MedevalDataError(
            f"{path}: cannot read it ({exc.strerror or type(exc).__name__}). Check its permissions (it is read "
            "as the user running the evaluation)."
        ) from None
    return {"path": str(path), "sha256": _digests[memo]}


def cache_dir_for(data_json: Path, data_ql: Path, seed: int, root: Path) -> Path:
    key = json.dumps(
        {"v": PREP_VERSION, "seed": seed, "json": _fingerprint(data_json), "ql": _fingerprint(data_ql)}, sort_keys=True
    )
    return root / hashlib.sha256(key.encode()).hexdigest()[:16]


def _owner_note(root: Path) -> str:
    """The note "; FOLDER belongs to USER" for the nearest existing folder of ``root`` another user owns, else ""."""
    here = root
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    try:
        uid = here.stat().st_uid
        if uid == os.geteuid():
            return ""
        import pwd

        return f"; {here} belongs to {pwd.getpwuid(uid).pw_name}"
    except (OSError, KeyError, ImportError, AttributeError):  # no such user name, or no POSIX users
        return ""


def unusable_cache(root: Path, exc: OSError) -> str:
    """One line for a cache folder the user cannot read or write: which folder, why, and the fix."""
    import errno

    elsewhere = f'--metadata \'{{"{CACHE_DIR_KEY}": "/path"}}\' or MEDEVAL_EMRQA_CACHE_DIR'
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"cannot use the emrQA cache folder {root} ({exc.strerror}{_owner_note(root)}). Remove it (or ask its "
            f"owner to), or choose a folder of your own with {elsewhere}."
        )
    free = "Free space there, or choose" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "Choose"
    return (
        f"cannot write the emrQA cache under {root} ({exc.strerror or type(exc).__name__}). {free} another folder "
        f"with {elsewhere}."
    )


@contextlib.contextmanager
def cache_errors(root: Path) -> Iterator[None]:
    """An ``OSError`` in the block (a folder another user made, permissions changed) as ``unusable_cache``."""
    try:
        yield
    except OSError as exc:
        raise MedevalDataError(unusable_cache(root, exc)) from None


def keep_private(folder: Path) -> None:
    """A prepared cache folder and everything in it readable by its owner only (0700 folders, 0600 files)."""
    os.chmod(folder, PRIVATE_FOLDER_MODE)
    for path in folder.rglob("*"):
        if not path.is_symlink():
            os.chmod(path, PRIVATE_FOLDER_MODE if path.is_dir() else PRIVATE_FILE_MODE)


def ensure_prepared(metadata: Mapping[str, Any] | None = None, log: Any = None) -> tuple[Path, dict[str, Any]]:
    """The prepared cache folder for the configured inputs, preparing it first if needed."""
    metadata = metadata or {}
    data_json, data_ql = resolve_inputs(metadata)
    seed = split_seed(metadata)
    root = cache_root(metadata)
    folder = cache_dir_for(data_json, data_ql, seed, root)
    manifest_path = folder / "manifest.json"
    with cache_errors(root):
        if not manifest_path.exists():  # one summary line when done (``prepare``); progress bars on a terminal
            logging.getLogger(__name__).debug(
                "emrQA: preparing %s and %s (first use; later runs reuse %s)", data_json.name, data_ql.name, folder
            )
            private_folder(root)
            prepare(data_json, data_ql, folder, seed=seed, log=log)
            keep_private(folder)
        return folder, json.loads(manifest_path.read_text(encoding="utf-8"))
