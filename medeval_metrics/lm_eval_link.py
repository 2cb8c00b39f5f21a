"""Opt-in: make plain ``lm_eval --tasks emsqa_public`` work without ``--include_path``.

lm-eval 0.4.13 indexes only its own ``lm_eval/tasks`` folder and ``--include_path`` (it reads no
plugin entry points, and its recursive glob does not follow symbolic links). So ``enable`` copies
the pack's YAMLs into ``<lm_eval>/tasks/medeval/`` with a marker file; ``disable`` removes exactly
that folder and nothing else. The YAMLs import their code from the installed ``medeval_metrics``,
so the copy holds no code. Re-run ``enable`` after upgrading the pack (``status`` tells).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

MARKER = ".medeval-installed"
FOLDER_NAME = "medeval"


def lm_eval_tasks_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("lm_eval.tasks")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("lm-eval is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0])


def _copy_target(target: Path | None) -> Path:
    return (target or lm_eval_tasks_dir()) / FOLDER_NAME


def status(target: Path | None = None) -> dict:
    from medeval_metrics import __version__

    folder = _copy_target(target)
    marker = folder / MARKER
    if not folder.exists():
        return {"enabled": False, "folder": str(folder)}
    if not marker.exists():
        return {"enabled": False, "folder": str(folder), "foreign": True}
    info = json.loads(marker.read_text(encoding="utf-8"))
    return {"enabled": True, "folder": str(folder), "version": info.get("version"), "current": info.get("version") == __version__}


def enable(target: Path | None = None) -> Path:
    from medeval_metrics import __version__, tasks_path

    folder = _copy_target(target)
    if folder.exists() and not (folder / MARKER).exists():
        raise RuntimeError(f"{folder} exists and was not made by medeval; refusing to overwrite it")
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(
        tasks_path(), folder, ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.pyc")
    )
    (folder / MARKER).write_text(json.dumps({"version": __version__, "source": tasks_path()}), encoding="utf-8")
    return folder


def disable(target: Path | None = None) -> bool:
    folder = _copy_target(target)
    if not folder.exists():
        return False
    if not (folder / MARKER).exists():
        raise RuntimeError(f"{folder} was not made by medeval; leaving it alone")
    shutil.rmtree(folder)
    return True


def _cmd(args: argparse.Namespace) -> int:
    target = Path(args.target) if args.target else None
    if args.action == "enable":
        print(f"medeval tasks copied to {enable(target)}; `lm_eval --tasks emsqa_public ...` now works without flags.")
        print("Undo with `medeval lm-eval-tasks disable`; re-run `enable` after upgrading medeval.")
    elif args.action == "disable":
        print("removed" if disable(target) else "nothing to remove: the pack was not enabled")
    else:
        state = status(target)
        if state["enabled"]:
            note = "" if state["current"] else " (made by another medeval version: run `enable` again)"
            print(f"enabled in {state['folder']}{note}")
        else:
            print(f"not enabled ({state['folder']})")
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lm-eval-tasks",
        help="opt in (or out) to plain `lm_eval --tasks emsqa_public` with no --include_path",
    )
    p.add_argument("action", choices=["enable", "disable", "status"])
    p.add_argument("--target", help="lm-eval tasks folder to use (default: the installed lm_eval/tasks)")
    p.set_defaults(func=_cmd)
