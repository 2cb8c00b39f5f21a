"""emrQA preparation, the public face: ``prepare``, ``ensure_prepared``, ``read_ql_csv`` and the CLI.

The work is split by job: :mod:`.records` (data.json records and evidence placement),
:mod:`.ql_csv` (data-ql.csv), :mod:`.splits` (writing the seeded splits), :mod:`.cache` (cache
keys and first-use preparation), :mod:`.sources` (settings), :mod:`.cli` (``emrqa-prepare``).
"""

from __future__ import annotations

from medeval_metrics.emrqa.cache import cache_dir_for, ensure_prepared
from medeval_metrics.emrqa.cli import register_cli
from medeval_metrics.emrqa.ql_csv import read_ql_csv
from medeval_metrics.emrqa.seeding import DEFAULT_SEED, TEST_FRACTION, is_test, stable_fraction
from medeval_metrics.emrqa.sources import DATA_JSON, DATA_QL_CSV, cache_root, resolve_inputs
from medeval_metrics.emrqa.splits import PREP_VERSION, describe, prepare

_is_test = is_test  # the name older tests and scripts use

__all__ = [
    "DATA_JSON",
    "DATA_QL_CSV",
    "DEFAULT_SEED",
    "PREP_VERSION",
    "TEST_FRACTION",
    "cache_dir_for",
    "cache_root",
    "describe",
    "ensure_prepared",
    "is_test",
    "prepare",
    "read_ql_csv",
    "register_cli",
    "resolve_inputs",
    "stable_fraction",
]
