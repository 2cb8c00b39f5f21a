"""What ``--tasks`` selects: the pack's tasks behind each name (task, group, tag, glob pattern, or a task of
the user's ``--include_path`` built on one of the pack's loaders), and a problem per name that is not known."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.preflight.catalogue import pack_name_prefixes, pack_names, task_configs
from medeval_metrics.preflight.problems import collect


@dataclass
class Selection:
    """What ``--tasks`` asks for: the pack's tasks (in order) and whether anything else is requested."""

    pack_tasks: list[str] = field(default_factory=list)
    requested_groups: dict[str, list[str]] = field(default_factory=dict)  # groups, tags and patterns -> tasks
    other_names: list[str] = field(default_factory=list)  # lm-eval tasks, YAML paths, patterns
    # the user's own tasks (--include_path) that read the pack's data: name -> (the pack task whose loader it
    # uses, the metadata its YAML sets)
    user_tasks: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def only_pack(self) -> bool:
        return bool(self.pack_tasks) and not self.other_names

    def add(self, tasks: Sequence[str]) -> None:
        self.pack_tasks += [t for t in tasks if t not in self.pack_tasks]


def is_path_or_pattern(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or is_pattern(name)


def is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def select(
    names: Sequence[str],
    lm_eval_names: Callable[[], list[str]] | None,
    user_tasks: bool,
    include_path: str | None = None,
) -> tuple[Selection, list[str]]:
    """Split ``names`` into the pack's and lm-eval's: the selection of the names that are right, and a problem
    per name that is not (with suggestions).

    ``lm_eval_names`` lists lm-eval's own tasks, built only if a name is not the pack's, and not at
    all for a name with one of the pack's prefixes (``emsqa_pubic``) unless ``user_tasks`` (the user
    gave an --include_path, whose tasks might use the prefix).
    """
    pack = pack_names()
    own = include_path_tasks(include_path) if include_path else {}
    selection = Selection()
    unknown = []
    for name in names:
        if name in pack:
            selection.add(pack[name])
            if pack[name] != [name]:
                selection.requested_groups[name] = pack[name]
        elif name in own:
            selection.other_names.append(name)
            selection.user_tasks.update(own[name])
        elif is_pattern(name):
            matched = fnmatch.filter(list(pack), name)
            tasks = [t for m in matched for t in pack[m]]
            selection.add(tasks)
            for task_name, entry in own.items():
                if fnmatch.fnmatch(task_name, name):
                    selection.user_tasks.update(entry)
            # a pattern only the pack's names can match needs no lm-eval index (and no other task runs)
            if not (tasks and name.startswith(pack_name_prefixes()) and not own):
                selection.other_names.append(name)
            elif len(tasks) > 1:
                selection.requested_groups[name] = list(dict.fromkeys(tasks))
        else:
            selection.other_names.append(name)
            if not is_path_or_pattern(name):
                unknown.append(name)
    problems: list[str] = []
    if unknown and not user_tasks:
        ours = [n for n in unknown if n.startswith(pack_name_prefixes())]
        for name in ours:  # a typo of one of the pack's names: no need to index lm-eval's 14,000 tasks to say so
            collect(problems, _unknown_name_error, name, pack, [])
        unknown = [n for n in unknown if n not in ours]
    if unknown and lm_eval_names is not None:
        index = lm_eval_names()
        known = set(index)
        for name in unknown:
            if name not in known:
                collect(problems, _unknown_name_error, name, pack, index)
    return selection, problems


def _unknown_name_error(name: str, pack: dict[str, list[str]], index: list[str]) -> None:
    close = difflib.get_close_matches(name, list(pack), n=3, cutoff=0.6) or difflib.get_close_matches(
        name, index, n=3, cutoff=0.75
    )
    suggestion = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise MedevalDataError(
        f"--tasks: no task or group named {name!r}.{suggestion} `medeval list` shows the pack's tasks; "
        "`lm-eval ls tasks` shows lm-eval's."
    )


def lm_eval_task_names(include_path: str | None = None) -> list[str]:
    """lm-eval's task index as the run will build it (the user's --include_path included)."""
    from lm_eval.tasks import TaskManager

    return list(TaskManager(include_path=include_path or None).all_tasks)


# --------------------------------------------------------------------------- the user's own tasks


def _loader_of(config: dict[str, Any]) -> str | None:
    loader = config.get("custom_dataset")
    return str(loader) if loader else None


def user_task_yamls(names: Sequence[str], include_path: str | None) -> list[Path]:
    """The user's own task YAMLs this run reads: every YAML under ``--include_path`` and each YAML file named in
    ``--tasks``."""
    paths: list[Path] = []
    if include_path:
        root = Path(include_path).expanduser()
        paths += [root] if root.is_file() else sorted(root.rglob("*.yaml")) if root.is_dir() else []
    for name in names:
        if name.endswith((".yaml", ".yml")) and Path(name).expanduser().is_file():
            paths.append(Path(name).expanduser())
    return list(dict.fromkeys(paths))


def include_path_tasks(include_path: str) -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    """Each name (task or tag) of the user's ``--include_path`` YAMLs whose task loads its data with one of the
    pack's loaders -> {its task: (the pack task with that loader, the metadata the user's YAML sets)}."""
    from medeval_metrics.task_yaml import own_task_config

    by_loader: dict[str, str] = {}
    for task, config in task_configs().items():
        loader = _loader_of(config)
        if loader:
            by_loader.setdefault(loader, task)  # the first by YAML path: tasks with one loader read the same sources
    pack = set(pack_names())
    root = Path(include_path).expanduser()
    paths = [root] if root.is_file() else sorted(root.rglob("*.yaml")) if root.is_dir() else []
    out: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
    for path in paths:
        config = own_task_config(path)
        name = config.get("task")
        loader = _loader_of(config)
        if not isinstance(name, str) or name in pack or loader not in by_loader:
            continue
        metadata = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
        entry = (by_loader[loader], {k: v for k, v in metadata.items() if k != "version"})
        out.setdefault(name, {})[name] = entry
        tag = config.get("tag")
        for tag_name in tag if isinstance(tag, list) else [tag] if isinstance(tag, str) else []:
            out.setdefault(tag_name, {})[name] = entry
    return out
