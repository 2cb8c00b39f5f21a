"""Where each benchmark's data comes from: one mechanism for every task.

Every data set has a *source*: a default public home (a Hugging Face Hub repository) and a
metadata key naming a local copy. The key can be set three ways, first match wins:

1. ``lm_eval ... --metadata '{"emsqa_public_path": "/data/test_open.json"}'``
2. the environment variable ``MEDEVAL_<KEY>`` (``MEDEVAL_EMSQA_PUBLIC_PATH=...``)
3. nothing: the Hub source is used (for data that has a public home).

The work is done in focused modules; this one gathers their names for the benchmarks' loaders, and
keeps every name it held importable from here (old import paths):

- ``sources``: ``DataSource``, the Hub download;  ``checksums``: the pins and the file digest;
- ``files``: what a file is by its content;  ``json_records``: JSON / JSON Lines records;
- ``dataset_cache``: validated data sets kept as Arrow files;  ``provenance``: what was scored, in the results;
- ``settings``: how a setting is read;  ``errors``: ``MedevalDataError``.
"""

from __future__ import annotations

from medeval_metrics.checksums import CHECKSUM_ENV, check_known_checksum, file_sha256, known_checksums
from medeval_metrics.dataset_cache import DATASET_CACHE_ENV, collector_paused, dataset_cache_root, validated_dataset
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.files import FILE_KINDS, file_kind, refuse_wrong_file_kind, unwritable_reason
from medeval_metrics.json_records import JSON_RECORDS_SHOULD_BE, read_json_records
from medeval_metrics.provenance import record_scored_data, record_scored_files
from medeval_metrics.settings import FALSE_WORDS, TRUE_WORDS, env_var, flag_setting, setting
from medeval_metrics.sources import DataSource, download_hub_file, hub_offline

__all__ = [
    "CHECKSUM_ENV",
    "DATASET_CACHE_ENV",
    "FALSE_WORDS",
    "FILE_KINDS",
    "JSON_RECORDS_SHOULD_BE",
    "TRUE_WORDS",
    "DataSource",
    "MedevalDataError",
    "check_known_checksum",
    "collector_paused",
    "dataset_cache_root",
    "download_hub_file",
    "env_var",
    "file_kind",
    "file_sha256",
    "flag_setting",
    "hub_offline",
    "known_checksums",
    "read_json_records",
    "record_scored_data",
    "record_scored_files",
    "refuse_wrong_file_kind",
    "setting",
    "unwritable_reason",
    "validated_dataset",
]
