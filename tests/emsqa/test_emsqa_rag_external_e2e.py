"""Your own retriever on EMSQA, end to end (issue 31): the header printed by `medeval emsqa-retrievals-header`,
a retrievals file written by hand from the chunks it wrote, and a run through lm-eval and `medeval run` whose
prompts show exactly those documents, in that order, whose scores follow them, and whose results name the
retriever as external. An item the file lacks stops the run before the model is asked anything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES, find_results, run_cli
from test_emsqa_rag import make_kb
from test_emsqa_rag_e2e import prompt_reading_model  # the same items (the synthetic set), the same oracle

pytestmark = pytest.mark.e2e
SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
ITEMS = json.loads(SYNTHETIC.read_text())
NAME = "hand-picked (test oracle)"
TASK = "emsqa_private_rag"


def gold(item):
    return [item["answer"]] if isinstance(item["answer"], str) else item["answer"]


def header_and_chunks(tmp_path, metadata):
    """What a user runs first: the header to copy and the chunks to search, from the documented command."""
    chunks_file = tmp_path / "chunks.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "medeval_metrics.cli",
            "emsqa-retrievals-header",
            "--name",
            NAME,
            "--metadata",
            json.dumps(metadata),
            "--chunks",
            str(chunks_file),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    chunks = [json.loads(line) for line in chunks_file.read_text(encoding="utf-8").splitlines()]
    return proc.stdout.strip(), {c["title"]: c for c in chunks}


def picked(by_title, index):
    """Even items: a filler section, then their own planted fact; odd items: the next item's fact first, then a
    filler section (no fact of their own): the model can answer only the even ones."""
    filler = by_title["Scene safety"]
    if index % 2 == 0:
        return [filler, by_title[f"Fact {index}"]]
    return [by_title[f"Fact {(index + 1) % 12}"], filler]


def write_file(path, header_line, by_title, drop=()):
    lines = [header_line]
    for index in range(12):
        if index not in drop:
            chunks = [{"id": c["id"]} for c in picked(by_title, index)]
            lines.append(json.dumps({"id": str(index), "chunks": chunks}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def block(by_title, index):
    return "Relevant documents:\n" + "\n".join(f"- {c['title']}: {c['text']}" for c in picked(by_title, index))


@pytest.fixture
def setup(tmp_path):
    metadata = {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 2,
    }
    header_line, by_title = header_and_chunks(tmp_path, metadata)
    return metadata, header_line, by_title


def test_an_external_file_reaches_the_model_as_given_through_lm_eval(setup, tmp_path, monkeypatch):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path

    metadata, header_line, by_title = setup
    path = write_file(tmp_path / "mine.jsonl", header_line, by_title)

    def no_retrieval(*args, **kwargs):
        raise AssertionError("retrieved although an external retrievals file was given")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.prepare", no_retrieval)
    manager = TaskManager(
        include_defaults=False,
        include_path=tasks_path(),
        metadata={"emsqa_private_path": str(SYNTHETIC), **metadata, "rag_retrievals": str(path)},
    )
    model = prompt_reading_model()
    results = lm_eval.simple_evaluate(model=model, tasks=[TASK], task_manager=manager, log_samples=True)

    prompts = {r.doc["question"]: r.args[0] for r in model.requests_seen}
    assert len(prompts) == 12
    for index, item in enumerate(ITEMS):
        assert prompts[item["question"]].startswith(block(by_title, index) + "\n\n"), index  # CoT: documents first
    accuracies = {k: v for k, v in results["results"][TASK].items() if k.startswith("acc,") and "stderr" not in k}
    assert accuracies and all(v == pytest.approx(6 / 12) for v in accuracies.values()), accuracies
    recorded = results["configs"][TASK]["metadata"]["rag"]
    assert recorded["external_retriever"] == NAME and recorded["shown"]["retriever"] == f"external: {NAME}"
    assert recorded["retrievals"]["retriever"] == {"external": NAME} and recorded["retrievals_from"] == str(path)
    assert recorded["retrievals"]["knowledge"] == json.loads(header_line)["knowledge"]
    sample = results["samples"][TASK][0]["doc"]
    assert [c["id"] for c in sample["rag_chunks"]] == [c["id"] for c in picked(by_title, 0)]
    assert all(c["score"] is None for c in sample["rag_chunks"])  # the file gave none


def test_medeval_run_with_an_external_file_and_with_an_item_missing(setup, tmp_path):
    metadata, header_line, by_title = setup
    table = {"key": "question", "generate": {i["question"]: json.dumps({"answer": gold(i)}) for i in ITEMS}}
    (tmp_path / "table.json").write_text(json.dumps(table))

    def run(path, out):
        asked = out.with_name(out.name + "-asked")  # the scripted model writes here each item it answers
        return run_cli(
            [
                "run",
                "--tasks",
                TASK,
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={tmp_path / 'table.json'},record={asked}",
                "--metadata",
                json.dumps({"emsqa_private_path": str(SYNTHETIC), **metadata, "rag_retrievals": str(path)}),
                "--output_path",
                str(out),
                "--log_samples",
            ],
            cwd=tmp_path,
        )

    proc = run(write_file(tmp_path / "mine.jsonl", header_line, by_title), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = find_results(tmp_path / "out")
    assert results["configs"][TASK]["metadata"]["rag"]["external_retriever"] == NAME
    for sample in samples[TASK]:
        index = int(sample["doc"]["id"])
        assert sample["arguments"]["gen_args_0"]["arg_0"].startswith(block(by_title, index) + "\n\n")

    missing = run(write_file(tmp_path / "short.jsonl", header_line, by_title, drop={7}), tmp_path / "out-short")
    assert missing.returncode != 0
    lines = [line for line in missing.stderr.splitlines() if "has no entry" in line]
    assert len(lines) == 1 and "EMSQA item '7' has no entry in the precomputed-retrievals file" in lines[0]
    assert str(tmp_path / "short.jsonl") in lines[0] and "Traceback" not in missing.stderr
    assert not list((tmp_path / "out-short").rglob("results_*.json"))
    assert (tmp_path / "out-asked").is_dir() and not (tmp_path / "out-short-asked").exists()  # never asked
