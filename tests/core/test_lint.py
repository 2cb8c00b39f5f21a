"""ruff (lint and format, the settings in pyproject.toml) passes on the whole tree, as at every commit."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

pytestmark = pytest.mark.e2e  # starts a subprocess


def _ruff() -> list[str]:
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it is in the test extra: pip install '.[test]')")
    return [found]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff_passes(args):
    proc = subprocess.run([*_ruff(), *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"ruff {' '.join(args)}:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"


def test_ruff_notices_a_lint_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")  # F401: imported but unused
    proc = subprocess.run([*_ruff(), "check", "--no-cache", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "F401" in proc.stdout, (sys.executable, proc.stdout)
