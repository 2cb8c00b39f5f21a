"""No code of the pack reads the generated manifest.json: what a task is comes from its YAML and its
benchmark's spec, the checksums from the DataSource. The file is generated for users, nothing more."""

from __future__ import annotations

import builtins
import pathlib

import pytest
from conftest import REPO_ROOT

import medeval_metrics
from medeval_metrics import data, registry
from medeval_metrics.manifest import MANIFEST_FILE, build_manifest


@pytest.fixture
def manifest_unreadable(monkeypatch):
    """Any open of the pack's manifest.json fails the test, however it is opened."""

    def refuse(path):
        if pathlib.Path(str(path)).resolve() == MANIFEST_FILE.resolve():
            raise AssertionError(f"runtime read of the generated {path}")

    real_open, real_path_open = builtins.open, pathlib.Path.open

    def guarded_open(file, *args, **kwargs):
        if isinstance(file, (str, pathlib.PurePath)):
            refuse(file)
        return real_open(file, *args, **kwargs)

    def guarded_path_open(self, *args, **kwargs):
        refuse(self)
        return real_path_open(self, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(pathlib.Path, "open", guarded_path_open)
    registry.reload()
    yield
    registry.reload()


def test_the_guard_catches_a_read(manifest_unreadable):
    with pytest.raises(AssertionError, match="runtime read"):
        MANIFEST_FILE.read_text(encoding="utf-8")
    with pytest.raises(AssertionError, match="runtime read"), open(MANIFEST_FILE, encoding="utf-8"):
        pass


def test_listing_task_facts_checksums_and_the_pack_s_task_names_read_no_generated_file(
    manifest_unreadable, capsys, shared_data
):
    from medeval_metrics.cli import main
    from medeval_metrics.task_yaml import pack_task_yamls

    assert main(["list"]) == 0 and "emsqa_public" in capsys.readouterr().out
    assert len(build_manifest()["tasks"]) == len(registry.all_tasks())
    assert registry.task("emsqa_public_mc").output_type == "multiple_choice"
    assert registry.task("emsqa_public").metrics == (
        "acc",
        "f1",
        "unparseable",
        "requested_format",
        "invalid_letter",
        "extracted_by_model",
    )
    assert "medicationqa" in pack_task_yamls()
    assert data.known_checksums()["MedInfo2019-QA-Medications.xlsx"].startswith("4f13d0e3")
    assert data.check_known_checksum(shared_data / "emsqa" / "test_open.json", mode="warn") == "match"


def test_no_module_but_the_generator_names_the_generated_file():
    offenders = []
    for path in sorted(pathlib.Path(medeval_metrics.__file__).parent.rglob("*.py")):
        if path == pathlib.Path(medeval_metrics.__file__).parent / "manifest.py":
            continue
        text = path.read_text(encoding="utf-8")
        if "MANIFEST_FILE" in text or "load_manifest" in text or 'joinpath("manifest.json")' in text:
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders
