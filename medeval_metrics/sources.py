"""A data set's source: a local copy named by a metadata key (or ``MEDEVAL_<KEY>``), else its Hub home."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medeval_metrics.checksums import check_known_checksum, pin
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import env_var, is_true, setting


@dataclass(frozen=True)
class DataSource:
    """A data set the pack can read: from a local path (metadata/env) or a public Hub repo."""

    key: str  # metadata key, e.g. "emsqa_public_path"
    description: str  # what it is, for messages: "the EMSQA public test set"
    how_to_get: str  # what to download, from where
    hub_repo: str | None = None  # default public home on the Hugging Face Hub
    # file name -> sha256 of the published files (a local copy or download is compared with them)
    sha256: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        pin(self.sha256)  # a file named like a pinned one is checked whichever loader reads it

    @property
    def env_var(self) -> str:
        return env_var(self.key)

    @property
    def example(self) -> str:
        """The placeholder the messages show: a folder where the instructions point at one (a set of files)."""
        return "/path/to/folder" if "folder" in self.how_to_get else "/path/to/file"

    def how_to_point(self, example: str | None = None) -> str:
        example = example or self.example
        return (
            f'Give the local copy with `--metadata \'{{"{self.key}": "{example}"}}\'` or '
            f"`export {self.env_var}={example}`."
        )

    def local_path(self, metadata: Mapping[str, Any] | None = None) -> Path | None:
        """The user's local copy, if one is configured; an error if it is configured but absent."""
        value = setting(metadata, self.key)
        if not value:
            return None
        origin = f"--metadata {self.key}" if (metadata or {}).get(self.key) else self.env_var
        path = Path(str(value)).expanduser()
        if not path.exists():
            # short (about two terminal lines): what is wrong and the fix in the form the user gave the setting;
            # what to download is said when nothing is given at all (``missing``)
            example = self.example
            fix = (
                f'--metadata \'{{"{self.key}": "{example}"}}\''
                if origin.startswith("--")
                else f"export {self.env_var}={example}"
            )
            raise MedevalDataError(
                f"{self.description}: {origin} points at {path}, which does not exist. Point the pack at an existing "
                f"{example.rsplit('/', 1)[1]}: {fix}."
            )
        check_known_checksum(path)
        return path.resolve()

    def missing(self, reason: str) -> MedevalDataError:
        """The error for a source that is neither configured locally nor reachable."""
        return MedevalDataError(
            f"{self.description} is not available: {reason}. {self.how_to_get} {self.how_to_point()}"
        )


# The endpoint `medeval run`'s pre-run probe found unreachable, for the rest of that run: the pack's downloads
# fail at once instead of retrying for seconds. Kept here, not in HF_HUB_OFFLINE, so the user's environment is
# left as it was and messages do not blame a variable the user never set.
_unreachable: dict[str, str] = {}


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def mark_hub_unreachable() -> None:
    _unreachable["endpoint"] = hub_endpoint()


def clear_hub_unreachable() -> None:
    _unreachable.clear()


def hub_unreachable() -> str | None:
    """The endpoint found unreachable in this run, or None."""
    return _unreachable.get("endpoint")


def _hub_disabled_by_user() -> bool:
    return any(is_true(os.environ.get(var, "")) for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_offline() -> bool:
    return _hub_disabled_by_user() or hub_unreachable() is not None


def hub_off_reason() -> str:
    """Why the pack does not download: the user's switch, or the probe that found the Hub unreachable."""
    if _hub_disabled_by_user():
        return "the Hub is disabled (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE)"
    return f"the Hub cannot be reached ({hub_unreachable() or hub_endpoint()})"


def download_hub_file(source: DataSource, filename_suffixes: Iterable[str], revision: str | None = None) -> Path:
    """Download the first file of ``source.hub_repo`` (a dataset repo) whose path ends with a suffix.

    Any failure (offline, unreachable, file not in the repo) becomes a MedevalDataError that says
    what to download and how to point the pack at it.
    """
    if source.hub_repo is None:
        raise source.missing("it has no public download")
    if hub_offline():
        raise source.missing(f"{hub_off_reason()} and no local copy is set")
    suffixes = tuple(filename_suffixes)
    try:
        from huggingface_hub import hf_hub_download, list_repo_files

        files = list_repo_files(source.hub_repo, repo_type="dataset", revision=revision)
        matches = sorted((f for f in files if f.endswith(suffixes)), key=len)
        if not matches:
            raise source.missing(f"the Hub dataset {source.hub_repo} has no file ending in {', '.join(suffixes)}")
        downloaded = Path(hf_hub_download(source.hub_repo, matches[0], repo_type="dataset", revision=revision))
    except MedevalDataError:
        raise
    except Exception as exc:  # network, auth, 404: all mean "get it yourself"
        raise source.missing(
            f"downloading from the Hub dataset {source.hub_repo} failed ({type(exc).__name__})"
        ) from exc
    return downloaded
