"""lm-eval's command line as the pack reads it before lm-eval does: a flag's values, ``--metadata``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from medeval_metrics.errors import MedevalDataError


def flag_values(argv: Sequence[str], *flags: str) -> list[str] | None:
    """The values after the last of ``flags`` (until the next ``-`` option), or None if absent."""
    found = _occurrences(argv, *flags)
    return found[-1] if found else None


def _occurrences(argv: Sequence[str], *flags: str) -> list[list[str]]:
    """The values after each occurrence of any of ``flags`` (until the next ``-`` option), in order."""
    found = []
    for index, arg in enumerate(argv):
        for flag in flags:
            if arg == flag:
                values = []
                for value in argv[index + 1 :]:
                    if value.startswith("-") and len(value) > 1 and not value[1:2].isdigit():
                        break
                    values.append(value)
                found.append(values)
            elif arg.startswith(flag + "="):
                found.append([arg.split("=", 1)[1]])
    return found


def parse_metadata(argv: Sequence[str]) -> dict[str, Any]:
    """``--metadata`` as lm-eval will read it (a JSON object, or ``key=value`` pairs; repeated flags merged in
    order, as lm-eval merges them); one-line errors."""
    merged: dict[str, Any] = {}
    for values in _occurrences(argv, "--metadata"):
        if values:
            merged.update(_one_metadata(values))
    return merged


def _one_metadata(values: Sequence[str]) -> dict[str, Any]:
    text = values[0].strip()
    if text.startswith(("{", "[")):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = ""
            if "'" in text:
                fixed = text.replace('"', '\\"').replace("'", '"')
                try:
                    json.loads(fixed)
                    hint = f" JSON needs double quotes: --metadata '{fixed}'"
                except json.JSONDecodeError:
                    hint = ' JSON needs double quotes around keys and strings, e.g. --metadata \'{"emsqa_public_path": "/data/test_open.json"}\''
            raise MedevalDataError(
                f"--metadata is not valid JSON ({exc.msg} at character {exc.pos}).{hint or ' Check the quotes and commas.'}"
            ) from None
        if not isinstance(parsed, dict):
            raise MedevalDataError(
                '--metadata must be a JSON object, e.g. --metadata \'{"emsqa_public_path": "/data/test_open.json"}\'.'
            )
        return parsed
    from lm_eval._cli.utils import key_val_to_dict  # lazily: lm-eval's CLI package, only for key=value pairs

    merged: dict[str, Any] = {}
    for value in values:
        try:
            merged.update(key_val_to_dict(value))
        except ValueError as exc:
            raise MedevalDataError(
                f"--metadata {value!r}: {exc}. Give key=value pairs or a JSON object, e.g. "
                '--metadata \'{"emsqa_public_path": "/data/test_open.json"}\'.'
            ) from None
    return merged
