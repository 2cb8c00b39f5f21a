"""``medeval emrqa-prepare``: prepare the emrQA cache ahead of the first run."""

from __future__ import annotations

import json
from typing import Any

from medeval_metrics.emrqa.cache import cache_dir_for, cache_errors, keep_private
from medeval_metrics.emrqa.seeding import DEFAULT_SEED
from medeval_metrics.emrqa.sources import (
    CACHE_DIR_KEY,
    DATA_JSON,
    DATA_QL_CSV,
    SEED_KEY,
    cache_root,
    resolve_inputs,
    split_seed,
)
from medeval_metrics.emrqa.splits import describe, prepare
from medeval_metrics.safe_files import private_folder


def _cmd_prepare(args: Any) -> int:
    metadata: dict[str, Any] = {}
    if args.data_json:
        metadata[DATA_JSON.key] = args.data_json
    if args.data_ql_csv:
        metadata[DATA_QL_CSV.key] = args.data_ql_csv
    if args.cache_dir:
        metadata[CACHE_DIR_KEY] = args.cache_dir
    if args.seed is not None:
        metadata[SEED_KEY] = args.seed
    seed = split_seed(metadata)
    data_json, data_ql = resolve_inputs(metadata)
    root = cache_root(metadata)
    folder = cache_dir_for(data_json, data_ql, seed, root)
    with cache_errors(root):
        if args.force or not (folder / "manifest.json").exists():
            private_folder(root)
            prepare(data_json, data_ql, folder, seed=seed, log=print, details=True)
            keep_private(folder)
        else:
            manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            for line in describe(manifest):
                print(line)
            print(f"already prepared: {folder} (use --force to redo)")
    return 0


def _interrupted(args: Any) -> str:
    """Ctrl-C: a preparation is written into a folder of its own and renamed into place when whole."""
    return (
        "the unfinished preparation was removed and any earlier one is kept as it was. Run the same command again "
        "to prepare from the start."
    )


def register_cli(sub: Any) -> None:
    p = sub.add_parser(
        "emrqa-prepare",
        help="read your emrQA data.json and data-ql.csv once and cache the evaluation splits",
        description="Validate emrQA's data.json and data-ql.csv and write seeded splits to the cache. "
        f"Files default to ${DATA_JSON.env_var} and ${DATA_QL_CSV.env_var}.",
    )
    p.add_argument("--data-json", help="path to data.json")
    p.add_argument("--data-ql-csv", help="path to data-ql.csv")
    p.add_argument("--cache-dir", help="cache root (default ~/.cache/medeval/emrqa or $MEDEVAL_EMRQA_CACHE_DIR)")
    p.add_argument(
        "--seed", type=int, default=None, help=f"split seed (default $MEDEVAL_EMRQA_SEED, else {DEFAULT_SEED})"
    )
    p.add_argument("--force", action="store_true", help="prepare again even if the cache exists")
    p.set_defaults(func=_cmd_prepare, interrupted=_interrupted)
