"""scripts/readme_tasks_table.py, which rewrites README.md's task table from the manifest
(test_packaging checks the README itself)."""

import importlib.util

import pytest
from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "readme_tasks_table.py"
_spec = importlib.util.spec_from_file_location("readme_tasks_table", SCRIPT)
readme_tasks_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tasks_table)


def test_the_generated_table_lists_every_manifest_task():
    from medeval_metrics.manifest import build_manifest

    table = readme_tasks_table.generated_table()
    lines = table.splitlines()
    assert lines[0] == "| task | type | split | samples | metrics | data source |"
    assert len(lines) == 2 + len(build_manifest()["tasks"])
    metrics = "acc, f1, unparseable, requested_format, invalid_letter, extracted_by_model"
    assert f"| `emsqa_public` | generate_until | test | 3,721 | {metrics} |" in table


def test_check_and_write_on_a_stale_readme(tmp_path, capsys):
    readme = tmp_path / "README.md"
    start, end = readme_tasks_table.TABLE_START, readme_tasks_table.TABLE_END
    readme.write_text(f"# Pack\n\nintro\n\n{start}\n| old | table |\n{end}\n\nafter\n")
    # the script's main() in this process (what `python scripts/readme_tasks_table.py ...` exits with)
    assert readme_tasks_table.main(["--check", "--readme", str(readme)]) == 1
    assert "differs from the manifest" in capsys.readouterr().out
    assert readme_tasks_table.main(["--write", "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text == f"# Pack\n\nintro\n\n{start}\n{readme_tasks_table.generated_table()}\n{end}\n\nafter\n"
    assert readme_tasks_table.main(["--check", "--readme", str(readme)]) == 0


def test_missing_markers_are_an_error():
    with pytest.raises(ValueError, match="tasks-table:start"):
        readme_tasks_table.current_table("# no table here\n")
