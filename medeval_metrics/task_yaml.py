"""A task's own YAML as written, before lm-eval merges ``--metadata`` into it.

lm-eval passes a loader ``config_source`` (the YAML's path) among the metadata, and lets the user's
``--metadata`` override the YAML's own ``metadata`` keys. A loader that must know what the task
itself says (its generation budget, a setting the task fixes) reads it here.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any


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
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    try:
        config = yaml.load(Path(path_text).read_text(encoding="utf-8"), Loader=_Loader) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return config if isinstance(config, dict) else {}
