"""The documentation's shape: README.md short, every page reachable from it, every relative link and
anchor resolving, the three task READMEs in one outline, the citations kept in one place, and the
README's test command the one CI runs."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from medeval_metrics import registry

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
TASK_READMES = sorted((REPO_ROOT / "tasks").glob("*/README.md"))
PAGES = [README, REPO_ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md")), *TASK_READMES]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# lm-eval's task README outline (kormedmcqa, mmlu_pro): these headings, in this order; a benchmark
# adds its own sections between them.
OUTLINE = ("Paper", "Citation", "Groups and Tasks", "Changelog", "Checklist")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans: `["a"](...)` is an answer, not a link
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_anchor_slugs_follow_github():
    page = Path(__file__).with_name("data") / "anchors.md"
    assert anchors(page) == {
        "data-bring-your-own-n2c2-data-use-agreement",
        "medeval-run-the-checks",
        "metrics",
        "metrics-1",
        "commands-for-the-papers-table-4",
    }


def test_readme_is_at_most_200_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in relative_links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(REPO_ROOT)}")
    assert not broken, broken


def test_every_page_is_reachable_from_the_readme():
    reached, todo = set(), [README]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in relative_links(page):
            file = target.partition("#")[0]
            dest = (page.parent / file).resolve() if file else page
            if dest.suffix == ".md" and dest.is_file() and REPO_ROOT in dest.parents:
                todo.append(dest)
    unreached = [p.relative_to(REPO_ROOT).as_posix() for p in PAGES if p.resolve() not in reached]
    assert not unreached, f"not linked from README.md or a page it links: {unreached}"


@pytest.mark.parametrize("readme", TASK_READMES, ids=lambda p: p.parent.name)
def test_task_readmes_share_lm_evals_outline(readme):
    sections = re.findall(r"^### (.+?) *$", readme.read_text(encoding="utf-8"), re.MULTILINE)
    found = [s for s in sections if s in OUTLINE]
    assert found == list(OUTLINE), f"{readme.parent.name}: sections {sections}"
    assert readme.read_text(encoding="utf-8").count("- [x]") >= 3  # the checklist is answered


def bibtex_entries(text: str) -> dict[str, str]:
    """{key: entry} of every BibTeX entry in the ```bibtex blocks of a page."""
    entries = {}
    for block in re.findall(r"```bibtex\n(.*?)```", text, re.DOTALL):
        for key, body in re.findall(r"^@\w+\{([^,\s]+),(.*?)^\}", block, re.MULTILINE | re.DOTALL):
            entries[key] = body.strip()
    return entries


def test_each_benchmark_is_cited_in_its_task_readme_and_the_readme_copies_entries_verbatim():
    readme = bibtex_entries(README.read_text(encoding="utf-8"))
    for spec in registry.benchmarks():
        own = bibtex_entries((REPO_ROOT / "tasks" / spec.name / "README.md").read_text(encoding="utf-8"))
        assert spec.citation_key in own, f"tasks/{spec.name}/README.md has no BibTeX entry {spec.citation_key}"
        if spec.citation_key in readme:
            assert readme[spec.citation_key] == own[spec.citation_key], f"README's {spec.citation_key} differs"
    keys = {spec.citation_key for spec in registry.benchmarks()}
    assert readme and set(readme) <= keys, f"README cites what no benchmark declares: {set(readme) - keys}"


def readme_test_command() -> list[list[str]]:
    section = README.read_text(encoding="utf-8").split("\n## Run the tests\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [shlex.split(part) for part in block.replace("\\\n", " ").strip().split("&&")]


def test_ci_runs_the_readmes_test_command():
    """.ci/run installs and tests as the README tells a reader to, step by step (what follows the README's
    test command is CI's own: the fast loop again on the oldest lm-eval the dependency allows)."""
    steps = []
    for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines():
        words = shlex.split(line, comments=True)
        if words[:3] == ["$VENV/bin/python", "-m", "pip"] and "install" in words and "--upgrade" not in words:
            steps.append(["pip", *[w for w in words[3:] if w != "-q"]])
        elif words == ["pytest"]:
            steps.append(words)
            break
    assert steps == readme_test_command()


def test_ci_tests_each_end_of_the_lm_eval_window():
    """The dependency's lm-eval range and the releases .ci/run tests are the same: its lower bound is installed
    for the second test run, and lm_eval_compat names both releases as tested."""
    from medeval_metrics.lm_eval_compat import TESTED_LM_EVAL_VERSIONS

    pin = re.search(r'"lm-eval\[hf,api\]>=([\d.]+),<([\d.]+)"', (REPO_ROOT / "pyproject.toml").read_text())
    assert pin, "pyproject.toml pins lm-eval to a range"
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert f'"lm-eval[hf,api]=={pin[1]}"' in ci
    assert pin[1] in TESTED_LM_EVAL_VERSIONS and all(v < pin[2] for v in TESTED_LM_EVAL_VERSIONS)


REPO_PATH = re.compile(r"`((?:medeval_metrics|tests|scripts|tasks|docs|\.ci)/[^`\s<*{]+?)(?:::\w+)?`")
DOTTED = re.compile(r"`(medeval_metrics(?:\.\w+)+)`")


def resolves(dotted: str) -> bool:
    """`medeval_metrics.a.b.c` is a module, or an attribute chain under the longest importable module."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_paths_and_names_the_docs_quote_exist(page):
    """A file moved or a function renamed leaves no stale `path` or `medeval_metrics.name` behind."""
    text = page.read_text(encoding="utf-8")
    # CONTRIBUTING's worked example (`# medeval_metrics/toyqa/spec.py` heading a code block) names a
    # benchmark that exists only in the test that writes it out.
    example = set(re.findall(r"```python\n# medeval_metrics/(\w+)/", text))
    missing = [
        path
        for path in REPO_PATH.findall(text)
        if not (REPO_ROOT / path.rstrip("/")).exists() and path.split("/")[1] not in example
    ]
    missing += [name for name in DOTTED.findall(text) if not resolves(name)]
    assert not missing, missing


def test_each_benchmark_s_year_in_the_readme_is_its_bibtex_year():
    """Issue 33: the README named "Ge et al. 2025" beside a 2026 BibTeX entry."""
    text = README.read_text(encoding="utf-8")
    for spec in registry.benchmarks():
        named = re.search(rf"\*\*{re.escape(spec.reporting.display_name)}\*\* \([^)]*?(\d{{4}})\)", text)
        own = bibtex_entries((REPO_ROOT / "tasks" / spec.name / "README.md").read_text(encoding="utf-8"))
        year = re.search(r"year\s*=\s*\{(\d{4})\}", own[spec.citation_key])
        assert named and year and named.group(1) == year.group(1), (spec.name, named and named.group(0))


def test_the_demo_s_real_model_time_is_one_figure_everywhere_it_is_given():
    """Issue 33: 408 s in docs/real-model.md, "about 140 s" in CONTRIBUTING and "a few minutes" in --help: the one
    measured figure (dated, in docs/real-model.md) is the one the other two give."""
    from medeval_metrics.cli import build_parser

    measured = re.search(
        r"Measured once \((\d{4}-\d\d-\d\d), `medeval demo --real-model`.*?: (\d[\d,]*) s from start",
        (DOCS / "real-model.md").read_text(encoding="utf-8"),
        re.DOTALL,
    )
    assert measured, "docs/real-model.md gives the measured time of medeval demo --real-model, dated"
    figure = f"{measured.group(2)} s"
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert re.search(rf"SmolLM2 demo \({figure} for `medeval demo --real-model`", contributing)
    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    real_model_help = next(a.help for a in demo._actions if "--real-model" in a.option_strings)
    assert figure in real_model_help and "few minutes" not in real_model_help


def test_the_real_model_page_calls_the_default_demo_model_scripted():
    page = (DOCS / "real-model.md").read_text(encoding="utf-8")
    section = page.split("## `medeval demo --real-model`", 1)[1].split("\n## ", 1)[0]
    assert "tiny random" not in section and "instead\nof the scripted one" in section


def test_the_demo_s_default_output_folder_is_ignored_by_git():
    from medeval_metrics.cli import build_parser

    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    default = next(a.default for a in demo._actions if "--output" in a.option_strings)
    ignored = (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert f"/{default}/" in ignored, (default, ignored)
