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
from collections.abc import Callable, Sequence

from medeval_metrics.settings import is_true

# Modules that contribute subcommands; each is imported only to build the parser, so they keep
# their heavy imports inside the command functions.
_SUBCOMMAND_MODULES: tuple[str, ...] = (
    "medeval_metrics.lm_eval_link",
    "medeval_metrics.breakdown",
    "medeval_metrics.judge.cli",
    "medeval_metrics.report",
    "medeval_metrics.demo",
    "medeval_metrics.real_model",
)  # and each benchmark's own (``BenchmarkSpec.commands``)


def run_lm_eval(argv: Sequence[str]) -> int:
    """Run lm-eval's CLI in this process with the pack's tasks indexed; returns an exit code.

    Credential redaction is on for the whole run, and this process's stdout/stderr pass through
    it too (lm-eval ``print``s its model_args summary).
    """
    from medeval_metrics import lm_eval_compat, redact
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.judge.cli import rewrite_run_argv, run_unscored_exit_code

    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(run_help())
        return 0
    redact.install(extra_secrets=redact.secrets_in_model_args(argv))
    from medeval_metrics.judge import health

    argv, skip_judge_check = health.take_skip_flag(argv)
    as_given = list(argv)  # for the re-judge hint: the user's own judge flags
    try:
        # --judge-model/--judges/... become --metadata medeval_judges; --allow-unscored is the pack's own
        argv, allow_unscored = rewrite_run_argv(argv)
    except MedevalDataError as exc:
        print(f"medeval: error: {redact.redact_text(exc)}", file=sys.stderr)
        return 2
    if "medeval-scripted" in argv:
        importlib.import_module("medeval_metrics.testing.scripted")
    lm_eval_compat.index_pack_tasks()
    lm_eval_compat.redact_results_writer()
    lm_eval_compat.quiet_documented_runs()
    from medeval_metrics.preflight import normalise_task_list, take_pack_options
    from medeval_metrics.preflight.argv import run_settings

    argv = normalise_task_list(argv)  # "--tasks 'a, b,'" is "--tasks a,b"
    argv, allow_unknown_metadata = take_pack_options(argv)  # the pack's own; lm-eval would refuse them
    show_breakdowns = BREAKDOWN_FLAG in argv
    argv = [arg for arg in argv if arg != BREAKDOWN_FLAG]
    _pack_logging(argv)
    try:
        # the model, task names, --metadata, data and judges: checked before lm-eval builds the model
        selection = run_checks(argv, allow_unknown_metadata)
        # one request per judge: a dead panel fails now, not after every answer is generated
        judge_problems = (
            []
            if skip_judge_check or selection is None
            else health.run_problems(argv, selection.pack_tasks, run_settings(argv).metadata)
        )
        for problem in judge_problems:
            print(f"medeval: error: {redact.redact_text(problem)}", file=sys.stderr)
        if judge_problems:
            return 2
    except MedevalDataError as exc:
        problems = getattr(exc, "problems", None)  # preflight.RunProblems: one line each
        if problems:
            print(f"medeval: {len(problems)} problems, fix them all before the run:", file=sys.stderr)
        for problem in problems or [exc]:
            print(f"medeval: error: {redact.redact_text(problem)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nmedeval: interrupted before the run started. {_resume_hint(argv)}", file=sys.stderr)
        return 130
    from lm_eval.__main__ import cli_evaluate

    from medeval_metrics.judge import transport  # lazily, as the rest of `medeval run`: asyncio and the judge client

    saved_argv, saved_stdout, saved_stderr = sys.argv, sys.stdout, sys.stderr
    sys.argv = ["lm-eval", "run", *argv]
    sys.stdout, sys.stderr = redact.RedactingStream(sys.stdout), redact.RedactingStream(sys.stderr)
    started = time.time()
    try:
        with (
            _task_index(selection, argv),
            lm_eval_compat.task_timings(transport.USAGE),
            lm_eval_compat.capture_results() as evaluations,
            lm_eval_compat.model_key_only_for_its_endpoint(),
            lm_eval_compat.guard_model_replies(),
            _ctrl_c_ends_the_run(f"\nmedeval: interrupted. {_resume_hint(argv)}", saved_stderr),
        ):
            cli_evaluate()
        failed = lm_eval_compat.take_write_failures()
        if failed:  # the results are printed above; no later step reads a file that was not written
            for failure in failed:
                print(f"medeval: error: {redact.redact_text(failure)}", file=saved_stderr)
            return 2
        print(run_summary(argv, evaluations[-1] if evaluations else {}, started, show_breakdowns), file=saved_stdout)
        code, reason = run_unscored_exit_code(evaluations[-1] if evaluations else {}, allow_unscored, as_given)
        if code:
            print(f"medeval: error: {reason}", file=saved_stderr)
            return code
        from medeval_metrics.judge.cli import _cache_failure_exit_code

        return _cache_failure_exit_code(0, "medeval")
    except MedevalDataError as exc:
        print(f"medeval: error: {redact.redact_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nmedeval: interrupted. {_resume_hint(argv)}", file=saved_stderr)
        _exit_now_if_workers_remain(130)
        return 130
    except SystemExit as exc:  # argparse and lm-eval exit this way
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdout, sys.stderr = saved_argv, saved_stdout, saved_stderr
    return 0


def run_checks(argv: Sequence[str], allow_unknown_metadata: bool = False):
    """``medeval_metrics.preflight.run_checks`` (a seam for tests)."""
    from medeval_metrics.preflight import run_checks as checks

    return checks(argv, check_options=True, allow_unknown_metadata=allow_unknown_metadata)


def _pack_only_index(selection, argv: Sequence[str]) -> bool:
    """Index only the pack's tasks: every requested name is the pack's and no --include_path is given
    (set MEDEVAL_FULL_TASK_INDEX=1 to index lm-eval's built-in tasks as well)."""
    import os

    from medeval_metrics.preflight import FULL_INDEX_ENV, user_include_path

    return (
        selection is not None
        and selection.only_pack
        and not user_include_path(argv)
        and not is_true(os.environ.get(FULL_INDEX_ENV, ""))
    )


def _task_index(selection, argv: Sequence[str]):
    import contextlib

    if _pack_only_index(selection, argv):
        from medeval_metrics.lm_eval_compat import pack_only_task_index

        return pack_only_task_index()
    return contextlib.nullcontext()


CTRL_C_GRACE_S = 3.0  # after Ctrl-C, time for caches to finish their writes before the process ends anyway


def _exit_now_if_workers_remain(code: int) -> None:
    """End the process now if worker threads are still busy (e.g. judge requests in flight): the
    interpreter would otherwise wait for each of them at exit. The pack's and lm-eval's caches are
    SQLite (transactional), so what they hold stays usable for a resumed run."""
    import os
    import threading

    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if busy:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code)


def _ctrl_c_ends_the_run(message: str, stream):
    """Ctrl-C during a run: the first one interrupts as usual (KeyboardInterrupt, so code can clean up)
    and ends the process after CTRL_C_GRACE_S if something still waits (a thread pool joining requests
    that are in flight); a second one ends it at once. Either way the last line says how to resume."""
    import contextlib
    import os
    import signal
    import threading

    @contextlib.contextmanager
    def handling():
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        pressed = []

        def end(code: int = 130) -> None:
            print(message, file=stream, flush=True)
            os._exit(code)

        def on_sigint(signum, frame):
            pressed.append(time.time())
            if len(pressed) > 1:
                end()
            timer = threading.Timer(CTRL_C_GRACE_S, end)
            timer.daemon = True
            timer.start()
            timers.append(timer)
            raise KeyboardInterrupt

        timers: list[threading.Timer] = []
        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:  # the interrupt got out: the caller prints the line and exits
            for timer in timers:
                timer.cancel()
            signal.signal(signal.SIGINT, previous)

    return handling()


def _resume_hint(argv: Sequence[str]) -> str:
    """One line on how to pick up where an interrupted run stopped."""
    cache = _flag_value(argv, "--use_cache")
    if cache:
        return f"Run the same command again: answers cached in {cache}* are reused and only the rest is generated."
    return (
        "Nothing was cached: add `--use_cache PATH` to the command so that an interrupted run resumes "
        "where it stopped when run again."
    )


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


BREAKDOWN_FLAG = "--breakdown"  # the pack's: print the per-category tables after the run


def _pack_logging(argv: Sequence[str]) -> None:
    """``--verbosity DEBUG`` shows the pack's own debug lines too (lm-eval sets only its own logger)."""
    import logging

    level = (_flag_value(argv, "--verbosity") or "").strip().upper()
    if level == "DEBUG":
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s [%(name)s] %(message)s"))
        for name in ("medeval_metrics", "medeval"):
            logger = logging.getLogger(name)
            logger.setLevel(logging.DEBUG)
            if not logger.handlers:
                logger.addHandler(handler)


def _headline(task: str, result: dict) -> list[str]:
    """``metric value`` for the task's reported metrics (its spec's order; diagnostics after), as lm-eval scored
    them under its first filter."""
    from medeval_metrics import registry

    try:
        metrics = list(registry.task(task).metrics)
        reporting = registry.benchmark_of(task).reporting.metrics
    except (KeyError, AttributeError):
        metrics = sorted({key.split(",")[0] for key in result if "," in key and "_stderr" not in key})
        reporting = {}
    primary = getattr(registry.benchmark_of(task), "reporting", None)
    primary = primary.primary_metric if primary else None
    metrics.sort(key=lambda m: (m != primary, not (reporting[m].in_model_index if m in reporting else True)))
    out = []
    for metric in metrics:
        key = next((k for k in result if k.split(",")[0] == metric), None)
        value = result.get(key) if key else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and len(out) < 4:
            out.append(f"{metric} {value:.3f}")
    return out


def run_summary(argv: Sequence[str], results: dict, started: float, show_breakdowns: bool = False) -> str:
    """After a run: one line per task (its headline numbers and item count), where the per-category
    breakdowns were written (``--breakdown`` prints their tables too), and how to make a report."""
    lines = []
    n_samples = results.get("n-samples") or {}
    limit = _flag_value(argv, "--limit")
    for task, result in (results.get("results") or {}).items():
        if task not in n_samples:  # a group's aggregate row: its tasks have their own lines
            continue
        count = n_samples[task].get("effective")
        timing = ((results.get("medeval_run") or {}).get("tasks") or {}).get(task) or {}
        spent = f", {timing['wall_s']:.1f} s" if "wall_s" in timing else ""
        judge = timing.get("judge") or {}
        used = (
            (
                f", judges: {judge.get('requests', 0):,} requests, "
                f"{judge.get('prompt_tokens', 0) + judge.get('completion_tokens', 0):,} tokens"
            )
            if judge
            else ""
        )
        items = (
            f" ({count:,} items{spent}{used}{f', --limit {limit}: a test run, not comparable scores' if limit else ''})"
        )
        lines.append(
            f"medeval: {task}: " + (", ".join(_headline(task, result)) or "no scores") + (items if count else "")
        )
    output_path = _flag_value(argv, "--output_path")
    if not output_path or "--log_samples" not in argv:
        lines.append("medeval: per-category breakdowns and model-card reports need `--output_path DIR --log_samples`.")
        return "\n".join(lines)
    from pathlib import Path

    from medeval_metrics.breakdown import write_breakdowns

    root = Path(output_path)
    written = write_breakdowns(root if root.is_dir() else root.parent, since=started - 1)
    if written is not None:
        _, md_path, text = written
        if show_breakdowns:
            lines.insert(0, f"\n{text}\n")
        lines.append(
            f"medeval: breakdowns by category in {md_path} (and .json)"
            + ("" if show_breakdowns else f"; `{BREAKDOWN_FLAG}` prints them")
        )
    lines.append(
        f"medeval: model-card section, tables and figures: medeval report {output_path} --output REPORT_DIR "
        "(--html for a page to browse the items)"
    )
    return "\n".join(lines)


def run_help() -> str:
    """``medeval run --help``: the pack's own options, its metadata keys, exit codes and pointers, then lm-eval's."""
    import contextlib
    import io
    import textwrap

    from medeval_metrics.judge.cli import add_judge_flags
    from medeval_metrics.preflight import ALLOW_UNKNOWN_METADATA, known_metadata_keys, task_set_keys

    ours = argparse.ArgumentParser(
        prog="medeval run",
        add_help=False,
        usage="%(prog)s [the pack's options] [lm-eval's options: --tasks ... --model ... --model_args ...]",
    )
    group = ours.add_argument_group("the pack's options (taken out before lm-eval reads the line)")
    add_judge_flags(group)
    group.add_argument(
        ALLOW_UNKNOWN_METADATA,
        action="store_true",
        help="let --metadata keys the pack does not read through (for your own tasks); without it "
        "such a key is an error, and a near-miss of a pack key always is",
    )
    from medeval_metrics.judge.health import SKIP_FLAG

    group.add_argument(
        SKIP_FLAG, action="store_true", help="skip the one request per judge made before the run to see it answers"
    )
    group.add_argument(
        BREAKDOWN_FLAG,
        action="store_true",
        help="print the per-category tables after the run (they are always written beside the "
        "results with --output_path DIR --log_samples)",
    )
    settable = [key for key in known_metadata_keys() if key not in task_set_keys()]  # rag_mode: each task's own
    keys = textwrap.fill(", ".join(settable), 100, initial_indent="  ", subsequent_indent="  ")
    text = [
        ours.format_help().rstrip(),
        "",
        'metadata keys the pack reads (--metadata \'{"KEY": "value"}\', or the variable MEDEVAL_<KEY>):',
        keys,
        "",
        "before the model is built, medeval run checks the model, the task names, --metadata, MEDEVAL_* variables,",
        "each selected task's data and the judge panel, and reports every problem at once.",
        "",
        "exit codes: 0 done; 2 a problem found before or during the run (each on a 'medeval: error:' line);",
        "  3 a judge scored no item of a judged task (--allow-unscored accepts it); 4 the judge cache could not",
        "  be written (the results hold every verdict); 130 interrupted.",
        "",
        "see also: `medeval list` (tasks, groups, data each needs), `medeval demo`, `medeval report --help`,",
        "  docs/medeval-run.md.",
        "",
        "lm-eval's options (`lm-eval run --help`):",
        "",
    ]
    from lm_eval._cli.harness import HarnessCLI

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        HarnessCLI()._parser.parse_args(["run", "--help"])
    return "\n".join(text) + buffer.getvalue()


def _cmd_tasks_path(args: argparse.Namespace) -> int:
    from medeval_metrics.pack import tasks_path

    print(tasks_path())
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from medeval_metrics.manifest import build_manifest, tasks_table

    manifest = build_manifest()
    print(tasks_table(manifest, markdown=True) if args.markdown else terminal_task_list(manifest))
    return 0


LIST_WIDTH = 100


def _data_needed(manifest: dict, task: dict) -> str:
    sources = manifest["benchmarks"][task["benchmark"]]["sources"]
    first = sources[task["source"]]
    needs = [f"public: {first['hub']}" if first.get("hub") else f"yours: {task['source']}"]
    for key in task.get("also_reads", []):  # short: the Hub repo's name, or the key (see --markdown)
        needs.append(sources[key]["hub"].split("/")[-1] if sources[key].get("hub") else key)
    return " + ".join(needs)


def terminal_task_list(manifest: dict, width: int = LIST_WIDTH) -> str:
    """``medeval list``: tasks (type, size, data each needs, metrics), then groups and tags; every line fits
    ``width``: the data and metrics columns wrap onto more lines, never cutting a name."""
    import textwrap

    from medeval_metrics.preflight import pack_tags

    kinds = {"generate_until": "generate", "multiple_choice": "loglik"}
    header = ("task", "type", "items", "data it needs", "metrics")
    rows = [
        (
            t["task"],
            kinds.get(t["output_type"], t["output_type"]),
            "yours" if t["samples"] is None else f"{t['samples']:,}",
            _data_needed(manifest, t),
            ", ".join(t["metrics"]),
        )
        for t in manifest["tasks"]
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    rest = width - sum(widths) - 2 * 4
    data_word = max(len(word) for r in rows for word in r[3].split())
    metric_word = max(len(word) for r in rows for word in r[4].split())
    beside = rest >= data_word + metric_word + 2  # else the metrics go on their own lines under each task
    data_width = max(data_word, min(max(len(r[3]) for r in [header, *rows]), rest // 2 if beside else rest + 2))
    widths += [data_width, rest - data_width]

    def wrap(text: str, size: int, indent: str = "") -> list[str]:
        return textwrap.wrap(
            text, size, break_long_words=False, break_on_hyphens=False, initial_indent=indent, subsequent_indent=indent
        ) or [""]

    shown = header if beside else header[:4]
    lines = ["  ".join(c.ljust(w) for c, w in zip(shown, widths)).rstrip(), "-" * width]
    for row in rows:
        data = wrap(row[3], data_width)
        metrics = wrap(row[4], widths[4]) if beside else []
        for i in range(max(len(data), len(metrics))):
            cells = [
                *(row[:3] if i == 0 else ("", "", "")),
                data[i] if i < len(data) else "",
                metrics[i] if i < len(metrics) else "",
            ]
            lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        lines += [] if beside else wrap("metrics: " + row[4], width - 4, "    ")
    lines += ["", "groups (a group runs all its tasks; it needs the data of each):"]
    for group in manifest["groups"]:
        lines += textwrap.wrap(
            ", ".join(group["tasks"]),
            width,
            initial_indent=f"  {group['group']}: ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    tags = pack_tags()
    if tags:
        lines += ["", "tags (like a group, checked the same way before the run):"]
        lines += [
            f"  {tag}: every task above" if len(tasks) == len(rows) else f"  {tag}: {', '.join(tasks)}"
            for tag, tasks in tags.items()
        ]
    lines += [
        "",
        *textwrap.wrap(
            "data: 'public' is read from the Hugging Face Hub (or a local copy); 'yours' needs your own file, given with "
            '--metadata \'{"KEY": "/path"}\' or the variable MEDEVAL_<KEY>. `medeval list --markdown` prints every '
            "source in full.",
            width,
        ),
    ]
    return "\n".join(line.rstrip() for line in lines)


def _cmd_make_tiny_model(args: argparse.Namespace) -> int:
    from medeval_metrics.testing.tiny_model import build_tiny_model

    print(build_tiny_model(args.output_dir))
    return 0


def _lm_eval_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"lm-eval {version('lm_eval')}"
    except PackageNotFoundError:
        return "lm-eval not installed"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medeval",
        description="Medical QA task pack for lm-evaluation-harness (EMSQA, MedicationQA, emrQA).",
        epilog="`medeval run ARGS` runs `lm_eval run ARGS` with the pack's tasks available.",
    )
    from medeval_metrics.pack import __version__

    parser.add_argument("--version", action="version", version=f"medeval-metrics {__version__} ({_lm_eval_version()})")
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
    from medeval_metrics import registry

    for module_name in (*_SUBCOMMAND_MODULES, *(m for spec in registry.benchmarks() for m in spec.commands)):
        register: Callable[[argparse._SubParsersAction], None] = importlib.import_module(module_name).register_cli
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        from medeval_metrics.sources import clear_hub_unreachable

        try:
            return run_lm_eval(argv[1:])
        finally:
            clear_hub_unreachable()  # the pre-run probe's finding holds for that run only
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
