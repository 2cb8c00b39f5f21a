"""Checks ``medeval run`` makes before lm-eval builds the model.

lm-eval builds the model first and the tasks after, so a typo in a task name, a bad ``--metadata``
or a missing data file would otherwise surface after a model has loaded (minutes for a real one).
Everything here reads the command line, the benchmark specs (``medeval_metrics.registry``) and the
data files; nothing builds a model. Each problem is one ``MedevalDataError`` that names what is wrong and the fix.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from medeval_metrics.data import MedevalDataError

JUDGES_KEY = "medeval_judges"  # the judge panel (medeval_metrics.judge.config.METADATA_KEY)


def _pack_key_prefixes() -> tuple[str, ...]:
    """Metadata keys with these prefixes belong to the pack: an unknown one is a typo, not a key for someone else."""
    from medeval_metrics import registry

    return (*(f"{spec.name}_" for spec in registry.benchmarks()),
            *(prefix for spec in registry.benchmarks() for prefix in spec.key_prefixes), "medeval_")


def _flag_values(argv: Sequence[str], *flags: str) -> list[str] | None:
    """The values after the last of ``flags`` (until the next ``-`` option), or None if absent."""
    found = None
    for index, arg in enumerate(argv):
        for flag in flags:
            if arg == flag:
                values = []
                for value in argv[index + 1:]:
                    if value.startswith("-") and len(value) > 1 and not value[1:2].isdigit():
                        break
                    values.append(value)
                found = values
            elif arg.startswith(flag + "="):
                found = [arg.split("=", 1)[1]]
    return found


# --------------------------------------------------------------------------- the pack's catalogue


def _manifest() -> dict[str, Any]:
    """The pack's tasks, groups and sources as the benchmark specs declare them."""
    from medeval_metrics.manifest import build_manifest

    return build_manifest()


def _known_metadata_keys() -> list[str]:
    """Every metadata key the pack reads (data sources and options, from the specs; the judge panel)."""
    from medeval_metrics import registry

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


def parse_metadata(argv: Sequence[str]) -> dict[str, Any]:
    """``--metadata`` as lm-eval will read it (a JSON object, or ``key=value`` pairs); one-line errors."""
    values = _flag_values(argv, "--metadata")
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
                    hint = ' JSON needs double quotes around keys and strings, e.g. --metadata \'{"emsqa_public_path": "/data/test_open.json"}\''
            raise MedevalDataError(
                f"--metadata is not valid JSON ({exc.msg} at character {exc.pos}).{hint or ' Check the quotes and commas.'}"
            ) from None
        if not isinstance(parsed, dict):
            raise MedevalDataError('--metadata must be a JSON object, e.g. --metadata \'{"emsqa_public_path": "/data/test_open.json"}\'.')
        return parsed
    from lm_eval._cli.utils import key_val_to_dict

    merged: dict[str, Any] = {}
    for value in values:
        try:
            merged.update(key_val_to_dict(value))
        except ValueError as exc:
            raise MedevalDataError(
                f"--metadata {value!r}: {exc}. Give key=value pairs or a JSON object, e.g. "
                "--metadata '{\"emsqa_public_path\": \"/data/test_open.json\"}'."
            ) from None
    return merged


def check_metadata_keys(metadata: dict[str, Any]) -> None:
    """An unknown key with the pack's prefix is a typo: an error naming the closest known key."""
    known = _known_metadata_keys()
    for key in metadata:
        if key.startswith(_pack_key_prefixes()) and key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            suggestion = f" Did you mean {close[0]!r}?" if close else ""
            raise MedevalDataError(
                f"--metadata key {key!r} is not one the pack reads.{suggestion} Known keys: {', '.join(known)}."
            )


_SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")  # a variable a judge's api_key_env names, not a setting


def check_environment_keys(environ: Mapping[str, str]) -> None:
    """A ``MEDEVAL_<KEY>`` variable whose key has a benchmark's prefix but is not a key the pack reads is
    a typo (``MEDEVAL_EMSQA_PUBLIC_PTH``): an error naming the closest known variable."""
    known = {f"MEDEVAL_{key.upper()}": key for key in _known_metadata_keys()}
    prefixes = tuple(f"MEDEVAL_{prefix.upper()}" for prefix in _pack_key_prefixes() if prefix != "medeval_")
    for name in sorted(environ):
        if name.startswith(prefixes) and name not in known and not name.endswith(_SECRET_SUFFIXES):
            close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
            suggestion = f" Did you mean {close[0]}?" if close else ""
            raise MedevalDataError(
                f"environment variable {name} is not a setting the pack reads.{suggestion} "
                f"Rename or unset it (`unset {name}`)."
            )


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
    if unknown and not user_tasks:
        ours = [n for n in unknown if n.startswith(_pack_name_prefixes())]
        if ours:  # a typo of one of the pack's names: no need to index lm-eval's 14,000 tasks to say so
            _unknown_name_error(ours[0], pack, [])
    if unknown and lm_eval_names is not None:
        index = lm_eval_names()
        known = set(index)
        missing = [n for n in unknown if n not in known]
        if missing:
            _unknown_name_error(missing[0], pack, index)
    return selection


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
    from medeval_metrics import registry

    return {source.key: source.check for spec in registry.benchmarks() for source in spec.sources if source.check}


def _has_local_copy(source_key: str, metadata: dict[str, Any]) -> bool:
    import os

    return bool(metadata.get(source_key) or os.environ.get("MEDEVAL_" + source_key.upper()))


def _sources_without_a_public_copy() -> set[str]:
    return {key for bench in _manifest()["benchmarks"].values() for key, source in bench["sources"].items()
            if not source.get("hub")}


def check_groups_have_data(selection: Selection, metadata: dict[str, Any]) -> None:
    """A requested group whose member tasks need the user's own data, not given: name them and the way out."""
    private = _sources_without_a_public_copy()
    for group, tasks in selection.requested_groups.items():
        lacking = [t for source, ts in _sources_for(tasks).items()
                   if source in private and not _has_local_copy(source, metadata) for t in ts]
        if lacking and len(lacking) < len(tasks):
            sources = sorted({s for s, ts in _sources_for(lacking).items()})
            others = [g for g, members in _pack_names().items() if g != group and members
                      and set(members) <= set(tasks) - set(lacking) and members != [g]]
            runnable = f"--tasks {others[0]}" if others else "--tasks " + ",".join(t for t in tasks if t not in lacking)
            raise MedevalDataError(
                f"--tasks {group} includes {', '.join(lacking)}, which need your own data ({', '.join(sources)} is not set). "
                f"Run the rest with `{runnable}`, or give the file with --metadata '{{\"{sources[0]}\": \"/path/to/file\"}}'."
            )


def check_data_sources(tasks: Sequence[str], metadata: dict[str, Any]) -> None:
    validators = _validators()
    done: set[Callable] = set()
    for source in _sources_for(tasks):
        check = validators.get(source)
        if check is not None and check not in done:
            done.add(check)
            check(metadata)


def check_judge_panel(metadata: dict[str, Any]) -> None:
    """The judge panel (``--metadata medeval_judges`` or ``$MEDEVAL_JUDGES``), validated completely
    (``judge.config.validate_panel``: backends, base URLs, key variables, cache path, rubric file)."""
    from medeval_metrics.judge import config

    config.panel_for_task(metadata)


def _needs_judges(tasks: Sequence[str]) -> bool:
    from medeval_metrics import registry

    return any(registry.judging_for(t) is not None for t in tasks)


def run_checks(argv: Sequence[str], lm_eval_names: Callable[[], list[str]] | None = None) -> Selection | None:
    """Every check, in the order a user fixes things; returns the selection (None without ``--tasks``).

    ``lm_eval_names`` lists lm-eval's tasks (default: its full index, built only for a name not the pack's).
    """
    if lm_eval_names is None:
        include_path = (_flag_values(argv, "--include_path") or [None])[0]
        lm_eval_names = lambda: _lm_eval_task_names(include_path)  # noqa: E731
    metadata = parse_metadata(argv)
    check_metadata_keys(metadata)
    check_environment_keys(os.environ)
    names = requested_task_names(argv)
    if not names:
        return None
    selection = select_tasks(names, lm_eval_names, user_tasks=user_include_path(argv))
    check_groups_have_data(selection, metadata)
    check_data_sources(selection.pack_tasks, metadata)
    if _needs_judges(selection.pack_tasks):
        check_judge_panel(metadata)
    return selection


def user_include_path(argv: Sequence[str]) -> bool:
    return _flag_values(argv, "--include_path") is not None
