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
import sys
from pathlib import Path

from medeval_metrics.pack import __version__, tasks_path

MARKER = ".medeval-installed"
FOLDER_NAME = "medeval"
_COPIED = shutil.ignore_patterns("__pycache__", "*.py", "*.pyc")
# lm-eval 0.4.13 indexes its own tasks folder first and --include_path after, a later copy replacing an earlier one
# with one warning per task: said once here instead of leaving the ~30 warnings to explain themselves
BOTH_COPIES = (
    'Use one or the other: with --include_path "$(medeval tasks-path)" as well, lm-eval finds every task twice, '
    'warns once per task ("overrides existing task") and runs the --include_path copy.'
)


class LinkRefused(RuntimeError):
    """``enable``/``disable`` refused to act; the message says why and what to do (one line)."""


def lm_eval_tasks_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("lm_eval.tasks")
    if spec is None or not spec.submodule_search_locations:
        raise LinkRefused("lm-eval is not installed in this environment; `pip install lm-eval` first")
    return Path(list(spec.submodule_search_locations)[0])


def _copy_target(target: Path | None) -> Path:
    if target is not None and not Path(target).is_dir():
        raise LinkRefused(f"--target {target} is not an existing folder; pass lm-eval's tasks folder")
    return (target or lm_eval_tasks_dir()) / FOLDER_NAME


def _files(root: Path) -> dict[str, bytes]:
    """The files ``enable`` copies from ``root`` (relative path -> bytes)."""
    ignored = _COPIED
    out = {}
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and not ignored(str(path.parent), [path.name])
            and not any(part == "__pycache__" for part in path.relative_to(root).parts)
        ):
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def copy_state(tasks_dir: Path) -> str | None:
    """Whether ``tasks_dir`` (a folder lm-eval indexes) holds the pack's enabled copy: ``"current"``
    (byte for byte the pack's task files), ``"stale"`` (made by medeval, different files) or None."""
    folder = Path(tasks_dir) / FOLDER_NAME
    if not (folder / MARKER).is_file():
        return None
    copied = _files(folder)
    copied.pop(MARKER, None)
    return "current" if copied == _files(Path(tasks_path())) else "stale"


def status(target: Path | None = None) -> dict:
    folder = _copy_target(target)
    marker = folder / MARKER
    if not folder.exists():
        return {"enabled": False, "folder": str(folder)}
    if not marker.exists():
        return {"enabled": False, "folder": str(folder), "foreign": True}
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    version = info.get("version") if isinstance(info, dict) else None
    return {
        "enabled": True,
        "folder": str(folder),
        "version": version,
        "current": copy_state(folder.parent) == "current",
    }


def enable(target: Path | None = None) -> Path:
    folder = _copy_target(target)
    if folder.exists() and not (folder / MARKER).exists():
        raise LinkRefused(f"{folder} exists and was not made by medeval; refusing to overwrite it")
    try:
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(tasks_path(), folder, ignore=_COPIED)
        (folder / MARKER).write_text(json.dumps({"version": __version__, "source": tasks_path()}), encoding="utf-8")
    except OSError as exc:
        raise LinkRefused(
            f"cannot write {folder} ({exc.strerror or type(exc).__name__}); "
            'use `--include_path "$(medeval tasks-path)"` or `medeval run` instead'
        ) from None
    return folder


def disable(target: Path | None = None) -> bool:
    folder = _copy_target(target)
    if not folder.exists():
        return False
    if not (folder / MARKER).exists():
        raise LinkRefused(f"{folder} was not made by medeval; leaving it alone")
    try:
        shutil.rmtree(folder)
    except OSError as exc:
        raise LinkRefused(f"cannot remove {folder} ({exc.strerror or type(exc).__name__})") from None
    return True


def _cmd(args: argparse.Namespace) -> int:
    try:
        return _run_action(args)
    except LinkRefused as exc:  # a refusal is one line, not a traceback
        print(f"medeval lm-eval-tasks: {exc}", file=sys.stderr)
        return 2


def _run_action(args: argparse.Namespace) -> int:
    target = Path(args.target) if args.target else None
    if args.action == "enable":
        print(f"medeval tasks copied to {enable(target)}; `lm_eval --tasks emsqa_public ...` now works without flags.")
        print(BOTH_COPIES)
        print("Undo with `medeval lm-eval-tasks disable`; re-run `enable` after upgrading medeval.")
    elif args.action == "disable":
        print("removed" if disable(target) else "nothing to remove: the pack was not enabled")
    else:
        state = status(target)
        if state["enabled"]:
            note = "" if state["current"] else " (its files differ from this medeval's: run `enable` again)"
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
