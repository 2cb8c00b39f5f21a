"""PNG figures (matplotlib, Agg backend, imported only here): per-category scores with 95% CIs,
judge score distributions per dimension, and a side-by-side comparison of runs.

Figures have a fixed width (``WIDTH_IN`` at ``DPI``) and a height that grows with the number of
bars, so their pixel size is predictable (``figure_size``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medeval_metrics.stats import normal_ci

DPI = 100
WIDTH_IN = 8.0
BAR_IN = 0.32  # height per bar
BASE_IN = 1.6  # title, axis and margins
LEGEND_ROW_IN = 0.25  # one legend entry below the axes


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png")  # no bbox_inches="tight": keeps the size predictable
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _clipped_ci(value: float, stderr: float, low: float, high: float) -> tuple[float, float]:
    lo, hi = normal_ci(value, stderr)
    return value - max(lo, low), min(hi, high) - value


def category_scores_figure(
    path: Path, title: str, metric_label: str, categories: dict[str, dict[str, float]], scale: tuple[float, float] = (0.0, 1.0)
) -> Path:
    """Horizontal bars of ``categories[name] = {value, stderr, n}`` with 95% normal CIs (clipped to the scale)."""
    plt = _pyplot()
    names = list(categories)
    width, height = figure_size(len(names))
    fig, ax = plt.subplots(figsize=(width / DPI, height / DPI), dpi=DPI)
    values = [categories[n]["value"] for n in names]
    errors = [_clipped_ci(categories[n]["value"], categories[n]["stderr"], *scale) for n in names]
    positions = list(range(len(names)))[::-1]
    ax.barh(positions, values, xerr=list(zip(*errors)) if errors else None, color="#4C72B0", capsize=3)
    ax.set_yticks(positions, [f"{n} (n={categories[n]['n']})" for n in names], fontsize=8)
    ax.set_xlim(*scale)
    ax.set_xlabel(f"{metric_label} (bars: 95% CI)")
    ax.set_title(title, fontsize=10)
    fig.subplots_adjust(left=0.45, right=0.97, bottom=BASE_IN * 0.45 / (height / DPI), top=1 - BASE_IN * 0.3 / (height / DPI))
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
        for j, judge in enumerate(judges):
            values = collected[judge].get(dimension, [])
            counts = [sum(1 for v in values if v == s) for s in scores] + [sum(1 for v in values if v is None)]
            ax.bar([i + j * bar for i in range(len(labels))], counts, width=bar, label=judge)
        ax.set_xticks([i + bar * (len(judges) - 1) / 2 for i in range(len(labels))], labels)
        ax.set_title(f"{title}: {dimension}", fontsize=10)
        ax.set_ylabel("items")
        ax.yaxis.get_major_locator().set_params(integer=True)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def comparison_figure(
    path: Path, title: str, metric_label: str, series: dict[str, dict[str, dict[str, float]]],
    scale: tuple[float, float] = (0.0, 1.0),
) -> Path:
    """Grouped horizontal bars: ``series[task][run label] = {value, stderr, n}``, 95% CIs."""
    plt = _pyplot()
    tasks = list(series)
    labels = sorted({label for per_run in series.values() for label in per_run})
    n_bars = len(tasks) * len(labels)
    width, height = figure_size(n_bars, legend_rows=len(labels))
    legend_in = LEGEND_ROW_IN * len(labels)
    fig, ax = plt.subplots(figsize=(width / DPI, height / DPI), dpi=DPI)
    bar = 0.8 / max(len(labels), 1)
    for j, label in enumerate(labels):
        positions, values, errors = [], [], []
        for i, task in enumerate(tasks):
            cell: dict[str, Any] | None = series[task].get(label)
            if cell is None:
                continue
            positions.append(len(tasks) - 1 - i + (len(labels) - 1 - j) * bar)
            values.append(cell["value"])
            errors.append(_clipped_ci(cell["value"], cell["stderr"], *scale))
        ax.barh(positions, values, height=bar, xerr=list(zip(*errors)) if errors else None, capsize=2, label=label)
    ax.set_yticks([len(tasks) - 1 - i + bar * (len(labels) - 1) / 2 for i in range(len(tasks))], tasks, fontsize=8)
    ax.set_xlim(*scale)
    ax.set_xlabel(f"{metric_label} (bars: 95% CI)")
    ax.set_title(title, fontsize=10)
    # the legend sits below the x axis label, in the space figure_size reserved for it
    fig.legend(fontsize=8, loc="lower center", ncol=1, frameon=False)
    fig.subplots_adjust(left=0.3, right=0.97, bottom=(BASE_IN * 0.45 + legend_in) / (height / DPI),
                        top=1 - BASE_IN * 0.3 / (height / DPI))
    return _save(fig, path)
