"""Process-wide redaction hooks: where text leaves the process, credentials are removed.

lm-eval 0.4.13's API backends log a failed, retried request as the ``repr`` of aiohttp's
``ClientResponseError``, which carries the request headers, ``Authorization: Bearer <key>``
included, and log the server's error body, which can quote the request (the prompt). This module
applies ``redact.text`` at the boundaries:

* every ``logging.LogRecord`` (message, arguments, exception and stack text), through a
  LogRecord *factory*. A factory runs once when any logger creates a record, so it covers
  lm-eval's loggers (which do not propagate to the root), third-party loggers, and handlers
  added after ``install()``. A ``logging.Filter`` would have to be attached to every logger
  or handler that exists now or later, and a logger-level filter does not even see records
  from child loggers, so it misses ``lm_eval.models.api_models`` unless attached there.
* ``warnings.showwarning`` (warnings printed to stderr),
* ``sys.excepthook`` and ``threading.excepthook`` (the traceback of an uncaught exception),
* the console streams, for command-line processes only (``medeval run``, the ``lm_eval`` command).

``install()`` is called from the pack's entry points only: the ``medeval`` command, the task
loaders (task building, before any request is made) and the judge. It is idempotent and cheap,
and imports nothing heavy.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Iterable
from typing import Any

from medeval_metrics.redact.text import redact_text, register_secret, secrets_in_model_args, withhold_request_echoes

__all__ = ["RedactingStream", "install", "installed", "private_documents_in_use", "wrap_console_streams"]

_lock = threading.Lock()
# Labels of the private documents in this process's prompts (e.g. "emrQA clinical notes"): while
# any is set, every error body lm-eval logs is withheld, not only bodies that quote the request.
_private_documents: set[str] = set()


def private_documents_in_use() -> tuple[str, ...]:
    """Labels passed as ``install(private_documents=...)`` in this process, sorted."""
    with _lock:
        return tuple(sorted(_private_documents))


def _clean_message(text: str) -> str:
    return withhold_request_echoes(redact_text(text), private_documents=bool(_private_documents))


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # bad format args: logging would print msg and args raw in its error report
        record.msg = _clean_message(str(record.msg))
        if isinstance(record.args, dict):
            record.args = {k: redact_text(v) for k, v in record.args.items()}
        elif record.args:
            record.args = tuple(redact_text(a) for a in record.args)
    else:
        clean = _clean_message(message)
        if clean != message:
            record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        clean = redact_text(text)
        if clean != text:
            # Formatter.format prints exc_text when set; dropping exc_info stops handlers that
            # render the exception object themselves from printing the unredacted original.
            record.exc_text, record.exc_info = clean, None
    elif record.exc_text:
        record.exc_text = redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)


def _make_record_factory(previous: Any) -> Any:
    def redacting_record_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            _redact_record(record)
        except Exception:  # redaction must never break logging; fall back to a blank message
            record.msg, record.args, record.exc_info, record.exc_text = "<log message withheld>", (), None, None
        return record

    redacting_record_factory._medeval_redacting = True  # type: ignore[attr-defined]
    return redacting_record_factory


def _make_showwarning(previous: Any) -> Any:
    def redacting_showwarning(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        clean = redact_text(text)
        if clean != text:
            message = clean
        if line is not None:
            line = redact_text(line)
        return previous(message, category, filename, lineno, file, line)

    redacting_showwarning._medeval_redacting = True  # type: ignore[attr-defined]
    return redacting_showwarning


def _write_to_stderr(text: str) -> None:
    """A redacted traceback to stderr; never the unredacted default instead: if stderr is unusable,
    nothing is printed."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:
        pass


def _make_excepthook(previous: Any) -> Any:
    def redacting_excepthook(exc_type, exc_value, exc_traceback):
        text = "".join(traceback.format_exception(exc_type, exc_value, exc_traceback))
        clean = redact_text(text)
        if clean == text:
            return previous(exc_type, exc_value, exc_traceback)
        _write_to_stderr(clean)

    redacting_excepthook._medeval_redacting = True  # type: ignore[attr-defined]
    return redacting_excepthook


def _make_threading_excepthook(previous: Any) -> Any:
    def redacting_threading_excepthook(args):
        if args.exc_type is SystemExit:
            return previous(args)
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        clean = redact_text(text)
        if clean == text:
            return previous(args)
        name = args.thread.name if args.thread is not None else threading.get_ident()
        _write_to_stderr(f"Exception in thread {name}:\n{clean}")

    redacting_threading_excepthook._medeval_redacting = True  # type: ignore[attr-defined]
    return redacting_threading_excepthook


def _is_ours(hook: Any) -> bool:
    return bool(getattr(hook, "_medeval_redacting", False))


def installed() -> bool:
    """Whether every hook is in place (something may have replaced one since ``install()``)."""
    return all(
        _is_ours(hook)
        for hook in (logging.getLogRecordFactory(), warnings.showwarning, sys.excepthook, threading.excepthook)
    )


def install(extra_secrets: Iterable[str] = (), *, private_documents: str | None = None) -> None:
    """Turn redaction on for this process. Idempotent: hooks already in place are left alone, and a
    hook that something else replaced since is wrapped again (around the replacement).

    ``extra_secrets``: values to treat as secrets from now on (``redact.register_secret``).
    ``private_documents``: a label ("emrQA clinical notes") saying the prompts hold private text;
    from then on every error body lm-eval logs is replaced by its length and hash. (``--write_out``
    prints whole prompts on purpose; the benchmark that owns such prompts warns about it.)

    In the ``lm_eval`` command's own process it also redacts the console streams and registers the
    secret values in its ``--model_args``. Results JSON and sample logs are lm-eval's writer's, patched
    in ``lm_eval_compat`` (``lm_eval_compat.install_redaction`` does both at a task's building).
    """
    for value in extra_secrets:
        register_secret(value)
    if private_documents:
        with _lock:
            _private_documents.add(private_documents)
    if _running_lm_eval_cli():
        for value in secrets_in_model_args(sys.argv[1:]):
            register_secret(value)
        wrap_console_streams()
    with _lock:
        if not _is_ours(logging.getLogRecordFactory()):
            logging.setLogRecordFactory(_make_record_factory(logging.getLogRecordFactory()))
        if not _is_ours(warnings.showwarning):
            warnings.showwarning = _make_showwarning(warnings.showwarning)
        if not _is_ours(sys.excepthook):
            sys.excepthook = _make_excepthook(sys.excepthook)
        if not _is_ours(threading.excepthook):
            threading.excepthook = _make_threading_excepthook(threading.excepthook)


def _running_lm_eval_cli() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name in ("lm_eval", "lm_eval.__main__"):
        return True
    return os.path.basename(sys.argv[0] if sys.argv else "") in ("lm_eval", "lm-eval")


def wrap_console_streams() -> None:
    """Redact everything written to ``sys.stdout``/``sys.stderr`` from now on (idempotent).

    For command-line processes only (``medeval run``, the ``lm_eval`` command): a library must
    not swap a host application's streams.
    """
    if not isinstance(sys.stdout, RedactingStream) and sys.stdout is not None:
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream) and sys.stderr is not None:
        sys.stderr = RedactingStream(sys.stderr)


class RedactingStream:
    """A text stream that redacts each write before passing it on (for ``medeval run``'s own
    stdout/stderr, which also carry lm-eval's ``print`` output, e.g. the model_args summary)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
