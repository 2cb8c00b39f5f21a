"""The ``medeval`` command.

``medeval run ...`` is ``lm_eval run ...`` with the pack's tasks added to the task index; every
other flag passes through unchanged. The other subcommands list the pack, print its tasks folder,
opt in to flag-free ``lm_eval --tasks emsqa_public``, and post-process runs.
Feature modules add their own subcommands through ``register_cli(subparsers)``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from medeval_metrics.settings import is_true

# Modules that contribute subcommands; each is imported only to build the parser, so they keep
# their heavy imports inside the command functions.
_SUBCOMMAND_MODULES: tuple[str, ...] = (
    "medeval_metrics.lm_eval_link",
    "medeval_metrics.breakdown",
    "medeval_metrics.judge.cli",
    "medeval_metrics.report",
    "medeval_metrics.demo",
    "medeval_metrics.rigs",
    "medeval_metrics.real_model",
)  # and each benchmark's own (``BenchmarkSpec.commands``)


def run_lm_eval(argv: Sequence[str]) -> int:
    """Run lm-eval's CLI in this process with the pack's tasks indexed; returns an exit code.

    The command line is read once (``preflight.read_command_line``): the checks, the wrappers and lm-eval's own
    command line come from that one reading. While lm-eval runs, ``medeval run`` holds the wrappers of
    ``lm_eval_compat`` (the task index, the run record, the evaluated model's key and replies, the log filter)
    and puts everything back when it returns.
    """
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.preflight import read_command_line, with_judge_panel
    from medeval_metrics.redact import redact_text

    settings = read_command_line(argv)
    if not argv or settings.help:
        print(run_help())
        return 0
    from medeval_metrics import rigs

    if settings.model == rigs.SCRIPTED_MODEL:
        rigs.register_scripted_model()
    with _files_private_to_the_user():
        try:
            settings = with_judge_panel(settings)  # --judge-model/--judges/... become --metadata medeval_judges
            # a panel whose URL holds user:password@ reaches the tasks through $MEDEVAL_JUDGES, not --metadata
            settings, panel_for_run, run_metadata = panel_outside_lm_eval_metadata(settings)
            # the model, task names, --metadata, keys, data and judges: checked before lm-eval builds the model
            selection = run_checks(settings)
            # one request per judge: a dead panel fails now, not after every answer is generated
            from medeval_metrics.judge import health

            with _judges_variable(panel_for_run):
                judge_problems = (
                    []
                    if settings.skip_judge_check or selection is None
                    else health.run_problems(settings.argv, selection.pack_tasks, run_metadata)
                )
            if judge_problems:
                for problem in judge_problems:
                    print(f"medeval: error: {redact_text(problem)}", file=sys.stderr)
                return 2
        except MedevalDataError as exc:
            problems = getattr(exc, "problems", None)  # preflight.RunProblems: one line each
            if problems:
                print(f"medeval: {len(problems)} problems, fix them all before the run:", file=sys.stderr)
            for problem in problems or [exc]:
                print(f"medeval: error: {redact_text(problem)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"\nmedeval: interrupted before the run started. {_resume_hint(settings)}", file=sys.stderr)
            return 130
        with _judges_variable(panel_for_run):
            return _run(settings, selection)


def panel_outside_lm_eval_metadata(settings):
    """(settings, panel, metadata): an inline judge panel whose URLs hold ``user:password@`` taken out of the
    ``--metadata`` lm-eval gets (lm-eval writes --metadata into every task's config in the results JSON) and
    returned as JSON text for ``$MEDEVAL_JUDGES`` while the run lasts; the settings' own metadata keep the panel
    without credentials, for the checks. ``metadata``: what the tasks get as --metadata. A panel without
    credentials, or a judges file's path, stays in --metadata as given (panel None)."""
    import dataclasses
    import json
    from urllib.parse import urlsplit

    from medeval_metrics.judge.config import METADATA_KEY as JUDGES_KEY
    from medeval_metrics.judge.config import panel_as_recorded, panel_url_credentials, url_without_userinfo
    from medeval_metrics.redact import register_secret

    value = settings.metadata.get(JUDGES_KEY)
    if value is None or not panel_url_credentials(value):
        return settings, None, settings.metadata
    rest = {key: item for key, item in settings.metadata.items() if key != JUDGES_KEY}
    if not rest and settings.config:
        # lm-eval reads a --config file's metadata when the command line's is empty: nothing to replace it with;
        # the checks refuse the credentials there, as for any key in --metadata
        return settings, None, settings.metadata
    try:
        options = [(flag, values) for flag, values in settings.lm_eval_options if flag != "--metadata"]
        if rest:
            options.append(("--metadata", (json.dumps(rest),)))
    except (TypeError, ValueError):  # a value JSON cannot write (a set from key=value): the checks say what
        return settings, None, settings.metadata
    panel = value if isinstance(value, str) else json.dumps(value)
    for url in _strings(json.loads(panel)):
        if url_without_userinfo(url) != url:  # the password, wherever else it may turn up, is redacted by value
            with contextlib.suppress(ValueError):
                parts = urlsplit(url)  # a token given as the user name alone is a credential too
                register_secret(parts.password or parts.username)
    checked = {**settings.metadata, JUDGES_KEY: panel_as_recorded(value)}
    return dataclasses.replace(settings, metadata=checked, lm_eval_options=tuple(options)), panel, rest


def _strings(obj) -> list[str]:
    if isinstance(obj, dict):
        return [text for value in obj.values() for text in _strings(value)]
    if isinstance(obj, list):
        return [text for value in obj for text in _strings(value)]
    return [obj] if isinstance(obj, str) else []


@contextlib.contextmanager
def _judges_variable(panel: str | None) -> Iterator[None]:
    """``$MEDEVAL_JUDGES`` holding ``panel`` while the block runs (the tasks' loaders read it there), the
    caller's value (or none) after."""
    import os

    from medeval_metrics.settings import JUDGES

    if panel is None:
        yield
        return
    saved = os.environ.get(JUDGES.name)
    os.environ[JUDGES.name] = panel
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(JUDGES.name, None)
        else:
            os.environ[JUDGES.name] = saved


PRIVATE_UMASK = 0o077  # files the run creates: 0600; folders: 0700


@contextlib.contextmanager
def _files_private_to_the_user() -> Iterator[None]:
    """The umask 077 while ``medeval run`` runs, the caller's after: every file the run creates (lm-eval's results
    and samples, its --use_cache database, the judge and data caches) is the user's alone, whatever the umask.
    Samples quote prompts (emrQA's notes) and answers. A process setting, held by the CLI only, never by a task."""
    import os

    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def _run(settings, selection) -> int:
    """lm-eval's CLI on ``settings.lm_eval_argv``, inside the run's wrappers; then the summary and exit code."""
    from lm_eval.__main__ import cli_evaluate

    from medeval_metrics import lm_eval_compat
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.judge import transport  # lazily, as the rest of `medeval run`: asyncio and the judge client
    from medeval_metrics.judge.cli import _cache_failure_exit_code, run_unscored_exit_code
    from medeval_metrics.preflight.budget import budget_notice
    from medeval_metrics.redact import redact_text

    started = time.time()
    try:
        with (
            lm_eval_compat.pack_task_index(pack_only=_pack_only_index(selection, settings)),
            lm_eval_compat.run_record(transport.USAGE) as evaluations,
            lm_eval_compat.model_key_only_for_its_endpoint(),
            lm_eval_compat.guard_model_replies(),
            lm_eval_compat.private_run_logs(),
            _pack_debug_logging(settings.verbosity),
            _lm_eval_command_line(settings.lm_eval_argv),
            _ctrl_c_ends_the_run(f"\nmedeval: interrupted. {_resume_hint(settings)}", sys.stderr),
        ):
            cli_evaluate()
    except MedevalDataError as exc:
        print(f"medeval: error: {redact_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nmedeval: interrupted. {_resume_hint(settings)}", file=sys.stderr)
        _exit_now_if_workers_remain(130)
        return 130
    except SystemExit as exc:  # argparse and lm-eval exit this way
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # lm-eval's own failure: its traceback, without a key it may quote (no global hook does this)
        import traceback

        print(redact_text(traceback.format_exc()).rstrip("\n"), file=sys.stderr)
        return 1
    try:
        results = evaluations.last_with_samples()
        cut = cut_outputs(settings, started) if evaluations else []
        if cut:  # the scores are printed above; no later step reads a file that was not written whole
            for problem in cut:
                print(f"medeval: error: {problem}", file=sys.stderr)
            return 2
        print(run_summary(settings, results, started, settings.breakdown))
        notice = budget_notice(results)  # read from the samples the results hold with --log_samples
        if notice:
            print(f"medeval: note: {notice}", file=sys.stderr)
    except KeyboardInterrupt:
        kept = f" in {settings.output_path}" if settings.output_path else ""
        again = f" `medeval breakdown {settings.output_path}` writes the breakdowns." if settings.output_path else ""
        print(f"\nmedeval: interrupted after lm-eval finished: what it wrote is kept{kept}.{again}", file=sys.stderr)
        return 130
    code, reason = run_unscored_exit_code(results, settings.allow_unscored, settings)
    if code:
        print(f"medeval: error: {reason}", file=sys.stderr)
        return code
    return _cache_failure_exit_code(0, "medeval")


def cut_outputs(settings, started: float) -> list[str]:
    """The results and sample files lm-eval wrote in this run that are not whole, each removed, one line each.

    lm-eval 0.4.13 writes them with ``Path.write_text`` and ``open(..., "a")`` and turns a failure (a full disk, a
    file size limit) into a warning: the run ends well with a results file cut short, which the breakdowns and
    ``medeval report`` would then read. A cut file is removed (lm-eval's copy of the scores is gone anyway; they
    were printed), so that no later step reads half of one."""
    import json
    from pathlib import Path

    if not settings.output_path:
        return []
    root = Path(settings.output_path).expanduser()
    folder = root if root.is_dir() else root.parent
    problems = []
    for path in sorted([*folder.rglob("results_*.json"), *folder.rglob("samples_*.jsonl")]):
        try:
            if path.stat().st_mtime < started - 1:
                continue
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".json":
                json.loads(text)
            else:
                for line in text.splitlines():
                    if line.strip():
                        json.loads(line)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            problems.append(
                f"could not write {path}: lm-eval's writer left it cut short (a full disk or a file size limit; its "
                "warning above says so). Removed, so that no later step reads half of it: free space, or choose "
                "another --output_path, and run again (--use_cache keeps the answers)."
            )
    return problems


def run_checks(settings, allow_unknown_metadata: bool = False):
    """``medeval_metrics.preflight.run_checks`` with lm-eval's options checked too (a seam for tests)."""
    from medeval_metrics.preflight import run_checks as checks

    return checks(settings, check_options=True, allow_unknown_metadata=allow_unknown_metadata)


def _pack_only_index(selection, settings) -> bool:
    """Index only the pack's tasks: every requested name is the pack's and no --include_path is given
    (set MEDEVAL_FULL_TASK_INDEX=1 to index lm-eval's built-in tasks as well)."""
    import os

    from medeval_metrics.preflight import FULL_INDEX_ENV

    return (
        selection is not None
        and selection.only_pack
        and settings.include_path is None
        and not is_true(os.environ.get(FULL_INDEX_ENV, ""))
    )


@contextlib.contextmanager
def _lm_eval_command_line(argv: Sequence[str]) -> Iterator[None]:
    """lm-eval's CLI reads ``sys.argv``: the run's command line for lm-eval while it parses, the caller's after."""
    saved = sys.argv
    sys.argv = ["lm-eval", "run", *argv]
    try:
        yield
    finally:
        sys.argv = saved


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


@contextlib.contextmanager
def _ctrl_c_ends_the_run(message: str, stream) -> Iterator[None]:
    """Ctrl-C during a run: the first one interrupts as usual (KeyboardInterrupt, so code can clean up)
    and ends the process after CTRL_C_GRACE_S if something still waits (a thread pool joining requests
    that are in flight); a second one ends it at once. Either way the last line says how to resume.
    The run's own SIGINT handler, put back when the run ends."""
    import os
    import signal
    import threading

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


def _resume_hint(settings) -> str:
    """One line on how to pick up where an interrupted run stopped."""
    if settings.use_cache:
        return (
            f"Run the same command again: answers cached in {settings.use_cache}* are reused and only the rest is "
            "generated."
        )
    return (
        "Nothing was cached: add `--use_cache PATH` to the command so that an interrupted run resumes "
        "where it stopped when run again."
    )


@contextlib.contextmanager
def _pack_debug_logging(verbosity: str | None) -> Iterator[None]:
    """``--verbosity DEBUG`` shows the pack's own debug lines too (lm-eval sets only its own logger): one handler
    on the pack's two loggers for the run, taken off after."""
    import logging

    if (verbosity or "").strip().upper() != "DEBUG":
        yield
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s [%(name)s] %(message)s"))
    loggers = [logging.getLogger(name) for name in ("medeval_metrics", "medeval")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(handler)
            logger.setLevel(level)


def _headline(task: str, result: dict) -> list[str]:
    """``metric value`` for the task's reported metrics (its spec's order; the headline first), under the task's
    headline reading (its spec's), else lm-eval's first filter."""
    from medeval_metrics import registry

    try:
        metrics = list(registry.task(task).metrics)
        reporting = registry.benchmark_of(task).reporting.metrics
    except (KeyError, AttributeError):
        metrics = sorted({key.split(",")[0] for key in result if "," in key and "_stderr" not in key})
        reporting = {}
    spec_reporting = getattr(registry.benchmark_of(task), "reporting", None)
    primary = spec_reporting.primary_metric if spec_reporting else None
    metrics.sort(key=lambda m: (m != primary, not (reporting[m].headline if m in reporting else True)))
    # a task read two ways (EMSQA's strict-match and flexible-extract): its headline reading, not the YAML's first
    filters = [k.split(",", 1)[1] for k in result if "," in k]
    headline = spec_reporting.headline_filter(filters) if spec_reporting and filters else None
    out = []
    for metric in metrics:
        key = f"{metric},{headline}" if f"{metric},{headline}" in result else None
        key = key or next((k for k in result if k.split(",")[0] == metric), None)
        value = result.get(key) if key else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and len(out) < 4:
            out.append(f"{metric} {value:.3f}")
    return out


def run_summary(settings, results: dict, started: float, show_breakdowns: bool = False) -> str:
    """After a run: one line per task (its headline numbers and item count), where the per-category
    breakdowns were written (``--breakdown`` prints their tables too), and how to make a report.
    ``settings``: the run's ``RunSettings`` (or its command line)."""
    from medeval_metrics.preflight.argv import settings_of

    settings = settings_of(settings)
    lines = []
    n_samples = results.get("n-samples") or {}
    limit = f"{settings.limit:g}" if settings.limit is not None else None
    for task, result in (results.get("results") or {}).items():
        if task not in n_samples:  # a group's aggregate row: its tasks have their own lines
            continue
        count = n_samples[task].get("effective")
        timing = ((results.get("medeval_run") or {}).get("tasks") or {}).get(task) or {}
        judge = timing.get("judge") or {}
        used = (
            (
                f", judges: {judge.get('requests', 0):,} requests, "
                f"{judge.get('prompt_tokens', 0) + judge.get('completion_tokens', 0):,} tokens"
            )
            if judge
            else ""
        )
        items = f" ({count:,} items{used}{f', --limit {limit}: a test run, not comparable scores' if limit else ''})"
        lines.append(
            f"medeval: {task}: " + (", ".join(_headline(task, result)) or "no scores") + (items if count else "")
        )
    setup_s = (results.get("medeval_run") or {}).get("setup_s")
    if lines:  # times said once for the run: lm-eval calls the model for all tasks of a request type together
        ready = f"; model and data ready in {setup_s:.1f} s" if isinstance(setup_s, (int, float)) else ""
        lines.append(f"medeval: the run took {time.time() - started:.1f} s{ready} (each task's steps: medeval report).")
    output_path = settings.output_path
    if not output_path or not settings.writes_samples:
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
            + ("" if show_breakdowns else "; `--breakdown` prints them")
        )
    lines.append(
        f"medeval: model-card section, tables and figures: medeval report {output_path} --output REPORT_DIR "
        "(--html for a page to browse the items)"
    )
    return "\n".join(lines)


def run_help() -> str:
    """``medeval run --help``: the pack's own options, its metadata keys, exit codes and pointers, then lm-eval's."""
    import textwrap

    from medeval_metrics.judge.cli import add_judge_flags
    from medeval_metrics.preflight import (
        ALLOW_UNKNOWN_METADATA,
        BREAKDOWN_FLAG,
        SKIP_JUDGE_CHECK,
        known_metadata_keys,
        task_set_keys,
    )

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
    group.add_argument(
        SKIP_JUDGE_CHECK,
        action="store_true",
        help="skip the one request per judge made before the run to see it answers",
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
    return "\n".join(text) + _lm_eval_run_help()


def _lm_eval_run_help() -> str:
    """lm-eval's own ``lm-eval run --help``, as its command prints it (in a process of its own: the pack reads
    no parser of lm-eval's)."""
    import subprocess

    try:
        proc = subprocess.run(
            [sys.executable, "-m", "lm_eval", "run", "--help"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "  (run `lm-eval run --help` to see them)\n"
    return proc.stdout if proc.returncode == 0 and proc.stdout else "  (run `lm-eval run --help` to see them)\n"


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
    from medeval_metrics import registry

    for module_name in (*_SUBCOMMAND_MODULES, *(m for spec in registry.benchmarks() for m in spec.commands)):
        register: Callable[[argparse._SubParsersAction], None] = importlib.import_module(module_name).register_cli
        register(sub)
    return parser


INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended
_NOTHING_HALF_WRITTEN = (
    "every file is written whole or not at all, so nothing half-written was left. Run the same command again."
)


def interrupted_line(command: str | None, args: argparse.Namespace | None = None) -> str:
    """The one line Ctrl-C ends a command with: what was kept and how to go on. A subcommand tells its own
    with ``set_defaults(interrupted=lambda args: "...")``."""
    hint = getattr(args, "interrupted", None) if args is not None else None
    try:
        said = hint(args) if callable(hint) else hint
    except Exception:  # the line must not fail: the generic one is true of every command
        said = None
    prog = f"medeval {command}" if command else "medeval"
    return f"{prog}: interrupted; {said or _NOTHING_HALF_WRITTEN}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    try:
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
    except KeyboardInterrupt:  # anywhere: one line, no traceback (``medeval run`` says more where it can)
        command = argv[0] if argv and not argv[0].startswith("-") else None
        print("\n" + interrupted_line(command, args), file=sys.stderr, flush=True)
        _exit_now_if_workers_remain(INTERRUPTED_EXIT)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
