"""``medeval run``'s command line as lm-eval will read it: flag values, ``--tasks`` and ``--metadata``.

The pack's own options (``--allow-unknown-metadata``) are taken out here, before lm-eval sees the line.
"""

from __future__ import annotations

from collections.abc import Sequence

from medeval_metrics.command_line import flag_values, parse_metadata  # noqa: F401 (importable from here)

ALLOW_UNKNOWN_METADATA = "--allow-unknown-metadata"  # the pack's: let keys the pack does not read through


def take_pack_options(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` without the pack's own ``--allow-unknown-metadata``, and whether it was given."""
    rest = [arg for arg in argv if arg != ALLOW_UNKNOWN_METADATA]
    return rest, len(rest) != len(argv)


def user_include_path(argv: Sequence[str]) -> bool:
    return flag_values(argv, "--include_path") is not None


def include_path(argv: Sequence[str]) -> str | None:
    return (flag_values(argv, "--include_path") or [None])[0]


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
