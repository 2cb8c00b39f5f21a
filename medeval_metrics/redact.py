"""Keep credentials out of everything the pack (and lm-eval under it) prints or writes.

lm-eval 0.4.13's API backends log a failed, retried request as the ``repr`` of aiohttp's
``ClientResponseError``, which carries the request headers, ``Authorization: Bearer <key>``
included. This module removes credentials at the boundary where text leaves the process:

* every ``logging.LogRecord`` (message, arguments, exception and stack text), through a
  LogRecord *factory*. A factory runs once when any logger creates a record, so it covers
  lm-eval's loggers (which do not propagate to the root), third-party loggers, and handlers
  added after ``install()``. A ``logging.Filter`` would have to be attached to every logger
  or handler that exists now or later, and a logger-level filter does not even see records
  from child loggers, so it misses ``lm_eval.models.api_models`` unless attached there.
* ``warnings.showwarning`` (warnings printed to stderr),
* ``sys.excepthook`` and ``threading.excepthook`` (the traceback of an uncaught exception).

What counts as a credential: ``Authorization``/``Proxy-Authorization`` header values, Bearer
tokens, ``api_key=``/``api-key:``/``x-api-key``/``auth_token``/``password`` style assignments,
``NAME_API_KEY=`` / ``NAME_TOKEN=`` / ``NAME_KEY=`` / ``NAME_SECRET=`` assignments, well-known
key formats (``sk-...``, ``hf_...``), and the *values* of the environment variables the user
configured as keys (see :func:`secret_env_var_names`), wherever those values appear.

``install()`` is idempotent and cheap; every loader and the judge call it, so the protection is
on whenever the pack is in use, with ``lm_eval`` or ``medeval run`` alike. ``redact_text`` is the
utility for anything the pack writes itself (caches, error messages).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import traceback
import warnings
from typing import Any, Iterable

__all__ = [
    "DOCUMENTED_SECRET_ENV_VARS",
    "REDACTED",
    "RedactingStream",
    "install",
    "installed",
    "redact_obj",
    "redact_text",
    "register_secret",
    "secret_env_var_names",
    "wrap_console_streams",
]

REDACTED = "[REDACTED]"

# Variables read as keys by lm-eval's API backends, huggingface_hub and the judge.
DOCUMENTED_SECRET_ENV_VARS: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "MEDEVAL_JUDGE_API_KEY",
)
# Comma-separated names of further variables whose values are secrets.
SECRET_ENV_VARS_LIST = "MEDEVAL_SECRET_ENV_VARS"
_SECRET_NAME_SUFFIXES = ("_API_KEY", "_TOKEN", "_KEY", "_SECRET")
_SUFFIXES_RAW = tuple(suffix.encode() for suffix in _SECRET_NAME_SUFFIXES)
# Shorter values ("1", "true", "none") are settings, not keys; redacting them would shred output.
MIN_SECRET_LENGTH = 8

# A credential value: runs until whitespace, a quote, or a separator of the enclosing syntax
# (dict/header reprs, URLs, "k=v,k=v" model_args, JSON).
_VALUE = r"(?!\[REDACTED)[^\s'\"\\,;&)}\]>]+"  # never re-redact a marker
_SEP = r"['\"]?\s*[:=]\s*['\"]?"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer KEY / 'Authorization': 'Basic KEY' / authorization=KEY
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization" + _SEP + r")(?:((?:bearer|basic|token|bot)\s+))?(?!(?:bearer|basic|token|bot)\s)" + _VALUE),
        r"\1\2" + REDACTED,
    ),
    # A bare Bearer token; the token must look like one (8+ chars with a digit or punctuation),
    # so prose like "a stretcher Bearer carried" survives.
    (
        re.compile(r"\b(Bearer\s+)(?=[A-Za-z0-9._~+/-]*[0-9._~+/-])[A-Za-z0-9._~+/-]{8,}=*"),
        r"\1" + REDACTED,
    ),
    # api_key=..., "api-key": "...", x-api-key: ..., auth_token=..., password=...
    (
        re.compile(
            r"(?i)\b((?:x-)?api[-_]?key|apikey|auth[-_]?token|access[-_]?token|refresh[-_]?token"
            r"|client[-_]?secret|secret[-_]?key|password|passwd)(" + _SEP + r")" + _VALUE
        ),
        r"\1\2" + REDACTED,
    ),
    # OPENAI_API_KEY=..., HF_TOKEN: ... (environment-style names, upper case only, so that
    # "pad_token": "<|endoftext|>" in a results JSON is left alone).
    (
        re.compile(r"\b([A-Z][A-Z0-9_]*(?:_API_KEY|_TOKEN|_KEY|_SECRET))(" + _SEP + r")" + _VALUE),
        r"\1\2" + REDACTED,
    ),
    # Well-known key formats, wherever they appear.
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),
)
# Text without any of these cannot match _PATTERNS: one cheap scan skips the seven.
_TRIGGER = re.compile(r"(?i)authoriz|bearer|api[-_]?key|apikey|token|secret|passw|sk-|hf_|gh[pousr]_|_key")
# Dict keys whose string values are secrets (model_args/metadata dicts in a results JSON).
_SECRET_KEY_NAME = re.compile(
    r"(?i)^(?:(?:x-)?api[-_]?key|apikey|auth[-_]?token|access[-_]?token|refresh[-_]?token|client[-_]?secret"
    r"|secret[-_]?key|password|passwd|authorization|proxy-authorization)$"
    r"|^[A-Za-z0-9_]*(?:_API_KEY|_TOKEN|_SECRET)$"
)

_registered_secrets: set[str] = set()
_lock = threading.Lock()
_values_cache: tuple[tuple[tuple[str, str], ...], re.Pattern[str] | None] = ((), None)


def secret_env_var_names(environ: Any = None) -> list[str]:
    """Names of the environment variables whose values are treated as secrets.

    The documented set, every name listed in ``MEDEVAL_SECRET_ENV_VARS`` (comma-separated), and
    every variable whose name ends in ``_API_KEY``, ``_TOKEN``, ``_KEY`` or ``_SECRET``.
    """
    environ = os.environ if environ is None else environ
    names = set(DOCUMENTED_SECRET_ENV_VARS)
    names.update(n.strip() for n in environ.get(SECRET_ENV_VARS_LIST, "").split(",") if n.strip())
    names.update(n for n in environ if n.upper().endswith(_SECRET_NAME_SUFFIXES))
    return sorted(names)


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (for keys that do not come from the environment)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered_secrets.add(value)


def _secret_env_names_present() -> list[str]:
    """Like secret_env_var_names(), limited to variables that are set; cheap enough to run per log
    record (CPython keeps the environment as bytes: names are matched before decoding)."""
    listed = os.environ.get(SECRET_ENV_VARS_LIST, "")
    wanted = set(DOCUMENTED_SECRET_ENV_VARS) | {n.strip() for n in listed.split(",") if n.strip()}
    raw_names = list(getattr(os.environ, "_data", None) or ())
    if raw_names and isinstance(raw_names[0], bytes):
        wanted_raw = {os.fsencode(name) for name in wanted}
        return [os.fsdecode(n) for n in raw_names if n.upper().endswith(_SUFFIXES_RAW) or n in wanted_raw]
    return [n for n in os.environ if n.upper().endswith(_SECRET_NAME_SUFFIXES) or n in wanted]


def _secret_values() -> tuple[tuple[str, str], ...]:
    # Read afresh on every call, so a key exported after install() is covered from its first use.
    pairs = set()
    for name in _secret_env_names_present():
        value = os.environ.get(name, "").strip()
        if len(value) >= MIN_SECRET_LENGTH:
            pairs.add((value, f"[REDACTED:{name}]"))
    pairs.update((value, REDACTED) for value in _registered_secrets)
    # Longest first, so a key that contains another key is removed whole.
    return tuple(sorted(pairs, key=lambda pair: (-len(pair[0]), pair)))


def _values_pattern() -> tuple[re.Pattern[str] | None, dict[str, str]]:
    global _values_cache
    values = _secret_values()
    cached_values, pattern = _values_cache
    if values != cached_values:
        pattern = re.compile("|".join(re.escape(value) for value, _ in values)) if values else None
        _values_cache = (values, pattern)
    return pattern, dict(values)


def redact_text(text: Any, *, patterns: bool = True) -> str:
    """``text`` (made a string) with every credential replaced by a ``[REDACTED...]`` marker.

    ``patterns=False`` removes only the configured secret values, leaving text that merely looks
    like ``password: ...`` alone (for model outputs and documents written to sample logs).
    Never raises.
    """
    try:
        text = text if isinstance(text, str) else str(text)
    except Exception:  # an object whose __str__ fails: say so rather than crash the logger
        return f"<unprintable {type(text).__name__}>"
    pattern, labels = _values_pattern()
    if pattern is not None:
        text = pattern.sub(lambda match: labels[match.group(0)], text)
    if patterns and _TRIGGER.search(text):
        for regex, replacement in _PATTERNS:
            text = regex.sub(replacement, text)
    return text


def redact_obj(obj: Any, *, patterns: bool = True) -> Any:
    """A copy of a JSON-like structure with every string redacted and secret-named keys blanked."""
    if isinstance(obj, str):
        return redact_text(obj, patterns=patterns)
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            clean_key = redact_text(key, patterns=patterns) if isinstance(key, str) else key
            if isinstance(key, str) and isinstance(value, str) and value and _SECRET_KEY_NAME.match(key):
                out[clean_key] = REDACTED
            else:
                out[clean_key] = redact_obj(value, patterns=patterns)
        return out
    if isinstance(obj, (list, tuple)):
        items = [redact_obj(item, patterns=patterns) for item in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


# --- the boundary hooks -----------------------------------------------------------------------


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # bad format args: logging would print msg and args raw in its error report
        record.msg = redact_text(record.msg)
        if isinstance(record.args, dict):
            record.args = {k: redact_text(v) for k, v in record.args.items()}
        elif record.args:
            record.args = tuple(redact_text(a) for a in record.args)
    else:
        clean = redact_text(message)
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


def _make_excepthook(previous: Any) -> Any:
    def redacting_excepthook(exc_type, exc_value, exc_traceback):
        text = "".join(traceback.format_exception(exc_type, exc_value, exc_traceback))
        clean = redact_text(text)
        if clean == text:
            return previous(exc_type, exc_value, exc_traceback)
        # Never fall back to the unredacted default: if stderr is unusable, print nothing.
        try:
            sys.stderr.write(clean)
            sys.stderr.flush()
        except Exception:
            pass

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
        try:
            sys.stderr.write(f"Exception in thread {name}:\n{clean}")
            sys.stderr.flush()
        except Exception:
            pass

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


def _patch_evaluation_tracker(tracker_cls: Any) -> None:
    """Redact what lm-eval's EvaluationTracker writes: the results JSON (which copies
    ``--model_args`` and ``--metadata``) fully, the sample logs for configured secret values only
    (documents and model outputs are kept as they are otherwise)."""
    if getattr(tracker_cls.save_results_aggregated, "_medeval_redacting", False):
        return
    save_aggregated = tracker_cls.save_results_aggregated
    save_samples = tracker_cls.save_results_samples

    def save_results_aggregated(self, results, samples=None):
        return save_aggregated(self, redact_obj(results), samples)

    def save_results_samples(self, task_name, samples):
        return save_samples(self, task_name, redact_obj(samples, patterns=False))

    save_results_aggregated._medeval_redacting = True  # type: ignore[attr-defined]
    tracker_cls.save_results_aggregated = save_results_aggregated
    tracker_cls.save_results_samples = save_results_samples


def install(extra_secrets: Iterable[str] = ()) -> None:
    """Turn redaction on for this process. Idempotent: hooks already in place are left alone, and a
    hook that something else replaced since is wrapped again (around the replacement).

    Imports nothing heavy: lm-eval's result writer is patched only if lm-eval already loaded it
    (it has by the time a task is built, which is when loaders call this).
    """
    for value in extra_secrets:
        register_secret(value)
    if _running_lm_eval_cli():
        # The lm_eval command prints its model_args summary and progress bars straight to the
        # console; in that process (and only there) the console streams are redacted as well.
        wrap_console_streams()
    tracker_module = sys.modules.get("lm_eval.loggers.evaluation_tracker")
    if tracker_module is not None and hasattr(tracker_module, "EvaluationTracker"):
        _patch_evaluation_tracker(tracker_module.EvaluationTracker)
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
