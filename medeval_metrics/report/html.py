"""``report.html``: one self-contained page to browse a report: the summary tables, the figures, and every
logged item (prompt, output, extracted answer, gold, score, each judge's verdict and reasons).

A task read several ways (lm-eval filters, the spec's ``Reading``s) shows each doc once, with its headline reading's
result and what each reading read; a "Readings" filter picks the items whose readings agree or differ.
Self-contained: the figures are embedded as data URIs, the styles and the few lines of script (the item
filters: task, category, correct/wrong/unparseable) are inline; nothing is fetched, no server is needed.
Private data stays out by default: the items of a task whose questions come from the user's own data (a
source with no public copy: clinical notes, a private question set), and of a task outside the pack unless
``public_tasks`` names it (the report cannot know where its text comes from), show their scores and categories
but not their text, unless ``show_private``; a task the demo marked as synthetic (``Run.synthetic``) shows all.
An item scored by scripted judges (``Run.judges_scripted``: the demo's) has a grey "scripted" badge, never a
green or red one, and each scripted judge's row says so. Every text shown passes the pack's credential redaction, and its
bidirectional-control characters are shown as their code points (``visible``).
"""

from __future__ import annotations

import ast
import base64
import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

PAGE = "report.html"
HIDDEN = "[private data, hidden: medeval report --html --html-show-private shows it]"
STATUSES = ("correct", "wrong", "unparseable")

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:1em 1.5em;
color:#1b1b1b;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}h3{margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
#figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(480px,1fr));gap:.8em}
figure{margin:0}figure img{width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
#filters{position:sticky;top:0;background:#fff;padding:.6em 0;border-bottom:1px solid #ddd;z-index:1}
#filters label{margin-right:1em}select{font-size:.95em;max-width:22em}
.item{border:1px solid #ccc;border-left:6px solid #999;border-radius:4px;margin:.5em 0;padding:.1em .8em}
.item.scripted{border-left-color:#9e9e9e}.badge.scripted{background:#757575}.item.correct{border-left-color:#2e7d32}.item.wrong{border-left-color:#c62828}.item.unparseable{border-left-color:#ef8f00}
.item summary{cursor:pointer;padding:.4em 0}.badge{display:inline-block;font-size:.8em;padding:0 .5em;border-radius:3px;
color:#fff;margin-right:.5em}.badge.correct{background:#2e7d32}.badge.wrong{background:#c62828}
.badge.unparseable{background:#ef8f00}pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.5em;
margin:.2em 0 .6em;max-height:22em;overflow:auto}.field{font-weight:600;font-size:.85em;color:#444}
.hidden-text{color:#777;font-style:italic}.note{color:#555;font-size:.9em}
"""

_SCRIPT = """
(function(){
  var selects = document.querySelectorAll('#filters select');
  function apply(){
    var want = {};
    selects.forEach(function(s){ want[s.name] = s.value; });
    var shown = 0;
    document.querySelectorAll('.item').forEach(function(item){
      var ok = (!want.task || item.dataset.task === want.task)
        && (!want.status || item.dataset.status === want.status)
        && (!want.readings || item.dataset.readings === want.readings)
        && (!want.category || item.dataset.categories.split('\\u001f').indexOf(want.category) >= 0);
      item.style.display = ok ? '' : 'none';
      if (ok) { shown++; }
    });
    document.getElementById('shown').textContent = shown;
  }
  // a filter can be given in the address (report.html#task=TASK&status=wrong), and is kept there
  var given = new URLSearchParams(location.hash.slice(1));
  selects.forEach(function(s){ if (given.has(s.name)) { s.value = given.get(s.name); } });
  selects.forEach(function(s){ s.addEventListener('change', function(){
    var now = new URLSearchParams();
    selects.forEach(function(t){ if (t.value) { now.set(t.name, t.value); } });
    history.replaceState(null, '', '#' + now.toString());
    apply();
  }); });
  apply();
})();
"""


# Bidirectional controls (embeddings, overrides, isolates, marks) make a browser show the text after them in
# another order than it was written (an output holding U+202E reads backwards): each is shown as its code point.
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # cannot be written as UTF-8


def visible(text: str) -> str:
    """``text`` as the page shows it: each bidirectional control as ``⟨U+202E⟩``, a lone surrogate as U+FFFD."""
    text = _BIDI_CONTROLS.sub(lambda match: f"\u27e8U+{ord(match.group()):04X}\u27e9", text)
    return _LONE_SURROGATE.sub("\ufffd", text)


def _e(text: Any) -> str:
    return html.escape(visible(str(text)), quote=True)


def _parse(value: Any) -> Any:
    """A logged value that lm-eval may have written as the repr of a Python object."""
    if not isinstance(value, str):
        return value
    for reader in (json.loads, ast.literal_eval):
        try:
            return reader(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return value


def _first(value: Any) -> Any:
    while isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    return value


def _prompt(sample: dict[str, Any]) -> str:
    arguments = _parse(sample.get("arguments"))
    if isinstance(arguments, dict):
        first = next(iter(arguments.values()), {})
        if isinstance(first, dict):
            return str(first.get("arg_0", ""))
    if isinstance(arguments, (list, tuple)) and arguments:
        return str(_first(arguments[0]))
    return ""


def _text(value: Any) -> str:
    value = _first(_parse(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _extracted(sample: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What the task read from the output, and the judges' verdicts where a judge filter ran."""
    value = _first(_parse(sample.get("filtered_resps")))
    value = _parse(value) if isinstance(value, str) and value.startswith("{") else value
    if isinstance(value, dict) and "verdicts" in value:
        return str(value.get("answer", "")), value.get("verdicts") or {}
    return _text(value), {}


def _number(value: Any) -> float | None:
    value = _parse(value)
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )


def _status(sample: dict[str, Any], metric: str, scale: tuple[float, float]) -> str:
    """correct / wrong / unparseable: unparseable where the task says so; else the headline metric at least the
    middle of its scale (a 0/1 metric: 1) counts as correct."""
    if (_number(sample.get("unparseable")) or 0) >= 1:
        return "unparseable"
    score = _number(sample.get(metric))
    if score is None:
        return "unparseable"
    low, high = scale
    if score in (low, high):  # a 0/1 metric (or a score at either end of its scale)
        return "correct" if score == high else "wrong"
    return "correct" if score >= (low + high) / 2 else "wrong"


def private_tasks(tasks: Iterable[str], public: Sequence[str] = ()) -> set[str]:
    """The tasks whose text may be private: a pack task whose questions come from the user's own data (a source
    with no public copy), and a task outside the pack unless ``public`` (names or ``fnmatch`` patterns, e.g.
    ``mysuite_*``) names it."""
    from fnmatch import fnmatchcase

    from medeval_metrics import registry

    private = set()
    for task in tasks:
        spec = registry.benchmark_of(task)
        if spec is None:
            if not any(fnmatchcase(task, pattern) for pattern in public):
                private.add(task)
        elif spec.source(registry.task(task).source).hub is None:
            private.add(task)
    return private


def _categories(task: str, doc: dict[str, Any]) -> list[str]:
    from medeval_metrics import registry

    breakdown = registry.breakdown_for(task)
    if breakdown is None or not isinstance(doc, dict):
        return []
    from medeval_metrics.report.figures import human

    out = []
    for dimension, categories in breakdown.dimensions.items():
        if " x " in dimension:
            continue  # the crossed dimensions repeat the single ones
        out += [f"{human(dimension)}: {c}" for c in categories(doc)]
    return out


def _doc_groups(samples: list[dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """The samples of one task as items: lm-eval logs each doc once per filter, so the samples of one doc (its
    n-th record under each filter) are one item, {filter: sample}, in the order the docs first appear."""
    groups: dict[tuple, dict[str, dict[str, Any]]] = {}
    seen: dict[tuple, int] = {}
    for index, sample in enumerate(samples):
        filter_name = str(sample.get("filter") or "none")
        doc_id = sample.get("doc_id")
        doc = ("doc", doc_id) if isinstance(doc_id, int) else ("record", index)
        nth = seen[(doc, filter_name)] = seen.get((doc, filter_name), -1) + 1
        groups.setdefault((doc, nth), {})[filter_name] = sample
    return list(groups.values())


def item_records(run, task: str, show_private: bool, public_tasks: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One record per logged item of ``task`` in ``run``, with its text hidden for private data. A task read several
    ways (lm-eval filters) has one record per doc, scored by its headline reading, with what each reading read."""
    from medeval_metrics.redact import redact_text
    from medeval_metrics.report.metric_info import headline_filter, metric_info, ordered_filters
    from medeval_metrics.report.tables import headline_mark, task_primary_metric

    # a task outside the pack: its first metric in the results stands for its headline
    logged = [key.split(",")[0] for key in run.results.get("results", {}).get(task, {}) if "," in key]
    benchmark, metric = task_primary_metric(task, [m for m in logged if not m.endswith("_stderr")])
    info = metric_info(benchmark, metric)
    # a task the demo marked synthetic (``Run.synthetic``): nothing of it is private
    hide = not show_private and not run.synthetic(task) and task in private_tasks([task], public_tasks)
    scripted = info.from_judges and run.judges_scripted()  # the item's score is a scripted panel's
    samples = run.samples(task)
    order = ordered_filters(benchmark, [str(s.get("filter") or "none") for s in samples])
    headline = headline_filter(benchmark, order)
    records = []
    for group in _doc_groups(samples):
        filters = [f for f in order if f in group]
        sample = group.get(headline) or group[filters[0]]
        doc = _parse(sample.get("doc"))
        extracted, verdicts = _extracted(sample)
        judges = []
        for name, verdict in sorted(verdicts.items()):
            verdict = verdict if isinstance(verdict, dict) else {}
            judges.append(
                {
                    "judge": name,
                    "scores": verdict.get("scores") or {},
                    "reasons": {} if hide else {k: redact_text(v) for k, v in (verdict.get("reasons") or {}).items()},
                    "unscored": verdict.get("unscored_reason"),
                    "scripted": run.judges_scripted(name),
                }
            )
        texts = {
            "prompt": _prompt(sample),
            "output": _text(sample.get("resps")),
            "extracted": extracted,
            "gold": _text(sample.get("target")),
        }
        readings = [
            {
                "filter": name,
                "headline": name == headline,  # the reading the item's result is
                "mark": headline_mark(benchmark, name),  # " (headline)" where the spec names it so
                "extracted": HIDDEN if hide else redact_text(_extracted(group[name])[0]),
                "score": _number(group[name].get(metric)),
                "status": _status(group[name], metric, info.scale),
            }
            for name in filters
        ]
        differ = len({(r["extracted"], r["status"]) for r in readings}) > 1
        records.append(
            {
                "task": task,
                "doc_id": sample.get("doc_id"),
                "metric": metric,
                "metric_label": info.label,
                "score": _number(sample.get(metric)),
                "status": _status(sample, metric, info.scale),
                "scripted": scripted,
                "categories": _categories(task, doc if isinstance(doc, dict) else {}),
                "hidden": hide,
                **{k: (HIDDEN if hide else redact_text(v)) for k, v in texts.items()},
                "judges": judges,
                "readings": readings,
                "agreement": "one reading" if len(readings) < 2 else ("differ" if differ else "agree"),
            }
        )
    return records


def _figure_tag(folder: Path, name: str) -> str:
    from medeval_metrics.report.figures import human

    data = base64.b64encode((folder / name).read_bytes()).decode("ascii")
    task, *rest = Path(name).stem.split("__")
    caption = " · ".join([task, *(human(part) for part in rest)])
    return (
        f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _code_spans(text: str) -> str:
    """``text`` escaped, its `backticked` names as <code>."""
    return re.sub(r"`([^`<>]*)`", r"<code>\1</code>", _e(text))


def _readings_html(rows) -> str:
    """The readings side by side (``tables.readings_tables``), "" where no task is read several ways."""
    from medeval_metrics.report.tables import _cell, readings_about, readings_tables, samples_text

    parts = []
    for table in readings_tables(rows):
        head = "".join(f"<th>{_e(c)}</th>" for c in ["Task", "n-shot", *table.columns, "Items"])
        body = "".join(
            f"<tr><td><code>{_e(first.task)}</code></td><td class=num>{_e(first.n_shot)}</td>"
            + "".join(f"<td class=num>{_e(_cell(r))}</td>" for r in found)
            + f"<td class=num>{_e(samples_text(first))}</td></tr>"
            for first, found in table.rows
        )
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    about = "".join(f'<p class="note">{_code_spans(line)}</p>' for line in readings_about(rows))
    return "<h3>Readings side by side</h3>" + "".join(parts) + about if parts else ""


def _scores_rows_html(rows) -> str:
    from medeval_metrics.report.tables import filter_text, interval_text, metric_label, samples_text, task_filters

    filters = task_filters(rows)
    body = "".join(
        f"<tr><td><code>{_e(r.task)}</code></td><td>{_e(metric_label(r))} "
        f"(<code>{_e(r.metric)}</code>)</td><td>{_e(filter_text(r, filters))}</td><td class=num>{r.value:.4f}</td>"
        f"<td class=num>{'N/A' if r.stderr is None else f'{r.stderr:.4f}'}</td>"
        f"<td class=num>{_e(interval_text(r))}</td><td class=num>{_e(samples_text(r))}</td></tr>"
        for r in rows
    )
    return (
        "<table><thead><tr><th>Task</th><th>Metric</th><th>Filter</th><th>Value</th><th>± Stderr</th>"
        f"<th>95% CI</th><th>Items</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _scores_table(run) -> str:
    """The run's headline table, then its "Diagnostics" table, and the notes a reader needs to read them."""
    from medeval_metrics.report import tables

    rows = tables.score_rows(run)
    headline, diagnostics = tables.headline_rows(rows), tables.diagnostic_rows(rows)
    if not headline and not diagnostics:
        return '<p class="note">No medeval task in this run.</p>'
    parts = [_readings_html(rows)]
    parts += [_scores_rows_html(headline)] if headline else []
    if diagnostics:
        parts += ["<h3>Diagnostics</h3>", _scores_rows_html(diagnostics)]
    notes = tables.run_notes(run, rows)
    parts += [f'<p class="note">{_e(note[0].upper() + note[1:])}.</p>' for note in notes]
    return "".join(parts)


def _task_settings_html(run) -> str:
    """Each task's own settings that change its scores (``Run.task_settings``: e.g. how a retrieval task retrieved),
    "" where no task has any."""
    rows = "".join(
        f"<tr><td><code>{_e(task)}</code></td><td>{_e(name)}</td><td>{_e(text)}</td></tr>"
        for task, own in run.task_settings().items()
        for name, text in own.items()
    )
    if not rows:
        return ""
    return (
        "<h3>Settings per task that change its scores</h3><table><thead><tr><th>Task</th><th>Setting</th>"
        f"<th>Value</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _run_time_table(run) -> str:
    """Per-task own time, the model's time per task or once for tasks sharing their calls, the set-up once, and
    judge usage, where the run recorded them (``tables.run_times``)."""
    from medeval_metrics.report.tables import TIMES_NOTE, _judge_cells, run_times

    times = run_times(run)
    if times is None:
        return ""
    body = ""
    for entry in times.tasks:
        requests, tokens = _judge_cells(entry.judge)
        model = "shared (below)" if entry.model_s is None else f"{entry.model_s:.1f}"
        body += (
            f"<tr><td><code>{_e(entry.task)}</code></td><td class=num>{entry.own_s:.1f}</td>"
            f"<td class=num>{entry.judging_s:.1f}</td><td class=num>{_e(model)}</td>"
            f"<td class=num>{_e(requests)}</td><td class=num>{_e(tokens)}</td></tr>"
        )
    for tasks, kind, seconds in times.shared:
        names = ", ".join(f"<code>{_e(t)}</code>" for t in tasks)
        body += f"<tr><td>model calls of {names} together ({_e(kind)})</td><td></td><td></td>"
        body += f"<td class=num>{seconds:.1f}</td><td></td><td></td></tr>"
    setup = (
        f'<p class="note">Set-up, once for the run (model built, data loaded): {times.setup_s:.1f} s.</p>'
        if times.setup_s is not None
        else ""
    )
    return (
        f"<h3>Run time and judge usage</h3>{setup}<table><thead><tr><th>Task</th><th>Own steps (s)</th>"
        "<th>of which judging (s)</th><th>Model (s)</th><th>Judge requests</th>"
        f"<th>Judge tokens (prompt + completion)</th></tr></thead><tbody>{body}</tbody></table>"
        f'<p class="note">{_e(TIMES_NOTE)}.</p>'
    )


def _answer_text(reading: dict[str, Any]) -> str:
    return reading["extracted"] or ("no answer" if reading["status"] == "unparseable" else "(empty)")


def _reading_result(reading: dict[str, Any], record: dict[str, Any]) -> str:
    score = reading["score"]
    return reading["status"] + ("" if score is None else f" ({record['metric_label']} {score:.3g})")


def _item_html(record: dict[str, Any], index: int) -> str:
    status, score = record["status"], record["score"]
    scripted = record.get("scripted", False)
    score_text = "no score" if score is None else f"{record['metric_label']} {score:.3g}"
    if scripted and score is not None:
        score_text += " (scripted judges: not a verdict on this answer)"
    # a scripted panel's verdict is never shown as a real one: a grey badge saying so, the result after it
    badge = (
        f'<span class="badge scripted">scripted · {status}</span>'
        if scripted
        else (f'<span class="badge {status}">{status}</span>')
    )
    head = (
        f"<summary>{badge}<code>{_e(record['task'])}</code> "
        f"item {_e(record['doc_id'])} · {_e(score_text)}"
        + "".join(  # the other readings' results beside the headline one's
            f" · {_e(r['filter'])}: {_e(r['status'])}" for r in record.get("readings") or [] if not r["headline"]
        )
        + (f" · {_e('; '.join(record['categories']))}" if record["categories"] else "")
        + "</summary>"
    )

    def field(label: str, key: str) -> str:
        value = record[key]
        cls = ' class="hidden-text"' if record["hidden"] else ""
        return f'<div class="field">{label}</div><pre{cls}>{_e(value)}</pre>'

    parts = [field("Prompt", "prompt"), field("Output", "output")]
    readings = record.get("readings") or []
    if len(readings) > 1:  # what each reading (lm-eval filter) read from the output, the headline one first
        rows = "".join(
            f"<tr><td>{_e(r['filter'] + r['mark'])}</td>"
            f"<td><code{' class=hidden-text' if record['hidden'] else ''}>{_e(_answer_text(r))}</code></td>"
            f"<td>{_e(_reading_result(r, record))}</td></tr>"
            for r in readings
        )
        parts.append(
            '<div class="field">Answer read by each reading</div><table><thead><tr><th>Reading (filter)</th>'
            f"<th>Answer read</th><th>Result</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    else:
        parts.append(field("Extracted answer", "extracted"))
    parts.append(field("Gold", "gold"))
    if record["judges"]:
        rows = ""
        for judge in record["judges"]:
            scores = ", ".join(f"{k} {v}" for k, v in judge["scores"].items()) or "no score"
            reasons = "; ".join(f"{k}: {v}" for k, v in judge["reasons"].items())
            if record["hidden"] and not reasons:
                reasons = HIDDEN
            unscored = f" (unscored: {judge['unscored']})" if judge["unscored"] else ""
            name = f"{judge['judge']} (scripted)" if judge.get("scripted") else judge["judge"]
            rows += f"<tr><td>{_e(name)}</td><td>{_e(scores + unscored)}</td><td>{_e(reasons)}</td></tr>"
        parts.append(
            '<div class="field">Judges</div><table><thead><tr><th>Judge</th><th>Scores</th>'
            f"<th>Reasons</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    categories = "\x1f".join(record["categories"])
    kind = "scripted" if scripted else status
    return (
        f'<details class="item {kind}" id="item-{index}" data-task="{_e(record["task"])}" '
        f'data-status="{status}" data-scripted="{str(scripted).lower()}" data-categories="{_e(categories)}" '
        f'data-readings="{_e(record.get("agreement", "one reading"))}">'
        f"{head}{''.join(parts)}</details>"
    )


def _select(name: str, label: str, options: Iterable[str]) -> str:
    values = "".join(f'<option value="{_e(o)}">{_e(o)}</option>' for o in options)
    return f'<label>{label} <select name="{name}"><option value="">all</option>{values}</select></label>'


def render(
    runs: list,
    folder: Path,
    figure_files: list[str],
    show_private: bool = False,
    public_tasks: Sequence[str] = (),
    left_out: Sequence[str] = (),
) -> str:
    """The page's HTML for ``runs`` (their samples), with the report's figures from ``folder`` embedded;
    ``left_out``: the numbers --skip-bad-numbers left out, listed."""
    from medeval_metrics import __version__
    from medeval_metrics.report.tables import INTRO

    sections, records = [], []
    for run in runs:
        sections.append(f"<h2>{_e(run.label)}</h2>{_scores_table(run)}{_task_settings_html(run)}{_run_time_table(run)}")
        for task in sorted(run.sample_paths):
            records += [{**r, "run": run.label} for r in item_records(run, task, show_private, public_tasks)]
    figures = "".join(_figure_tag(folder, name) for name in figure_files if (folder / name).is_file())
    hidden = sorted({r["task"] for r in records if r["hidden"]})
    privacy = (
        f'<p class="note">The text of {_e(", ".join(hidden))} is hidden (the user\'s own data, or a task outside '
        "the pack that <code>--public-task</code> does not name); scores and categories are shown. "
        "<code>medeval report --html --html-show-private</code> shows it.</p>"
        if hidden
        else ""
    )
    omitted = (
        "<h2>Numbers left out</h2><p class=note>Numbers that cannot be published, left out of every table and "
        f"figure (--skip-bad-numbers): {len(left_out)}.</p><ul>"
        + "".join(f"<li>{_e(line)}</li>" for line in left_out)
        + "</ul>"
        if left_out
        else ""
    )
    filters = (
        '<div id="filters">'
        + _select("task", "Task", sorted({r["task"] for r in records}))
        + _select("category", "Category", sorted({c for r in records for c in r["categories"]}))
        + _select("status", "Result", STATUSES)
        + (
            _select("readings", "Readings", ("agree", "differ"))
            if any(len(r.get("readings") or []) > 1 for r in records)
            else ""
        )
        + f' <span class="note"><span id="shown">{len(records)}</span> of {len(records)} items shown</span></div>'
    )
    items = "".join(_item_html(r, i) for i, r in enumerate(records))
    legend = (
        '<p class="note">Correct: the headline metric at its best for a 0/1 metric, at least the middle of its '
        "scale for a graded one; unparseable: no answer could be read from the output.</p>"
    )
    if any(len(r.get("readings") or []) > 1 for r in records):
        legend += (
            '<p class="note">A task read several ways (lm-eval filters) shows each item once, with its headline '
            "reading's result; the answer each reading read is inside the item, and the Readings filter picks the "
            "items whose readings agree or differ.</p>"
        )
    if any(r.get("scripted") for r in records):
        legend += (
            "<p class=\"note\">Scripted (grey): the item's score comes from scripted judges (the demo's fake judge "
            "server answers from a script, whatever the model wrote): its result says nothing about the answer.</p>"
        )
    body = (
        f"<h1>medeval report</h1><p>{_e(INTRO)}</p><p class=note>medeval-metrics {_e(__version__)}</p>"
        + "".join(sections)
        + omitted
        + (f"<h2>Figures</h2><div id=figures>{figures}</div>" if figures else "")
        + f"<h2>Items</h2>{legend}{privacy}{filters}<div id=items>{items}</div>"
    )
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>medeval report</title><style>{_STYLE}</style></head><body>{body}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
