"""The benchmark specs and the registry: lookups, the generated manifest, the specs against the task
YAMLs and the real data's pins, the checks that reject a contradictory spec, and the rule that the
generic modules name no benchmark."""

import hashlib
import json
import re
import subprocess
import sys

import pytest
from conftest import REPO_ROOT, SHARED_DATA

from medeval_metrics import registry
from medeval_metrics.data import DataSource
from medeval_metrics.manifest import MANIFEST_FILE, build_manifest, manifest_text
from medeval_metrics.spec import BenchmarkSpec, Reporting, Source, Task


def test_the_pack_has_its_three_benchmarks_in_listing_order():
    # the pack's own, first (a benchmark added later lists after them and must not fail this test)
    assert [spec.name for spec in registry.benchmarks()][:3] == ["emsqa", "medicationqa", "emrqa"]
    own = [t for t in registry.all_tasks() if registry.benchmark_of(t.name).name in {"emsqa", "medicationqa", "emrqa"}]
    assert len(own) == 25  # 8 EMSQA, 8 EMSQA with retrieval, 1 MedicationQA, 8 emrQA
    assert own[0].name == "emsqa_public" and own[-1].name == "emrqa_evidence_window"


@pytest.mark.parametrize(
    "task, benchmark, samples, source",
    [
        ("emsqa_public_mc", "emsqa", 3721, "emsqa_public_path"),
        ("emsqa_private_cot", "emsqa", None, "emsqa_private_path"),
        ("medicationqa", "medicationqa", 690, "medicationqa_path"),
        ("emrqa_emrql_2", "emrqa", None, "emrqa_data_ql_csv"),
        ("emrqa_smoking", "emrqa", None, "emrqa_data_json"),
    ],
)
def test_task_lookups(task, benchmark, samples, source):
    assert registry.benchmark_of(task).name == benchmark
    assert (registry.task(task).samples, registry.task(task).source) == (samples, source)


def test_a_task_outside_the_pack():
    assert registry.benchmark_of("arc_easy") is None
    with pytest.raises(KeyError, match="medeval list"):
        registry.task("arc_easy")
    assert registry.breakdown_for("arc_easy") is None and registry.judging_for("arc_easy") is None


def test_breakdowns_by_longest_prefix_so_a_new_variant_inherits_its_siblings():
    emrqa = registry.benchmark("emrqa")
    assert registry.breakdown_for("emrqa_emrql_1") is emrqa.breakdowns["emrqa_emrql"]
    assert registry.breakdown_for("emrql_1") is emrqa.breakdowns["emrqa_emrql"]  # results under the old name
    assert registry.breakdown_for("emrqa_risk") is emrqa.breakdowns["emrqa"]
    # a task added to the EMSQA spec later (e.g. a retrieval variant) is broken down like the others
    assert registry.breakdown_for("emsqa_public_rag") is registry.benchmark("emsqa").breakdowns["emsqa"]
    assert registry.breakdown_for("emsqa") is registry.breakdown_for("emsqa_public")
    assert registry.breakdown_for("emsqafoo") is None  # a prefix counts only up to "_"


def test_judging_comes_from_the_spec_and_matches_the_task_yaml():
    import importlib

    from test_packaging import read_task_yamls

    assert "medicationqa" in registry.judged_benchmarks() and not {"emsqa", "emrqa"} & set(registry.judged_benchmarks())
    assert registry.judging_for("emsqa_public") is None and registry.judging_for("emrqa_risk") is None
    configs = read_task_yamls()
    for spec in registry.benchmarks():
        for task in spec.tasks:
            judge_filters = [
                f
                for entry in configs[task.name].get("filter_list", [])
                for f in entry["filter"]
                if str(f["function"]).endswith("JudgeFilter")
            ]
            judging = registry.judging_for(task.name)
            if judging is None:
                assert not judge_filters, task.name
                continue
            (judge_filter,) = judge_filters
            assert judge_filter["rubric"] == judging.rubric, task.name
            assert (judge_filter["question_field"], judge_filter["reference_field"]) == (
                judging.question_field,
                judging.reference_field,
            )
            module = importlib.import_module(judging.module)
            assert callable(module.process_results) and module.RUBRIC.name


def test_sources_for_tasks_in_first_use_order():
    from medeval_metrics.preflight.catalogue import sources_for  # the pre-run checks' (registry's was unused)

    sources = sources_for(["emrqa_risk", "emsqa_public", "emsqa_public_mc", "emrqa_emrql_1"])
    # emrqa_risk reads both emrQA files (its questions, then the other one preparation needs)
    assert sources == {
        "emrqa_data_json": ["emrqa_risk", "emrqa_emrql_1"],
        "emrqa_data_ql_csv": ["emrqa_risk", "emrqa_emrql_1"],
        "emsqa_public_path": ["emsqa_public", "emsqa_public_mc"],
    }
    public = registry.benchmark_of("emsqa_public").source("emsqa_public_path")
    assert public.hub == "Xueren/EMS-MCQA" and public.data.env_var == "MEDEVAL_EMSQA_PUBLIC_PATH"
    assert sources_for([]) == {}
    with pytest.raises(KeyError):
        sources_for(["arc_easy"])


def test_every_source_has_a_preflight_check_and_the_metadata_keys_come_from_the_specs():
    from medeval_metrics import preflight

    for spec in registry.benchmarks():
        for source in spec.sources:
            assert callable(source.check), f"{spec.name}: {source.key} has no check for `medeval run`"
    keys = registry.metadata_keys()
    assert {
        "emsqa_public_path",
        "emsqa_revision",
        "medicationqa_path",
        "emrqa_data_json",
        "emrqa_seed",
        "emrqa_sample_size",
        "emrqa_cache_dir",
    } <= set(keys)
    assert set(preflight.known_metadata_keys()) == {*keys, "medeval_judges"}
    assert {"emsqa_", "medicationqa_", "emrqa_", "medeval_", "rag_"} <= set(
        preflight.pack_key_prefixes()
    )  # rag_: EMSQA retrieval
    assert {
        "emsqa",
        "emsqa_public_variants",
        "emsqa_private_variants",
        "emsqa_rag",
        "emrqa",
        "emrql_1",
        "emrql_2",
    } <= set(registry.groups())


def test_manifest_json_is_generated_from_the_specs():
    """After changing a spec: python -m medeval_metrics.manifest --write."""
    assert MANIFEST_FILE.read_text(encoding="utf-8") == manifest_text(build_manifest()), (
        "manifest.json is stale: python -m medeval_metrics.manifest --write"
    )


def test_manifest_check_and_write(tmp_path, capsys):
    from medeval_metrics.manifest import main

    stale = tmp_path / "manifest.json"
    stale.write_text('{"pack": "medeval-metrics", "tasks": []}\n')
    assert main(["--check", "--path", str(stale)]) == 1
    assert "--write" in capsys.readouterr().out
    assert main(["--write", "--path", str(stale)]) == 0
    assert main(["--check", "--path", str(stale)]) == 0
    assert json.loads(stale.read_text()) == build_manifest()


def test_manifest_pins_match_the_real_public_files():
    checked = 0
    for spec in registry.benchmarks():
        for source in spec.sources:
            for name, pin in source.sha256.items():
                path = SHARED_DATA / spec.name / name
                if path.is_file():
                    assert hashlib.sha256(path.read_bytes()).hexdigest() == pin, path
                    checked += 1
    if not checked:
        pytest.skip(f"real public data not present at {SHARED_DATA}")


@pytest.mark.parametrize(
    "answers_json, expected",
    [
        (
            json.dumps([{"entity_type": "single"}, {"entity_type": "complex"}, {"entity_type": "single"}]),
            ["complex", "single"],
        ),
        (json.dumps([{"text": "x"}]), ["None"]),  # no entity type recorded: its own category, never dropped
        ("[]", []),
        ("not json", []),
        (None, []),
    ],
)
def test_emrqa_answer_type_categories(answers_json, expected):
    from medeval_metrics.emrqa.spec import answer_types

    assert answer_types({"answers_json": answers_json}) == expected


def _spec(name="toy", tasks=(Task("toy_a", "toy_path"),), groups=None, sources=None):
    source = Source(DataSource("toy_path", "the toy set", "make one"), files=("toy.json",), upstream="nowhere")
    return BenchmarkSpec(
        name=name,
        paper="p",
        licence="l",
        citation_key="k",
        sources=sources or (source,),
        tasks=tasks,
        reporting=Reporting("Toy", "question-answering", "acc"),
        groups=groups or {},
    )


@pytest.mark.parametrize(
    "specs, message",
    [
        ([("medeval_metrics.other.spec", _spec())], "must be the package name 'other'"),
        ([("medeval_metrics.toy.spec", _spec(tasks=(Task("toy_a", "elsewhere"),)))], "reads source 'elsewhere'"),
        (
            [("medeval_metrics.toy.spec", _spec()), ("medeval_metrics.toy2.spec", _spec(name="toy2"))],
            "already declared by medeval_metrics.toy.spec",
        ),
        ([("medeval_metrics.toy.spec", _spec(groups={"toy": ("toy_a", "toy_b")}))], r"lists \['toy_b'\]"),
    ],
)
def test_contradictory_specs_are_rejected_with_the_module_named(specs, message):
    with pytest.raises(ValueError, match=message):
        registry._check(specs)


GENERIC_MODULES = ["breakdown.py", "registry.py", "spec.py", "manifest.py", "stats.py", "report", "judge"]
# preflight.py: its error messages show `emsqa_public_path` as an example key; its logic reads the registry


def test_generic_modules_name_no_benchmark():
    names = {spec.name for spec in registry.benchmarks()} | {"emrql"}
    names |= {spec.reporting.display_name for spec in registry.benchmarks()}
    pattern = re.compile("|".join(sorted(names, key=len, reverse=True)), re.IGNORECASE)
    package = REPO_ROOT / "medeval_metrics"
    offenders = []
    for entry in GENERIC_MODULES:
        paths = sorted((package / entry).rglob("*.py")) if (package / entry).is_dir() else [package / entry]
        for path in paths:
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not offenders, "move benchmark knowledge into its spec:\n" + "\n".join(offenders)


@pytest.mark.e2e
def test_reading_every_spec_stays_light():
    """`medeval list` imports every spec: none may pull in torch, transformers or datasets."""
    code = (
        "import sys; from medeval_metrics import registry; registry.all_tasks(); "
        "print(sorted(m for m in ('torch', 'datasets', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
