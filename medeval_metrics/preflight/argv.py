"""``medeval run``'s command line as lm-eval will read it: flag values, ``--tasks`` and ``--metadata``.

The pack's own options (``--allow-unknown-metadata``) are taken out here, before lm-eval sees the line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from medeval_metrics.data import MedevalDataError

ALLOW_UNKNOWN_METADATA = "--allow-unknown-metadata"  # the pack's: let keys the pack does not read through


def flag_values(argv: Sequence[str], *flags: str) -> list[str] | None:
    """The values after the last of ``flags`` (until the next ``-`` option), or None if absent."""
    found = None
    for index, arg in enumerate(argv):
        for flag in flags:
            if arg == flag:
                values = []
                for value in argv[index + 1 :]:
                    if value.startswith("-") and len(value) > 1 and not value[1:2].isdigit():
                        break
                    values.append(value)
                found = values
            elif arg.startswith(flag + "="):
                found = [arg.split("=", 1)[1]]
    return found


def take_pack_options(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` without the pack's own ``--allow-unknown-metadata``, and whether it was given."""
    rest = [arg for arg in argv if arg != ALLOW_UNKNOWN_METADATA]
    return rest, len(rest) != len(argv)


def user_include_path(argv: Sequence[str]) -> bool:
    return flag_values(argv, "--include_path") is not None


def include_path(argv: Sequence[str]) -> str | None:
    return (flag_values(argv, "--include_path") or [None])[0]


_EXAMPLE = '--metadata \'{"emsqa_public_path": "/data/test_open.json"}\''


def parse_metadata(argv: Sequence[str]) -> dict[str, Any]:
    """``--metadata`` as lm-eval will read it (a JSON object, or ``key=value`` pairs); one-line errors."""
    values = flag_values(argv, "--metadata")
    if not values:
        return {}
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
                    hint = f" JSON needs double quotes around keys and strings, e.g. {_EXAMPLE}"
            raise MedevalDataError(
                f"--metadata is not valid JSON ({exc.msg} at character {exc.pos}).{hint or ' Check the quotes and commas.'}"
            ) from None
        if not isinstance(parsed, dict):
            raise MedevalDataError(f"--metadata must be a JSON object, e.g. {_EXAMPLE}.")
        return parsed
    from lm_eval._cli.utils import key_val_to_dict

    merged: dict[str, Any] = {}
    for value in values:
        try:
            merged.update(key_val_to_dict(value))
        except ValueError as exc:
            raise MedevalDataError(
                f"--metadata {value!r}: {exc}. Give key=value pairs or a JSON object, e.g. {_EXAMPLE}."
            ) from None
    return merged


def requested_task_names(argv: Sequence[str]) -> list[str] | None:
    values = flag_values(argv, "--tasks", "-t")
    if values is None:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def normalise_task_list(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--tasks`` list as one comma-separated value without spaces or empty entries:
    ``--tasks "a, b"``, ``--tasks a, b`` and ``--tasks a,b,`` all become ``--tasks a,b`` (lm-eval 0.4.13 would
    look for a task named " b" or ""). Everything else is left as it is."""
    out: list[str] = []
    index = 0
    argv = list(argv)
    while index < len(argv):
        arg = argv[index]
        if arg in ("--tasks", "-t") or arg.startswith("--tasks="):
            values = [arg.split("=", 1)[1]] if "=" in arg else []
            index += 1
            if "=" not in arg:
                while index < len(argv) and not (
                    argv[index].startswith("-") and len(argv[index]) > 1 and not argv[index][1:2].isdigit()
                ):
                    values.append(argv[index])
                    index += 1
            names = [name.strip() for value in values for name in value.split(",") if name.strip()]
            out += ["--tasks", ",".join(names)] if names else [arg.split("=", 1)[0]]
            continue
        out.append(arg)
        index += 1
    return out
