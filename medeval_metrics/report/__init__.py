"""``medeval report``: from lm-eval output folders to a model card section, tables and figures.

Given one or more folders written by lm-eval (``--output_path``; samples where ``--log_samples``
was on), ``build_report`` writes into the output folder:

- ``model_index.yaml``: the card's ``model-index`` metadata (one file per model when the runs hold
  several models: ``model_index_<model>.yaml``);
- ``results.md``: scores with stderr, 95% intervals and sample counts (the spec's headline metrics first, the
  rest under "Diagnostics"), run times, and the settings that change scores; ``card_section.md``: the headline
  table and settings, ready to paste into a model card;
- ``breakdowns.{json,md}``: per-category scores from logged samples (``medeval_metrics.breakdown``);
  ``judges.{json,md}``: judge scores per judge and dimension, where samples carry them;
- ``figures/*.png``: per-category scores with 95% intervals (``stats.interval``: Wilson's for proportions), judge
  score distributions;
- with several runs, ``comparison.{md,png}``;
- ``report.json``: what was written, and every score row.

``--update-card README.md`` merges the model-index entries and the results section into the card
in place, or creates it (see ``medeval_metrics.report.model_card``). A report written into a folder
that holds an earlier report removes the files the earlier one listed in its ``report.json`` and
this one does not write (``build._remove_stale_files``).

Modules: ``build`` (``build_report``, step by step), ``cli`` (``medeval report``), ``runs`` (reading
lm-eval output folders), ``tables``, ``model_card``, ``judges``, ``figures``, ``metric_info``.

A task read several ways (lm-eval filters, e.g. ``strict-match`` and ``flexible-extract``; the spec's ``Reading``s)
is shown with its readings side by side, the headline reading first (``tables.readings_tables``); docs/report.md.

A partial (``--limit``) run's numbers say "N of M items, partial" wherever they are shown, and a run ``medeval
demo`` marked (``medeval_demo.json`` beside its results, ``runs.demo_note``) has its scripted judges' numbers labelled
"scripted" and its synthetic items shown.
"""

from medeval_metrics.report.build import build_report
from medeval_metrics.report.cli import register_cli

__all__ = ["build_report", "register_cli"]
