"""PNG figures (matplotlib, Agg backend, imported only here): per-category scores with 95% intervals,
judge score distributions per dimension, and a side-by-side comparison of runs.

Figures have a fixed width (``WIDTH_IN`` at ``DPI``) and a height that grows with the number of
bars, so their pixel size is predictable (``figure_size``). Every bar carries its value as a label
(a zero bar reads "0.00" and has a mark in its colour, so zero and missing differ), an interval is drawn
where one can be had: Wilson's for a proportion (a mean of 0/1 items, also for one item or at 0 or 1 of n), a
normal one where a stderr exists, the method named on the x axis; titles are wrapped, then shortened, to fit the width,
and the left margin is measured from the category labels (wrapped, then shortened, when long).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from medeval_metrics.stats import interval

DPI = 100
WIDTH_IN = 8.0
BAR_IN = 0.32  # height per bar
BASE_IN = 1.6  # title, axis and margins
LEGEND_ROW_IN = 0.25  # one legend entry below the axes
TITLE_SIZE = 10
TITLE_LINES = 2  # a longer title is shortened with "..."
TITLE_MARGIN = 0.02  # of the figure width, on each side


class MissingReportExtra(RuntimeError):
    pass


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingReportExtra(
            "figures need matplotlib: `pip install 'medeval-metrics[report]'` (or pass --no-figures)"
        ) from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def figure_size(n_bars: int, n_panels: int = 1, legend_rows: int = 0) -> tuple[int, int]:
    """(width, height) in pixels of a figure with ``n_bars`` bars per panel, ``n_panels`` panels and
    a legend of ``legend_rows`` entries below the axes."""
    height_in = n_panels * (BASE_IN + BAR_IN * max(n_bars, 1)) + LEGEND_ROW_IN * legend_rows
    return round(WIDTH_IN * DPI), round(height_in * DPI)


def _save(fig, path: Path) -> Path:
    from medeval_metrics.safe_files import atomic_open

    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, dpi=DPI, format="png")  # no bbox_inches="tight": keeps the size predictable
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def fit_title(fig, text: str, fontsize: int = TITLE_SIZE):
    """The figure's title, wrapped (then shortened) until it fits the figure's width; returns the Text."""
    width_px = fig.get_figwidth() * fig.dpi * (1 - 2 * TITLE_MARGIN)
    renderer = fig.canvas.get_renderer()
    title = fig.suptitle(text, fontsize=fontsize, y=1 - 0.08 / fig.get_figheight(), va="top")
    chars = len(text)
    while chars > 10:
        lines = textwrap.wrap(text, chars, break_long_words=True, break_on_hyphens=False) or [text]
        if len(lines) > TITLE_LINES:
            lines = lines[: TITLE_LINES - 1] + [
                textwrap.shorten(" ".join(lines[TITLE_LINES - 1 :]), chars, placeholder="...")
            ]
        title.set_text("\n".join(lines))
        if title.get_window_extent(renderer).width <= width_px:
            break
        chars -= max(1, chars // 12)
    return title


def _interval(
    value: float, stderr: float | None, low: float, high: float, n: int | None = None, proportion: bool = False
) -> tuple[float, float] | None:
    """The 95% interval as (minus, plus) offsets, clipped to the scale: Wilson's for a proportion of ``n`` items
    (``stats.interval``: it does not collapse at 0 or 1, and one item has one), else the normal approximation;
    None without either."""
    found = interval(value, stderr, n, proportion, (low, high))
    if found is None:
        return None
    return max(0.0, value - max(found.low, low)), max(0.0, min(found.high, high) - value)


def interval_words(proportion: bool) -> str:
    """The method named on a figure's axis."""
    return "95% Wilson score interval" if proportion else "95% CI, normal approximation"


def _value_label(value: float, scale: tuple[float, float]) -> str:
    return f"{value:.1f}" if scale[1] - scale[0] > 10 else f"{value:.2f}"


_WORDS = {"lf": "logical-form", "x": "×", "qa": "QA"}  # short forms in field names, read out


def human(name: str) -> str:
    """A field or category name for a reader: ``subject_area`` -> ``subject area``, ``level x subject_area`` ->
    ``level × subject area``, ``lf_template`` -> ``logical-form template``."""
    words = str(name).replace("_", " ").split(" ")
    return " ".join(_WORDS.get(w, w) for w in words if w != "")


LABEL_CHARS = 48  # a category label is wrapped at this many characters, two lines at most, then shortened
MAX_LEFT = 0.55  # the labels may take at most this share of the figure's width


def wrap_label(text: str, chars: int = LABEL_CHARS, suffix: str = "") -> str:
    """``text`` on two lines at most (the rest shortened with "..."), ``suffix`` (the item count) always kept."""
    lines = textwrap.wrap(f"{text} {suffix}".strip(), chars, break_long_words=True, break_on_hyphens=False) or [text]
    if len(lines) > 2:
        rest = textwrap.wrap(text, chars, break_long_words=True, break_on_hyphens=False)[1:]
        room = max(4, chars - len(suffix) - 1)
        lines = [lines[0], (textwrap.shorten(" ".join(rest), room, placeholder="...") + " " + suffix).strip()]
    return "\n".join(lines)


def fit_left_margin(fig, ax, labels: list[str], suffixes: list[str] | None = None, pad_px: float = 12) -> None:
    """Set the y tick labels, wrapped narrower until they fit ``MAX_LEFT`` of the width, and the left margin
    to the widest of them (measured, so short labels leave the bars the room)."""
    renderer = fig.canvas.get_renderer()
    width_px = fig.get_figwidth() * fig.dpi
    chars = LABEL_CHARS
    while True:
        ax.set_yticklabels(
            [wrap_label(label, chars, suffix) for label, suffix in zip(labels, suffixes or [""] * len(labels))]
        )
        widest = max((t.get_window_extent(renderer).width for t in ax.get_yticklabels()), default=0.0)
        ylabel = ax.yaxis.label.get_window_extent(renderer).width if ax.get_ylabel() else 0.0
        needed = (widest + ylabel + 2 * pad_px) / width_px
        if needed <= MAX_LEFT or chars <= 12:
            break
        chars -= 6
    fig.subplots_adjust(left=min(MAX_LEFT, max(0.08, needed)))


def _bars_with_labels(
    ax, positions, values, stderrs, scale, height, color="#4C72B0", counts=None, proportion=False, **bar_args
) -> None:
    """Horizontal bars, a 95% interval where one can be had (``_interval``), the value at each bar's end, and a
    mark in the bar's colour at its value, so that a zero bar is visibly there (and whose it is)."""
    ax.barh(positions, [v - scale[0] for v in values], left=scale[0], height=height, color=color, **bar_args)
    counts = counts or [None] * len(values)
    intervals = [_interval(v, s, *scale, n, proportion) for v, s, n in zip(values, stderrs, counts)]
    with_ci = [(p, v, ci) for p, v, ci in zip(positions, values, intervals) if ci is not None]
    if with_ci:
        ax.errorbar(
            [v for _, v, _ in with_ci],
            [p for p, _, _ in with_ci],
            xerr=[[ci[0] for *_, ci in with_ci], [ci[1] for *_, ci in with_ci]],
            fmt="none",
            ecolor="black",
            elinewidth=1,
            capsize=3,
        )
    span = scale[1] - scale[0]
    for position, value in zip(positions, values):
        ax.plot(
            [value, value],
            [position - height * 0.45, position + height * 0.45],
            color=color,
            linewidth=4,
            solid_capstyle="butt",
        )
    for position, value, ci in zip(positions, values, intervals):
        inside = value + 0.16 * span > scale[1]
        x = value - 0.012 * span if inside else value + 0.012 * span
        ax.text(
            x,
            position,
            _value_label(value, scale) + ("" if ci is not None else " (no CI)"),
            va="center",
            ha="right" if inside else "left",
            fontsize=7,
            color="black",
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )


def category_scores_figure(
    path: Path,
    title: str,
    metric_label: str,
    categories: dict[str, dict[str, float]],
    scale: tuple[float, float] = (0.0, 1.0),
    dimension: str | None = None,
    proportion: bool = False,
) -> Path:
    """Horizontal bars of ``categories[name] = {value, stderr, n}`` with 95% intervals: Wilson's for a
    ``proportion`` (a mean of 0/1 items; one item has one too), else normal ones (clipped to the scale; none where
    stderr is None). The x axis names the method. ``dimension`` names the y axis."""
    plt = _pyplot()
    names = list(categories)
    width, height = figure_size(len(names))
    fig, ax = plt.subplots(figsize=(width / DPI, height / DPI), dpi=DPI)
    positions = list(range(len(names)))[::-1]
    _bars_with_labels(
        ax,
        positions,
        [categories[n]["value"] for n in names],
        [categories[n].get("stderr") for n in names],
        scale,
        0.8,
        counts=[categories[n].get("n") for n in names],
        proportion=proportion,
    )
    ax.set_yticks(positions)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlim(*scale)
    ax.set_xlabel(f"{metric_label} (lines: {interval_words(proportion)})")
    ax.set_ylabel(f"{human(dimension)} (items)" if dimension else "category (items)", fontsize=8)
    fig.subplots_adjust(right=0.97, bottom=BASE_IN * 0.45 / (height / DPI), top=1 - BASE_IN * 0.3 / (height / DPI))
    fit_left_margin(fig, ax, [human(n) for n in names], [f"(n={categories[n]['n']})" for n in names])
    fit_title(fig, title)
    return _save(fig, path)


def judge_distribution_figure(path: Path, title: str, collected: dict[str, dict[str, list[float | None]]]) -> Path:
    """One panel per dimension: how often each judge gave each score (unscored items as 'none')."""
    plt = _pyplot()
    dimensions = sorted({d for dims in collected.values() for d in dims})
    judges = sorted(collected)
    scores = sorted({s for dims in collected.values() for vals in dims.values() for s in vals if s is not None})
    labels = [f"{s:g}" for s in scores] + ["none"]
    width, height = figure_size(len(labels), len(dimensions))
    fig, axes = plt.subplots(len(dimensions), 1, figsize=(width / DPI, height / DPI), dpi=DPI, squeeze=False)
    bar = 0.8 / max(len(judges), 1)
    for ax, dimension in zip(axes[:, 0], dimensions):
        top = 0
        for j, judge in enumerate(judges):
            values = collected[judge].get(dimension, [])
            counts = [sum(1 for v in values if v == s) for s in scores] + [sum(1 for v in values if v is None)]
            xs = [i + j * bar for i in range(len(labels))]
            bars = ax.bar(xs, counts, width=bar, label=judge)
            colour = bars.patches[0].get_facecolor() if bars.patches else "black"
            for x, count in zip(xs, counts):  # the count on every bar, 0 included, and a 0 in its judge's colour
                if count == 0:
                    ax.plot([x - bar * 0.4, x + bar * 0.4], [0, 0], color=colour, linewidth=4, solid_capstyle="butt")
                ax.text(x, count, str(count), ha="center", va="bottom", fontsize=7)
            top = max([top, *counts])
        ax.set_ylim(0, max(1, top) * 1.18)
        ax.set_xticks([i + bar * (len(judges) - 1) / 2 for i in range(len(labels))], labels)
        ax.set_title(human(dimension).capitalize(), fontsize=9)
        ax.set_ylabel("items")
        ax.set_xlabel("score the judge gave (none: no score read from its reply)", fontsize=8)
        ax.yaxis.get_major_locator().set_params(integer=True)
    axes[0, 0].legend(fontsize=8)
    title_in = 0.55
    fig.tight_layout(rect=(0, 0, 1, 1 - title_in / (height / DPI)))
    fit_title(fig, title)
    return _save(fig, path)


def comparison_figure(
    path: Path,
    title: str,
    metric_label: str,
    series: dict[str, dict[str, dict[str, float]]],
    scale: tuple[float, float] = (0.0, 1.0),
    proportion: bool = False,
) -> Path:
    """Grouped horizontal bars: ``series[task][run label] = {value, stderr, n}``, 95% intervals (Wilson's for a
    ``proportion``, as ``category_scores_figure``)."""
    plt = _pyplot()
    tasks = list(series)
    labels = sorted({label for per_run in series.values() for label in per_run})
    n_bars = len(tasks) * len(labels)
    width, height = figure_size(n_bars, legend_rows=len(labels))
    legend_in = LEGEND_ROW_IN * len(labels)
    fig, ax = plt.subplots(figsize=(width / DPI, height / DPI), dpi=DPI)
    bar = 0.8 / max(len(labels), 1)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, label in enumerate(labels):
        positions, values, stderrs, counts = [], [], [], []
        for i, task in enumerate(tasks):
            cell: dict[str, Any] | None = series[task].get(label)
            if cell is None:
                continue
            positions.append(len(tasks) - 1 - i + (len(labels) - 1 - j) * bar)
            values.append(cell["value"])
            stderrs.append(cell.get("stderr"))
            counts.append(cell.get("n"))
        _bars_with_labels(
            ax,
            positions,
            values,
            stderrs,
            scale,
            bar,
            label=label,
            color=colours[j % len(colours)],
            counts=counts,
            proportion=proportion,
        )
    ax.set_yticks([len(tasks) - 1 - i + bar * (len(labels) - 1) / 2 for i in range(len(tasks))])
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlim(*scale)
    ax.set_xlabel(f"{metric_label} (lines: {interval_words(proportion)})")
    ax.set_ylabel("task", fontsize=8)
    # the legend sits below the x axis label, in the space figure_size reserved for it
    fig.legend(fontsize=8, loc="lower center", ncol=1, frameon=False)
    fig.subplots_adjust(
        right=0.97, bottom=(BASE_IN * 0.45 + legend_in) / (height / DPI), top=1 - BASE_IN * 0.3 / (height / DPI)
    )
    fit_left_margin(fig, ax, tasks)
    fit_title(fig, title)
    return _save(fig, path)
