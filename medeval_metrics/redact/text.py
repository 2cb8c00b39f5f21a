"""Pure text redaction: what a credential looks like, how to remove it from text, and where a settings object
holds one.

Nothing here touches process state except the set of registered secret values (keys that do not come from the
environment, e.g. the one ``MEDEVAL_MODEL_API_KEY_ENV`` names). ``redact.logs`` applies this to the log records
``medeval run`` makes while it runs.

What counts as a credential (one table, ``_PATTERNS``, used by every caller):

* ``Authorization``/``Proxy-Authorization`` values, Bearer tokens, ``api_key=``/``api-key:``/
  ``x-api-key``/``auth_token``/``password`` style assignments, ``NAME_API_KEY=`` / ``NAME_TOKEN=`` /
  ``NAME_KEY=`` / ``NAME_SECRET=`` assignments, ``user:password@`` before a host (with its URL's scheme or
  without), and well-known key formats
  (``sk-...``, ``hf_...``, ``ghp_...``, ``github_pat_...``, ``AKIA...``, ``AIza...``, ``xox?-...``);
* the *values* of the environment variables that hold keys (see :func:`secret_env_var_names`) and of
  registered secrets, wherever they appear, whatever surrounds them.

Two modes share that table. Log mode (:func:`redact_text`) keeps the label and replaces the value
(``api_key=[REDACTED]``), so logs stay readable. Display mode (:func:`redact_for_display`, used by
reports, which print only settings known to be harmless) replaces the whole match with
``[redacted]`` and also removes anything that merely *looks* opaque (long mixed tokens, short
``key_...`` strings), which would shred hashes in a log but has no place in a model card.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from typing import Any

from medeval_metrics.settings import SECRET_ENV_VARS

__all__ = [
    "DISPLAY_REDACTED",
    "DOCUMENTED_SECRET_ENV_VARS",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_ENV_VARS_LIST",
    "credential_fields",
    "describe_withheld",
    "is_secret_key_name",
    "redact_for_display",
    "redact_text",
    "register_secret",
    "secret_env_var_names",
    "withhold_request_echoes",
]

REDACTED = "[REDACTED]"
DISPLAY_REDACTED = "[redacted]"

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
SECRET_ENV_VARS_LIST = SECRET_ENV_VARS.name
_SECRET_NAME_SUFFIXES = ("_API_KEY", "_TOKEN", "_KEY", "_SECRET")
_SUFFIXES_RAW = tuple(suffix.encode() for suffix in _SECRET_NAME_SUFFIXES)
# Shorter values ("1", "true", "none") are settings, not keys; redacting them would shred output.
MIN_SECRET_LENGTH = 8

# A credential value: runs until whitespace, a quote, or a separator of the enclosing syntax
# (dict/header reprs, URLs, "k=v,k=v" model_args, JSON). Never re-redacts a marker.
_VALUE = r"(?!\[REDACTED)[^\s'\"\\,;&)}\]>]+"
_SEP = r"['\"]?\s*[:=]\s*['\"]?"

# (pattern, log-mode replacement, display only). Display mode replaces each whole match.
_PATTERNS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    # Authorization: Bearer KEY / 'Authorization': 'Basic KEY' / authorization=KEY
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization"
            + _SEP
            + r")(?:((?:bearer|basic|token|bot)\s+))?(?!(?:bearer|basic|token|bot)\s)"
            + _VALUE
        ),
        r"\1\2" + REDACTED,
        False,
    ),
    # A bare Bearer token; the token must look like one (8+ chars with a digit or punctuation),
    # so prose like "a stretcher Bearer carried" survives.
    (re.compile(r"\b(Bearer\s+)(?=[A-Za-z0-9._~+/-]*[0-9._~+/-])[A-Za-z0-9._~+/-]{8,}=*"), r"\1" + REDACTED, False),
    # api_key=..., "api-key": "...", x-api-key: ..., auth_token=..., password=...
    (
        re.compile(
            r"(?i)\b((?:x-)?api[-_]?key|apikey|auth[-_]?token|access[-_]?token|refresh[-_]?token"
            r"|client[-_]?secret|secret[-_]?key|password|passwd)(" + _SEP + r")" + _VALUE
        ),
        r"\1\2" + REDACTED,
        False,
    ),
    # OPENAI_API_KEY=..., HF_TOKEN: ... (environment-style names, upper case only, so that
    # "pad_token": "<|endoftext|>" in a results JSON is left alone).
    (
        re.compile(r"\b([A-Z][A-Z0-9_]*(?:_API_KEY|_TOKEN|_KEY|_SECRET))(" + _SEP + r")" + _VALUE),
        r"\1\2" + REDACTED,
        False,
    ),
    # user:password@ in a URL (https://user:secret@host/v1), and before a host without its scheme, as a message
    # naming "user:secret@host:port" shows it
    (
        re.compile(
            r"(?:(?<=://)|(?<![\w.~%+:/@-]))[^/\s:@'\"]+:[^/\s@'\"]+(?=@(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d+)?(?![\w.-]))"
        ),
        REDACTED,
        False,
    ),
    # Well-known key formats, wherever they appear.
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), REDACTED, False),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), REDACTED, False),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), REDACTED, False),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"), REDACTED, False),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED, False),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED, False),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"), REDACTED, False),
    # Display only: anything shaped like a key, a bare "token: x" label, long opaque tokens.
    (
        re.compile(r"(?i)\b(?:sk|hf|ghp|gho|github_pat|xox[abp]|AKIA|AIza|api|key|token)[-_][A-Za-z0-9_\-]{8,}"),
        DISPLAY_REDACTED,
        True,
    ),
    (re.compile(r"(?i)\b(?:api[_-]?key|token|secret|password|authorization)\s*[=:]\s*\S+"), DISPLAY_REDACTED, True),
    (re.compile(r"\b(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{32,}\b"), DISPLAY_REDACTED, True),
)
_LOG_PATTERNS = tuple((regex, replacement) for regex, replacement, display_only in _PATTERNS if not display_only)
# Text without any of these cannot match a log-mode pattern: one cheap scan skips them all.
_TRIGGER = re.compile(
    r"(?i)authoriz|bearer|api[-_]?key|apikey|token|secret|passw|sk-|hf_|gh[pousr]_|github_pat|_key|akia|aiza|xox|:[^/\s:@]*@"
)
# Dict keys whose string values are secrets (model_args/metadata dicts in a results JSON).
_SECRET_KEY_NAME = re.compile(
    r"(?i)^(?:(?:x-)?api[-_]?key|apikey|auth[-_]?token|access[-_]?token|refresh[-_]?token|client[-_]?secret"
    r"|secret[-_]?key|password|passwd|authorization|proxy-authorization)$"
    r"|^[A-Za-z0-9_]*(?:_API_KEY|_TOKEN|_SECRET)$"
)
# Dict keys holding HTTP headers: every value in them is treated as a secret, except these names.
_HEADER_DICT_KEYS = frozenset({"header", "headers", "default_headers", "extra_headers"})
_HARMLESS_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "connection",
        "content-type",
        "user-agent",
        "anthropic-version",
        "openai-beta",
    }
)

_registered_secrets: set[str] = set()
_lock = threading.Lock()
_values_cache: tuple[tuple[tuple[str, str], ...], re.Pattern[str] | None] = ((), None)


def is_secret_key_name(name: str) -> bool:
    """Whether a field named ``name`` holds a secret (``api_key``, ``auth_token``, ``FOO_TOKEN``...)."""
    return bool(_SECRET_KEY_NAME.match(name.strip()))


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
    with _lock:
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


def _as_text(text: Any) -> str | None:
    try:
        return text if isinstance(text, str) else str(text)
    except Exception:  # an object whose __str__ fails
        return None


def redact_text(text: Any, *, patterns: bool = True) -> str:
    """``text`` (made a string) with every credential replaced by a ``[REDACTED...]`` marker.

    ``patterns=False`` removes only the configured secret values, leaving text that merely looks
    like ``password: ...`` alone (for model outputs and documents written to sample logs).
    Never raises.
    """
    string = _as_text(text)
    if string is None:
        return f"<unprintable {type(text).__name__}>"
    pattern, labels = _values_pattern()
    if pattern is not None:
        string = pattern.sub(lambda match: labels[match.group(0)], string)
    if patterns and _TRIGGER.search(string):
        for regex, replacement in _LOG_PATTERNS:
            string = regex.sub(replacement, string)
    return string


def redact_for_display(text: Any) -> str:
    """``text`` for a report or model card: every credential-shaped match, and every configured
    secret value, becomes ``[redacted]`` whole (label included). Never raises."""
    string = _as_text(text)
    if string is None:
        return f"<unprintable {type(text).__name__}>"
    pattern, _ = _values_pattern()
    if pattern is not None:
        string = pattern.sub(DISPLAY_REDACTED, string)
    for regex, _, _ in _PATTERNS:
        string = regex.sub(DISPLAY_REDACTED, string)
    return string


# --- request echoes in error bodies ----------------------------------------------------------------

# lm-eval 0.4.13's API backends log a failed request's response body verbatim
# (lm_eval/models/api_models.py: "API request failed! Status code: N, Response text: BODY. Retrying..."
# from amodel_call, "API request failed with error message: BODY. Retrying..." from model_call),
# and "Exception:REPR, OUTPUTS, retrying." when a reply could not be used.
_BODY_LOGS = (
    re.compile(r"(Response text: )(.*?)(\. Retrying\.\.\.\s*)\Z", re.DOTALL),
    re.compile(r"(API request failed with error message: )(.*?)(\. Retrying\.\.\.\s*)\Z", re.DOTALL),
)
_EXCEPTION_WITH_OUTPUTS = re.compile(r"\AException:(\w+)(.*), retrying\.\s*\Z", re.DOTALL)
# A body that quotes the request: the JSON keys of a chat/completions request (or FastAPI's "input").
_QUOTES_REQUEST = re.compile(r"""["'](?:messages|prompt|input|content)["']\s*:""")


def describe_withheld(text: str, what: str = "body withheld") -> str:
    """``[body withheld: N chars, sha256 0123456789ab]``: enough to match two reports, nothing to read."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"[{what}: {len(text)} chars, sha256 {digest}]"


def withhold_request_echoes(message: str, *, private_documents: bool = False) -> str:
    """An lm-eval failure log line with the response body replaced by its length and hash.

    A body that quotes the request (a 422 from an OpenAI-compatible server echoes the messages) is
    always withheld; with ``private_documents`` (emrQA notes in the prompts) every body is, and so
    are the outputs in lm-eval's "Exception: ..., retrying." line. Other text is returned as is.
    """
    for regex in _BODY_LOGS:
        match = regex.search(message)
        if match:
            body = match.group(2)
            if private_documents or _QUOTES_REQUEST.search(body):
                return message[: match.start(2)] + describe_withheld(body, "response body withheld") + match.group(3)
            return message
    if private_documents:
        match = _EXCEPTION_WITH_OUTPUTS.match(message)
        if match and not match.group(2).endswith(", (no outputs)"):
            return f"Exception:{match.group(1)} {describe_withheld(match.group(2), 'details withheld')}, retrying."
    return message


# --- keys where lm-eval would copy them -----------------------------------------------------------

# Field names that hold a key (the model arguments lm-eval's API and HF backends take, and the usual
# spellings), case-insensitive; and environment-style names, upper case only (``add_bos_token`` and
# ``pad_token`` are model settings, not keys).
_KEY_FIELD = re.compile(
    r"(?i)^(?:(?:x-)?api[-_]?key|apikey|auth[-_]?token|access[-_]?token|refresh[-_]?token|client[-_]?secret"
    r"|secret[-_]?key|password|passwd|authorization|proxy-authorization|token|hf_token|bearer)$"
)
_ENV_STYLE_KEY_FIELD = re.compile(r"^[A-Z][A-Z0-9_]*(?:_API_KEY|_TOKEN|_SECRET|_PASSWORD)$")
# A value that is a key by its shape alone (a Bearer token, user:password@ in a URL, a vendor prefix).
_KEY_SHAPED = tuple(regex for regex, _ in (*_LOG_PATTERNS[1:2], *_LOG_PATTERNS[4:]))
# Values of a key-named field that are switches, not keys (HF's token=True: use the cached login).
_NOT_A_KEY = frozenset({"", "true", "false", "none", "null", "0", "1", "yes", "no"})


def _explicit_secret_values(environ: Any) -> set[str]:
    """Values of the variables that certainly hold keys: the documented ones and those listed in
    ``MEDEVAL_SECRET_ENV_VARS`` (not every ``*_TOKEN`` variable: a value such as a task name is no key)."""
    names = set(DOCUMENTED_SECRET_ENV_VARS)
    names.update(n.strip() for n in environ.get(SECRET_ENV_VARS_LIST, "").split(",") if n.strip())
    return {environ[n].strip() for n in names if len(environ.get(n, "").strip()) >= MIN_SECRET_LENGTH}


def credential_fields(obj: Any, environ: Any = None, where: str = "") -> list[str]:
    """Where a JSON-like structure (``--model_args``, ``--metadata``, a task YAML) holds a key: each as a dotted
    path (``api_key``, ``header.X-Gateway-Auth``, ``judges.0.key``). A key is a string under a key-named field
    (``api_key``, ``auth_token``, ``token``, ``OPENAI_API_KEY``), a header other than harmless ones, a
    key-shaped value (``sk-...``, ``hf_...``, ``Bearer ...``) anywhere, or the value of a variable that holds a
    key. A field naming a variable (``api_key_env``) is a name, not a key."""
    environ = os.environ if environ is None else environ
    values = _explicit_secret_values(environ)
    found: list[str] = []

    def visit(value: Any, path: str, name: str, header_value: bool) -> None:
        if isinstance(value, str) and name.strip().lower() in _HEADER_DICT_KEYS:
            try:  # a header dict given as a JSON string (key=value form)
                value = json.loads(value)
            except ValueError:
                pass
        if isinstance(value, dict):
            headers = name.strip().lower() in _HEADER_DICT_KEYS
            for key, item in value.items():
                visit(item, f"{path}.{key}" if path else str(key), str(key), headers)
            return
        if isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(item, f"{path}.{index}" if path else str(index), name, False)
            return
        if not isinstance(value, str) or value.strip().lower() in _NOT_A_KEY:
            return
        text = value.strip()
        if (
            (header_value and name.strip().lower() not in _HARMLESS_HEADERS)
            or _KEY_FIELD.match(name)
            or _ENV_STYLE_KEY_FIELD.match(name)
            or text in values
            or any(regex.search(text) for regex in _KEY_SHAPED)
        ):
            found.append(path or where)

    visit(obj, "", where, False)
    return found
