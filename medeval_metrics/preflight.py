"""Checks ``medeval run`` makes before lm-eval builds the model.

lm-eval builds the model first and the tasks after, so a typo in a task name, a bad ``--metadata``
or a missing data file would otherwise surface after a model has loaded (minutes for a real one).
Everything here reads the command line, the benchmark specs (``medeval_metrics.registry``) and the
data files; nothing builds a model. Each problem is one ``MedevalDataError`` that names what is wrong and the fix.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from medeval_metrics import registry
from medeval_metrics.data import MedevalDataError, flag_setting
from medeval_metrics.command_line import flag_values as _flag_values
from medeval_metrics.command_line import parse_metadata
from medeval_metrics.files import unwritable_reason
from medeval_metrics.settings import FULL_TASK_INDEX, PACK_KEYS, env_var, removed_problems
from medeval_metrics.task_yaml import task_set_metadata

JUDGES_KEY = "medeval_judges"  # the judge panel (medeval_metrics.judge.config.METADATA_KEY)


def _pack_key_prefixes() -> tuple[str, ...]:
    """Metadata keys with these prefixes belong to the pack: an unknown one is a typo, not a key for someone else."""
    return (*(f"{spec.name}_" for spec in registry.benchmarks()),
            *(prefix for spec in registry.benchmarks() for prefix in spec.key_prefixes), "medeval_")


# --------------------------------------------------------------------------- the pack's catalogue


def _manifest() -> dict[str, Any]:
    """The pack's tasks, groups and sources as the benchmark specs declare them."""
    from medeval_metrics.manifest import build_manifest

    return build_manifest()


def _known_metadata_keys() -> list[str]:
    """Every metadata key the pack reads (data sources and options, from the specs; the judge panel)."""
    return sorted({*registry.metadata_keys(), JUDGES_KEY})


def _pack_names() -> dict[str, list[str]]:
    """Every name the pack answers to (tasks and groups) -> the tasks it stands for."""
    manifest = _manifest()
    groups = {g["group"]: g["tasks"] for g in manifest["groups"]}
    names: dict[str, list[str]] = {t["task"]: [t["task"]] for t in manifest["tasks"]}

    def expand(name: str, seen: tuple[str, ...] = ()) -> list[str]:
        if name in names:
            return names[name]
        out: list[str] = []
        for member in groups.get(name, []):
            if member not in seen:
                out += [t for t in expand(member, seen + (name,)) if t not in out]
        return out

    for group in groups:
        names[group] = expand(group)
    return names


def _sources_for(tasks: Sequence[str]) -> dict[str, list[str]]:
    """Data source key -> the selected tasks that read it, in the tasks' order."""
    by_task = {t["task"]: [t["source"], *t.get("also_reads", [])] for t in _manifest()["tasks"]}
    out: dict[str, list[str]] = {}
    for task in tasks:
        for source in by_task[task]:
            out.setdefault(source, []).append(task)
    return out


# --------------------------------------------------------------------------- command line


CLOSE_KEY_CUTOFF = 0.85  # a key this close to a known one (``ems_public_path``) is a typo, whatever its prefix


def check_metadata_keys(metadata: dict[str, Any]) -> None:
    """An unknown key that is a typo of a known one is an error naming the closest known key: one with the pack's
    prefix, one differing only in case (``EMSQA_PUBLIC_PATH``), or one very close (``ems_public_path``). A key a
    task sets itself (``rag_mode``) is refused too. Every such key is reported in one error."""
    raise_problems(metadata_key_problems(metadata))


def metadata_key_problems(metadata: Mapping[str, Any]) -> list[str]:
    known = _known_metadata_keys()
    lowered = {k.lower(): k for k in known}
    task_set = task_set_keys()
    removed = registry.removed_options()
    problems = []
    for key in metadata:
        if key in removed:
            problems += removed_problems({key: metadata[key]}, {key: removed[key]}, {})
        elif key in task_set:
            problems.append(_task_set_problem(f"--metadata key {key!r}", key, metadata[key], task_set[key]))
        elif key in known:
            continue
        elif str(key).lower() in lowered:
            problems.append(f"--metadata key {key!r} is not one the pack reads (keys are lower case). "
                            f"Did you mean {lowered[str(key).lower()]!r}?")
        elif key.startswith(_pack_key_prefixes()):
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            suggestion = f" Did you mean {close[0]!r}?" if close else ""
            problems.append(
                f"--metadata key {key!r} is not one the pack reads.{suggestion} Known keys: {', '.join(known)}."
            )
        else:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=CLOSE_KEY_CUTOFF)
            if close:
                problems.append(f"--metadata key {key!r} is not one the pack reads. Did you mean {close[0]!r}?")
    return problems


def keys_meant(metadata: Mapping[str, Any], environ: Mapping[str, str]) -> set[str]:
    """The known keys that misspelled ``--metadata`` keys or ``MEDEVAL_*`` variables were probably meant for: their
    data sources look unset only because of the typo, so the typo's error is the one to show."""
    known = _known_metadata_keys()
    lowered = {k.lower(): k for k in known}
    meant = set()
    for key in metadata:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            meant |= {lowered[str(key).lower()]} if str(key).lower() in lowered else set(close)
    by_variable = {environment_variable(k): k for k in known}
    for name in environ:
        if name.startswith("MEDEVAL_") and name not in by_variable:
            meant |= {by_variable[c] for c in difflib.get_close_matches(name, list(by_variable), n=1, cutoff=0.6)}
    return meant


def task_set_keys() -> dict[str, dict[str, list[str]]]:
    """Metadata keys the pack's task YAMLs set themselves (besides ``version``) -> value -> the tasks that set it.
    A user's value would silently turn a task into another (``rag_mode``), so such keys are refused."""
    return _task_set_keys_cached()


def _task_set_keys_cached(_memo: dict = {}) -> dict[str, dict[str, list[str]]]:  # noqa: B006 (a memo)
    if not _memo:
        order = {name: i for i, name in enumerate(_pack_names())}  # the pack's listing order, public tasks first
        _memo["keys"] = {key: {value: sorted(tasks, key=lambda t: order.get(t, len(order))) for value, tasks in by.items()}
                         for key, by in task_set_metadata().items()}
    return _memo["keys"]


def _task_set_problem(where: str, key: str, value: Any, by_value: Mapping[str, list[str]]) -> str:
    wanted = by_value.get(str(value).strip())
    each = "; ".join(f"{v}: {', '.join(ts)}" for v, ts in by_value.items())
    if wanted:
        return (f"{where} cannot be set: each task sets its own {key}, and another value would make it a different "
                f"task under the same name. For {key} {str(value).strip()!r} run --tasks {wanted[0]}"
                + (f" (or {', '.join(wanted[1:])})" if len(wanted) > 1 else "") + f" and leave {key} out.")
    return (f"{where} cannot be set: each task sets its own {key} ({each}). Choose the task for the {key} you want "
            f"and leave {key} out.")


# --------------------------------------------------------------------------- on/off settings



def flag_problems(metadata: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """Each on/off setting (``BenchmarkSpec.flag_options`` and the pack's switch variables) that is neither."""
    checks = [(f"--metadata {key}", metadata[key]) for key in registry.flag_options() if key in metadata]
    checks += [(f"MEDEVAL_{key.upper()}", environ[f"MEDEVAL_{key.upper()}"]) for key in registry.flag_options()
               if f"MEDEVAL_{key.upper()}" in environ and key not in metadata]
    checks += [(FULL_TASK_INDEX.name, environ[FULL_TASK_INDEX.name])] if FULL_TASK_INDEX.name in environ else []
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
    return sorted({environment_variable(key) for key in _known_metadata_keys()} | pack_wide)


def environment_variable(key: str) -> str:
    """The variable for a metadata key: ``MEDEVAL_<KEY>`` (``medeval_judges``: ``MEDEVAL_JUDGES``)."""
    return env_var(key)


def check_environment_keys(environ: Mapping[str, str]) -> None:
    """A ``MEDEVAL_*`` variable the pack does not read is a typo (``MEDEVAL_EMSQA_PUBLIC_PTH``, ``MEDEVAL_JUDGE``):
    an error naming the closest known variable; every such variable in one error."""
    raise_problems(environment_problems(environ))


def environment_problems(environ: Mapping[str, str]) -> list[str]:
    known = known_environment_variables()
    task_set = {environment_variable(key): key for key in task_set_keys()}
    removed = {environment_variable(key): key for key in registry.removed_options()}
    problems = []
    for name in sorted(environ):
        if not name.startswith("MEDEVAL_") or name.startswith(SCRIPT_VARIABLE_PREFIX):
            continue
        if name in removed:
            problems += removed_problems({}, {removed[name]: registry.removed_options()[removed[name]]}, {name: environ[name]})
        elif name in task_set:
            key = task_set[name]
            problems.append(_task_set_problem(f"environment variable {name}", key, environ[name], task_set_keys()[key])
                            + f" (`unset {name}`)")
        elif name not in known and not _holds_a_credential(name, known, environ):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            suggestion = f" Did you mean {close[0]}?" if close else f" Known: {', '.join(known)}."
            problems.append(
                f"environment variable {name} is not a setting the pack reads.{suggestion} "
                f"Rename or unset it (`unset {name}`)."
            )
    return problems


def _holds_a_credential(name: str, known: Sequence[str], environ: Mapping[str, str]) -> bool:
    from medeval_metrics.lm_eval_compat import MODEL_KEY_ENV

    if name == environ.get(MODEL_KEY_ENV, "").strip():
        return True
    if difflib.get_close_matches(name, known, n=1, cutoff=0.9):
        return False  # one letter off a setting (the model key variable without its V): a typo, whatever its words
    return bool(_SECRET_WORDS & set(name.split("_")))


# --------------------------------------------------------------------------- problems, reported together


class RunProblems(MedevalDataError):
    """Several problems found at once; ``problems`` holds each (the command prints one line per problem)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(f"{len(self.problems)} problems, fix them all before the run:"
                         + "".join(f"\n  - {p}" for p in self.problems))


def raise_problems(problems: Sequence[str]) -> None:
    """One problem: its line; several: one error listing each on its own line (``RunProblems``). A problem
    two checks found (a setting both the option check and the data loader read) is listed once."""
    problems = list(dict.fromkeys(problems))
    if len(problems) == 1:
        raise MedevalDataError(problems[0])
    if problems:
        raise RunProblems(problems)


def _collect(problems: list[str], check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``check(*args)``; a MedevalDataError it raises becomes one more entry of ``problems`` (returns None then)."""
    try:
        return check(*args, **kwargs)
    except MedevalDataError as exc:
        problems.append(str(exc))
        return None


@dataclass
class Selection:
    """What ``--tasks`` asks for: the pack's tasks (in order) and whether anything else is requested."""

    pack_tasks: list[str] = field(default_factory=list)
    requested_groups: dict[str, list[str]] = field(default_factory=dict)
    other_names: list[str] = field(default_factory=list)  # lm-eval tasks, YAML paths, patterns

    @property
    def only_pack(self) -> bool:
        return bool(self.pack_tasks) and not self.other_names


def requested_task_names(argv: Sequence[str]) -> list[str] | None:
    values = _flag_values(argv, "--tasks", "-t")
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
                while index < len(argv) and not (argv[index].startswith("-") and len(argv[index]) > 1
                                                 and not argv[index][1:2].isdigit()):
                    values.append(argv[index])
                    index += 1
            names = [name.strip() for value in values for name in value.split(",") if name.strip()]
            out += ["--tasks", ",".join(names)] if names else [arg.split("=", 1)[0]]
            continue
        out.append(arg)
        index += 1
    return out


def _pack_name_prefixes() -> tuple[str, ...]:
    """Name prefixes only the pack uses (lm-eval 0.4.13 has no built-in task starting with any of them)."""
    names = _pack_names()
    return tuple(sorted({name.split("_", 1)[0] for name in names}))


def select_tasks(names: Sequence[str], lm_eval_names: Callable[[], list[str]] | None = None,
                 user_tasks: bool = False) -> Selection:
    """Split ``names`` into the pack's and lm-eval's; an unknown name is an error with suggestions.

    ``lm_eval_names`` lists lm-eval's own tasks, built only if a name is not the pack's, and not at
    all for a name with one of the pack's prefixes (``emsqa_pubic``) unless ``user_tasks`` (the user
    gave an --include_path, whose tasks might use the prefix).
    """
    selection, problems = _select_tasks(names, lm_eval_names, user_tasks)
    raise_problems(problems)
    return selection


def _select_tasks(names: Sequence[str], lm_eval_names: Callable[[], list[str]] | None,
                  user_tasks: bool) -> tuple[Selection, list[str]]:
    """``select_tasks``'s selection of the names that are right, and a problem per name that is not."""
    pack = _pack_names()
    selection = Selection()
    unknown = []
    for name in names:
        if name in pack:
            selection.pack_tasks += [t for t in pack[name] if t not in selection.pack_tasks]
            if pack[name] != [name]:
                selection.requested_groups[name] = pack[name]
        else:
            selection.other_names.append(name)
            if not _is_path_or_pattern(name):
                unknown.append(name)
    problems = []
    if unknown and not user_tasks:
        ours = [n for n in unknown if n.startswith(_pack_name_prefixes())]
        for name in ours:  # a typo of one of the pack's names: no need to index lm-eval's 14,000 tasks to say so
            _collect(problems, _unknown_name_error, name, pack, [])
        unknown = [n for n in unknown if n not in ours]
    if unknown and lm_eval_names is not None:
        index = lm_eval_names()
        known = set(index)
        for name in unknown:
            if name not in known:
                _collect(problems, _unknown_name_error, name, pack, index)
    return selection, problems


def _unknown_name_error(name: str, pack: dict[str, list[str]], index: list[str]) -> None:
    close = difflib.get_close_matches(name, list(pack), n=3, cutoff=0.6) or difflib.get_close_matches(
        name, index, n=3, cutoff=0.75)
    suggestion = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise MedevalDataError(
        f"--tasks: no task or group named {name!r}.{suggestion} `medeval list` shows the pack's tasks; "
        "`lm-eval ls tasks` shows lm-eval's."
    )


def _is_path_or_pattern(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or any(c in name for c in "*?[")


def _lm_eval_task_names(include_path: str | None = None) -> list[str]:
    """lm-eval's task index as the run will build it (the user's --include_path included)."""
    from lm_eval.tasks import TaskManager

    return list(TaskManager(include_path=include_path or None).all_tasks)


# --------------------------------------------------------------------------- data and judges


def _validators() -> dict[str, Callable[[dict[str, Any]], None]]:
    """Data source key -> a check that resolves and reads the source as the task will (raises if it cannot);
    each benchmark's spec gives its sources' checks."""
    return {source.key: source.check for spec in registry.benchmarks() for source in spec.sources if source.check}


def _has_local_copy(source_key: str, metadata: dict[str, Any]) -> bool:
    from medeval_metrics.data import setting

    return bool(setting(metadata, source_key))


def _sources_without_a_public_copy() -> set[str]:
    return {key for bench in _manifest()["benchmarks"].values() for key, source in bench["sources"].items()
            if not source.get("hub")}


def check_groups_have_data(selection: Selection, metadata: dict[str, Any]) -> None:
    """A requested group whose member tasks need the user's own data, not given: name them and the way out."""
    raise_problems(_group_problems(selection, metadata)[0])


def _group_problems(selection: Selection, metadata: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The problems of requested groups with tasks needing the user's own data, not given, and those tasks.
    The message names only the sources that are missing, and says what the rest needs when the Hub is off."""
    from medeval_metrics.data import hub_offline

    private = _sources_without_a_public_copy()
    problems, left_out = [], set()
    for group, tasks in selection.requested_groups.items():
        lacking = [t for source, ts in _sources_for(tasks).items()
                   if source in private and not _has_local_copy(source, metadata) for t in ts]
        lacking = [t for t in tasks if t in lacking]
        if lacking and len(lacking) < len(tasks):
            left_out |= set(lacking)
            sources = [s for s in _sources_for(lacking) if s in private and not _has_local_copy(s, metadata)]
            rest = [t for t in tasks if t not in lacking]
            others = [g for g, members in _pack_names().items() if g != group and members
                      and set(members) <= set(rest) and members != [g]]
            runnable = f"--tasks {others[0]}" if others else "--tasks " + ",".join(rest)
            from_hub = [s for s in _sources_for(rest) if s not in private and not _has_local_copy(s, metadata)]
            offline = (f" (the Hub is off, so those need {' and '.join(from_hub)} as well)"
                       if from_hub and hub_offline() else "")
            problems.append(
                f"--tasks {group} includes {', '.join(lacking)}, which need your own data ({', '.join(sources)} "
                f"{'is' if len(sources) == 1 else 'are'} not set). Run the rest with `{runnable}`{offline}, or give "
                f"the file with --metadata '{{\"{sources[0]}\": \"/path/to/file\"}}'."
            )
    return problems, left_out


def check_data_sources(tasks: Sequence[str], metadata: dict[str, Any]) -> None:
    raise_problems(_data_source_problems(tasks, metadata))


def _data_source_problems(tasks: Sequence[str], metadata: dict[str, Any], skip: set[str] = frozenset()) -> list[str]:
    """Each data source's problem (``skip``: sources a misspelled key was meant for, reported as that typo)."""
    validators = _validators()
    done: set[Callable] = set()
    problems: list[str] = []
    for source in _sources_for(tasks):
        if source in skip:
            continue
        check = validators.get(source)
        if check is not None and check not in done:
            done.add(check)
            _collect(problems, check, metadata)
    return problems


def check_judge_panel(metadata: dict[str, Any]) -> None:
    """The judge panel (``--metadata medeval_judges`` or ``$MEDEVAL_JUDGES``), validated completely
    (``judge.config.validate_panel``: backends, base URLs, key variables, cache path, rubric file)."""
    from medeval_metrics.judge import config

    config.panel_for_task(metadata)


def _needs_judges(tasks: Sequence[str]) -> bool:
    return any(registry.judging_for(t) is not None for t in tasks)


def run_checks(argv: Sequence[str], lm_eval_names: Callable[[], list[str]] | None = None,
               environ: Mapping[str, str] | None = None, check_options: bool = False) -> Selection | None:
    """Every check; returns the selection (None without ``--tasks``). The problems of all checks that can run
    are reported together in one error (a data source is checked only for tasks whose names are right).

    ``lm_eval_names`` lists lm-eval's tasks (default: its full index, built only for a name not the pack's).
    ``check_options``: also lm-eval's own options (``run_option_problems``), as ``medeval run`` does.
    """
    environ = os.environ if environ is None else environ
    if lm_eval_names is None:
        include_path = (_flag_values(argv, "--include_path") or [None])[0]
        lm_eval_names = lambda: _lm_eval_task_names(include_path)  # noqa: E731
    problems: list[str] = []
    if argv and check_options:  # `medeval run` alone prints lm-eval's help
        problems += run_option_problems(argv)
    before = len(problems)
    metadata = _collect(problems, parse_metadata, argv) or {}
    metadata_read = len(problems) == before  # else the data checks would blame settings they cannot see
    problems += metadata_key_problems(metadata)
    problems += environment_problems(environ)
    problems += flag_problems(metadata, environ)
    names = requested_task_names(argv)
    if not names:
        raise_problems(problems)
        return None
    selection, name_problems = _select_tasks(names, lm_eval_names, user_include_path(argv))
    problems += name_problems
    if selection.pack_tasks and metadata_read:  # the data of the tasks whose names are right
        group_problems, left_out = _group_problems(selection, metadata)
        checked = [t for t in selection.pack_tasks if t not in left_out]
        problems += _data_source_problems(checked, metadata, skip=keys_meant(metadata, environ))
        if _needs_judges(checked) and JUDGES_KEY not in keys_meant(metadata, environ):
            _collect(problems, check_judge_panel, metadata)
        problems += group_problems  # last: its way out is to run the rest, whose problems are listed above
    raise_problems(problems)
    return selection


# --------------------------------------------------------------------------- lm-eval's own options


def run_option_problems(argv: Sequence[str]) -> list[str]:
    """What lm-eval would refuse or lose only after building the model (or after the whole run): no --tasks,
    --log_samples without --output_path, --limit 0 or below, an unknown --model, an --output_path or --use_cache
    that cannot be written. Read with lm-eval's own parser and config, so its defaults and --config files count."""
    config, problem = _lm_eval_config(argv)
    if problem:
        return [problem]
    if config is None:  # lm-eval's parser refuses the command line: it says why itself when it runs
        return []
    problems = []
    if not config.tasks:
        problems.append(_LM_EVAL_REFUSALS["Need to specify task"])
    if config.limit is not None and config.limit <= 0:
        problems.append(f"--limit {config.limit:g} selects no items: give a count (--limit 20) or a fraction of each "
                        "set (--limit 0.1), or leave --limit out to run everything.")
    problems += [p for p in [_model_problem(config.model or "hf")] if p]
    if config.output_path:
        folder = Path(config.output_path).expanduser()
        reason = unwritable_reason(folder.parent if folder.suffix == ".json" else folder)
        if reason:
            problems.append(f"--output_path {config.output_path}: {reason}. lm-eval would run everything and then "
                            "fail to save the results: choose a folder you can write to.")
    if config.use_cache:
        folder = Path(os.path.dirname(os.path.expanduser(config.use_cache)) or ".")
        reason = unwritable_reason(folder)
        if reason:
            problems.append(f"--use_cache {config.use_cache}: {reason} (lm-eval writes {config.use_cache}_rank0.db "
                            "there). Choose a path in a folder you can write to.")
    return problems


_LM_EVAL_REFUSALS = {  # lm-eval's message -> the pack's, with the fix
    "Need to specify task": "--tasks is missing: name what to run, e.g. --tasks emsqa_public (`medeval list` shows "
                            "the pack's tasks, `lm-eval ls tasks` lm-eval's).",
    "Specify --output_path": "--log_samples (and --predict_only) write the samples into the --output_path folder: "
                             "add --output_path DIR.",
}


def _lm_eval_config(argv: Sequence[str]) -> tuple[Any, str | None]:
    """lm-eval's EvaluatorConfig for ``lm-eval run ARGV`` (None if its parser refuses the line), or the problem it
    raises. Nothing is printed or logged: lm-eval parses the line again when it runs."""
    import contextlib
    import io
    import logging

    from lm_eval._cli.harness import HarnessCLI
    from lm_eval.config.evaluate_config import EvaluatorConfig

    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                namespace = HarnessCLI()._parser.parse_args(["run", *argv])
            except SystemExit:  # argparse's usage error: lm-eval prints it when it parses the line itself
                return None, None
            except (ValueError, TypeError) as exc:  # raised by one of lm-eval's argument actions
                try:
                    parse_metadata(argv)
                except MedevalDataError:
                    return None, None  # the --metadata problem, reported by parse_metadata
                return None, f"lm-eval refuses the command line: {' '.join(str(exc).split())}"
            try:
                return EvaluatorConfig.from_cli(namespace), None
            except (ValueError, TypeError, OSError) as exc:
                text = " ".join(str(exc).split())
                known = next((mine for theirs, mine in _LM_EVAL_REFUSALS.items() if text.startswith(theirs)), None)
                return None, known or f"lm-eval refuses the command line: {text}"
    finally:
        logging.disable(previous)


def _model_problem(name: str) -> str | None:
    import lm_eval.models  # noqa: F401  (fills the registry)
    from lm_eval.api.registry import MODEL_REGISTRY

    if name == "medeval-scripted":
        import medeval_metrics.testing.scripted  # noqa: F401  (registers it)
    known = sorted(MODEL_REGISTRY.keys())
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    suggestion = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"--model {name!r} is not a model backend lm-eval knows.{suggestion} Known: {', '.join(known)}."


def user_include_path(argv: Sequence[str]) -> bool:
    return _flag_values(argv, "--include_path") is not None
