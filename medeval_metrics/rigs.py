"""The test rigs as the ``medeval`` command reaches them: ``--model medeval-scripted`` and ``medeval
make-tiny-model``. The rigs themselves (``medeval_metrics.testing``) are imported by the tests, the demo and this
module only (the import contract "rigs" in pyproject.toml): the task runtime, the checks and the CLI never load
them for a run that does not ask for them."""

from __future__ import annotations

import argparse

SCRIPTED_MODEL = "medeval-scripted"  # the demo's model, answering from a table


def register_scripted_model() -> None:
    """Make ``--model medeval-scripted`` known to lm-eval (``medeval run`` calls this before its checks)."""
    import medeval_metrics.testing.scripted  # noqa: F401  (registers it with lm-eval)


def _cmd_make_tiny_model(args: argparse.Namespace) -> int:
    from medeval_metrics.testing.tiny_model import build_tiny_model

    print(build_tiny_model(args.output_dir))
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("make-tiny-model", help="build a tiny random-weight model for offline smoke runs")
    p.add_argument("output_dir")
    p.set_defaults(func=_cmd_make_tiny_model)
