"""A task's own YAML as written, before lm-eval merges ``--metadata`` into it.

lm-eval passes a loader ``config_source`` (the YAML's path) among the metadata, and lets the user's
``--metadata`` override the YAML's own ``metadata`` keys. A loader that must know what the task
itself says (its generation budget, a setting the task fixes) reads it here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def own_task_config(config_source: Any) -> dict[str, Any]:
    """The task's YAML (``include`` followed, ``!function`` left as text); {} if unknown or inline."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    path = Path(str(config_source)) if config_source and config_source != "inline" else None
    if path is None or not path.is_file():
        return {}
    try:
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    if not isinstance(config, dict):
        return {}
    includes = config.pop("include", None)
    merged: dict[str, Any] = {}
    for include in includes if isinstance(includes, list) else [includes] if includes else []:
        merged.update(own_task_config(path.parent / include if not Path(include).is_absolute() else include))
    return {**merged, **config}  # shallow, as lm-eval merges an include
