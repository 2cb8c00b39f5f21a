"""``medeval run``'s command line as lm-eval will read it: flag values, ``--tasks`` and ``--metadata``.

The pack's own options (``--allow-unknown-metadata``) are taken out here, before lm-eval sees the line.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from medeval_metrics.command_line import flag_values, parse_metadata
from medeval_metrics.errors import MedevalDataError

ALLOW_UNKNOWN_METADATA = "--allow-unknown-metadata"  # the pack's: let keys the pack does not read through


def take_pack_options(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` without the pack's own ``--allow-unknown-metadata``, and whether it was given."""
    rest = [arg for arg in argv if arg != ALLOW_UNKNOWN_METADATA]
    return rest, len(rest) != len(argv)


def user_include_path(argv: Sequence[str]) -> bool:
    try:
        return run_settings(argv).include_path is not None
    except MedevalDataError:  # unreadable --metadata: the run stops on it anyway
        return include_path(argv) is not None


def include_path(argv: Sequence[str]) -> str | None:
    return (flag_values(argv, "--include_path") or [None])[0]


def lm_eval_namespace(argv: Sequence[str]) -> tuple[Any, Exception | None]:
    """lm-eval's parsed ``lm-eval run ARGV`` (its argparse namespace), or None and what its parser raised (None
    for argparse's own usage error, which lm-eval prints when it parses the line itself). Nothing is printed."""
    import contextlib
    import io
    import logging

    from lm_eval._cli.harness import HarnessCLI

    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return HarnessCLI()._parser.parse_args(["run", *argv]), None
    except SystemExit:
        return None, None
    except (ValueError, TypeError) as exc:  # raised by one of lm-eval's argument actions
        return None, exc
    finally:
        logging.disable(previous)


@dataclass(frozen=True)
class RunSettings:
    """What lm-eval will run: the task names (None: no ``--tasks``), ``--metadata`` and ``--include_path``."""

    tasks: list[str] | None
    metadata: dict[str, Any] = field(default_factory=dict)
    include_path: str | None = None


def run_settings(argv: Sequence[str]) -> RunSettings:
    """``--tasks``, ``--metadata`` and ``--include_path`` as lm-eval's own parser reads them: abbreviated flags
    (``--task``), repeated flags merged, a ``--config`` file's values where the command line gives none (lm-eval's
    precedence). Where lm-eval's parser refuses the line, the pack's reading of it (``parse_metadata``'s one-line
    error for bad ``--metadata``). Raises MedevalDataError for unreadable metadata."""
    namespace, _ = lm_eval_namespace(argv)
    if namespace is None:
        return RunSettings(requested_task_names(argv), parse_metadata(argv), include_path(argv))
    from_file: dict[str, Any] = {}
    if getattr(namespace, "config", None):
        from lm_eval.config.evaluate_config import EvaluatorConfig

        try:
            from_file = EvaluatorConfig.load_yaml_config(namespace.config)
        except (OSError, ValueError):
            from_file = {}  # lm-eval's own refusal, reported by the option checks

    def given(name: str) -> Any:  # lm-eval's EvaluatorConfig.from_cli: a value on the command line wins
        value = getattr(namespace, name, None)
        return value if value or value == 0 else from_file.get(name)

    tasks = given("tasks")
    if tasks is not None:
        tasks = (
            tasks.split(",")
            if isinstance(tasks, str)
            else [t for v in tasks if isinstance(v, str) for t in v.split(",")]
        )
        tasks = [name.strip() for name in tasks if name.strip()]
    metadata = given("metadata") or {}
    if isinstance(metadata, str):
        from lm_eval.utils import simple_parse_args_string

        metadata = simple_parse_args_string(metadata)
    where = given("include_path")
    return RunSettings(tasks, dict(metadata) if isinstance(metadata, dict) else {}, str(where) if where else None)


def requested_task_names(argv: Sequence[str]) -> list[str] | None:
    values = flag_values(argv, "--tasks", "-t")
    if values is None:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


@functools.cache
def _spellings(flag: str) -> frozenset[str]:
    """Every way lm-eval's parser takes ``flag``: its own names and each abbreviation only it starts with."""
    from lm_eval._cli.harness import HarnessCLI

    parser = HarnessCLI()._parser
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    options = run._option_string_actions
    action = options[flag]
    names = set(action.option_strings)
    for name in action.option_strings:
        names |= {name[:n] for n in range(3, len(name)) if [o for o in options if o.startswith(name[:n])] == [name]}
    return frozenset(names)


def normalise_task_list(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--tasks`` list as one comma-separated value without spaces or empty entries:
    ``--tasks "a, b"``, ``--tasks a, b`` and ``--tasks a,b,`` all become ``--tasks a,b`` (lm-eval 0.4.13 would
    look for a task named " b" or ""). Everything else is left as it is."""
    out: list[str] = []
    index = 0
    argv = list(argv)
    while index < len(argv):
        arg = argv[index]
        if arg.split("=", 1)[0] in _spellings("--tasks"):
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
