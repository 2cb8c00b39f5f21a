"""``medeval run``'s command line, read once into one ``RunSettings`` that every check and wrapper reads.

The pack's own argparse parser knows the pack's options (the judge flags, ``--allow-unknown-metadata``,
``--skip-judge-check``, ``--breakdown``) and the lm-eval options the pack reads (``--tasks``, ``--model``,
``--model_args``, ``--metadata``, ``--include_path``, ``--output_path``, ...), with lm-eval's own names, short
forms and value counts; every other option passes through to lm-eval unchanged (``parse_known_args``). lm-eval
is then handed ``RunSettings.lm_eval_argv``: its options as given, the pack's taken out and ``--tasks`` as one
clean list. A ``--config`` file's values count where the command line gives none, as in lm-eval.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from medeval_metrics.command_line import merge_key_values
from medeval_metrics.errors import MedevalDataError

ALLOW_UNKNOWN_METADATA = "--allow-unknown-metadata"  # the pack's: let keys the pack does not read through
SKIP_JUDGE_CHECK = "--skip-judge-check"  # the pack's: no request per judge before the run
BREAKDOWN_FLAG = "--breakdown"  # the pack's: print the per-category tables after the run

# lm-eval 0.4.13's `run` options the pack reads: (names, nargs). Names, short forms and value counts are
# lm-eval's (tests/core/test_cli_command_line.py compares them with lm-eval's own parser).
LM_EVAL_OPTIONS: dict[str, tuple[tuple[str, ...], Any]] = {
    "config": (("--config", "-C"), None),
    "tasks": (("--tasks", "-t"), "+"),
    "model": (("--model", "-M"), None),
    "model_args": (("--model_args", "-a"), "+"),
    "apply_chat_template": (("--apply_chat_template",), "?"),
    "limit": (("--limit", "-L"), None),
    "use_cache": (("--use_cache", "-c"), None),
    "device": (("--device",), None),
    "gen_kwargs": (("--gen_kwargs",), "+"),
    "output_path": (("--output_path", "-o"), None),
    "log_samples": (("--log_samples", "-s"), 0),
    "include_path": (("--include_path",), None),
    "verbosity": (("--verbosity", "-v"), None),
    "write_out": (("--write_out", "-w"), 0),
    "predict_only": (("--predict_only", "-x"), 0),
    "metadata": (("--metadata",), "+"),
}
_DICT_OPTIONS = ("model_args", "gen_kwargs", "metadata")  # lm-eval merges their occurrences into one dict


@dataclass(frozen=True)
class RunSettings:
    """``medeval run``'s command line: what lm-eval will run (a ``--config`` file's values included) and the
    pack's own options. ``problems``: values that could not be read (each one line, reported by the checks)."""

    argv: tuple[str, ...] = ()  # as the user gave it
    tasks: list[str] | None = None  # None: no --tasks
    metadata: dict[str, Any] = field(default_factory=dict)
    include_path: str | None = None
    model: str | None = None  # None: lm-eval's default (hf)
    model_args: dict[str, Any] = field(default_factory=dict)
    gen_kwargs: dict[str, Any] = field(default_factory=dict)
    output_path: str | None = None
    log_samples: bool = False
    predict_only: bool = False
    write_out: bool = False
    apply_chat_template: bool | str = False
    limit: float | None = None
    use_cache: str | None = None
    device: str | None = None
    verbosity: str | None = None
    config: str | None = None
    # the pack's own options
    judges: str | None = None
    judge_model: tuple[str, ...] = ()
    judge_base_url: tuple[str, ...] = ()
    judge_api_key_env: tuple[str, ...] = ()
    allow_unscored: bool = False
    allow_unknown_metadata: bool = False
    skip_judge_check: bool = False
    breakdown: bool = False
    help: bool = False
    problems: tuple[str, ...] = ()
    readable: bool = True  # False: argparse could not read the line at all (its one problem is all there is to say)
    metadata_read: bool = True  # False: --metadata could not be read (the data checks would blame the wrong thing)
    # what lm-eval gets: its options in the order given (each occurrence's values), then the ones the pack does not
    # read, untouched
    lm_eval_options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    passthrough: tuple[str, ...] = ()

    @property
    def lm_eval_argv(self) -> list[str]:
        """The command line lm-eval parses: the pack's options taken out, ``--tasks`` as one clean list."""
        out: list[str] = []
        for flag, values in self.lm_eval_options:
            out += [flag, *values]
        return out + list(self.passthrough)

    @property
    def writes_samples(self) -> bool:
        return self.log_samples or self.predict_only  # lm-eval: --predict_only implies --log_samples

    @property
    def judge_flags_given(self) -> bool:
        return bool(self.judges or self.judge_model or self.judge_base_url or self.judge_api_key_env)


class _Refused(MedevalDataError):
    """What argparse says of a line it cannot read (an option without its value, an ambiguous abbreviation)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line for the pack's error output, instead of usage and exit 2
        raise _Refused(f"the command line cannot be read: {message}.")


class _Occurrence(argparse.Action):
    """Keeps each occurrence of an lm-eval option, in order (lm-eval merges repeated dict options)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.__dict__.setdefault("_seen", []).append((self.dest, values))


@functools.cache
def _parser() -> _Parser:
    from medeval_metrics.judge.cli import add_judge_flags

    parser = _Parser(prog="medeval run", add_help=False)
    pack = parser.add_argument_group("the pack's options")
    add_judge_flags(pack)
    pack.add_argument(ALLOW_UNKNOWN_METADATA, action="store_true")
    pack.add_argument(SKIP_JUDGE_CHECK, action="store_true")
    pack.add_argument(BREAKDOWN_FLAG, action="store_true")
    pack.add_argument("-h", "--help", action="store_true")
    theirs = parser.add_argument_group("lm-eval's options the pack reads")
    for dest, (names, nargs) in LM_EVAL_OPTIONS.items():
        extra = {"const": True} if nargs == "?" else {}
        theirs.add_argument(*names, dest=dest, nargs=nargs, action=_Occurrence, default=argparse.SUPPRESS, **extra)
    return parser


def read_command_line(argv: Sequence[str]) -> RunSettings:
    """``medeval run ARGV`` read once: the pack's options, the lm-eval options it reads (a ``--config`` file's
    where the line gives none) and the command line for lm-eval. Never raises: what cannot be read is in
    ``problems``, one line each."""
    argv = tuple(argv)
    try:
        namespace, passthrough = _parser().parse_known_args(list(argv))
    except _Refused as exc:
        return RunSettings(argv=argv, problems=(str(exc),), readable=False, metadata_read=False, passthrough=argv)
    seen: list[tuple[str, Any]] = namespace.__dict__.pop("_seen", [])
    problems: list[str] = []
    given: dict[str, list[Any]] = {}
    for dest, values in seen:
        given.setdefault(dest, []).append(values)

    values: dict[str, Any] = {}
    for dest, occurrences in given.items():
        nargs = LM_EVAL_OPTIONS[dest][1]
        if dest == "tasks":
            values[dest] = _task_names([v for values_ in occurrences for v in values_])
        elif dest in _DICT_OPTIONS:
            values[dest] = occurrences  # read below, each problem reported
        elif nargs == 0:
            values[dest] = True
        else:
            values[dest] = occurrences[-1]  # argparse keeps the last, as lm-eval's parser does
    from_file = _config_file(values.get("config"), problems)
    for dest, value in from_file.items():  # lm-eval's precedence: a value on the command line wins
        if dest in LM_EVAL_OPTIONS and dest not in values and (value or value == 0):
            values[dest] = _from_file(dest, value)

    dicts: dict[str, dict[str, Any]] = {}
    metadata_read = True
    for dest in _DICT_OPTIONS:
        value = values.get(dest)
        try:
            dicts[dest] = (
                value if isinstance(value, dict) else merge_key_values(LM_EVAL_OPTIONS[dest][0][0], value or [])
            )
        except (
            MedevalDataError,
            TypeError,
            KeyError,
            AttributeError,
        ) as exc:  # a --config file's value of a wrong type
            problems.append(
                str(exc)
                if isinstance(exc, MedevalDataError)
                else f"{LM_EVAL_OPTIONS[dest][0][0]} in the --config file is {type(value).__name__}: give key=value "
                "pairs or a mapping."
            )
            dicts[dest] = {}
            metadata_read = metadata_read and dest != "metadata"
    limit = values.get("limit")
    try:
        limit = None if limit is None else float(limit)
    except (TypeError, ValueError):
        problems.append(f"--limit {limit!r} is not a number: give a count (--limit 20) or a fraction (--limit 0.1).")
        limit = None
    template = values.get("apply_chat_template", False)
    return RunSettings(
        argv=argv,
        tasks=values.get("tasks"),
        metadata=dicts["metadata"],
        include_path=_text(values.get("include_path")),
        model=_text(values.get("model")),
        model_args=dicts["model_args"],
        gen_kwargs=dicts["gen_kwargs"],
        output_path=_text(values.get("output_path")),
        log_samples=bool(values.get("log_samples")),
        predict_only=bool(values.get("predict_only")),
        write_out=bool(values.get("write_out")),
        apply_chat_template=template if isinstance(template, str) else bool(template),
        limit=limit,
        use_cache=_text(values.get("use_cache")),
        device=_text(values.get("device")),
        verbosity=_text(values.get("verbosity"), upper=True),
        config=_text(values.get("config")),
        judges=namespace.judges,
        judge_model=tuple(namespace.judge_model),
        judge_base_url=tuple(namespace.judge_base_url),
        judge_api_key_env=tuple(namespace.judge_api_key_env),
        allow_unscored=namespace.allow_unscored,
        allow_unknown_metadata=namespace.allow_unknown_metadata,
        skip_judge_check=namespace.skip_judge_check,
        breakdown=namespace.breakdown,
        help=namespace.help,
        problems=tuple(problems),
        metadata_read=metadata_read,
        lm_eval_options=tuple(_lm_eval_options(seen, given)),
        passthrough=tuple(passthrough),
    )


def _text(value: Any, upper: bool = False) -> str | None:
    if value is None or value == "":
        return None
    return str(value).upper() if upper else str(value)


def _task_names(values: Sequence[Any]) -> list[str]:
    """``--tasks`` values as one list: comma-separated, spaces and empty entries dropped (lm-eval 0.4.13 would look
    for a task named " b" or "")."""
    return [name.strip() for value in values for name in str(value).split(",") if name.strip()]


def _from_file(dest: str, value: Any) -> Any:
    """A ``--config`` file's value in the shape the command line gives it."""
    if dest == "tasks":
        return _task_names(value if isinstance(value, list) else [value])
    if dest in _DICT_OPTIONS and isinstance(value, str):
        return [[value]]
    return value


def _config_file(path: Any, problems: list[str]) -> dict[str, Any]:
    """The values of lm-eval's ``--config`` YAML file (a mapping of option names), or {} and a problem."""
    if not path:
        return {}
    from pathlib import Path

    import yaml

    try:
        loaded = yaml.safe_load(Path(str(path)).expanduser().read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        problems.append(f"--config {path}: cannot be read ({' '.join(str(exc).split())[:200]}).")
        return {}
    if not isinstance(loaded, dict):
        problems.append(f"--config {path}: holds no mapping of options (tasks: ..., model: ...).")
        return {}
    return loaded


def _lm_eval_options(seen: list[tuple[str, Any]], given: dict[str, list[Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """lm-eval's options in the order first given: ``--tasks`` once with the clean list, a dict option once per
    occurrence (lm-eval merges them), another option once with its last value."""
    out: list[tuple[str, tuple[str, ...]]] = []
    done: set[str] = set()
    for dest, values in seen:
        flag, nargs = LM_EVAL_OPTIONS[dest][0][0], LM_EVAL_OPTIONS[dest][1]
        if dest in _DICT_OPTIONS:
            out.append((flag, tuple(values)))
            continue
        if dest in done:
            continue
        done.add(dest)
        if dest == "tasks":
            names = _task_names([v for occurrence in given[dest] for v in occurrence])
            out.append((flag, (",".join(names),) if names else ()))  # nothing left: lm-eval says it needs a value
        elif nargs == 0:
            out.append((flag, ()))
        else:
            last = given[dest][-1]
            out.append((flag, () if last is True else (str(last),)))  # --apply_chat_template alone: True
    return out


def with_judge_panel(settings: RunSettings) -> RunSettings:
    """The settings with the panel the judge flags describe (``--judge-model`` ...) in ``--metadata`` as
    ``medeval_judges``, for the checks and for lm-eval (one JSON ``--metadata`` holding every key the line gave).
    Unchanged without judge flags, or when ``--metadata`` could not be read (its problem stops the run).
    Raises MedevalDataError for a judges file or flag the panel cannot be built from."""
    if not settings.judge_flags_given or not settings.metadata_read:
        return settings
    from types import SimpleNamespace

    from medeval_metrics.judge.cli import panel_from_args

    panel = panel_from_args(
        SimpleNamespace(
            judges=settings.judges,
            judge_model=list(settings.judge_model),
            judge_base_url=list(settings.judge_base_url),
            judge_api_key_env=list(settings.judge_api_key_env),
        )
    )
    metadata = {**settings.metadata, "medeval_judges": json.loads(panel.to_json())}
    options = [(flag, values) for flag, values in settings.lm_eval_options if flag != "--metadata"]
    options.append(("--metadata", (json.dumps(metadata),)))
    return dataclasses.replace(settings, metadata=metadata, lm_eval_options=tuple(options))


def settings_of(argv_or_settings: RunSettings | Sequence[str]) -> RunSettings:
    """``RunSettings`` as given, or read from a command line (for checks called with one)."""
    if isinstance(argv_or_settings, RunSettings):
        return argv_or_settings
    return read_command_line(argv_or_settings)


def parse_metadata(argv: Sequence[str]) -> dict[str, Any]:
    """``--metadata`` of ``medeval run ARGV`` as lm-eval will read it (repeated flags merged, abbreviations and a
    ``--config`` file's counted). Raises MedevalDataError with the one-line problem when it cannot be read."""
    settings = read_command_line(argv)
    if not settings.metadata_read:
        raise MedevalDataError(next(p for p in settings.problems if "--metadata" in p or "command line" in p))
    return settings.metadata
