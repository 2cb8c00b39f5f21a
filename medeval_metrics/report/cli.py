"""``medeval report``: the command line of ``build_report`` (``medeval_metrics.report.build``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from medeval_metrics.report.build import build_report


def _cmd(args: argparse.Namespace) -> int:
    from medeval_metrics.report.figures import MissingReportExtra

    try:
        report = _build_from_args(args)
    except MissingReportExtra as exc:
        print(f"medeval: error: {exc}", file=sys.stderr)
        return 2
    print((Path(args.output) / "card_section.md").read_text(encoding="utf-8"))
    print(f"medeval report: wrote {len(report['written'])} files to {args.output}")
    if getattr(args, "html", False):
        print(f"medeval report: browse the items in {Path(args.output) / 'report.html'}")
    if args.update_card:
        state = "created" if report["card_created"] else "updated" if report["card_updated"] else "already up to date"
        print(f"model card {args.update_card}: {state}")
    return 0


def _build_from_args(args: argparse.Namespace) -> dict[str, Any]:
    report = build_report(
        args.folders,
        Path(args.output),
        figures=not args.no_figures,
        update_card=Path(args.update_card) if args.update_card else None,
        model=args.model,
        source_name=args.source_name,
        source_url=args.source_url,
        include_partial_runs=args.include_partial_runs,
        model_name=args.model_name,
        html=getattr(args, "html", False),
        html_show_private=getattr(args, "html_show_private", False),
        skip_bad_numbers=getattr(args, "skip_bad_numbers", False),
        public_tasks=tuple(getattr(args, "public_task", None) or ()),
    )
    for note in report["notes"]:
        print(f"medeval report: note: {note}", file=sys.stderr)
    return report


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="model-index, results table, breakdowns and figures from lm-eval output folders")
    p.add_argument("folders", nargs="+", help="folders given to lm-eval's --output_path (or results_*.json files)")
    p.add_argument("--output", required=True, help="folder to write the report into")
    p.add_argument(
        "--update-card",
        metavar="README.md",
        help="merge the results into this model card in place (created if it does not exist)",
    )
    p.add_argument("--model", help="with runs of several models: the one whose card is written/updated")
    p.add_argument(
        "--model-name",
        help="the model's name on the card and in model_index.yaml (default: its Hub id, "
        "or the local folder's name; a local path is never used)",
    )
    p.add_argument(
        "--include-partial-runs",
        action="store_true",
        help="also put runs made with --limit into the model-index (left out by default: not comparable)",
    )
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    p.add_argument(
        "--html",
        action="store_true",
        help="also write report.html: one self-contained page with the tables, the figures and every "
        "logged item, filterable by task, category and result (docs/report.md)",
    )
    p.add_argument(
        "--html-show-private",
        action="store_true",
        help="show the text of items from your own data in report.html (a task whose data has no "
        "public copy); hidden by default",
    )
    p.add_argument(
        "--public-task",
        action="append",
        metavar="NAME",
        help="a task outside the pack whose item text is public, shown in report.html (a name or a pattern such "
        "as 'mysuite_*'; repeat for several); the text of any other task outside the pack is hidden like private "
        "data (docs/report.md)",
    )
    p.add_argument(
        "--skip-bad-numbers",
        action="store_true",
        help="leave out a score outside its metric's range, not finite or not a number, or a negative stderr, "
        "and list each in the notes (default: such a number is an error naming the file, task and metric)",
    )
    p.add_argument(
        "--source-name", help=f"model-index source name (default: {'lm-evaluation-harness with medeval-metrics'})"
    )
    p.add_argument("--source-url", help="model-index source URL (default: the lm-evaluation-harness repository)")
    p.set_defaults(func=_cmd)
