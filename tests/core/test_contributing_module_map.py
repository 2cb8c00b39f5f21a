"""CONTRIBUTING.md's module map lists every module of the package, and only modules that exist."""

import re

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "medeval_metrics"
EVALUATE_FOLDERS = "<benchmark>/evaluate_modules/*/"  # one line stands for every evaluate metric folder


def module_map() -> list[str]:
    guide = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = guide.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE)


def test_every_module_has_one_line_and_every_line_a_module():
    listed = module_map()
    assert len(listed) == len(set(listed)), "a module is listed twice"
    files = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    files |= {"manifest.json"}
    in_evaluate_folders = {f for f in files if re.fullmatch(r"[^/]+/evaluate_modules/[^/]+/[^/]+\.py", f)}
    assert in_evaluate_folders and EVALUATE_FOLDERS in listed
    missing = sorted(files - in_evaluate_folders - set(listed))
    stale = sorted(set(listed) - files - {EVALUATE_FOLDERS})
    assert not missing, f"add to CONTRIBUTING.md's module map: {missing}"
    assert not stale, f"in CONTRIBUTING.md's module map but not in the package: {stale}"
