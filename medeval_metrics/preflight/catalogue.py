"""The pack's catalogue as the checks need it: names (tasks, groups, tags), sources, metadata keys.

Read from the benchmark specs (``medeval_metrics.registry``) and the pack's task YAMLs (tags and the keys a
task sets itself live only there).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

JUDGES_KEY = "medeval_judges"  # the judge panel (medeval_metrics.judge.config.METADATA_KEY)


def manifest() -> dict[str, Any]:
    """The pack's tasks, groups and sources as the benchmark specs declare them."""
    from medeval_metrics.manifest import build_manifest

    return build_manifest()


def known_metadata_keys() -> list[str]:
    """Every metadata key the pack reads (data sources and options, from the specs; the judge panel)."""
    from medeval_metrics import registry

    return sorted({*registry.metadata_keys(), JUDGES_KEY})


def pack_key_prefixes() -> tuple[str, ...]:
    """Metadata keys with these prefixes belong to the pack: an unknown one is a typo, not a key for someone else."""
    from medeval_metrics import registry

    return (
        *(f"{spec.name}_" for spec in registry.benchmarks()),
        *(prefix for spec in registry.benchmarks() for prefix in spec.key_prefixes),
        "medeval_",
    )


@functools.lru_cache(maxsize=1)
def _own_task_configs() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(path, config) of each of the pack's task YAMLs that defines a task, includes merged."""
    from medeval_metrics import tasks_path
    from medeval_metrics.task_yaml import own_task_config

    out = []
    for path in sorted(Path(tasks_path()).rglob("*.yaml")):
        config = own_task_config(path)
        if isinstance(config.get("task"), str):
            out.append((str(path), config))
    return tuple(out)


def task_configs() -> dict[str, dict[str, Any]]:
    """The pack's task name -> its own YAML config (includes merged, ``!function`` as text)."""
    return {config["task"]: config for _, config in _own_task_configs()}


def pack_tags() -> dict[str, list[str]]:
    """Each tag the pack's task YAMLs set (``tag: medeval``) -> its tasks, in the pack's listing order."""
    order = {t["task"]: i for i, t in enumerate(manifest()["tasks"])}
    tags: dict[str, list[str]] = {}
    for task, config in task_configs().items():
        tag = config.get("tag")
        for name in tag if isinstance(tag, list) else [tag] if isinstance(tag, str) else []:
            tags.setdefault(name, []).append(task)
    return {tag: sorted(tasks, key=lambda t: order.get(t, len(order))) for tag, tasks in tags.items()}


def pack_names() -> dict[str, list[str]]:
    """Every name the pack answers to (tasks, groups and tags) -> the tasks it stands for."""
    data = manifest()
    groups = {g["group"]: g["tasks"] for g in data["groups"]}
    names: dict[str, list[str]] = {t["task"]: [t["task"]] for t in data["tasks"]}

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
    for tag, tasks in pack_tags().items():
        names.setdefault(tag, [t for t in tasks if t in names])
    return names


def pack_name_prefixes() -> tuple[str, ...]:
    """Name prefixes only the pack uses (lm-eval 0.4.13 has no built-in task starting with any of them)."""
    return tuple(sorted({name.split("_", 1)[0] for name in pack_names()}))


def sources_for(tasks: Sequence[str]) -> dict[str, list[str]]:
    """Data source key -> the selected tasks that read it, in the tasks' order."""
    by_task = {t["task"]: [t["source"], *t.get("also_reads", [])] for t in manifest()["tasks"]}
    out: dict[str, list[str]] = {}
    for task in tasks:
        for source in by_task[task]:
            out.setdefault(source, []).append(task)
    return out


def sources_without_a_public_copy() -> set[str]:
    return {
        key
        for bench in manifest()["benchmarks"].values()
        for key, source in bench["sources"].items()
        if not source.get("hub")
    }


def task_set_keys() -> dict[str, dict[str, list[str]]]:
    """Metadata keys the pack's task YAMLs set themselves (besides ``version``) -> value -> the tasks that set it.
    A user's value would silently turn a task into another (``rag_mode``), so such keys are refused."""
    out: dict[str, dict[str, list[str]]] = {}
    for task, config in task_configs().items():
        metadata = config.get("metadata")
        if isinstance(metadata, dict):
            for key, value in metadata.items():
                if key != "version":
                    out.setdefault(key, {}).setdefault(str(value), []).append(task)
    order = {name: i for i, name in enumerate(pack_names())}  # the pack's listing order, public tasks first
    return {
        key: {value: sorted(tasks, key=lambda t: order.get(t, len(order))) for value, tasks in by.items()}
        for key, by in out.items()
    }
