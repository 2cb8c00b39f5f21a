"""A task's own YAML as written, before lm-eval merges ``--metadata`` into it.

lm-eval passes a loader ``config_source`` (the YAML's path) among the metadata, and lets the user's
``--metadata`` override the YAML's own ``metadata`` keys. A loader that must know what the task
itself says (its generation budget, a setting the task fixes) reads it here.

The YAML is also the one statement of what a task is: ``task_facts(name)`` gives its metrics,
version, output type and split as the pack's tasks folder says them (a spec's ``Task`` reads them here).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medeval_metrics.pack import task_folders


def own_task_config(config_source: Any) -> dict[str, Any]:
    """The task's YAML (``include`` followed, ``!function`` left as text); {} if unknown or inline."""
    path = Path(str(config_source)) if config_source and config_source != "inline" else None
    if path is None or not path.is_file():
        return {}
    config = copy.deepcopy(_parsed(str(path.resolve()), path.stat().st_mtime_ns))
    includes = config.pop("include", None)
    merged: dict[str, Any] = {}
    for include in includes if isinstance(includes, list) else [includes] if includes else []:
        merged.update(own_task_config(path.parent / include if not Path(include).is_absolute() else include))
    return {**merged, **config}  # shallow, as lm-eval merges an include


@functools.lru_cache(maxsize=256)
def _parsed(path_text: str, mtime_ns: int) -> dict[str, Any]:
    # One parse per file version: the pre-run check reads every task YAML, and they include the same
    # templates (82 reads of 45 files before). ``own_task_config`` hands out copies.
    import yaml  # lazily: 50 ms, and `import medeval_metrics` (lm-eval resolving a !function) needs none of it

    try:
        config = yaml.load(Path(path_text).read_text(encoding="utf-8"), Loader=_loader()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return config if isinstance(config, dict) else {}


@functools.cache
def _loader() -> type:
    import yaml

    # libyaml's parser where PyYAML has it: the 45 task files take 40 ms instead of 400 (`medeval list` reads them all)
    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return Loader


@dataclass(frozen=True)
class TaskFacts:
    """What a task's YAML says it is."""

    name: str
    metrics: tuple[str, ...]  # metric_list order
    version: int
    output_type: str
    split: str
    path: Path


def _folders(root: str | Path | None) -> tuple[str, ...]:
    return (str(Path(root).resolve()),) if root else task_folders()


def pack_task_yamls(root: str | Path | None = None) -> dict[str, Path]:
    """{task name: its YAML file} for every task YAML under the pack's tasks folders (groups left out)."""
    return {name: facts.path for name, facts in _pack_facts(_folders(root)).items()}


def task_facts(name: str, root: str | Path | None = None) -> TaskFacts:
    """The metrics, version, output type and split of the pack's task ``name``, read from its YAML."""
    folders = _folders(root)
    facts = _pack_facts(folders).get(name)
    if facts is None:
        raise KeyError(
            f"no task YAML declares `task: {name}` under {', '.join(folders)}; a benchmark's "
            "tasks/<benchmark>/ folder holds one YAML per task."
        )
    return facts


def reload() -> None:
    """Read the tasks folder again on the next lookup (for tests that add a benchmark's YAMLs)."""
    _pack_facts.cache_clear()


@functools.lru_cache(maxsize=8)
def _pack_facts(folders: tuple[str, ...]) -> dict[str, TaskFacts]:
    # Once per process: `medeval list` asks for four facts of every task (100 lookups of 25 YAMLs).
    found: dict[str, TaskFacts] = {}
    for path in (p for folder in folders for p in sorted(Path(folder).rglob("*.yaml"))):
        config = own_task_config(path)
        name = config.get("task")
        if not isinstance(name, str) or "group" in config or name in found:  # the first folder's wins
            continue
        found[name] = TaskFacts(
            name=name,
            metrics=tuple(str(entry["metric"]) for entry in config.get("metric_list") or ()),
            version=int((config.get("metadata") or {}).get("version", 0)),
            output_type=str(config.get("output_type", "generate_until")),
            split=str(config.get("test_split", "")),
            path=path,
        )
    return found


def task_set_metadata(root: str | Path | None = None) -> dict[str, dict[str, list[str]]]:
    """Metadata keys the pack's task YAMLs set themselves (besides ``version``) -> value -> the tasks setting it,
    by task name. A user's value would silently turn a task into another (``rag_mode``): such keys are refused."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, facts in _pack_facts(_folders(root)).items():
        metadata = own_task_config(facts.path).get("metadata")
        if isinstance(metadata, dict):
            for key, value in metadata.items():
                if key != "version":
                    out.setdefault(key, {}).setdefault(str(value), []).append(name)
    return {key: {value: sorted(tasks) for value, tasks in by.items()} for key, by in out.items()}
