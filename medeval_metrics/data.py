"""Where each benchmark's data comes from: one mechanism for every task.

Every data set has a *source*: a default public home (a Hugging Face Hub repository) and a
metadata key naming a local copy. The key can be set three ways, first match wins:

1. ``lm_eval ... --metadata '{"emsqa_public_path": "/data/test_open.json"}'``
2. the environment variable ``MEDEVAL_<KEY>`` (``MEDEVAL_EMSQA_PUBLIC_PATH=...``)
3. nothing: the Hub source is used (for data that has a public home).

Secrets never travel through ``--metadata``: lm-eval copies it into the results JSON.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping


class MedevalDataError(ValueError):
    """Bad or missing input data; the message says which file, which record and the fix."""


@dataclass(frozen=True)
class DataSource:
    """A data set the pack can read: from a local path (metadata/env) or a public Hub repo."""

    key: str  # metadata key, e.g. "emsqa_public_path"
    description: str  # what it is, for messages: "the EMSQA public test set"
    how_to_get: str  # what to download, from where
    hub_repo: str | None = None  # default public home on the Hugging Face Hub

    @property
    def env_var(self) -> str:
        return "MEDEVAL_" + self.key.upper()

    def how_to_point(self, example: str = "/path/to/file") -> str:
        return (
            f"Point the pack at a local copy with `--metadata '{{\"{self.key}\": \"{example}\"}}'` "
            f"on the lm_eval/medeval command line, or `export {self.env_var}={example}`."
        )

    def local_path(self, metadata: Mapping[str, Any] | None = None) -> Path | None:
        """The user's local copy, if one is configured; an error if it is configured but absent."""
        value = (metadata or {}).get(self.key) or os.environ.get(self.env_var)
        if not value:
            return None
        origin = f"--metadata {self.key}" if (metadata or {}).get(self.key) else self.env_var
        path = Path(str(value)).expanduser()
        if not path.exists():
            raise MedevalDataError(
                f"{self.description}: {origin} points at {path}, which does not exist. "
                f"{self.how_to_get} {self.how_to_point()}"
            )
        return path.resolve()

    def missing(self, reason: str) -> MedevalDataError:
        """The error for a source that is neither configured locally nor reachable."""
        return MedevalDataError(
            f"{self.description} is not available: {reason}. {self.how_to_get} {self.how_to_point()}"
        )


def hub_offline() -> bool:
    return any(
        os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}
        for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def download_hub_file(source: DataSource, filename_suffixes: Iterable[str], revision: str | None = None) -> Path:
    """Download the first file of ``source.hub_repo`` (a dataset repo) whose path ends with a suffix.

    Any failure (offline, unreachable, file not in the repo) becomes a MedevalDataError that says
    what to download and how to point the pack at it.
    """
    if source.hub_repo is None:
        raise source.missing("it has no public download")
    if hub_offline():
        raise source.missing(f"the Hub is disabled (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE) and no local copy is set")
    suffixes = tuple(filename_suffixes)
    try:
        from huggingface_hub import hf_hub_download, list_repo_files

        files = list_repo_files(source.hub_repo, repo_type="dataset", revision=revision)
        matches = sorted((f for f in files if f.endswith(suffixes)), key=len)
        if not matches:
            raise source.missing(
                f"the Hub dataset {source.hub_repo} has no file ending in {', '.join(suffixes)}"
            )
        return Path(hf_hub_download(source.hub_repo, matches[0], repo_type="dataset", revision=revision))
    except MedevalDataError:
        raise
    except Exception as exc:  # network, auth, 404: all mean "get it yourself"
        raise source.missing(f"downloading from the Hub dataset {source.hub_repo} failed ({type(exc).__name__})") from exc


def read_json_records(path: Path, description: str) -> list[dict[str, Any]]:
    """Records from a JSON array, a JSON object holding one array, or JSON Lines."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MedevalDataError(
            f"{path}: {description} is not UTF-8 text (byte {exc.start}). Re-save the file as UTF-8."
        ) from exc
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read {description} ({exc.strerror}).") from exc
    if not text.strip():
        raise MedevalDataError(f"{path}: {description} is empty. Point the pack at the full file.")
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and "\n{" not in stripped.rstrip()):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MedevalDataError(
                f"{path}: {description} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
                "The file may be truncated; download it again."
            ) from exc
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise MedevalDataError(
                    f"{path}: {description} is a JSON object; expected a list of records "
                    "(or an object holding exactly one list)."
                )
            data = lists[0]
        records = data
    else:
        records = []
        for line_number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise MedevalDataError(
                    f"{path}: line {line_number} of {description} (JSON Lines) is not valid JSON ({exc.msg}). "
                    "Fix or remove that line."
                ) from exc
    if not records:
        raise MedevalDataError(f"{path}: {description} holds no records.")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise MedevalDataError(
                f"{path}: record {index} of {description} is a {type(record).__name__}, not a JSON object."
            )
    return records
