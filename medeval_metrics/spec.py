"""What the pack knows about one benchmark, declared in one place: its ``BenchmarkSpec``.

Each benchmark package holds a ``spec.py`` with ``SPEC = BenchmarkSpec(...)``: its paper and
licence, its data sources, its tasks (sample counts, metric names, which source each reads), the
categories its scores are broken down by, how the report names and publishes its metrics, and
whether a judge panel scores it. ``medeval_metrics.registry`` collects the specs; ``medeval list``,
``manifest.json``, the README's task table, breakdowns, the report and ``medeval judge`` read them
from there, so the generic modules name no benchmark. This module holds only light dataclasses: a
spec module must import nothing heavy (``medeval list`` imports every spec).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

from medeval_metrics.data import DataSource
from medeval_metrics.task_yaml import TaskFacts, task_facts

Categories = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True)
class Source:
    """A ``DataSource`` with what ``medeval list`` and the manifest publish about it: files, upstream home."""

    data: DataSource
    files: tuple[str, ...]
    upstream: str
    hub_split: str | None = None  # the split as the Hub copy names it, where it differs from the task's
    # check(metadata): resolve and read the source as the task will, raising MedevalDataError if it
    # cannot (`medeval run` calls it before lm-eval builds the model); None: no check
    check: Callable[[Mapping[str, Any]], None] | None = None

    @property
    def key(self) -> str:
        return self.data.key

    @property
    def hub(self) -> str | None:
        return self.data.hub_repo

    @property
    def sha256(self) -> Mapping[str, str]:
        """The published files' pins, declared on the ``DataSource``."""
        return self.data.sha256


@dataclass(frozen=True)
class Task:
    """One lm-eval task of the benchmark: what its YAML in ``tasks/<benchmark>/`` cannot say.

    The YAML says what the task is: its metrics, version, output type and split are read from it
    (``medeval_metrics.task_yaml.task_facts``), never restated here.
    """

    name: str
    source: str  # key of one of the benchmark's sources
    samples: int | None = None  # items in the test set; None where it is the user's own file
    also_reads: tuple[str, ...] = ()  # further sources it needs (e.g. a retrieval corpus), by key

    @property
    def reads(self) -> tuple[str, ...]:
        """Every source key the task needs: its questions first."""
        return (self.source, *self.also_reads)

    @property
    def facts(self) -> TaskFacts:
        return task_facts(self.name)

    @property
    def metrics(self) -> tuple[str, ...]:
        """In the YAML's ``metric_list`` order."""
        return self.facts.metrics

    @property
    def version(self) -> int:
        return self.facts.version

    @property
    def output_type(self) -> str:
        return self.facts.output_type

    @property
    def split(self) -> str:
        return self.facts.split


@dataclass(frozen=True)
class BreakdownSpec:
    """Per-category scores: ``metrics`` averaged within each category of each dimension."""

    metrics: tuple[str, ...]
    dimensions: dict[str, Categories]


def _category_values(value: Any) -> list[str]:
    """A doc field as category names: none, each item of a list, or the one value."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def named_function(name: str) -> Callable[..., Any]:
    """The function a spec names as "module:function" (``MetricInfo.sample_stderr``, ``Reporting.task_settings``):
    named, not imported, so that a spec stays light."""
    import importlib

    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def doc_field(name: str) -> Categories:
    """Categories from a doc field (a list field puts an item in each of its categories)."""
    return lambda doc: _category_values(doc.get(name))


def crossed(first: Categories, second: Categories) -> Categories:
    return lambda doc: [f"{a} x {b}" for a, b in product(first(doc), second(doc))]


@dataclass(frozen=True)
class MetricInfo:
    label: str  # human-readable name, used in tables and as the model-index metric name
    hub_type: str  # model-index metric type (a Hub metric id where one fits)
    in_model_index: bool = True  # diagnostics (e.g. the unparseable rate) stay out of the card metadata
    scale: tuple[float, float] = (0.0, 1.0)  # range for figures (their x axis)
    # A corpus statistic lm-eval gives no stderr for ("N/A"): "module:function" computing it from the logged
    # samples' per-item values of the metric, for ``medeval report``.
    sample_stderr: str | None = None
    # The range ``medeval report`` accepts a value in; None: ``scale``. Wider than the figure's scale where a value
    # has no upper limit (a count that grows with a setting: math.inf) but a figure needs one.
    bounds: tuple[float, float] | None = None
    # In the report's first table and the card section; False: in its "Diagnostics" table (results.md, report.html)
    headline: bool = True
    # A mean of per-item 0/1 values (an accuracy, a rate of items): its interval is Wilson's, which does not
    # collapse at 0 or 1; other means get the normal approximation
    proportion: bool = False
    # A judge panel's number: labelled "scripted" where the run's judges were scripted (the demo's)
    from_judges: bool = False
    # The same value under every reading of a task (``Reading``; e.g. the share of outputs in the requested format):
    # shown once, beside the readings, and published once (under the headline reading)
    across_readings: bool = False

    @property
    def checked_range(self) -> tuple[float, float]:
        """The range a published value must lie in: ``bounds``, else ``scale``."""
        return self.bounds if self.bounds is not None else self.scale


@dataclass(frozen=True)
class Reading:
    """One reading of a task's outputs: one lm-eval filter of its YAML's ``filter_list`` (lm-eval's convention for
    generative tasks, e.g. gsm8k's ``strict-match`` and ``flexible-extract``). A run holding several readings of a
    task is reported with them side by side, the ``headline`` one first."""

    filter: str  # the filter's name in the task YAML
    label: str  # a few words naming it for a reader, e.g. "the pack's reader"
    about: str  # one sentence: what it reads as an answer (the report's note under the readings)
    headline: bool = False  # the reading the task's headline numbers are
    # the filter's names in earlier task versions: a run written by one still reports, named as it was
    former_filters: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reporting:
    """How the report names and publishes the benchmark's metrics.

    Only listed metrics with ``in_model_index`` go into the model-index; other metrics (e.g.
    per-judge success rates) are shown in the tables only. A key ending in ``*`` names every metric that starts
    with the rest (metrics named at run time, e.g. ``judge_success_<judge>``); a ``{}`` in its label is replaced
    by what the ``*`` stands for. An exact key wins over a pattern, a longer pattern over a shorter one.
    """

    display_name: str
    task_type: str  # model-index task type (a Hub task id)
    primary_metric: str  # plotted per category and compared across runs; a task without it uses its first metric
    metrics: dict[str, MetricInfo] = field(default_factory=dict)
    # the readings of the benchmark's tasks, in the order the report shows them (``Reading``); () where each task
    # has one filter
    readings: tuple[Reading, ...] = ()
    # the metrics the readings table shows under each reading, side by side; (): the primary metric alone
    reading_metrics: tuple[str, ...] = ()
    # "module:function" turning one task's results config (lm-eval's ``configs.<task>``) into the settings of that task
    # that change its scores beyond the run's own, as {name: printable text} ({} where it has none; e.g. how a
    # retrieval task's documents were retrieved): the report lists them with the run's settings and compares runs by
    # them. It picks only fields known harmless (never a folder path) and raises ``MedevalDataError`` naming the
    # field where one is malformed. Named, not imported, so that the spec stays light; None: no such settings
    task_settings: str | None = None

    def __post_init__(self) -> None:
        # a filter named twice, or two headlines, would make the report pick one silently
        names = [n for r in self.readings for n in (r.filter, *r.former_filters)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{self.display_name}: readings name the filter {', '.join(map(repr, twice))} twice.")
        if sum(r.headline for r in self.readings) > 1:
            raise ValueError(f"{self.display_name}: more than one reading is the headline; mark one.")

    def reading(self, filter_name: str) -> Reading | None:
        """The ``Reading`` a filter is (by its name, or a name earlier task versions gave it); None if unlisted."""
        for reading in self.readings:
            if filter_name == reading.filter or filter_name in reading.former_filters:
                return reading
        return None

    def ordered_filters(self, filters: Iterable[str]) -> list[str]:
        """One task's filters (as its results or samples name them) in the order they are shown: the readings in the
        spec's order, then any other filter by name."""
        names = [r.filter for r in self.readings]

        def position(filter_name: str) -> tuple[int, str]:
            reading = self.reading(filter_name)
            return (names.index(reading.filter) if reading else len(names), filter_name)

        return sorted(dict.fromkeys(filters), key=position)

    def headline_filter(self, filters: Iterable[str]) -> str:
        """The filter a task's headline numbers come from: its headline reading where the task has it, else the first
        of ``ordered_filters``; "" without filters. (A results file's first filter is the YAML's first, not this.)"""
        ordered = self.ordered_filters(filters)
        for filter_name in ordered:
            reading = self.reading(filter_name)
            if reading is not None and reading.headline:
                return filter_name
        return ordered[0] if ordered else ""

    def info(self, metric: str) -> MetricInfo | None:
        """The listed ``MetricInfo`` of ``metric`` (an exact key, else the longest ``prefix*`` key it matches, its
        label's ``{}`` filled in); None where the spec does not list it."""
        if metric in self.metrics:
            return self.metrics[metric]
        patterns = [key for key in self.metrics if key.endswith("*") and metric.startswith(key[:-1])]
        if not patterns:
            return None
        key = max(patterns, key=len)
        found = self.metrics[key]
        return replace(found, label=found.label.replace("{}", metric[len(key) - 1 :]))


@dataclass(frozen=True)
class Judging:
    """How a judged benchmark's logged answers are (re-)judged by ``medeval judge``.

    ``module`` exposes ``RUBRIC`` (the ``Rubric`` the task YAML's ``JudgeFilter`` names) and
    ``process_results(doc, [judge record])``; the fields are the doc fields the judge reads.
    """

    module: str
    question_field: str = "question"
    reference_field: str = "answer"

    @property
    def rubric(self) -> str:
        return f"{self.module}.RUBRIC"


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str  # the package name, and the prefix of its task names
    paper: str
    licence: str
    citation_key: str  # the BibTeX key in tasks/<name>/README.md's Citation section
    sources: tuple[Source, ...]
    tasks: tuple[Task, ...]
    reporting: Reporting
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # group -> its tasks (or groups)
    # task-name prefix -> breakdown; a task takes the longest prefix its name starts with
    breakdowns: dict[str, BreakdownSpec] = field(default_factory=dict)
    judging: Judging | None = None
    options: tuple[str, ...] = ()  # metadata keys its loaders read besides the sources' (e.g. a seed)
    flag_options: tuple[str, ...] = ()  # those options that are on/off switches (true/false, 1/0, yes/no)
    # keys it no longer reads -> what replaced them: given anyway, each is an error saying so (settings.refuse_removed)
    removed_options: Mapping[str, str] = field(default_factory=dict)
    # further prefixes of its option keys besides "<name>_" (e.g. "rag_"): an unknown key with one is a typo
    key_prefixes: tuple[str, ...] = ()
    # modules with a ``register_cli(subparsers)`` adding the benchmark's own ``medeval`` subcommands
    commands: tuple[str, ...] = ()
    listing_position: int = 100  # order of benchmarks in `medeval list`, the manifest and the README

    def source(self, key: str) -> Source:
        for source in self.sources:
            if source.key == key:
                return source
        raise KeyError(f"{self.name} has no source {key!r} (has: {', '.join(s.key for s in self.sources)})")

    def task(self, name: str) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"{self.name} has no task {name!r}")
