"""EMSQA with retrieval end to end through real lm-eval.

A prompt-reading scripted model answers an item right only when the item's planted knowledge section
is in its prompt, so the scores prove that retrieval reaches the model and changes the result; a run
with a precomputed-retrievals file reproduces a run's scores without retrieving; the documented
command runs with the tiny model on the real knowledge-base copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURES, find_results, run_cli
from test_emsqa_rag import make_kb, planted_text

pytestmark = pytest.mark.e2e
SYNTHETIC = FIXTURES / "emsqa_synthetic.json"
ITEMS = json.loads(SYNTHETIC.read_text())
METRICS = ("acc", "f1", "unparseable", "retrieved_own_area", "retrieved_documents", "prompt_too_long")


def one_reading(samples):
    """lm-eval logs each item once per filter (strict-match, flexible-extract): the items once, the headline's."""
    return [s for s in samples if s["filter"] == "flexible-extract"]


def gold(item):
    return [item["answer"]] if isinstance(item["answer"], str) else item["answer"]


def prompt_reading_model():
    from medeval_metrics.testing.scripted import ScriptedLM

    class PromptReadingLM(ScriptedLM):
        """Right answer when the item's planted section is in the prompt, a wrong one otherwise."""

        def generate_until(self, requests, disable_tqdm=False):
            self.requests_seen.extend(requests)
            outputs = []
            for request in requests:
                index = next(i for i, item in enumerate(ITEMS) if item["question"] == request.doc["question"])
                wrong = next(c[0] for c in ITEMS[index]["choices"] if c[0] not in gold(ITEMS[index]))
                letters = gold(ITEMS[index]) if planted_text(index) in request.args[0] else [wrong]
                outputs.append("Using the documents.\n" + json.dumps({"answer": letters}))
            return outputs

    return PromptReadingLM()


def evaluate(task, metadata):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path

    manager = TaskManager(
        include_defaults=False, include_path=tasks_path(), metadata={"emsqa_private_path": str(SYNTHETIC), **metadata}
    )
    model = prompt_reading_model()
    results = lm_eval.simple_evaluate(model=model, tasks=[task], task_manager=manager, log_samples=True)
    return results, model


def metrics_of(results, task):
    return {m: results["results"][task][f"{m},flexible-extract"] for m in METRICS}


def test_retrieval_reaches_the_model_and_changes_the_score(tmp_path):
    base = {"rag_cache_dir": str(tmp_path / "cache"), "rag_k": 2}
    planted = make_kb(tmp_path / "kb", ITEMS, wrong_area_for={5, 9})  # items 5 and 9: fact in terminology
    bare = make_kb(tmp_path / "kb-bare", ITEMS, plant=False)

    results, model = evaluate("emsqa_private_expertrag_ftr", {**base, "emsqa_knowledge_path": str(planted)})
    ftr = metrics_of(results, "emsqa_private_expertrag_ftr")
    assert ftr["acc"] == pytest.approx(10 / 12)  # filtering keeps items 5 and 9 from their facts
    # bm25 returns only chunks sharing a term with the question: each item's planted section (the only
    # match in its file) for 9 items; items 5 and 7 also match a filler section ("patient", "resources");
    # item 9 (its fact moved away) matches nothing in its file: 0 documents, counted 0 own-area share.
    assert ftr["retrieved_documents"] == pytest.approx((9 * 1 + 2 + 2 + 0) / 12)
    assert ftr["retrieved_own_area"] == pytest.approx(11 / 12) and ftr["unparseable"] == 0.0
    prompt = model.requests_seen[0].args[0]
    assert prompt.index("Question:") < prompt.index("Relevant documents:") < prompt.index("One or more options")

    results, _ = evaluate("emsqa_private_rag", {**base, "emsqa_knowledge_path": str(bare)})
    assert metrics_of(results, "emsqa_private_rag")["acc"] == 0.0  # nothing to find: every answer wrong
    results, _ = evaluate("emsqa_private_rag", {**base, "emsqa_knowledge_path": str(planted)})
    assert metrics_of(results, "emsqa_private_rag")["acc"] == 1.0  # global retrieval reaches terminology too

    # The samples show which chunks each item got; the config records settings, retriever and corpus.
    samples = results["samples"]["emsqa_private_rag"]
    chunks = samples[5]["doc"]["rag_chunks"]
    assert chunks[0]["id"].startswith("terminology_") and chunks[0]["score"] > 0
    assert all(set(c) == {"id", "source", "score"} for s in samples for c in s["doc"]["rag_chunks"])
    recorded = results["configs"]["emsqa_private_rag"]["metadata"]["rag"]
    assert recorded["settings"] == {
        "retriever": "bm25",
        "mode": "global",
        "k": 2,
        "chunk_tokens": 512,
        "chunk_overlap": 128,
        "chunk_tokenizer": "basic",
    }
    assert len(recorded["corpus_version"]) == 64 and recorded["files"]["trauma"]
    assert recorded["index_from_cache"] is True  # built by the ftr run above: same corpus and settings


def test_precomputed_retrievals_give_identical_scores_without_retrieving(tmp_path, monkeypatch):
    metadata = {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS, wrong_area_for={3})),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 3,
    }
    saved = tmp_path / "retrievals.jsonl"
    first, first_model = evaluate("emsqa_private_expertrag_rtf", {**metadata, "rag_save_retrievals": str(saved)})
    assert 0 < metrics_of(first, "emsqa_private_expertrag_rtf")["acc"] < 1

    def no_retrieval(*args, **kwargs):
        raise AssertionError("retrieved although precomputed retrievals were given")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.prepare", no_retrieval)
    samples_file = tmp_path / "samples_emsqa_private_expertrag_rtf.jsonl"
    samples_file.write_text(
        "\n".join(json.dumps(s, default=str) for s in first["samples"]["emsqa_private_expertrag_rtf"])
    )
    for source in (saved, samples_file):
        fresh_cache = str(tmp_path / f"cache-{source.name}")  # no cached retrievals to fall back on
        second, second_model = evaluate(
            "emsqa_private_expertrag_rtf", {**metadata, "rag_retrievals": str(source), "rag_cache_dir": fresh_cache}
        )
        assert metrics_of(second, "emsqa_private_expertrag_rtf") == metrics_of(first, "emsqa_private_expertrag_rtf")
        assert [r.args[0] for r in second_model.requests_seen] == [r.args[0] for r in first_model.requests_seen]
        assert second["configs"]["emsqa_private_expertrag_rtf"]["metadata"]["rag"]["retrievals_from"] == str(source)


def test_two_processes_build_the_index_once(tmp_path):
    folder = make_kb(tmp_path / "kb", ITEMS)
    script = textwrap.dedent(f"""
        import time
        from medeval_metrics.emsqa.retrieval import RetrievalSettings, open_index
        from medeval_metrics.emsqa.rag import knowledge_files
        import medeval_metrics.emsqa.retrieval.index as ix
        import medeval_metrics.emsqa.retrieval.retrievers as r
        build, chunk = r.BM25Retriever.build, ix.chunk_corpus
        def slow_build(self, chunks, folder):
            print("indexing")
            time.sleep(1.0)
            build(self, chunks, folder)
        def slow_chunk(*args):
            print("chunking")
            time.sleep(1.0)
            return chunk(*args)
        r.BM25Retriever.build, ix.chunk_corpus = slow_build, slow_chunk
        files, _ = knowledge_files({{"emsqa_knowledge_path": {str(folder)!r}}})
        index = open_index(files, RetrievalSettings(k=2), {str(tmp_path / "cache")!r}, "kb", "fix")
        print("chunks", len(index.chunks), index.retrieve(["shock"], None))
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]
    lines = [line for out, _ in outputs for line in out.splitlines()]
    assert lines.count("chunking") == 1 and lines.count("indexing") == 1  # each part built by one process
    finals = [line for line in lines if line.startswith("chunks ")]
    assert len(finals) == 2 and finals[0] == finals[1]  # and both processes search the same index


def test_documented_command_on_the_real_knowledge_base(tmp_path, tiny_model, shared_data):
    """The issue's "done when": medeval run ... emsqa_public_expertrag_rtf offline on the shared copy;
    the samples show the chunks; a second run from the retrievals file gives identical scores."""
    saved = tmp_path / "retrievals.jsonl"
    common = [
        "run",
        "--tasks",
        "emsqa_public_expertrag_rtf",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={tiny_model}",
        "--limit",
        "5",
        "--device",
        "cpu",
        "--batch_size",
        "5",
        "--gen_kwargs",
        "max_gen_toks=8",
        "--log_samples",
    ]
    metadata = {
        "emsqa_public_path": str(shared_data / "emsqa"),
        "emsqa_knowledge_path": str(shared_data / "emsqa" / "knowledge"),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 4,
    }
    first = run_cli(
        [
            *common,
            "--metadata",
            json.dumps({**metadata, "rag_save_retrievals": str(saved)}),
            "--output_path",
            str(tmp_path / "a"),
        ],
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert "lacks ems_operations.json" in first.stderr
    results_a, samples_a = find_results(tmp_path / "a")
    logged = samples_a["emsqa_public_expertrag_rtf"]
    assert [s["filter"] for s in logged] == ["strict-match"] * 5 + ["flexible-extract"] * 5  # once per reading
    docs = [s["doc"] for s in logged if s["filter"] == "flexible-extract"]
    assert len(docs) == 5 and all(c["id"] and isinstance(c["score"], float) for d in docs for c in d["rag_chunks"])
    assert all({c["source"] for c in d["rag_chunks"]} <= set(d["rag_sources"]) for d in docs)
    # retrieved for the 5 items the run reached, not the 3,721 of the set: the record and the file say 5
    shown = results_a["configs"]["emsqa_public_expertrag_rtf"]["metadata"]["rag"]["shown"]
    assert shown["items"] == 5 and len(saved.read_text().splitlines()) == 1 + 5
    # item 1's only area is ems_operations, whose file the shared copy lacks: one console line says so
    assert shown["no_documents"] == {"items": 1, "share": 0.2}
    assert [line for line in first.stderr.splitlines() if "got no documents" in line] == [
        "medeval: emsqa_public_expertrag_rtf: 1 of 5 items (20.0%) got no documents (mode retrieve_then_filter, "
        "k 4); the metric no_documents is their share"
    ]
    # The prompt length, counted when the item is scored, is the whole prompt's as lm-eval sent it.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    for sample in samples_a["emsqa_public_expertrag_rtf"]:
        whole = len(tokenizer(sample["arguments"]["gen_args_0"]["arg_0"])["input_ids"])
        assert sample["doc"]["prompt_tokens"] == whole
    assert results_a["configs"]["emsqa_public_expertrag_rtf"]["metadata"]["rag"]["seconds"]["prompt_length"] > 0
    for sample in samples_a["emsqa_public_expertrag_rtf"]:  # scored with the budget lm-eval used: max_gen_toks=8
        doc = sample["doc"]
        assert sample["prompt_too_long"] == float(doc["prompt_tokens"] + 8 > doc["context_limit"])
        assert doc["fits_context"] is (doc["prompt_tokens"] + 8 <= doc["context_limit"])  # the logged doc agrees
    # Breakdowns by level and subject area, as for the other EMSQA variants.
    breakdown = json.loads(next((tmp_path / "a").rglob("medeval_breakdowns.json")).read_text())
    by_area = breakdown["emsqa_public_expertrag_rtf"]["flexible-extract"]["subject_area"]
    assert (
        sum(v["acc"]["n"] for v in by_area.values()) >= 5
        and "level" in breakdown["emsqa_public_expertrag_rtf"]["flexible-extract"]
    )
    second = run_cli(
        [
            *common,
            "--metadata",
            json.dumps({**metadata, "rag_retrievals": str(saved), "rag_cache_dir": str(tmp_path / "cache-b")}),
            "--output_path",
            str(tmp_path / "b"),
        ],
        cwd=tmp_path,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    results_b, samples_b = find_results(tmp_path / "b")
    task = "emsqa_public_expertrag_rtf"
    scores = lambda r: {k: v for k, v in r["results"][task].items() if "," in k}
    assert scores(results_b) == scores(results_a)
    assert [s["arguments"] for s in samples_b[task]] == [s["arguments"] for s in samples_a[task]]
    config_b = results_b["configs"][task]["metadata"]["rag"]
    assert config_b["retrievals_from"] == str(saved) and config_b["settings"]["mode"] == "retrieve_then_filter"
    assert config_b["missing_files"] == ["ems_operations"]
    assert "prompt_too_long" in results_a["results"][task].__repr__()


PUBLIC_RAG_TASKS = [
    "emsqa_public_rag",
    "emsqa_public_rag_expert_cot",
    "emsqa_public_expertrag_ftr",
    "emsqa_public_expertrag_rtf",
]


def evaluate_public(tasks, metadata, folder, **kwargs):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path

    folder.mkdir(exist_ok=True)
    (folder / "test_open.json").write_text(json.dumps(ITEMS))
    manager = TaskManager(
        include_defaults=False, include_path=tasks_path(), metadata={"emsqa_public_path": str(folder), **metadata}
    )
    model = prompt_reading_model()
    results = lm_eval.simple_evaluate(model=model, tasks=tasks, task_manager=manager, log_samples=True, **kwargs)
    return results, model


def test_the_four_public_rag_tasks_save_one_file_and_get_their_prompts_back(tmp_path, monkeypatch):
    """The issue's "done when": one run of the four public RAG tasks saves their retrievals; given back,
    every task's prompts are the same, and its scores (the old single-section file gave one task of four)."""
    metadata = {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS, wrong_area_for={3, 5})),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 2,
    }
    saved = tmp_path / "retrievals.jsonl"
    first, _ = evaluate_public(PUBLIC_RAG_TASKS, {**metadata, "rag_save_retrievals": str(saved)}, tmp_path / "data")
    prompts = {t: [s["arguments"][0][0] for s in first["samples"][t]] for t in PUBLIC_RAG_TASKS}
    assert prompts["emsqa_public_rag_expert_cot"] != prompts["emsqa_public_expertrag_ftr"]

    def no_retrieval(*args, **kwargs):
        raise AssertionError("retrieved although precomputed retrievals were given")

    monkeypatch.setattr("medeval_metrics.emsqa.retrieval.retrievers.BM25Retriever.prepare", no_retrieval)
    second, _ = evaluate_public(
        PUBLIC_RAG_TASKS,
        {**metadata, "rag_retrievals": str(saved), "rag_cache_dir": str(tmp_path / "cold")},
        tmp_path / "data",
    )
    for task in PUBLIC_RAG_TASKS:
        assert [s["arguments"][0][0] for s in second["samples"][task]] == prompts[task], task
        assert second["results"][task] == first["results"][task] or {
            k: v for k, v in second["results"][task].items() if "," in k
        } == {k: v for k, v in first["results"][task].items() if "," in k}
        rag = second["configs"][task]["metadata"]["rag"]
        assert rag["retrievals_from"] == str(saved) and rag["retrievals"]["task"] == task
    # the ftr run shows no document to item 7 only if its area file lacks a match; the count is recorded
    ftr = first["configs"]["emsqa_public_expertrag_ftr"]["metadata"]["rag"]["shown"]
    share = first["results"]["emsqa_public_expertrag_ftr"]["no_documents,flexible-extract"]
    assert ftr["no_documents"]["share"] == pytest.approx(share, abs=1e-4)


def test_the_authors_prompt_sends_their_system_message(tmp_path):
    metadata = {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 2,
        "rag_prompt": "authors",
    }
    results, model = evaluate_public(["emsqa_public_expertrag_ftr"], metadata, tmp_path / "data")
    prompt = model.requests_seen[1].args[0]  # no chat template: system text, then the user text
    areas = str(ITEMS[1]["category"])
    assert prompt.startswith(
        "You are a helpful EMS expert, and your task is to answer a multi-choice ems question "
        "at the requested certification depth"
    )
    assert f"from the standpoint of {areas} and then choose" in prompt
    assert (
        "JSON schema provided.\n\nCertification Level: ['emt']" in prompt
        or "JSON schema provided.\n\nCertification Level: [" in prompt
    )
    authors = results["results"]["emsqa_public_expertrag_ftr"]
    assert authors["acc,flexible-extract"] == 1.0  # documents reach it
    # their Expert-CoT template asks for a JSON list; the model wrote the CoT object: not the requested format
    assert authors["requested_format,strict-match"] == 0.0 and authors["acc,strict-match"] == 0.0
    pack, pack_model = evaluate_public(
        ["emsqa_public_expertrag_ftr"], {**metadata, "rag_prompt": "pack"}, tmp_path / "data"
    )
    assert pack_model.requests_seen[1].args[0].startswith("You are a certified ")  # no system message
    pack = pack["results"]["emsqa_public_expertrag_ftr"]
    assert pack["requested_format,strict-match"] == 1.0 and pack["acc,strict-match"] == 1.0  # the pack's asks for it


def test_a_private_rag_run_retrieves_only_its_items_and_its_examples_show_no_documents(tmp_path, monkeypatch):
    """The private set is its own few-shot pool: lm-eval lists the pool when it builds the task, which must
    not retrieve for every item; an example shows no documents (as the public validation examples) and is
    never the evaluated item itself."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.emsqa.retrieval.retrievers import BM25Retriever

    queries = []
    real_prepare = BM25Retriever.prepare
    monkeypatch.setattr(BM25Retriever, "prepare", lambda self, q: queries.extend(q) or real_prepare(self, q))
    metadata = {
        "emsqa_private_path": str(SYNTHETIC),
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "rag_k": 2,
    }
    manager = TaskManager(include_defaults=False, include_path=tasks_path(), metadata=metadata)
    model = prompt_reading_model()
    results = lm_eval.simple_evaluate(
        model=model, tasks=["emsqa_private_rag"], task_manager=manager, limit=3, num_fewshot=1, log_samples=True
    )
    assert queries == [item["question"] for item in ITEMS[:3]]
    assert results["configs"]["emsqa_private_rag"]["metadata"]["rag"]["shown"]["items"] == 3
    for request in model.requests_seen:
        prompt, index = request.args[0], ITEMS.index(next(i for i in ITEMS if i["question"] == request.doc["question"]))
        assert prompt.count("Relevant documents:") == 1  # the item's own block; the example has none
        example = 1 if index == 0 else 0  # first_n, the evaluated item left out
        own, shown = f"Question: {ITEMS[index]['question']}", f"Question: {ITEMS[example]['question']}"
        assert prompt.count(own) == 1 and prompt.index(shown) < prompt.index(own)


def test_lm_eval_s_scored_prompts_are_counted_in_one_tokenizer_call(tmp_path, monkeypatch, tiny_model):
    """Through lm-eval: a --limit 4 run tokenizes its 4 prompts in one call when the first is scored, and a
    --samples run counts the items it scores, not the others it iterates past (it retrieves for all)."""
    from medeval_metrics.context_fit import ContextFit

    calls = []
    tokenize = ContextFit._tokenize
    monkeypatch.setattr(ContextFit, "_tokenize", lambda self, texts: calls.append(len(texts)) or tokenize(self, texts))
    metadata = {
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS)),
        "rag_cache_dir": str(tmp_path / "cache"),
        "pretrained": str(tiny_model),  # as lm-eval merges --model_args into the metadata: counted with its tokenizer
    }
    limited, _ = evaluate_public(["emsqa_public_rag"], metadata, tmp_path / "data", limit=4)
    assert calls == [4] and all(s["doc"]["prompt_tokens"] > 0 for s in limited["samples"]["emsqa_public_rag"])
    calls.clear()
    picked, _ = evaluate_public(
        ["emsqa_public_rag"], {**metadata, "rag_cache_dir": str(tmp_path / "cache-2")}, tmp_path / "data",
        samples={"emsqa_public_rag": [5, 7]},
    )  # fmt: skip
    assert [s["doc"]["question"] for s in one_reading(picked["samples"]["emsqa_public_rag"])] == [
        ITEMS[i]["question"] for i in (5, 7)
    ]
    # the two scored, and at most item 0, whose prompt lm-eval renders once to check the task: not all of them
    assert len(calls) == 1 and 2 <= calls[0] <= 3 < len(ITEMS)


def public_rag_manager(tmp_path, user_tasks=None, **metadata):
    """A TaskManager of the pack's tasks (and a folder of a user's own) with the synthetic items as the public set
    and a planted knowledge base."""
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path

    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "test_open.json").write_text(json.dumps(ITEMS))
    metadata = {
        "emsqa_public_path": str(folder),
        "emsqa_knowledge_path": str(make_kb(tmp_path / "kb", ITEMS)),
        "rag_cache_dir": str(tmp_path / "cache"),
        **metadata,
    }
    paths = [tasks_path(), *([str(user_tasks)] if user_tasks else [])]
    return TaskManager(include_defaults=False, include_path=paths, metadata=metadata)


def test_prompts_are_counted_with_the_tokenizer_the_tasks_metadata_names(tmp_path, monkeypatch, tiny_model):
    """The model settings lm-eval's command line merges into every task's metadata (``--model_args
    pretrained=...,max_length=900``) name the tokenizer (loaded once per process and settings) and the limit;
    the counts equal what lm-eval's HF backend encodes, against the budget lm-eval generated with
    (``--gen_kwargs``, read from the task when the items are scored), with or without a chat template. A model
    object handed to ``simple_evaluate`` with nothing naming it in the metadata: a labelled estimate."""
    import lm_eval
    import transformers
    from lm_eval.models.huggingface import HFLM

    from medeval_metrics.emsqa.rag import doc_to_text_rag_cot

    lm = HFLM(pretrained=str(tiny_model), device="cpu", batch_size=4, max_length=900)
    named = tmp_path / "named"
    named.mkdir()
    manager = public_rag_manager(named, pretrained=str(tiny_model), max_length=900)
    results = lm_eval.simple_evaluate(
        model=lm, tasks=["emsqa_public_rag"], task_manager=manager, limit=3, log_samples=True,
        gen_kwargs="max_gen_toks=4",
    )  # fmt: skip
    record = results["configs"]["emsqa_public_rag"]["metadata"]["rag"]
    # the budget lm-eval generated with (--gen_kwargs), not the YAML's 1,024
    assert record["prompt_length"] == f"tokenizer {tiny_model.name}, limit 900 incl. 4 generated"
    samples = one_reading(results["samples"]["emsqa_public_rag"])
    assert len(samples) == 3
    for sample in samples:
        doc = sample["doc"]
        expected = len(lm.tok_encode(doc["rag_system"] + doc_to_text_rag_cot(doc)))  # as lm-eval encodes it
        assert (doc["prompt_tokens"], doc["context_limit"]) == (expected, 900)
        assert sample["prompt_too_long"] == float(expected + 4 > 900)

    def no_second_load(*args, **kwargs):
        raise AssertionError("the tokenizer was loaded again")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", no_second_load)
    import shutil

    from medeval_metrics import context_fit

    context_fit._KNOWN.clear(), context_fit._PENDING.clear()
    shutil.rmtree(named / "cache" / "token_counts", ignore_errors=True)
    chat = lm_eval.simple_evaluate(
        model=lm, tasks=["emsqa_public_rag"], task_manager=manager, limit=3, log_samples=True,
        gen_kwargs="max_gen_toks=4", apply_chat_template=True,
    )  # fmt: skip
    docs = [sample["doc"] for sample in chat["samples"]["emsqa_public_rag"]]
    assert [d["prompt_tokens"] for d in docs] == [
        len(lm.tok_encode(d["rag_system"] + doc_to_text_rag_cot(d))) for d in docs
    ]

    unnamed = tmp_path / "unnamed"
    unnamed.mkdir()
    estimated = lm_eval.simple_evaluate(
        model=lm, tasks=["emsqa_public_rag"], task_manager=public_rag_manager(unnamed), limit=3, log_samples=True,
        gen_kwargs="max_gen_toks=4",
    )  # fmt: skip
    record = estimated["configs"]["emsqa_public_rag"]["metadata"]["rag"]
    assert record["prompt_length"].startswith("estimate: characters/4 against max_length 2048")
    for sample in estimated["samples"]["emsqa_public_rag"]:
        doc = sample["doc"]
        prompt = doc["rag_system"] + doc_to_text_rag_cot(doc)
        assert (doc["prompt_tokens"], doc["context_limit"]) == ((len(prompt) + 3) // 4, 2048)


def test_a_task_dict_evaluated_twice_counts_with_the_settings_its_task_holds(tmp_path, tiny_model):
    """lm-eval's ``evaluate`` called twice with the same tasks (a sweep in one process) after the model settings
    in the task's metadata changed (``max_length`` 1,024, then 64): the RAG split keeps its docs, so each run's
    counts must come from the settings the task held when it was scored, and each run's logged samples keep their
    own. (The model object given to ``evaluate`` is not read: the settings are the task's.)"""
    from lm_eval import evaluator
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import get_task_dict

    task_dict = get_task_dict(["emsqa_public_rag"], public_rag_manager(tmp_path, rag_k=1, pretrained=str(tiny_model)))
    task = task_dict["emsqa_public_rag"]
    task._config.generation_kwargs["max_gen_toks"] = 4  # as --gen_kwargs does
    outs = []
    for max_length in (1024, 64):
        task._config.metadata["max_length"] = max_length  # as --model_args max_length=N puts it there
        lm = HFLM(pretrained=str(tiny_model), device="cpu", batch_size=4, max_length=max_length)
        out = evaluator.evaluate(lm, task_dict, limit=2, log_samples=True)
        docs = [s["doc"] for s in out["samples"]["emsqa_public_rag"]]
        assert all(d["prompt_tokens"] + 4 > 64 for d in docs)  # the prompts fit 1,024, not 64
        assert out["configs"]["emsqa_public_rag"]["metadata"]["rag"]["prompt_length"].endswith(
            f"limit {max_length} incl. 4 generated"
        )
        outs.append(out)
    # read after both runs: each run's logged samples keep their own counts (the second run rewrote the first's docs)
    seen = [
        (
            [s["doc"]["context_limit"] for s in one_reading(out["samples"]["emsqa_public_rag"])],
            out["results"]["emsqa_public_rag"]["prompt_too_long,flexible-extract"],
        )
        for out in outs
    ]
    assert seen == [([1024, 1024], 0.0), ([64, 64], 1.0)]


def test_a_users_task_over_the_packs_counts_its_own_prompt(tmp_path, tiny_model):
    """A user's YAML including the pack's RAG task with its own name and ``doc_to_text`` (a Jinja template): the
    count is of the prompt lm-eval renders, system message included (the pack's prompt was counted before)."""
    from lm_eval import evaluator
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import get_task_dict

    from medeval_metrics import tasks_path

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "mine.yaml").write_text(
        f"include: {Path(tasks_path()) / 'emsqa' / 'emsqa_public_rag.yaml'}\ntask: my_rag\n"
        'doc_to_text: "{{rag_context}}\\n\\nQ: {{question}}\\nA:"\n'
    )
    # pretrained and max_length as lm-eval's command line merges --model_args into every task's metadata
    manager = public_rag_manager(tmp_path, user_tasks=mine, rag_k=1, pretrained=str(tiny_model), max_length=1024)
    task_dict = get_task_dict(["my_rag"], manager)
    task_dict["my_rag"]._config.generation_kwargs["max_gen_toks"] = 4  # as --gen_kwargs does
    lm = HFLM(pretrained=str(tiny_model), device="cpu", batch_size=4, max_length=1024)
    out = evaluator.evaluate(lm, task_dict, limit=2, log_samples=True)
    for sample in out["samples"]["my_rag"]:
        prompt, doc = sample["arguments"][0][0], sample["doc"]
        assert prompt.endswith(f"Q: {doc['question']}\nA:") and doc["rag_counter"] == "my_rag"
        assert doc["prompt_tokens"] == len(lm.tok_encode(prompt))
