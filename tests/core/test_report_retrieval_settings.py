"""Issue 31, your own retriever: `medeval report` says how each EMSQA retrieval task's documents were retrieved (the
retriever, k, the mode, the retrievals file read, by its name only) in results.md's and card_section.md's "Settings
that change scores", in report.html and in the comparison of several runs, and two runs whose retrieval differs are
never taken for the same evaluation.

The runs are synthetic: the ``metadata.rag`` record a RAG task writes into its results config (``emsqa/rag.py``),
here of a run that retrieved with bm25 and of one that read a file of another retriever, with private folders in
every path field. Every expected line is written out by hand. The last test makes both kinds of run for real
(`medeval run` with the scripted model) and reports them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa.report_settings import task_settings
from medeval_metrics.report import build_report
from medeval_metrics.report.runs import load_runs

TASK = "emsqa_public_rag"
PRIVATE = "/home/alice/private"  # every path of the records below starts with it: none may reach a report
DIGEST = "ab" * 32
OLD, NEW = "2026-03-01T10-00-00.000000", "2026-03-02T10-00-00.000000"


def rag_record(**changes) -> dict:
    """The record of a run that retrieved with the pack's bm25 (the fields and values rag.py writes)."""
    record = {
        "chunks_version": "ee19d87824e0381d",
        "corpus_version": DIGEST,
        "settings": {
            "retriever": "bm25",
            "mode": "global",
            "k": 32,
            "chunk_tokens": 512,
            "chunk_overlap": 128,
            "chunk_tokenizer": "basic",
        },
        "areas": "gold",
        "retrievals": {"task": TASK, "mode": "global", "k": 32, "areas": "gold", "retriever": "bm25"},
        "external_retriever": None,
        "shown": {"retriever": "bm25", "mode": "global", "k": 32, "prompt": "pack", "items": 4},
        "knowledge": f"{PRIVATE}/kb",
        "files": {"trauma": "cd" * 32},
        "missing_files": [],
        "retrievals_from": None,
        "retrievals_saved_to": f"{PRIVATE}/saved/retrievals.jsonl",
        "index_from_cache": True,
        "seconds": {"index": 0.0, "retrieval": 0.0, "total": 0.1},
    }
    record.update(changes)
    return record


def external_record(name: str = "my-colbert v2", k: int = 5) -> dict:
    """A run that read a file of another retriever (the header names it: ``{"external": name}``)."""
    record = rag_record(
        external_retriever=name,
        retrievals_from=f"{PRIVATE}/retrievals/colbert.jsonl",
        retrievals_saved_to=None,
    )
    record["settings"] = {**record["settings"], "retriever": "external", "k": k}
    record["shown"] = {**record["shown"], "retriever": f"external: {name}", "k": k, "prompt": "authors"}
    record["retrievals"] = {"retriever": {"external": name}, "knowledge": DIGEST, "task": TASK}
    return record


PACK_LINE = (
    "retriever: bm25; k: 32; mode: global; prompt: the pack's; knowledge: sha256 abababababab; "
    "chunks: 512 tokens, overlap 128"
)
EXTERNAL_LINE = (
    "retriever: external: my-colbert v2; k: 5; mode: global; retrievals file: colbert.jsonl; prompt: the authors'; "
    "knowledge: sha256 abababababab; chunks: 512 tokens, overlap 128"
)


def config(record: dict | None) -> dict:
    metadata = {"version": 7, "rag_mode": "global", "emsqa_knowledge_path": f"{PRIVATE}/kb", "api_key": "sk-secret"}
    if record is not None:
        metadata["rag"] = record
    return {"task": TASK, "output_type": "generate_until", "metadata": metadata}


def ftr(**changes) -> dict:
    record = rag_record(**changes)
    record["settings"] = {**record["settings"], "mode": "filter_then_retrieve", "k": 8}
    return record


def rtf(**changes) -> dict:
    record = rag_record(**changes)
    record["settings"] = {**record["settings"], "mode": "retrieve_then_filter", "k": 8, "pool_factor": 10}
    return record


def dense(query: str, article: str) -> dict:
    record = rag_record()
    record["settings"] = {
        **record["settings"],
        "retriever": "medcpt",
        "query_encoder": query,
        "article_encoder": article,
        "query_max_tokens": 64,
    }
    return record


KNOWLEDGE = "knowledge: sha256 abababababab; chunks: 512 tokens, overlap 128"


@pytest.mark.parametrize(
    "record, expected",
    [
        (rag_record(), PACK_LINE),
        (external_record(), EXTERNAL_LINE),
        # a name as the file's header gives it, on one line
        (external_record("multi\nline  name"), EXTERNAL_LINE.replace("my-colbert v2", "multi line name")),
        (
            ftr(),
            "retriever: bm25; k: 8; mode: filter-then-retrieve (the items' own subject areas); prompt: the pack's; "
            + KNOWLEDGE,
        ),
        # the paper's "Filter" rows: areas predicted per item, read from a file (its name only)
        (
            ftr(areas=f"{PRIVATE}/areas/predicted.json"),
            "retriever: bm25; k: 8; mode: filter-then-retrieve (subject areas predicted in predicted.json); "
            "prompt: the pack's; " + KNOWLEDGE,
        ),
        # with another retriever's file the task's mode is the file's to have applied: the pack neither searched
        # nor filtered, so no pool or subject areas are claimed
        (
            {**external_record(), "settings": {**external_record()["settings"], "mode": "filter_then_retrieve"}},
            EXTERNAL_LINE.replace("mode: global", "mode: filter-then-retrieve"),
        ),
        (
            rtf(),
            "retriever: bm25; k: 8; mode: retrieve-then-filter (the top 10 x k searched, the items' own subject "
            "areas); prompt: the pack's; " + KNOWLEDGE,
        ),
        (
            dense("ncbi/MedCPT-Query-Encoder", "ncbi/MedCPT-Article-Encoder"),
            "retriever: dense (ncbi/MedCPT-Query-Encoder + ncbi/MedCPT-Article-Encoder); k: 32; mode: global; "
            "prompt: the pack's; " + KNOWLEDGE,
        ),
        # encoders in local folders: their names only
        (
            dense(f"{PRIVATE}/enc/query-v3", "C:\\Users\\alice\\article-v3"),
            "retriever: dense (query-v3 (local) + article-v3 (local)); k: 32; mode: global; prompt: the pack's; "
            + KNOWLEDGE,
        ),
        # the pack's own retrievals, saved by an earlier run and read again (on Windows too)
        (
            rag_record(retrievals_from="C:\\runs\\alice\\saved.jsonl"),
            PACK_LINE.replace(
                "; prompt",
                "; retrievals file: saved.jsonl (saved by an earlier run of the pack, not retrieved again); prompt",
            ),
        ),
        (
            rag_record(missing_files=["trauma", "pediatrics"]),
            PACK_LINE.replace("abababababab", "abababababab, lacking trauma.json, pediatrics.json"),
        ),
        # a run of an earlier version: no prompt or knowledge digest recorded, nothing made up for them
        (
            {"settings": {"retriever": "bm25", "mode": "global", "k": 32}, "areas": "gold"},
            "retriever: bm25; k: 32; mode: global",
        ),
    ],
)
def test_the_retrieval_line_names_retriever_k_mode_and_file_by_name(record, expected):
    settings = task_settings(config(record))
    assert settings == {"retrieval": expected}
    assert PRIVATE not in repr(settings) and "alice" not in repr(settings) and "sk-secret" not in repr(settings)


def test_a_task_that_does_not_retrieve_has_no_retrieval_line():
    assert task_settings(config(None)) == {}
    assert task_settings({"task": "emsqa_public", "metadata": {"version": 7}}) == {}
    assert task_settings({}) == {}


def _broken(path: tuple[str, ...], value) -> dict:
    record = rag_record()
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return record


@pytest.mark.parametrize(
    "record, message",
    [
        ("bm25", "'metadata.rag' is text, not an object"),
        (_broken(("settings",), None), "'metadata.rag.settings' is null, not an object"),
        (_broken(("settings", "k"), "32"), "'metadata.rag.settings.k' is text, not a whole number of at least 1"),
        (_broken(("settings", "k"), True), "'metadata.rag.settings.k' is true/false, not a whole number"),
        (_broken(("settings", "k"), 0), "'metadata.rag.settings.k' is the number 0, not a whole number"),
        (_broken(("settings", "mode"), ["global"]), "'metadata.rag.settings.mode' is a list, not one of global, "),
        (_broken(("settings", "retriever"), " "), "'metadata.rag.settings.retriever' is empty text, not a name"),
        # a path in a field that must be a name is never echoed
        (_broken(("settings", "mode"), f"{PRIVATE}/x"), "'metadata.rag.settings.mode' is text, not one of"),
        (_broken(("external_retriever",), {"n": 1}), "'metadata.rag.external_retriever' is an object, not a name"),
        (_broken(("retrievals_from",), [PRIVATE]), "'metadata.rag.retrievals_from' is a list, not a file or null"),
        (_broken(("shown", "prompt"), "mine"), "'metadata.rag.shown.prompt' is text, not one of pack, authors"),
        (ftr(areas=7), "'metadata.rag.areas' is the number 7, not \"gold\" or a file"),
    ],
)
def test_a_malformed_record_is_one_line_naming_the_field_never_its_value(record, message):
    with pytest.raises(MedevalDataError) as caught:
        task_settings(config(record))
    text = str(caught.value)
    assert message in text and "\n" not in text and PRIVATE not in text
    assert "Restore it, or run the evaluation again" in text


# --- through the report ------------------------------------------------------------------------------------------


def write_run(folder: Path, stamp: str, record: dict | None, model: str = "org/model", acc: float = 0.5) -> Path:
    """A run of ``emsqa_public_rag`` on 4 items (no samples logged): acc ``acc`` under both readings."""
    folder.mkdir(parents=True, exist_ok=True)
    values = {}
    for reading in ("flexible-extract", "strict-match"):
        for metric in ("acc", "f1", "unparseable", "requested_format"):
            value = acc if metric in ("acc", "f1") else 0.25
            values[f"{metric},{reading}"], values[f"{metric}_stderr,{reading}"] = value, 0.25
    results = {
        "results": {TASK: {"alias": TASK, **values}},
        "versions": {TASK: 7},
        "n-shot": {TASK: 0},
        "n-samples": {TASK: {"original": 4, "effective": 4}},
        "config": {"model": "hf", "model_args": f"pretrained={model}", "limit": None},
        "configs": {TASK: config(record)},
    }
    path = folder / f"results_{stamp}.json"
    path.write_text(json.dumps(results))
    return path


def _read(out: Path, name: str) -> str:
    return (out / name).read_text(encoding="utf-8")


def test_results_card_and_html_say_how_each_run_retrieved(tmp_path):
    write_run(tmp_path / "pack", OLD, rag_record())
    write_run(tmp_path / "external", NEW, external_record(), acc=0.75)
    out = tmp_path / "report"
    build_report([tmp_path / "pack", tmp_path / "external"], out, figures=False, html=True)
    results, card = _read(out, "results.md"), _read(out, "card_section.md")
    assert f"| retrieval, `{TASK}` | {PACK_LINE} |" in results
    assert f"| retrieval, `{TASK}` | {EXTERNAL_LINE} |" in results
    assert f"| retrieval, `{TASK}` | {PACK_LINE} |" in card and f"| retrieval, `{TASK}` | {EXTERNAL_LINE} |" in card
    # the row sits in the "Settings that change scores" table, after the limit and before the versions
    section = results.split("Settings that change scores:")[1]
    rows = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| ")]
    assert rows.index("| limit") < rows.index(f"| retrieval, `{TASK}`") < rows.index("| lm-eval version")
    page = _read(out, "report.html")
    assert "<h3>Settings per task that change its scores</h3>" in page
    assert (
        f"<tr><td><code>{TASK}</code></td><td>retrieval</td><td>retriever: external: my-colbert v2; k: 5; "
        "mode: global; retrievals file: colbert.jsonl; prompt: the authors&#x27;; " in page
    )
    for name in ("results.md", "card_section.md", "report.html", "comparison.md"):
        text = _read(out, name)
        assert PRIVATE not in text and "alice" not in text and "sk-secret" not in text, name


def test_the_comparison_puts_the_retrievals_side_by_side_and_says_they_differ(tmp_path):
    write_run(tmp_path / "pack", OLD, rag_record())
    write_run(tmp_path / "external", NEW, external_record(), acc=0.75)
    out = tmp_path / "report"
    summary = build_report([tmp_path / "pack", tmp_path / "external"], out, figures=False)
    comparison = _read(out, "comparison.md")
    # the console's notes (report.json) say it too
    assert any(f"`{TASK}` was run with different retrieval settings" in note for note in summary["notes"])
    # the model-index (the newest run's numbers) says how they were retrieved, in the dataset's args
    index = yaml.safe_load(_read(out, "model_index.yaml"))
    (entry,) = [r for r in index["model-index"][0]["results"] if r["task"]["name"] == TASK]
    assert entry["dataset"]["args"]["retrieval"] == EXTERNAL_LINE
    first, second = "org/model (2026-03-01T10-00-00)", "org/model (2026-03-02T10-00-00)"
    assert (
        "Settings per task that change its scores:\n\n"
        f"| Task | Setting | {first} | {second} |\n"
        "|---|---|---|---|\n"
        f"| `{TASK}` | retrieval | {PACK_LINE} | {EXTERNAL_LINE} |\n"
    ) in comparison
    assert (
        f"`{TASK}` was run with different retrieval settings (settings per task, above): its scores are not "
        "comparable as if measured the same way"
    ) in comparison
    assert "## Comparison" in _read(out, "results.md") and "was run with different retrieval" in _read(
        out, "results.md"
    )


def test_runs_that_retrieved_alike_are_compared_without_a_note(tmp_path):
    write_run(tmp_path / "a", OLD, rag_record(), model="org/one")
    write_run(tmp_path / "b", NEW, rag_record(retrievals_saved_to=None, knowledge="/elsewhere/kb"), model="org/two")
    out = tmp_path / "report"
    build_report([tmp_path / "a", tmp_path / "b"], out, figures=False)
    comparison = _read(out, "comparison.md")
    assert f"| `{TASK}` | retrieval | {PACK_LINE} | {PACK_LINE} |" in comparison  # where they are kept: no setting
    assert "was run with different" not in comparison


def test_a_run_that_recorded_no_retrieval_is_not_taken_for_the_same(tmp_path):
    """A run of an earlier version (no ``metadata.rag``) beside one that says how it retrieved: "not recorded", and
    the note, not a silent match."""
    write_run(tmp_path / "old", OLD, None)
    write_run(tmp_path / "new", NEW, rag_record())
    comparison = build_comparison(tmp_path, "old", "new")
    assert f"| `{TASK}` | retrieval | not recorded | {PACK_LINE} |" in comparison
    assert f"`{TASK}` was run with different retrieval settings" in comparison


def build_comparison(tmp_path: Path, *folders: str) -> str:
    out = tmp_path / "report"
    build_report([tmp_path / f for f in folders], out, figures=False)
    return _read(out, "comparison.md")


def test_a_run_without_retrieval_tasks_shows_no_retrieval(tmp_path):
    folder = tmp_path / "plain"
    path = write_run(folder, OLD, None)
    results = json.loads(path.read_text())
    results["results"]["emsqa_public"] = results["results"].pop(TASK)
    results["configs"] = {"emsqa_public": {"output_type": "generate_until", "metadata": {"version": 7}}}
    results["versions"] = {"emsqa_public": 7}
    path.write_text(json.dumps(results))
    out = tmp_path / "report"
    build_report([folder], out, figures=False, html=True)
    assert "retrieval" not in _read(out, "results.md").split("Settings that change scores:")[1]
    assert "Settings per task" not in _read(out, "report.html")


def test_two_runs_in_one_folder_that_retrieved_differently_are_both_kept(tmp_path):
    """A re-run into the same --output_path with another retriever (or k) is another evaluation, not a repeat to
    collapse to the newest (the runs' items, without logged samples, look the same)."""
    folder = tmp_path / "out"
    write_run(folder, OLD, rag_record())
    write_run(folder, NEW, external_record())
    notes: list[str] = []
    runs = load_runs([folder], notes)
    assert len(runs) == 2 and notes == []
    assert [run.task_settings()[TASK]["retrieval"] for run in runs] == [PACK_LINE, EXTERNAL_LINE]

    other_k = copy.deepcopy(rag_record())
    other_k["settings"]["k"] = 16
    write_run(folder, NEW, other_k)  # replaces the external run: bm25 at k 32 and at k 16
    assert len(load_runs([folder], [])) == 2

    write_run(folder, NEW, rag_record(retrievals_saved_to=None))  # the same retrieval again: a repeat
    notes = []
    assert len(load_runs([folder], notes)) == 1 and "2 runs with the same settings" in notes[0]


def test_a_malformed_record_stops_the_report_in_one_line_naming_file_task_and_field(tmp_path):
    record = rag_record()
    record["settings"]["k"] = "thirty-two"
    path = write_run(tmp_path / "bad", OLD, record)
    with pytest.raises(MedevalDataError) as caught:
        build_report([tmp_path / "bad"], tmp_path / "report", figures=False)
    text = str(caught.value)
    assert text.startswith(f"{path}: configs.{TASK}: 'metadata.rag.settings.k' is text, not a whole number")
    assert "\n" not in text


def test_the_emsqa_spec_names_its_hook_and_the_hook_is_light():
    """The spec names the hook as "module:function" (resolved by the report); the module imports only the standard
    library and the pack's error (``medeval list`` imports every spec, which must stay light)."""
    import ast

    from medeval_metrics import registry
    from medeval_metrics.emsqa import report_settings

    assert registry.benchmark("emsqa").reporting.task_settings == "medeval_metrics.emsqa.report_settings:task_settings"
    tree = ast.parse(Path(report_settings.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported == {"__future__", "re", "collections.abc", "typing", "medeval_metrics.data"}


# --- real runs -----------------------------------------------------------------------------------------------------

EXTERNAL_NAME = "reversed bm25 (test)"


@pytest.mark.e2e
def test_real_runs_of_the_pack_s_retriever_and_of_an_external_file_are_reported_as_they_retrieved(tmp_path):
    """`medeval run` (scripted model) on ``emsqa_private_rag`` with the pack's bm25 at k 2, saving its retrievals;
    from them, a file of an "external" retriever (the same chunks, each item's order reversed) and a second run
    reading it. The report names each run's retrieval and the file by its name; no folder of the runs reaches it."""
    from conftest import FIXTURES, run_cli

    from medeval_metrics.emsqa.knowledge import KNOWLEDGE_FILES

    synthetic = FIXTURES / "emsqa_synthetic.json"
    items = json.loads(synthetic.read_text(encoding="utf-8"))
    kb = tmp_path / "kb"
    kb.mkdir()
    for stem in KNOWLEDGE_FILES:  # one short section per subject: bm25 finds something for every item
        page = [{f"{stem} basics": f"the {stem} facts every provider learns, with airway and pulse checks first"}]
        (kb / f"{stem}.json").write_text(json.dumps(page), encoding="utf-8")
    golds = {i["question"]: [i["answer"]] if isinstance(i["answer"], str) else i["answer"] for i in items}
    table = tmp_path / "table.json"
    table.write_text(
        json.dumps({"key": "question", "generate": {q: json.dumps({"answer": g}) for q, g in golds.items()}})
    )
    metadata = {
        "emsqa_private_path": str(synthetic),
        "emsqa_knowledge_path": str(kb),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 2,
    }

    def run(out: Path, **more: str) -> None:
        proc = run_cli(
            [
                "run",
                "--tasks",
                "emsqa_private_rag",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={table}",
                "--metadata",
                json.dumps({**metadata, **more}),
                "--output_path",
                str(out),
            ],
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]

    saved = tmp_path / "saved" / "pack-bm25.jsonl"
    saved.parent.mkdir()
    run(tmp_path / "out-pack", rag_save_retrievals=str(saved))
    lines = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[0]
    assert header["k"] == 2 and header["retriever"]["kind"] == "bm25"
    external = tmp_path / "theirs" / "reversed.jsonl"
    external.parent.mkdir()
    own_header = {"medeval_retrievals": 2, "retriever": {"external": EXTERNAL_NAME}}
    rows = [{**own_header, "knowledge": header["knowledge"], "chunking": header["chunking"]}]
    rows += [{"id": line["id"], "chunks": [{"id": c["id"]} for c in reversed(line["chunks"])]} for line in lines[1:]]
    assert len(rows) == 13
    external.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    run(tmp_path / "out-external", rag_retrievals=str(external))

    out = tmp_path / "report"
    build_report([tmp_path / "out-pack", tmp_path / "out-external"], out, figures=False, html=True)
    knowledge = f"knowledge: sha256 {header['knowledge'][:12]}; chunks: 512 tokens, overlap 128"
    pack = f"retriever: bm25; k: 2; mode: global; prompt: the pack's; {knowledge}"
    theirs = (
        f"retriever: external: {EXTERNAL_NAME}; k: 2; mode: global; retrievals file: reversed.jsonl; "
        f"prompt: the pack's; {knowledge}"
    )
    results = _read(out, "results.md")
    assert f"| retrieval, `emsqa_private_rag` | {pack} |" in results
    assert f"| retrieval, `emsqa_private_rag` | {theirs} |" in results
    assert f"| `emsqa_private_rag` | retrieval | {pack} | {theirs} |" in _read(out, "comparison.md")
    assert "`emsqa_private_rag` was run with different retrieval settings" in results
    assert "retriever: external: reversed bm25 (test); k: 2" in _read(out, "report.html")
    for name in ("results.md", "card_section.md", "report.html", "comparison.md"):
        assert str(tmp_path) not in _read(out, name), name
