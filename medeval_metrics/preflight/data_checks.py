"""The data each selected task reads, checked as its loader will read it (every source, every problem)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from medeval_metrics.data import setting
from medeval_metrics.preflight.catalogue import pack_names, sources_for, sources_without_a_public_copy
from medeval_metrics.preflight.problems import collect
from medeval_metrics.preflight.selection import Selection


def _validators() -> dict[str, Callable[[Mapping[str, Any]], None]]:
    """Data source key -> a check that resolves and reads the source as the task will (raises if it cannot);
    each benchmark's spec gives its sources' checks."""
    from medeval_metrics import registry

    return {source.key: source.check for spec in registry.benchmarks() for source in spec.sources if source.check}


def has_local_copy(source_key: str, metadata: Mapping[str, Any]) -> bool:
    return bool(setting(metadata, source_key))


def group_problems(selection: Selection, metadata: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    """The problems of requested groups (or tags, or patterns) with tasks needing the user's own data, not given,
    and those tasks. The message names only the sources that are missing, says what to run instead, and what
    the rest needs when the Hub is off."""
    from medeval_metrics.data import hub_offline

    private = sources_without_a_public_copy()
    names = pack_names()
    problems, left_out = [], set()
    for group, tasks in selection.requested_groups.items():
        lacking = [
            t
            for source, ts in sources_for(tasks).items()
            if source in private and not has_local_copy(source, metadata)
            for t in ts
        ]
        lacking = [t for t in tasks if t in lacking]
        if not lacking:
            continue
        sources = [s for s in sources_for(lacking) if s in private and not has_local_copy(s, metadata)]
        given = "is" if len(sources) == 1 else "are"
        example = f'--metadata \'{{"{sources[0]}": "/path/to/file"}}\''
        rest = [t for t in tasks if t not in lacking]
        if not rest:  # nothing to run instead: each source's own error says where to get it
            continue
        left_out |= set(lacking)
        runnable = "--tasks " + ",".join(_cover(rest, names, exclude=group))
        from_hub = [s for s in sources_for(rest) if s not in private and not has_local_copy(s, metadata)]
        offline = (
            f" (the Hub is off, so those need {' and '.join(from_hub)} as well)" if from_hub and hub_offline() else ""
        )
        problems.append(
            f"--tasks {group} includes {', '.join(lacking)}, which need your own data ({', '.join(sources)} "
            f"{given} not set). Run these instead: `{runnable}`{offline}, or give the file"
            f"{'s' if len(sources) > 1 else ''}, e.g. {example}."
        )
    return problems, left_out


def _cover(tasks: Sequence[str], names: Mapping[str, list[str]], exclude: str) -> list[str]:
    """The shortest list of the pack's names for exactly ``tasks``: its groups made only of them, largest first,
    then the tasks no such group covers."""
    left = list(tasks)
    chosen = []
    groups = sorted(
        (g for g, m in names.items() if g != exclude and len(m) > 1 and set(m) <= set(tasks)),
        key=lambda g: (-len(names[g]), list(names).index(g)),
    )
    for group in groups:
        if set(names[group]) <= set(left):
            chosen.append(group)
            left = [t for t in left if t not in names[group]]
    return chosen + left


def data_source_problems(tasks: Sequence[str], metadata: Mapping[str, Any], skip: set[str] = frozenset()) -> list[str]:
    """Each data source's problem (``skip``: sources a misspelled key was meant for, reported as that typo)."""
    validators = _validators()
    done: set[Callable] = set()
    problems: list[str] = []
    for source in sources_for(tasks):
        if source in skip:
            continue
        check = validators.get(source)
        if check is not None and check not in done:
            done.add(check)
            collect(problems, check, dict(metadata))
    return problems


def user_task_problems(selection: Selection, metadata: Mapping[str, Any], skip: set[str]) -> list[str]:
    """The data of the user's own tasks that use a pack loader, with the metadata their YAML sets under the
    command line's (lm-eval lets ``--metadata`` override a task's own). Each problem names the task."""
    problems: list[str] = []
    for name, (pack_task, own_metadata) in selection.user_tasks.items():
        found: list[str] = []
        found += data_source_problems([pack_task], {**own_metadata, **metadata}, skip)
        problems += [f"{name} (your task, read like {pack_task}): {p}" for p in found]
    return problems
