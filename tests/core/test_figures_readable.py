"""Issue 23.10: figures a reader can read: labels never clipped and margins from the text, human titles, axis
labels on every axis, zero bars visible (in their series' colour)."""

from __future__ import annotations

import pytest

from medeval_metrics.report import figures

CELL = {"value": 0.5, "stderr": 0.1, "n": 3}
LONG = (
    "LabEvent (|test|) [date=|date|, result=x] OR ProcedureEvent (|test|) [date=|date|, result=x] OR "
    "MedicationEvent (|medication|) [date=|date|]"
)


def drawn(monkeypatch, draw):
    captured = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: captured.setdefault("fig", fig) and path)
    draw()
    fig = captured["fig"]
    fig.canvas.draw()
    return fig


def label_boxes(fig):
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for ax in fig.axes for t in ax.get_yticklabels() if t.get_text()]


@pytest.mark.parametrize(
    "human, name",
    [
        ("subject area", "subject_area"),
        ("level × subject area", "level x subject_area"),
        ("logical-form template", "lf_template"),
        ("answer type", "answer_type"),
    ],
)
def test_field_names_read_as_words(human, name):
    assert figures.human(name) == human


def test_a_long_label_is_wrapped_inside_the_figure_and_keeps_its_count(monkeypatch):
    cats = {LONG: {"value": 0.25, "stderr": 0.1, "n": 6}, "short": CELL}
    fig = drawn(monkeypatch, lambda: figures.category_scores_figure(None, "t", "acc", cats, dimension="lf_template"))
    assert all(box.x0 >= 0 for box in label_boxes(fig))  # nothing cut at the left edge
    texts = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert texts[0].count("\n") == 1 and texts[0].endswith("(n=6)") and "..." in texts[0]
    assert fig.subplotpars.left <= figures.MAX_LEFT


def test_short_labels_leave_the_bars_the_width(monkeypatch):
    cats = {"emt": CELL, "emr": CELL}
    fig = drawn(monkeypatch, lambda: figures.category_scores_figure(None, "t", "acc", cats, dimension="level"))
    assert fig.subplotpars.left < 0.2  # was a fixed 0.45
    assert all(box.x0 >= 0 for box in label_boxes(fig))


@pytest.mark.parametrize("kind", ["category", "comparison", "judge"])
def test_every_axis_has_both_labels(monkeypatch, kind):
    draw = {
        "category": lambda: figures.category_scores_figure(None, "t", "acc", {"a": CELL}, dimension="level"),
        "comparison": lambda: figures.comparison_figure(None, "t", "acc", {"task": {"run": CELL}}),
        "judge": lambda: figures.judge_distribution_figure(None, "t", {"j": {"accuracy": [1, 5, None]}}),
    }[kind]
    fig = drawn(monkeypatch, draw)
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel(), (kind, ax.get_xlabel(), ax.get_ylabel())


def test_zero_bars_show_in_their_series_colour(monkeypatch):
    from matplotlib.colors import to_hex

    series = {"task": {"run a": {"value": 0.0, "stderr": 0.0, "n": 4}, "run b": {"value": 0.0, "stderr": 0.0, "n": 4}}}
    fig = drawn(monkeypatch, lambda: figures.comparison_figure(None, "t", "acc", series))
    marks = {to_hex(line.get_color()) for line in fig.axes[0].lines if list(line.get_xdata()) == [0.0, 0.0]}
    bars = {to_hex(patch.get_facecolor()) for patch in fig.axes[0].patches}
    assert len(bars) == 2 and bars <= marks  # each run's zero is there, in its colour


def test_a_judge_score_nobody_gave_shows_a_zero_in_each_judge_s_colour(monkeypatch):
    fig = drawn(
        monkeypatch,
        lambda: figures.judge_distribution_figure(None, "t", {"a": {"accuracy": [5, 5]}, "b": {"accuracy": [1, 5]}}),
    )
    zero_marks = [line for line in fig.axes[0].lines if list(line.get_ydata()) == [0, 0]]
    assert len(zero_marks) == 3  # a gave no 1 and no "none", b no "none"


def test_a_proportion_at_0_or_1_and_a_single_item_get_wilson_intervals_named_on_the_axis(monkeypatch):
    """Issue 33: a normal interval collapses at 0 or 1 of n (stderr 0) and has none for one item; Wilson's does not."""
    cats = {
        "all right": {"value": 1.0, "stderr": 0.0, "n": 2},
        "all wrong": {"value": 0.0, "stderr": 0.0, "n": 2},
        "one item": {"value": 1.0, "stderr": None, "n": 1},
    }
    fig = drawn(monkeypatch, lambda: figures.category_scores_figure(None, "t", "acc", cats, proportion=True))
    ax = fig.axes[0]
    assert "95% Wilson score interval" in ax.get_xlabel()
    assert not any("(no CI)" in t.get_text() for t in ax.texts)
    segments = [s for c in ax.collections if c.__class__.__name__ == "LineCollection" for s in c.get_segments()]
    spans = sorted((round(float(s[0][0]), 3), round(float(s[1][0]), 3)) for s in segments)
    assert spans == [(0.0, 0.658), (0.207, 1.0), (0.342, 1.0)]  # test_stats: by hand


def test_a_mean_that_is_no_proportion_keeps_the_normal_interval_and_says_so(monkeypatch):
    fig = drawn(monkeypatch, lambda: figures.comparison_figure(None, "t", "F1", {"task": {"run": CELL}}))
    assert "95% CI, normal approximation" in fig.axes[0].get_xlabel()
