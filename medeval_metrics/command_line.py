"""lm-eval's command line as the pack reads it before lm-eval does: a flag's values, ``--metadata`` and the other
key=value flags (``--model_args``, ``--gen_kwargs``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import excerpt


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
    return merge_key_values("--metadata", [values for values in _occurrences(argv, "--metadata") if values])


def merge_key_values(flag: str, occurrences: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The dict lm-eval makes of a key=value flag's occurrences (``--metadata``, ``--model_args``,
    ``--gen_kwargs``): each a JSON object, or ``key=value`` pairs; later ones win. One-line errors."""
    merged: dict[str, Any] = {}
    for values in occurrences:
        if values:
            merged.update(_one_occurrence(flag, values))
    return merged


_EXAMPLES = {
    "--metadata": '--metadata \'{"emsqa_public_path": "/data/test_open.json"}\'',
    "--model_args": "--model_args pretrained=ORG/MODEL,dtype=float32",
    "--gen_kwargs": "--gen_kwargs max_gen_toks=256",
}


def _one_occurrence(flag: str, values: Sequence[str]) -> dict[str, Any]:
    text = values[0].strip()
    example = _EXAMPLES.get(flag, f"{flag} key=value")
    if text.startswith(("{", "[")):  # lm-eval reads the first value as JSON and ignores the rest
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = ""
            if "'" in text:
                fixed = text.replace('"', '\\"').replace("'", '"')
                try:
                    json.loads(fixed)
                    hint = f" JSON needs double quotes: {flag} '{fixed}'"
                except json.JSONDecodeError:
                    hint = f" JSON needs double quotes around keys and strings, e.g. {example}"
            raise MedevalDataError(
                f"{flag} is not valid JSON ({exc.msg} at character {exc.pos}).{hint or ' Check the quotes and commas.'}"
            ) from None
        if not isinstance(parsed, dict):
            raise MedevalDataError(f"{flag} must be a JSON object, e.g. {example}.")
        return parsed
    # lm-eval's own reading of key=value pairs (values typed: numbers, true/false, literals), so the pack's checks
    # see what the run will; lazily: a function of lm-eval's CLI package, read only for such pairs
    from lm_eval._cli.utils import key_val_to_dict

    merged: dict[str, Any] = {}
    for value in values:
        try:
            merged.update(key_val_to_dict(value))
        except ValueError as exc:
            raise MedevalDataError(
                f"{flag} {excerpt(value)}: {excerpt(str(exc), 80)}. Give key=value pairs or a JSON object, e.g. {example}."
            ) from None
    return merged
