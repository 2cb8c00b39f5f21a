"""Shared test rig: offline Hub settings, the tiny model, the shared real-data folder, CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Tests never reach the Hugging Face Hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Synthetic files named like the published ones (test_open.json) are not the published files: the
# checksum notice would fire in every such test. Its own tests set MEDEVAL_DATA_CHECKSUMS themselves.
os.environ["MEDEVAL_DATA_CHECKSUMS"] = "off"

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-weight GPT-2 with a freshly trained tokenizer and a chat template (built once)."""
    from medeval_metrics.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-lm") / "tiny-lm")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data copies in ../shared/data (skip where that folder is absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real public data not present at {SHARED_DATA} (see shared/data/README.md)")
    return SHARED_DATA


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run the installed ``medeval`` command (as ``python -m medeval_metrics.cli``) and capture output."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "medeval_metrics.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_lm_eval_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run plain ``lm_eval`` (as ``python -m lm_eval``)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "lm_eval", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def find_results(output_dir: Path) -> tuple[dict, dict[str, list[dict]]]:
    """The results JSON and the logged samples (per task) that lm-eval wrote under output_dir."""
    results_files = sorted(output_dir.rglob("results_*.json"))
    assert results_files, f"no results file under {output_dir}"
    results = json.loads(results_files[-1].read_text())
    samples: dict[str, list[dict]] = {}
    for path in sorted(output_dir.rglob("samples_*.jsonl")):
        task = path.name[len("samples_"):].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return results, samples
