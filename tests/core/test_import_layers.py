"""The import contracts of pyproject.toml (`lint-imports`): no cycles; the layers CLI, test rigs, benchmarks
(each named, none importing another), shared services and core; the tasks' runtime importing no tool; the test
rigs imported only by the demo and ``medeval_metrics.rigs``. Every package holding a spec.py must be named in
the benchmarks layer and in the runtime, so a new benchmark is held to the contracts from its first commit.
"""

from __future__ import annotations

import json
import pathlib

import tomllib
from conftest import REPO_ROOT

import medeval_metrics
from medeval_metrics import registry

PYPROJECT = REPO_ROOT / "pyproject.toml"


def benchmark_packages() -> list[str]:
    return sorted(name.rsplit(".", 1)[0] for name in registry.spec_module_names())


def contracts() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]


def _contract(config: dict, contract_id: str) -> dict:
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def _toml(config: dict) -> str:
    """The importlinter section as TOML (strings, lists of strings and tables of those only)."""
    lines = ["[tool.importlinter]"] + [f"{k} = {json.dumps(v)}" for k, v in config.items() if k != "contracts"]
    for contract in config["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"] + [f"{k} = {json.dumps(v)}" for k, v in contract.items()]
    return "\n".join(lines) + "\n"


def lint(config: dict, tmp_path: pathlib.Path, capsys) -> tuple[bool, str]:
    from importlinter import configuration
    from importlinter.application.use_cases import lint_imports

    configuration.configure()  # what the lint-imports command does first
    path = tmp_path / "contracts.toml"
    path.write_text(_toml(config), encoding="utf-8")
    kept = lint_imports(config_filename=str(path), cache_dir=None, no_logo=True)  # True: every contract kept
    return kept, capsys.readouterr().out


def test_the_import_contracts_hold(tmp_path, capsys):
    kept, report = lint(contracts(), tmp_path, capsys)
    assert kept is True, report
    assert "Contracts: 4 kept, 0 broken." in report


def test_every_benchmark_package_is_named_in_its_layer_and_in_the_runtime():
    benchmarks = benchmark_packages()
    assert {"medeval_metrics.emsqa", "medeval_metrics.medicationqa", "medeval_metrics.emrqa"} <= set(benchmarks)
    config = contracts()
    layer = next(layer for layer in _contract(config, "layers")["layers"] if "medeval_metrics.emsqa" in layer)
    assert sorted(name.strip() for name in layer.split("|")) == benchmarks, (
        "name each benchmark package in the benchmarks layer of pyproject.toml, separated by '|'"
    )
    assert set(benchmarks) <= set(_contract(config, "tasks-apart-from-tools")["source_modules"])


def test_the_runtime_is_kept_from_every_tool():
    config = contracts()
    tools = set(_contract(config, "tasks-apart-from-tools")["forbidden_modules"])
    assert tools == {f"medeval_metrics.{m}" for m in ("cli", "preflight", "report", "demo", "real_model", "testing")}
    assert _contract(config, "rigs")["forbidden_modules"] == ["medeval_metrics.testing"]


def test_every_top_level_module_has_a_layer():
    config = contracts()
    layers = _contract(config, "layers")["layers"]
    placed = {name.strip().strip("()") for layer in layers for name in layer.replace("|", ":").split(":")}
    package = pathlib.Path(medeval_metrics.__file__).parent
    found = {f"medeval_metrics.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    found |= {f"medeval_metrics.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert not found - placed, (
        f"give these modules a layer in pyproject.toml [tool.importlinter]: {sorted(found - placed)}"
    )


PLANTED = [  # (module file, what it is made to import): one wrong-way import of each kind
    ("data.py", "medeval_metrics.emsqa.scoring"),  # core reaching into a benchmark
    ("emrqa/metrics.py", "medeval_metrics.emsqa.scoring"),  # one benchmark into another
    ("judge/aggregate.py", "medeval_metrics.medicationqa.spec"),  # a service into a benchmark
    ("stats.py", "medeval_metrics.cli"),  # core into the CLI
    ("emsqa/prompts.py", "medeval_metrics.report.tables"),  # the tasks' runtime into a tool
    ("preflight/options.py", "medeval_metrics.testing.scripted"),  # a tool other than the demo into the rigs
]


def test_a_wrong_way_import_breaks_the_contracts(tmp_path, capsys, monkeypatch):
    """The contracts are not vacuous: a copy of the package under another name, with one planted import of each
    kind, breaks them, and the report names each planted import."""
    copy = tmp_path / "copy" / "medeval_plant"
    package = pathlib.Path(medeval_metrics.__file__).parent
    for source in package.rglob("*.py"):
        target = copy / source.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            source.read_text(encoding="utf-8").replace("medeval_metrics", "medeval_plant"), encoding="utf-8"
        )
    for module_file, imported in PLANTED:
        target = copy / module_file
        target.write_text(
            target.read_text(encoding="utf-8") + f"\nimport {imported.replace('medeval_metrics', 'medeval_plant')}\n",
            encoding="utf-8",
        )
    monkeypatch.syspath_prepend(str(copy.parent))
    config = json.loads(json.dumps(contracts()).replace("medeval_metrics", "medeval_plant"))
    kept, report = lint(config, tmp_path, capsys)
    assert kept is False
    for module_file, imported in PLANTED:
        importer = "medeval_plant." + module_file.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> {imported.replace('medeval_metrics', 'medeval_plant')}" in report, report
