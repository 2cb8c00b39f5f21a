"""Files and folders as the pack finds them: what a file is by its content, whether a folder can be written,
a lock shared by processes that fill one cache, and a model folder's identity by its files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from medeval_metrics.errors import MedevalDataError


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


_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # Compound File: old .xls/.doc, and every encrypted OOXML file
_SNIFF_BYTES = 4096
_OLE_SCAN_LIMIT = 64 * 1024 * 1024

FILE_KINDS: dict[str, str] = {
    # kind -> how messages name it
    "folder": "a folder",
    "empty": "an empty file",
    "xlsx": "an Excel workbook (.xlsx)",
    "encrypted-office": "a password-protected (encrypted) Office file",
    "ole-office": "an old-format Office file (.xls or .doc)",
    "zip": "a ZIP archive",
    "gzip": "a gzip-compressed file",
    "pdf": "a PDF document",
    "parquet": "a Parquet file",
    "html": "an HTML web page (the page around the file, saved instead of the raw file?)",
    "lfs-pointer": "a Git LFS pointer (the data itself was not downloaded: run `git lfs pull`)",
    "utf16": 'UTF-16 text (what Excel\'s "Unicode Text" and Windows Notepad write)',
    "json": "JSON text",
    "csv": "CSV text",
    "text": "text",
    "binary": "binary data",
}


def file_kind(path: Path) -> str:
    """What ``path`` is by its content, not its name: one of ``FILE_KINDS``.

    Cheap (the first few KB; an Office container is scanned for its encryption streams). Text is
    told apart only roughly ("json" starts with ``[``/``{``, "csv" has a separator in its first
    line); a loader still parses it and reports the exact problem.
    """
    path = Path(path)
    if path.is_dir():
        return "folder"
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if not head:
        return "empty"
    if head.startswith(_ZIP_MAGIC):
        import zipfile

        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError):
            return "zip"  # damaged or truncated: the reader that expected a ZIP says so
        return "xlsx" if "xl/workbook.xml" in names else "zip"
    if head.startswith(_OLE_MAGIC):
        with path.open("rb") as handle:
            container = handle.read(_OLE_SCAN_LIMIT)
        # An encrypted .xlsx/.docx is an OLE container with these two streams (MS-OFFCRYPTO 2.3.4).
        if "EncryptedPackage".encode("utf-16-le") in container and "EncryptionInfo".encode("utf-16-le") in container:
            return "encrypted-office"
        return "ole-office"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf16"
    if b"\x00" in head:
        return "binary"
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff").lstrip()
    if text.startswith(("[", "{")):
        return "json"
    if text.startswith("version https://git-lfs.github.com/spec/"):
        return "lfs-pointer"
    if text[:15].lower().startswith(("<!doctype html", "<html")):
        return "html"
    first_line = text.split("\n", 1)[0]
    if any(separator in first_line for separator in (",", "\t", ";")):
        return "csv"
    return "text"


def _folder_hint(path: Path, suffixes: Iterable[str]) -> str:
    suffixes = tuple(s.lower() for s in suffixes)
    try:
        names = sorted(p.name for p in path.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
    except OSError:
        names = []
    if not names:
        return f"it holds no {'/'.join(suffixes)} file."
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"it holds {shown}."


def refuse_wrong_file_kind(
    path: Path, description: str, accepted: Iterable[str], should_be: str, suffixes: Iterable[str] = ()
) -> str:
    """Raise a ``MedevalDataError`` when ``path`` is plainly not the kind of file a loader reads
    (a workbook or CSV where JSON is expected, a folder, an archive, a web page...); else return its kind.

    ``accepted``: the ``FILE_KINDS`` the loader reads (it still parses them and reports details);
    ``should_be``: what the file should be, for the message; ``suffixes``: file names to suggest
    when ``path`` is a folder.
    """
    path = Path(path)
    try:
        kind = file_kind(path)
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read {description} ({exc.strerror}).") from exc
    accepted = set(accepted)
    if kind in accepted:
        return kind
    if kind == "folder":
        raise MedevalDataError(
            f"{path}: {description} is a folder; point at the file itself ({should_be}): {_folder_hint(path, suffixes)}"
        )
    if kind == "empty":
        raise MedevalDataError(f"{path}: {description} is empty. Point the pack at the full file.")
    fix = {
        "encrypted-office": " Open it in Excel, remove the password (File > Info > Protect Workbook) and save it "
        "again, or point at the unprotected original.",
        "ole-office": " Open it and save it as .xlsx (Excel Workbook).",
        "gzip": " Decompress it first (gunzip).",
        "zip": " Extract the file from the archive first.",
        "utf16": " Re-save it as UTF-8.",
    }.get(kind, "")
    raise MedevalDataError(f"{path}: {description} should be {should_be}, but this file is {FILE_KINDS[kind]}.{fix}")


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no POSIX locks (Windows): an exclusive-create lock file, polled
        while True:
            try:
                fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                break
            except FileExistsError:
                time.sleep(0.2)
        try:
            yield
        finally:
            os.close(fd)
            os.unlink(lock_path)
        return
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def model_fingerprint(name_or_path: str, small_files_only: bool = False) -> str:
    """A Hub name as given; a local folder by the content of its files (an encoder retrained into the
    same folder gets a new index). ``small_files_only``: only files under 64 MB (tokenizer and config
    files; weights by name and size), for keys that depend on the tokenizer alone."""
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        return str(name_or_path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        size = file.stat().st_size
        digest.update(f"{file.relative_to(path).as_posix()}\0{size}\0".encode())
        if small_files_only and size >= 64 << 20:
            continue
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"{path.name}@sha256:{digest.hexdigest()[:16]}"
