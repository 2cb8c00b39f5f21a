"""The pack's benchmarks: every ``medeval_metrics/<package>/spec.py`` that defines ``SPEC``.

A benchmark joins the pack by having a package with a ``spec.py`` (see ``medeval_metrics.spec`` and
CONTRIBUTING.md); nothing here names one. The specs are found on disk (no import) and imported on
first use, once per process; they import only light modules, so ``medeval list`` stays fast.
``reload()`` forgets them (for tests that add a benchmark).

Lookups by task name: ``task(name)``, ``benchmark_of(name)``, ``breakdown_for(name)``,
``judging_for(name)``; over the pack: ``benchmarks()``, ``all_tasks()``, ``groups()``,
``metadata_keys()``.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import Path

import medeval_metrics
from medeval_metrics import task_yaml
from medeval_metrics.spec import BenchmarkSpec, BreakdownSpec, Judging, Reporting, Task

SPEC_MODULE = "spec"  # medeval_metrics.<package>.spec
SPEC_ATTRIBUTE = "SPEC"


def spec_module_names() -> tuple[str, ...]:
    """``medeval_metrics.<package>.spec`` for each package of the pack holding a ``spec.py`` (found on disk)."""
    names = set()
    for root in medeval_metrics.__path__:
        for path in Path(root).glob(f"*/{SPEC_MODULE}.py"):
            if (path.parent / "__init__.py").is_file() and path.parent.name.isidentifier():
                names.add(f"{medeval_metrics.__name__}.{path.parent.name}.{SPEC_MODULE}")
    return tuple(sorted(names))


def _check(specs: list[tuple[str, BenchmarkSpec]]) -> None:
    """Specs that contradict each other or themselves fail here, naming the module and the fix."""
    owner: dict[str, str] = {}
    for module, spec in specs:
        package = module.split(".")[-2]
        if spec.name != package:
            raise ValueError(f"{module}: SPEC.name is {spec.name!r}; it must be the package name {package!r}.")
        source_keys = {s.key for s in spec.sources}
        for task in spec.tasks:
            if task.name in owner:
                raise ValueError(f"{module}: task {task.name!r} is already declared by {owner[task.name]}.")
            owner[task.name] = module
            for key in task.reads:
                if key not in source_keys:
                    raise ValueError(
                        f"{module}: task {task.name!r} reads source {key!r}, which is not among "
                        f"SPEC.sources ({', '.join(sorted(source_keys))})."
                    )
        members = {t.name for t in spec.tasks} | set(spec.groups)
        for group, tasks in spec.groups.items():
            unknown = [t for t in tasks if t not in members]
            if unknown:
                raise ValueError(f"{module}: group {group!r} lists {unknown}, neither tasks nor groups of {spec.name}.")


@dataclass(frozen=True)
class _Loaded:
    specs: tuple[BenchmarkSpec, ...]  # in listing order
    tasks: dict[str, tuple[BenchmarkSpec, Task]]


@functools.cache
def _loaded() -> _Loaded:
    found = []
    for module_name in spec_module_names():
        spec = getattr(importlib.import_module(module_name), SPEC_ATTRIBUTE, None)
        if not isinstance(spec, BenchmarkSpec):
            raise ValueError(f"{module_name}: defines no {SPEC_ATTRIBUTE} = BenchmarkSpec(...).")
        found.append((module_name, spec))
    _check(found)
    specs = tuple(sorted((spec for _, spec in found), key=lambda s: (s.listing_position, s.name)))
    return _Loaded(specs, {task.name: (spec, task) for spec in specs for task in spec.tasks})


def _load() -> tuple[BenchmarkSpec, ...]:
    return _loaded().specs


def _task_index() -> dict[str, tuple[BenchmarkSpec, Task]]:
    return _loaded().tasks


def reload() -> None:
    """Forget the specs and task YAMLs read so far; the next lookup finds and reads them again."""
    _loaded.cache_clear()
    task_yaml.reload()


def benchmarks() -> tuple[BenchmarkSpec, ...]:
    """Every benchmark of the pack, in listing order."""
    return _load()


def benchmark(name: str) -> BenchmarkSpec:
    for spec in _load():
        if spec.name == name:
            return spec
    raise KeyError(f"no benchmark {name!r} in the pack (have: {', '.join(s.name for s in _load())})")


def all_tasks() -> tuple[Task, ...]:
    """Every task of the pack, benchmark by benchmark in listing order."""
    return tuple(task for spec in _load() for task in spec.tasks)


def task(name: str) -> Task:
    """The pack's task ``name``; KeyError for a task outside the pack."""
    try:
        return _task_index()[name][1]
    except KeyError:
        raise KeyError(f"{name!r} is not a medeval task (`medeval list` shows them)") from None


def benchmark_of(task_name: str) -> BenchmarkSpec | None:
    """The benchmark declaring ``task_name``; None for a task outside the pack."""
    entry = _task_index().get(task_name)
    return entry[0] if entry else None


def _longest_prefix(task_name: str, prefixes: list[str]) -> str | None:
    matches = [p for p in prefixes if task_name == p or task_name.startswith(p + "_")]
    return max(matches, key=len) if matches else None


def breakdown_for(task_name: str) -> BreakdownSpec | None:
    """The breakdown of a task: the longest breakdown prefix its name starts with, over all benchmarks
    (so a new variant ``<prefix>_x`` is broken down like its siblings); None where none applies."""
    by_prefix = {prefix: b for spec in _load() for prefix, b in spec.breakdowns.items()}
    prefix = _longest_prefix(task_name, list(by_prefix))
    return by_prefix[prefix] if prefix else None


def judging_for(task_name: str) -> Judging | None:
    """How ``medeval judge`` judges a task: its benchmark's judging (a task not in the pack takes that of
    the benchmark its name starts with); None for a task no panel judges."""
    spec = benchmark_of(task_name)
    if spec is None:
        by_name = {s.name: s for s in _load()}
        prefix = _longest_prefix(task_name, list(by_name))
        spec = by_name[prefix] if prefix else None
    return spec.judging if spec else None


def judged_benchmarks() -> tuple[str, ...]:
    return tuple(spec.name for spec in _load() if spec.judging is not None)


def reporting_for(benchmark_name: str) -> Reporting | None:
    """The report's table for a benchmark; None for one not in the pack."""
    return next((spec.reporting for spec in _load() if spec.name == benchmark_name), None)


def groups() -> dict[str, tuple[str, ...]]:
    """Every group of the pack -> its members (tasks or groups), benchmark by benchmark."""
    return {group: members for spec in _load() for group, members in spec.groups.items()}


def metadata_keys() -> tuple[str, ...]:
    """Every metadata key a benchmark reads: its sources' keys and its options, sorted."""
    return tuple(
        sorted({s.key for spec in _load() for s in spec.sources} | {o for spec in _load() for o in spec.options})
    )


def removed_options() -> dict[str, str]:
    """Every metadata key a benchmark no longer reads -> what replaced it (``BenchmarkSpec.removed_options``)."""
    return {key: instead for spec in _load() for key, instead in spec.removed_options.items()}


def flag_options() -> tuple[str, ...]:
    """The metadata keys that are on/off switches (``BenchmarkSpec.flag_options``), sorted."""
    return tuple(sorted({o for spec in _load() for o in spec.flag_options}))
