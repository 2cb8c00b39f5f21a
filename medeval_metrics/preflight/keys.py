"""Typo policing of the pack's settings: ``--metadata`` keys, ``MEDEVAL_*`` variables, on/off values.

A key the pack does not read is an error: with "did you mean" when it looks meant for a known key (the
pack's prefix left out, another case, other separators or word order, a letter off), otherwise with the
way to let it through (``--allow-unknown-metadata``, for keys the user's own tasks read).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from medeval_metrics import registry
from medeval_metrics.data import MedevalDataError, flag_setting
from medeval_metrics.preflight.argv import ALLOW_UNKNOWN_METADATA
from medeval_metrics.preflight.catalogue import (
    JUDGES_KEY,
    known_metadata_keys,
    pack_key_prefixes,
    task_set_keys,
)
from medeval_metrics.settings import FULL_TASK_INDEX, MODEL_API_KEY_ENV, PACK_KEYS, env_var, removed_problems

CLOSE_KEY_CUTOFF = 0.85  # a key this close to a known one (``ems_public_path``) is a typo, whatever its prefix
FULL_INDEX_ENV = FULL_TASK_INDEX.name  # index lm-eval's own tasks even for a pack-only run


def _words(key: str) -> tuple[str, ...]:
    """A key's words, lower case and sorted: ``PublicPath``, ``public-path`` and ``path_public`` are one key."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(key))
    return tuple(sorted(w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w))


def _without_prefix(key: str) -> str:
    for prefix in sorted(pack_key_prefixes(), key=len, reverse=True):
        if key.startswith(prefix) and len(key) > len(prefix):
            return key[len(prefix) :]
    return key


def meant_keys(key: str, known: Sequence[str], one_word_is_theirs: bool = False) -> list[str]:
    """The known keys ``key`` was probably meant for (empty if it looks like none): the same words in another
    case, separator or order; the same without the pack's prefix (``private_path``); or a near spelling.
    ``one_word_is_theirs``: a one-word key (``seed``, ``device``) is not taken for a pack key without its prefix
    (with --allow-unknown-metadata such a key is more likely the user's own task's)."""
    words = _words(key)
    same = [k for k in known if _words(k) == words]
    if same:
        return same
    unprefixed = [k for k in known if _words(_without_prefix(k)) == words]
    if unprefixed and not (one_word_is_theirs and len(words) == 1):
        return unprefixed
    if one_word_is_theirs and len(words) == 1:
        return []
    flat = "_".join(words)
    by_flat = {"_".join(_words(k)): k for k in known}
    by_flat_unprefixed = {"_".join(_words(_without_prefix(k))): k for k in known}
    cutoff = 0.6 if str(key).lower().startswith(pack_key_prefixes()) else CLOSE_KEY_CUTOFF
    close = difflib.get_close_matches(flat, list(by_flat), n=1, cutoff=cutoff)
    if close:
        return [by_flat[close[0]]]
    close = difflib.get_close_matches(flat, list(by_flat_unprefixed), n=1, cutoff=CLOSE_KEY_CUTOFF)
    return [by_flat_unprefixed[close[0]]] if close and len(flat) >= 6 else []


def _did_you_mean(keys: Sequence[str]) -> str:
    return "Did you mean " + " or ".join(repr(k) for k in keys) + "?"


def metadata_key_problems(metadata: Mapping[str, Any], allow_unknown: bool = False) -> list[str]:
    """One problem per key that is not one the pack reads: a typo of a known key (always), a key a task sets
    itself (always), any other unknown key unless ``allow_unknown``."""
    return [problem for problem, _ in _metadata_key_findings(metadata, allow_unknown)]


def _metadata_key_findings(metadata: Mapping[str, Any], allow_unknown: bool) -> list[tuple[str, list[str]]]:
    """Each problem of ``metadata_key_problems`` with the known keys it says the key was meant for."""
    known = known_metadata_keys()
    task_set = task_set_keys()
    removed = registry.removed_options()
    findings: list[tuple[str, list[str]]] = []
    for key in metadata:
        if key in removed:
            findings += [(p, []) for p in removed_problems({key: metadata[key]}, {key: removed[key]}, {})]
        elif key in task_set:
            findings.append((task_set_problem(f"--metadata key {key!r}", key, metadata[key], task_set[key]), []))
        elif key in known:
            continue
        elif meant := meant_keys(key, known, one_word_is_theirs=allow_unknown):
            case = " (keys are lower case)" if str(key).lower() in known else ""
            findings.append((f"--metadata key {key!r} is not one the pack reads{case}. {_did_you_mean(meant)}", meant))
        elif str(key).startswith(pack_key_prefixes()):
            findings.append((f"--metadata key {key!r} is not one the pack reads. Known keys: {', '.join(known)}.", []))
        elif not allow_unknown:
            findings.append(
                (
                    f"--metadata key {key!r} is not one the pack reads, so it would be ignored. If a task of your own "
                    f"(or one of lm-eval's) reads it, add {ALLOW_UNKNOWN_METADATA}; `medeval run --help` lists the "
                    "pack's keys.",
                    [],
                )
            )
    return findings


def keys_meant(metadata: Mapping[str, Any], environ: Mapping[str, str], allow_unknown: bool = False) -> set[str]:
    """The known keys that reported typos (a ``--metadata`` key or ``MEDEVAL_*`` variable that got "did you
    mean") were meant for: their data sources look unset only because of the typo, so the typo's error is the
    one to show. Only a reported typo counts: a variable or key let through (a credential, a benchmark script's
    variable, a key allowed by --allow-unknown-metadata) never switches a check off."""
    meant = {key for _, keys in _metadata_key_findings(metadata, allow_unknown) for key in keys}
    return meant | {key for _, keys in _environment_findings(environ) for key in keys}


def task_set_problem(where: str, key: str, value: Any, by_value: Mapping[str, list[str]]) -> str:
    wanted = by_value.get(str(value).strip())
    each = "; ".join(f"{v}: {', '.join(ts)}" for v, ts in by_value.items())
    if wanted:
        return (
            f"{where} cannot be set: each task sets its own {key}, and another value would make it a different "
            f"task under the same name. For {key} {str(value).strip()!r} run --tasks {wanted[0]}"
            + (f" (or {', '.join(wanted[1:])})" if len(wanted) > 1 else "")
            + f" and leave {key} out."
        )
    return (
        f"{where} cannot be set: each task sets its own {key} ({each}). Choose the task for the {key} you want "
        f"and leave {key} out."
    )


# --------------------------------------------------------------------------- on/off settings


def flag_problems(metadata: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """Each on/off setting (``BenchmarkSpec.flag_options`` and the pack's switch variables) that is neither."""
    from medeval_metrics import registry

    checks = [(f"--metadata {key}", metadata[key]) for key in registry.flag_options() if key in metadata]
    checks += [
        (f"MEDEVAL_{key.upper()}", environ[f"MEDEVAL_{key.upper()}"])
        for key in registry.flag_options()
        if f"MEDEVAL_{key.upper()}" in environ and key not in metadata
    ]
    checks += [(FULL_INDEX_ENV, environ[FULL_INDEX_ENV])] if FULL_INDEX_ENV in environ else []
    problems = []
    for where, value in checks:
        try:
            flag_setting(value, where)
        except MedevalDataError as exc:
            problems.append(str(exc))
    return problems


# --------------------------------------------------------------------------- environment

# A variable that holds a credential (one a judge's api_key_env or MEDEVAL_MODEL_API_KEY_ENV names) is
# not a setting: any name with one of these words is left alone, unless it is a near-miss of a setting.
_SECRET_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASS", "PASSWORD", "AUTH", "CREDENTIAL", "CREDENTIALS"})
SCRIPT_VARIABLE_PREFIX = "MEDEVAL_BENCH_"  # the benchmark scripts' own settings (scripts/bench_*.py)


def known_environment_variables() -> list[str]:
    """Every ``MEDEVAL_*`` variable the pack reads: one per metadata key, and the pack-wide switches."""
    pack_wide = {key.name for key in PACK_KEYS}
    return sorted({environment_variable(key) for key in known_metadata_keys()} | pack_wide)


def environment_variable(key: str) -> str:
    """The variable for a metadata key: ``MEDEVAL_<KEY>`` (``medeval_judges``: ``MEDEVAL_JUDGES``)."""
    return env_var(key)


def environment_problems(environ: Mapping[str, str]) -> list[str]:
    return [problem for problem, _ in _environment_findings(environ)]


def _environment_findings(environ: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """Each problem of ``environment_problems`` with the metadata key its "did you mean" names, if any."""
    known = known_environment_variables()
    task_set = {environment_variable(key): key for key in task_set_keys()}
    removed = {environment_variable(key): key for key in registry.removed_options()}
    by_variable = {environment_variable(key): key for key in known_metadata_keys()}
    findings: list[tuple[str, list[str]]] = []
    for name in sorted(environ):
        if not name.startswith("MEDEVAL_") or name.startswith(SCRIPT_VARIABLE_PREFIX):
            continue
        if name in removed:
            key = removed[name]
            findings += [
                (p, []) for p in removed_problems({}, {key: registry.removed_options()[key]}, {name: environ[name]})
            ]
        elif name in task_set:
            key = task_set[name]
            findings.append(
                (
                    task_set_problem(f"environment variable {name}", key, environ[name], task_set_keys()[key])
                    + f" (`unset {name}`)",
                    [],
                )
            )
        elif name not in known and not _holds_a_credential(name, known, environ):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            suggestion = f" Did you mean {close[0]}?" if close else f" Known: {', '.join(known)}."
            findings.append(
                (
                    f"environment variable {name} is not a setting the pack reads.{suggestion} "
                    f"Rename or unset it (`unset {name}`).",
                    [by_variable[close[0]]] if close and close[0] in by_variable else [],
                )
            )
    return findings


def _holds_a_credential(name: str, known: Sequence[str], environ: Mapping[str, str]) -> bool:
    if name == environ.get(MODEL_API_KEY_ENV.name, "").strip():
        return True
    if difflib.get_close_matches(name, known, n=1, cutoff=0.9):
        return False  # one letter off a setting (the model key variable without its V): a typo, whatever its words
    return bool(_SECRET_WORDS & set(name.split("_")))


# --------------------------------------------------------------------------- keys where lm-eval copies them

_MODEL_KEY_FIX = (
    "give it in an environment variable instead: OPENAI_API_KEY (ANTHROPIC_API_KEY, AZURE_OPENAI_API_KEY) for "
    "lm-eval's own API backends, or for a local-* server the variable MEDEVAL_MODEL_API_KEY_ENV names "
    "(MEDEVAL_MODEL_API_KEY_ENV=VLLM_API_KEY sends Bearer $VLLM_API_KEY)"
)


def credential_problems(
    model_args: Mapping[str, Any], metadata: Mapping[str, Any], environ: Mapping[str, str]
) -> list[str]:
    """A key in ``--model_args`` or ``--metadata`` is refused: lm-eval writes both into the results JSON (the model
    arguments into every task's metadata too), and the line lands in the shell's history. One line per field,
    naming the flag and the fix, never the value."""
    from medeval_metrics.redact import credential_fields

    problems = [
        f"--model_args {path} holds a key, and lm-eval copies --model_args into the results JSON; {_MODEL_KEY_FIX}."
        for path in credential_fields(dict(model_args), environ)
    ]
    problems += [
        f"--metadata {path} holds a key, and lm-eval copies --metadata into every task's config in the results JSON; "
        "give it in an environment variable instead (a judge's key: its variable's name as api_key_env in the "
        "judges file)."
        for path in credential_fields(dict(metadata), environ)
    ]
    return problems


def task_yaml_credential_problems(paths: Sequence[Any], environ: Mapping[str, str]) -> list[str]:
    """A key written in one of the user's task YAMLs (``--include_path``, or a YAML named in ``--tasks``): lm-eval
    copies each task's config into the results JSON."""
    from medeval_metrics.redact import credential_fields
    from medeval_metrics.task_yaml import own_task_config

    problems = []
    for path in paths:
        for field in credential_fields(own_task_config(path), environ):
            problems.append(
                f"{path}: {field} holds a key, and lm-eval copies each task's config into the results JSON; read the "
                "key from an environment variable in the task's code instead."
            )
    return problems


__all__ = [
    "CLOSE_KEY_CUTOFF",
    "FULL_INDEX_ENV",
    "JUDGES_KEY",
    "credential_problems",
    "environment_problems",
    "environment_variable",
    "flag_problems",
    "keys_meant",
    "known_environment_variables",
    "meant_keys",
    "metadata_key_problems",
    "task_set_problem",
    "task_yaml_credential_problems",
]
