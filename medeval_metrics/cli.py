"""The ``medeval`` command.

``medeval run ...`` is ``lm_eval run ...`` with the pack's tasks added to the task index; every
other flag passes through unchanged. The other subcommands list the pack, print its tasks folder,
opt in to flag-free ``lm_eval --tasks emsqa_public``, and post-process runs.
Feature modules add their own subcommands through ``register_cli(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from typing import Callable, Sequence

# Modules that contribute subcommands; each is imported only to build the parser, so they keep
# their heavy imports inside the command functions.
_SUBCOMMAND_MODULES: tuple[str, ...] = (
    "medeval_metrics.lm_eval_link",
    "medeval_metrics.breakdown",
    "medeval_metrics.judge.cli",
    "medeval_metrics.report",
    "medeval_metrics.emrqa.prepare",
)


def run_lm_eval(argv: Sequence[str]) -> int:
    """Run lm-eval's CLI in this process with the pack's tasks indexed; returns an exit code.

    Credential redaction is on for the whole run, and this process's stdout/stderr pass through
    it too (lm-eval ``print``s its model_args summary).
    """
    from medeval_metrics import lm_eval_compat, redact
    from medeval_metrics.data import MedevalDataError

    argv = list(argv)
    redact.install(extra_secrets=redact.secrets_in_model_args(argv))
    if "medeval-scripted" in argv:
        importlib.import_module("medeval_metrics.testing.scripted")
    lm_eval_compat.index_pack_tasks()
    lm_eval_compat.redact_results_writer()
    from lm_eval.__main__ import cli_evaluate

    saved_argv, saved_stdout, saved_stderr = sys.argv, sys.stdout, sys.stderr
    sys.argv = ["lm-eval", "run", *argv]
    sys.stdout, sys.stderr = redact.RedactingStream(sys.stdout), redact.RedactingStream(sys.stderr)
    started = time.time()
    try:
        cli_evaluate()
        _print_breakdowns(argv, started)
    except MedevalDataError as exc:
        print(f"medeval: error: {redact.redact_text(exc)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse and lm-eval exit this way
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdout, sys.stderr = saved_argv, saved_stdout, saved_stderr
    return 0


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _print_breakdowns(argv: Sequence[str], started: float) -> None:
    """After a run that logged samples, write and print the pack's per-category breakdowns."""
    output_path = _flag_value(argv, "--output_path")
    if not output_path or "--log_samples" not in argv:
        print("\nmedeval: per-category breakdowns and model-card reports need `--output_path DIR --log_samples`.")
        return
    from pathlib import Path

    from medeval_metrics.breakdown import write_breakdowns

    root = Path(output_path)
    written = write_breakdowns(root if root.is_dir() else root.parent, since=started - 1)
    if written is not None:
        json_path, md_path, text = written
        print(f"\n{text}\n\nmedeval breakdowns written to {json_path} and {md_path}")
        print(f"For a model-card section, tables and figures: medeval report {output_path} --output REPORT_DIR")


def _cmd_tasks_path(args: argparse.Namespace) -> int:
    from medeval_metrics import tasks_path

    print(tasks_path())
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from medeval_metrics.manifest import build_manifest, tasks_table

    print(tasks_table(build_manifest(), markdown=args.markdown))
    return 0


def _cmd_make_tiny_model(args: argparse.Namespace) -> int:
    from medeval_metrics.testing.tiny_model import build_tiny_model

    print(build_tiny_model(args.output_dir))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medeval",
        description="Medical QA task pack for lm-evaluation-harness (EMSQA, MedicationQA, emrQA).",
        epilog="`medeval run ARGS` runs `lm_eval run ARGS` with the pack's tasks available.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="run lm-eval with the pack's tasks (all flags pass through to lm-eval)")
    p = sub.add_parser("tasks-path", help="print the pack's tasks folder, for lm_eval --include_path")
    p.set_defaults(func=_cmd_tasks_path)
    p = sub.add_parser("list", help="list the pack's tasks with sample counts and data sources")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("make-tiny-model", help="build a tiny random-weight model for offline smoke runs")
    p.add_argument("output_dir")
    p.set_defaults(func=_cmd_make_tiny_model)
    for module_name in _SUBCOMMAND_MODULES:
        register: Callable[[argparse._SubParsersAction], None] = importlib.import_module(module_name).register_cli
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        return run_lm_eval(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from medeval_metrics.data import MedevalDataError

    try:
        return int(args.func(args) or 0)
    except MedevalDataError as exc:
        from medeval_metrics.redact import redact_text

        print(f"medeval: error: {redact_text(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
