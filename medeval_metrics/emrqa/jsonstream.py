"""Read emrQA's ``data.json`` one note at a time, in bounded memory, without a new dependency.

The file is one JSON object, ``{"data": [{"title": ..., "paragraphs": [note, ...]}, ...]}`` (or that
list bare, as one version of the authors' combining script writes it), often
over a gigabyte. We walk its outer structure by hand and hand each note object (a "paragraph", a
few megabytes at most) to ``json.JSONDecoder.raw_decode``. Memory is bounded by the largest note
plus the read buffer. Notes seen before their subset's ``title`` key are spooled to a temporary file
and replayed once the title is known, so key order in the file does not matter.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError

_CHUNK = 1 << 20
# No note object comes near this; past it the file is malformed, and reading on would hold all of it.
_MAX_VALUE = 256 << 20
_DECODER = json.JSONDecoder()


class _Reader:
    def __init__(self, path: Path, progress: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.progress = progress  # called with the bytes read so far
        self.handle = open(path, "r", encoding="utf-8-sig")
        self.buffer = ""
        self.position = 0  # index into buffer
        self.consumed = 0  # characters dropped from the front of the buffer so far
        self.eof = False

    def close(self) -> None:
        self.handle.close()

    def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            chunk = self.handle.read(_CHUNK)
        except UnicodeDecodeError as exc:
            raise MedevalDataError(
                f"{self.path}: emrQA data.json is not UTF-8 text (near character {self.consumed + len(self.buffer)}). "
                "Use the file exactly as downloaded from the n2c2 portal or written by the emrQA scripts."
            ) from exc
        if self.progress is not None:
            self.progress(self.handle.buffer.tell())
        if not chunk:
            self.eof = True
            return False
        if self.position > _CHUNK:  # drop what has been parsed, keep memory bounded
            self.consumed += self.position
            self.buffer = self.buffer[self.position :]
            self.position = 0
        self.buffer += chunk
        return True

    def where(self) -> str:
        return f"character {self.consumed + self.position}"

    def error(self, expected: str) -> MedevalDataError:
        # Never quote the file's content: it is patient-note text.
        return MedevalDataError(
            f"{self.path}: emrQA data.json is malformed at {self.where()}: expected {expected}. "
            'The file must be {"data": [{"title": ..., "paragraphs": [...]}]} as written by the emrQA scripts; '
            "it may be truncated: download or generate it again."
        )

    def too_deep(self, what: str) -> MedevalDataError:
        # as error(): the place, never the content
        return MedevalDataError(
            f"{self.path}: emrQA data.json nests arrays/objects too deeply to parse in {what} (at {self.where()}, "
            "thousands of levels). A note is an object of a few levels; use the file exactly as written by the "
            "emrQA scripts."
        )

    def peek(self) -> str:
        while True:
            while self.position < len(self.buffer) and self.buffer[self.position] in " \t\r\n":
                self.position += 1
            if self.position < len(self.buffer):
                return self.buffer[self.position]
            if not self._fill():
                return ""

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise self.error(what)
        self.position += 1

    def value(self, what: str) -> Any:
        """Decode one complete JSON value, reading more of the file until it is complete."""
        return self.value_and_text(what)[0]

    def value_and_text(self, what: str) -> tuple[Any, str]:
        """The next JSON value and its source text (spooled as is, without encoding it again)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buffer, self.position)
            except json.JSONDecodeError:
                if len(self.buffer) - self.position < _MAX_VALUE and self._fill():
                    continue
                raise self.error(what) from None
            except RecursionError:
                raise self.too_deep(what) from None
            # A number at the very end of the buffer may continue in the next chunk.
            if end == len(self.buffer) and not self.eof and self._fill():
                continue
            text = self.buffer[self.position : end]
            self.position = end
            return value, text

    def skip_value(self, what: str) -> None:
        self.value(what)

    def object_keys(self, what: str) -> Iterator[str]:
        """Iterate over an object's keys; the caller consumes each key's value before the next."""
        self.expect("{", f"'{{' opening {what}")
        if self.peek() == "}":
            self.position += 1
            return
        while True:
            key = self.value(f"a key of {what}")
            if not isinstance(key, str):
                raise self.error(f"a string key in {what}")
            self.expect(":", f"':' after a key of {what}")
            yield key
            separator = self.peek()
            self.position += 1
            if separator == "}":
                return
            if separator != ",":
                self.position -= 1
                raise self.error(f"',' or '}}' in {what}")

    def array_items(self, what: str) -> Iterator[None]:
        """Iterate over an array; the caller consumes each item before the next."""
        self.expect("[", f"'[' opening {what}")
        if self.peek() == "]":
            self.position += 1
            return
        while True:
            yield None
            separator = self.peek()
            self.position += 1
            if separator == "]":
                return
            if separator != ",":
                self.position -= 1
                raise self.error(f"',' or ']' in {what}")


def iter_notes(path: Path, progress: Callable[[int], None] | None = None) -> Iterator[tuple[str, int, Any]]:
    """Yield ``(subset title, index of the note in its subset, note object)`` in file order.

    ``progress``, if given, is called with the number of bytes read so far after each chunk.
    """
    reader = _Reader(Path(path), progress)
    try:
        if reader.peek() == "[":  # some versions of the combining script dump the subset list bare
            for subset_index, _ in enumerate(reader.array_items("the top-level list")):
                yield from _subset_notes(reader, subset_index)
            return
        found_data = False
        for key in reader.object_keys("the top-level object"):
            if key != "data":
                reader.skip_value(f"the top-level key {key!r}")
                continue
            found_data = True
            for subset_index, _ in enumerate(reader.array_items("the 'data' list")):
                yield from _subset_notes(reader, subset_index)
        if not found_data:
            raise MedevalDataError(
                f"{path}: emrQA data.json has no top-level 'data' list. "
                'Expected {"data": [{"title": ..., "paragraphs": [...]}]} as written by the emrQA scripts.'
            )
    finally:
        reader.close()


def _subset_notes(reader: _Reader, subset_index: int) -> Iterator[tuple[str, int, Any]]:
    title: str | None = None
    spool = None  # notes read before the title
    what = f"data[{subset_index}]"
    try:
        for key in reader.object_keys(what):
            if key == "title":
                title = reader.value(f"{what}.title")
                if not isinstance(title, str):
                    raise reader.error(f"a string title in {what}")
                continue
            if key != "paragraphs":
                reader.skip_value(f"{what}.{key}")
                continue
            for note_index, _ in enumerate(reader.array_items(f"{what}.paragraphs")):
                note, source = reader.value_and_text(f"note {note_index} of {what}.paragraphs")
                if title is not None:
                    yield title, note_index, note
                else:
                    if spool is None:
                        spool = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")
                    # Raw line breaks in JSON text are only whitespace between tokens: one note per line.
                    spool.write(source.replace("\r", " ").replace("\n", " ") + "\n")
        if spool is not None:
            if title is None:
                raise MedevalDataError(
                    f"{reader.path}: {what} of emrQA data.json has paragraphs but no 'title' naming its subset "
                    "(medication, relations, risk-dataset, smoking, obesity)."
                )
            spool.seek(0)
            for note_index, line in enumerate(spool):
                try:
                    note = json.loads(line)
                except RecursionError:  # decoded once already, so unreachable unless the limit changed
                    raise reader.too_deep(f"note {note_index} of {what}.paragraphs") from None
                yield title, note_index, note
    finally:
        if spool is not None:
            spool.close()
