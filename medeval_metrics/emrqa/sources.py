"""What the user configures for emrQA: the two input files, the cache folder and the split seed.

Every setting is a metadata key (``--metadata``) with a ``MEDEVAL_<KEY>`` environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.data import DataSource, MedevalDataError, setting
from medeval_metrics.emrqa.seeding import DEFAULT_SEED
from medeval_metrics.settings import excerpt

_HOW_TO_GET = (
    "emrQA is distributed only under the n2c2 data-use agreement and is never shipped with this pack: "
    "register and sign the agreement at https://portal.dbmi.hms.harvard.edu/ (n2c2 NLP Research Data Sets, "
    "'Community Annotations Downloads', emrQA), or generate data.json and data-ql.csv from the i2b2/n2c2 "
    "notes with the authors' scripts (https://github.com/panushri25/emrQA)."
)
DATA_JSON = DataSource(key="emrqa_data_json", description="the emrQA data.json", how_to_get=_HOW_TO_GET)
DATA_QL_CSV = DataSource(key="emrqa_data_ql_csv", description="the emrQA data-ql.csv", how_to_get=_HOW_TO_GET)
CACHE_DIR_KEY = "emrqa_cache_dir"  # metadata key; env MEDEVAL_EMRQA_CACHE_DIR
SEED_KEY = "emrqa_seed"  # metadata key; env MEDEVAL_EMRQA_SEED


def split_seed(metadata: Mapping[str, Any] | None = None) -> int:
    """The split seed: metadata ``emrqa_seed``, else ``MEDEVAL_EMRQA_SEED``, else 1234."""
    value = setting(metadata, SEED_KEY)
    if value is None:
        return DEFAULT_SEED
    try:
        return int(str(value).strip())
    except ValueError:
        raise MedevalDataError(
            f"emrqa_seed is {excerpt(value)}: give a whole number (metadata emrqa_seed or MEDEVAL_EMRQA_SEED)."
        ) from None


def cache_root(metadata: Mapping[str, Any] | None = None) -> Path:
    value = setting(metadata, CACHE_DIR_KEY)
    if value:
        return Path(str(value)).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medeval" / "emrqa"


def resolve_inputs(metadata: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """Both files; every problem with them in one error (its ``problems`` lists each, for ``medeval run``)."""
    paths, problems, unset = [], [], []
    for source in (DATA_JSON, DATA_QL_CSV):
        try:
            path = source.local_path(metadata)
        except MedevalDataError as exc:
            path, problems = None, [*problems, str(exc)]
        else:
            unset += [source] if path is None else []
        paths.append(path)
    if len(unset) == 2:  # the usual first run: one line for both files
        example = '{"emrqa_data_json": "/path/to/data.json", "emrqa_data_ql_csv": "/path/to/data-ql.csv"}'
        problems.append(
            f"the emrQA data.json and data-ql.csv are not available: no local copy is configured (they are never "
            f"downloaded). {_HOW_TO_GET} Point the pack at both with `--metadata '{example}'`, or export "
            f"{DATA_JSON.env_var} and {DATA_QL_CSV.env_var}."
        )
    elif unset:
        problems.append(str(unset[0].missing("no local copy is configured (it is never downloaded)")))
    if problems:
        error = MedevalDataError(" ".join(problems))
        error.problems = problems
        raise error
    return paths[0], paths[1]  # type: ignore[return-value]
