"""Issue 23.11: report.html renders in a real browser (headless Chromium from the Debian packages): the filters'
script runs (a filter in the address shows only its items), and a screenshot shows the page (tables, figures,
the coloured results). Skips where Chromium is not installed (.ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_report_html import write_run
from test_report_readings import readings_spec  # noqa: F401  (a fixture: EMSQA's spec with two readings)

from medeval_metrics.report import build_report

CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
)
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]  # nothing could be fetched even if the page tried
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    (root / "run" / "org__model").mkdir(parents=True)
    write_run(root / "run" / "org__model")
    build_report([root / "run"], root / "report", figures=True, html=True)
    return root / "report" / "report.html"


def test_a_filter_in_the_address_shows_only_its_items(page, tmp_path):
    proc = chromium(
        tmp_path, "--virtual-time-budget=3000", "--dump-dom", f"{page.as_uri()}#task=emsqa_private&status=wrong"
    )
    dom = proc.stdout
    assert '<span id="shown">1</span>' in dom, proc.stderr[-2000:]
    shown = [part for part in dom.split("<details")[1:] if 'style="display: none;"' not in part.split(">")[0]]
    assert len(shown) == 1 and 'data-task="emsqa_private"' in shown[0] and 'data-status="wrong"' in shown[0]


def test_the_page_renders_with_its_tables_figures_and_results(page, tmp_path):
    from PIL import Image

    shot = tmp_path / "page.png"
    proc = chromium(
        tmp_path, "--virtual-time-budget=3000", "--window-size=1200,4000", f"--screenshot={shot}", page.as_uri()
    )
    assert shot.is_file(), proc.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 4000)
    colours = image.getcolors(maxcolors=1 << 20)
    counts = {rgb: n for n, rgb in colours}
    # text, the figures' bar blue, and the result badges' green and red are all on the page
    near = lambda target: sum(n for rgb, n in counts.items() if all(abs(a - b) <= 12 for a, b in zip(rgb, target)))
    assert near((0x4C, 0x72, 0xB0)) > 2000  # bars of the embedded figures
    assert near((0x2E, 0x7D, 0x32)) > 100 and near((0xC6, 0x28, 0x28)) > 100  # correct / wrong borders and badges
    assert near((255, 255, 255)) < 0.95 * 1200 * 4000  # not a blank page


@pytest.mark.usefixtures("readings_spec")
def test_the_readings_filter_shows_the_items_whose_readings_differ(tmp_path):
    """A task read two ways (test_report_readings' run: the readings differ on docs 1 and 2): the Readings filter in
    the address shows those two items alone."""
    from test_report_readings import write_run as write_two_readings

    build_report([write_two_readings(tmp_path / "run")], tmp_path / "report", figures=False, html=True)
    page = tmp_path / "report" / "report.html"
    proc = chromium(tmp_path, "--virtual-time-budget=3000", "--dump-dom", f"{page.as_uri()}#readings=differ")
    dom = proc.stdout
    assert '<span id="shown">2</span>' in dom, proc.stderr[-2000:]
    shown = [part for part in dom.split("<details")[1:] if 'style="display: none;"' not in part.split(">")[0]]
    assert [part.split('id="item-')[1].split('"')[0] for part in shown] == ["1", "2"]
