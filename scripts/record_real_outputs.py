"""Record a small real model's outputs on a fixed small sample of the generative tasks.

Runs the pack's own path (``medeval run ... --log_samples``, greedy, CPU, one thread) and writes one JSON
Lines row per output: the raw model text, the item, the task and prompt variant, the generation
settings. Hand labels already in the files (``label``, ``label_reason``, ``ambiguous``) are kept for a
row whose output text is unchanged, so the corpus can be regenerated without losing them; a changed
output loses its label (it must be read again).

    python scripts/record_real_outputs.py [--model smollm2-135m-instruct|gemma3-270m]
        [--only emsqa|medicationqa|emrqa] [--model-dir DIR]

SmolLM2-135M-Instruct (the default): every benchmark, the first N public EMSQA test items (about 40
minutes on two busy cores). Gemma-3-270M, a base model whose GGUF has no chat template: EMSQA only,
without a chat template, on GEMMA_DRAW (a seeded sample of public test items that no earlier corpus or
reference run used). Needs the real public data in ../shared/data (EMSQA test/validation and knowledge,
MedicationQA) and the emrQA templates for the synthetic notes.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
CORPORA = {
    "emsqa": REPO / "tests" / "emsqa" / "data" / "smollm2_outputs.jsonl",
    "emsqa-gemma3-270m": REPO / "tests" / "emsqa" / "data" / "gemma3_outputs.jsonl",
    "medicationqa": REPO / "tests" / "medicationqa" / "data" / "smollm2_outputs.jsonl",
    "emrqa": REPO / "tests" / "emrqa" / "data" / "smollm2_outputs.jsonl",
    "judge": REPO / "tests" / "core" / "data" / "smollm2_judge_replies.jsonl",
}
MEDICATIONQA_LIMIT, EMRQA_LIMIT = 10, 8
EMSQA_GEN = "max_gen_toks=128"  # CoT's 1,024 would take hours on two shared cores
MEDICATIONQA_GEN = "max_gen_toks=128"
EMSQA_TASKS = ("emsqa_public", "emsqa_public_cot", "emsqa_public_expert_cot", "emsqa_public_rag")
EMRQA_TASKS = ("emrqa_medication", "emrqa_emrql_1", "emrqa_smoking")
JUDGE_MAX_TOKENS = 160
REUSE = False  # --reuse: a run whose output folder (--work-dir) already holds results is read, not run again


def medeval_run(
    model_dir: Path,
    tasks: list[str],
    out: Path,
    limit: int,
    chat: bool,
    metadata: dict,
    gen_kwargs: str | None = None,
    fewshot: int | None = None,
    items: list[int] | None = None,
) -> tuple[list[str], float]:
    cmd = [
        str(Path(sys.executable).parent / "medeval"),
        "run",
        "--tasks",
        ",".join(tasks),
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model_dir},dtype=float32",
        "--device",
        "cpu",
        "--batch_size",
        "8",
        *(["--samples", json.dumps({t: items for t in tasks})] if items else ["--limit", str(limit)]),
        "--output_path",
        str(out),
        "--log_samples",
        "--metadata",
        json.dumps(metadata),
    ]
    if chat:
        cmd.append("--apply_chat_template")
    if gen_kwargs:
        cmd += ["--gen_kwargs", gen_kwargs]
    if fewshot:
        cmd += ["--num_fewshot", str(fewshot)]
    if REUSE and list(out.glob("**/results_*.json")):
        print(f"  reusing the finished run in {out}", flush=True)
        seconds = out.with_suffix(".seconds")
        return cmd, json.loads(seconds.read_text()) if seconds.exists() else 0
    start = time.time()
    print("$", " ".join(cmd), flush=True)
    # one thread: on a loaded machine two OpenMP threads spend most of their time waiting for each other
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    log = out.with_suffix(".log")  # lm-eval's progress, to follow a long run with tail -f
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  log: {log}", flush=True)
    with log.open("w", encoding="utf-8") as handle:
        done = subprocess.run(cmd, check=False, stdout=handle, stderr=subprocess.STDOUT, env=env)
    took = time.time() - start
    if done.returncode not in (0, 3):  # 3: unscored judge items, the run still wrote its samples
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        sys.exit(f"medeval run failed ({done.returncode}):\n{tail}")
    print(f"  {took:.0f} s", flush=True)
    out.with_suffix(".seconds").write_text(json.dumps(round(took)))
    return cmd, took


def samples(out: Path, task: str) -> list[dict]:
    files = sorted(glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True))
    if not files:
        sys.exit(f"no samples for {task} under {out}")
    rows = [json.loads(line) for line in Path(files[-1]).read_text(encoding="utf-8").splitlines()]
    # lm-eval logs a sample per filter (EMSQA's strict-match and flexible-extract): one output, kept once
    by_doc = {}
    for row in rows:
        first = by_doc.setdefault(row["doc_id"], row)
        if first["resps"] != row["resps"]:
            sys.exit(f"{task}: doc {row['doc_id']} logged with different outputs under two filters")
    return [by_doc[doc_id] for doc_id in sorted(by_doc)]


def gen_settings(sample: dict) -> dict:
    kwargs = dict(sample["arguments"]["gen_args_0"]["arg_1"])
    return {k: kwargs[k] for k in ("max_gen_toks", "do_sample", "temperature", "until") if k in kwargs}


EMSQA_RUNS = {  # name: (chat template, few-shot examples, tasks, items); fewer items where outputs are long
    "chat": (True, None, ("emsqa_public",), 16),
    "chat-cot": (True, None, EMSQA_TASKS[1:], 12),
    "chat-fewshot": (True, 3, ("emsqa_public",), 8),
    "plain": (False, None, ("emsqa_public",), 16),
    "plain-cot": (False, None, EMSQA_TASKS[1:], 4),
    "plain-fewshot": (False, 3, ("emsqa_public",), 8),
}
# Gemma-3-270M: one seeded draw of public test items past the first 400 (the SmolLM2 corpus holds items 0-15, the
# reference results the first 400 and 100); the first 12 in every variant, 12 more where the outputs vary (3-shot's
# are all one JSON list); no chat template (its GGUF has none)
GEMMA_DRAW = random.Random(31).sample(range(400, 3721), 24)
GEMMA_ITEMS, GEMMA_MORE = sorted(GEMMA_DRAW[:12]), sorted(GEMMA_DRAW[12:])
GEMMA_COT = ("emsqa_public_cot", "emsqa_public_expert_cot")
GEMMA_RUNS = {
    "plain": (False, None, ("emsqa_public",), GEMMA_ITEMS),
    "plain-fewshot": (False, 3, ("emsqa_public",), GEMMA_ITEMS),
    "plain-cot": (False, None, GEMMA_COT, GEMMA_ITEMS),
    "plain-more": (False, None, ("emsqa_public",), GEMMA_MORE),
    "plain-cot-more": (False, None, GEMMA_COT, GEMMA_MORE),
}
MODEL_RUNS = {"smollm2-135m-instruct": EMSQA_RUNS, "gemma3-270m": GEMMA_RUNS}
MODEL = "smollm2-135m-instruct"  # --model


def emsqa_rows(model_dir: Path, work: Path, runs: list[str] | None = None) -> None:
    meta = {
        "emsqa_public_path": str(SHARED / "emsqa"),
        "emsqa_knowledge_path": str(SHARED / "emsqa" / "knowledge"),
        "rag_k": 2,
        "rag_cache_dir": str(Path.home() / ".cache" / "medeval" / "retrieval"),
    }
    table = MODEL_RUNS[MODEL]
    corpus = CORPORA["emsqa" if MODEL == "smollm2-135m-instruct" else f"emsqa-{MODEL}"]
    for name in runs or table:
        chat, fewshot, tasks, sample = table[name]
        out = work / f"emsqa-{MODEL}-{name}"
        items = sample if isinstance(sample, list) else None  # fixed doc ids, else the first N
        limit = len(sample) if items else sample
        cmd, took = medeval_run(model_dir, list(tasks), out, limit, chat, meta, EMSQA_GEN, fewshot, items)
        write(corpus, emsqa_samples(out, tasks, chat, fewshot, cmd, took))


def emsqa_samples(out: Path, tasks, chat: bool, fewshot: int | None, cmd: list[str], took: float) -> list[dict]:
    """One corpus row per logged EMSQA sample of one run."""
    rows = []
    for task in tasks:
        variant = {
            "emsqa_public": "zero_shot",
            "emsqa_public_cot": "cot",
            "emsqa_public_expert_cot": "expert_cot",
            "emsqa_public_rag": "rag_cot",
        }[task]
        if fewshot:
            variant = f"fewshot_{fewshot}"
        for s in samples(out, task):
            doc = s["doc"]
            rows.append(
                {
                    "id": f"{variant}-{'chat' if chat else 'plain'}-{s['doc_id']:03d}",
                    **({} if MODEL == "smollm2-135m-instruct" else {"model": MODEL}),
                    "task": task,
                    "variant": variant,
                    "chat_template": chat,
                    "num_fewshot": fewshot or 0,
                    "doc_id": s["doc_id"],
                    "question": doc["question"],
                    "choices": doc["choices"],
                    "gold": doc.get("gold"),
                    "output": s["resps"][0][0],
                    "generation": gen_settings(s),
                    "prompt": s["arguments"]["gen_args_0"]["arg_0"],
                    "run": {"seconds_for_run": round(took), "command": _portable(cmd)},
                }
            )
    return rows


def medicationqa_rows(model_dir: Path, work: Path) -> tuple[list[dict], list[dict]]:
    judge = {
        "judges": [
            {
                "name": "smollm2",
                "backend": "hf",
                "model": str(model_dir),
                "max_tokens": JUDGE_MAX_TOKENS,
                "model_args": {"device": "cpu", "dtype": "float32", "batch_size": 4},
            }
        ],
        "max_reasks": 0,
        "cache": None,
    }
    meta = {
        "medicationqa_path": str(SHARED / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"),
        "medeval_judges": json.dumps(judge),
    }
    out = work / "medicationqa"
    cmd, took = medeval_run(model_dir, ["medicationqa"], out, MEDICATIONQA_LIMIT, True, meta, MEDICATIONQA_GEN)
    answers, replies = [], []
    for s in samples(out, "medicationqa"):
        doc = s["doc"]
        answers.append(
            {
                "id": f"medicationqa-chat-{s['doc_id']:03d}",
                "task": "medicationqa",
                "variant": "zero_shot",
                "chat_template": True,
                "doc_id": s["doc_id"],
                "question": doc["question"],
                "reference": doc["answer"],
                "output": s["resps"][0][0],
                "generation": gen_settings(s),
                "rougeL": s.get("rougeL"),
                "run": {"seconds_for_run": round(took), "command": _portable(cmd)},
            }
        )
        # the judge filter's record (logged as the filtered response) holds each judge's full verdict and reply
        record = s["filtered_resps"][0] if isinstance(s["filtered_resps"], list) else s["filtered_resps"]
        record = ast.literal_eval(record) if isinstance(record, str) else record  # lm-eval logs it as its repr
        for verdict in (record.get("verdicts") or {}).values():
            replies.append(
                {
                    "id": f"judge-smollm2-{s['doc_id']:03d}",
                    "judge": "smollm2",
                    "backend": "hf",
                    "doc_id": s["doc_id"],
                    "question": doc["question"],
                    "reference": doc["answer"],
                    "answer": s["resps"][0][0],
                    "reply": verdict.get("reply"),
                    "judge_settings": {"max_tokens": JUDGE_MAX_TOKENS, "temperature": 0, "max_reasks": 0},
                }
            )
    return answers, replies


def emrqa_rows(model_dir: Path, work: Path) -> list[dict]:
    sys.path.insert(0, str(REPO))
    from medeval_metrics.emrqa.synthetic import write_synthetic

    templates = SHARED / "emrqa" / "templates-all.csv"
    info = write_synthetic(work / "emrqa-data", templates_csv=templates if templates.exists() else None)
    meta = {
        "emrqa_data_json": str(info.data_json),
        "emrqa_data_ql_csv": str(info.data_ql_csv),
        "emrqa_cache_dir": str(work / "emrqa-cache"),
    }
    out = work / "emrqa"
    cmd, took = medeval_run(model_dir, list(EMRQA_TASKS), out, EMRQA_LIMIT, True, meta)
    rows = []
    for task in EMRQA_TASKS:
        for s in samples(out, task):
            doc = s["doc"]
            gold = {k: doc[k] for k in ("logical_form", "lf_template", "label", "labels") if k in doc}
            if "answers_json" in doc:  # evidence tasks: the gold lines, and the synthetic note they are in
                gold["answers"] = json.loads(doc["answers_json"])
            rows.append(
                {
                    "id": f"{task}-chat-{s['doc_id']:03d}",
                    "task": task,
                    "chat_template": True,
                    "doc_id": s["doc_id"],
                    "question": doc.get("question"),
                    "note": doc.get("note"),  # synthetic (medeval_metrics.emrqa.synthetic), no patient data
                    "gold": gold,
                    "output": s["resps"][0][0],
                    "generation": gen_settings(s),
                    "synthetic_notes": "medeval_metrics.emrqa.synthetic, default seed",
                    "run": {"seconds_for_run": round(took), "command": _portable(cmd)},
                }
            )
    return rows


def _portable(cmd: list[str]) -> str:
    """The command with this machine's paths replaced by names a reader can map."""
    text = " ".join(cmd[1:])
    for path, name in ((str(SHARED), "SHARED_DATA"), (tempfile.gettempdir(), "TMP"), (str(Path.home()), "~")):
        text = text.replace(path, name)
    return "medeval " + text


def merge_labels(path: Path, rows: list[dict]) -> list[dict]:
    """Keep the hand labels of rows whose output is unchanged."""
    old = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                old[row["id"]] = row
    text_key = "reply" if "judge" in path.name else "output"
    for row in rows:
        before = old.get(row["id"])
        if before and before.get(text_key) == row.get(text_key):
            for key in ("label", "label_reason", "ambiguous"):
                if key in before:
                    row[key] = before[key]
    return rows


def write(path: Path, rows: list[dict]) -> None:
    """Replace the rows of the same ids (keeping their hand labels where the text is unchanged), keep the others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = merge_labels(path, rows)
    fresh = {r["id"]: r for r in rows}
    kept = []
    if path.exists():
        kept = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        kept = [r for r in kept if r["id"] not in fresh]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept + rows), encoding="utf-8")
    print(f"wrote {len(rows)} rows to {path.relative_to(REPO)} ({len(kept)} others kept)", flush=True)


def main() -> None:
    global REUSE, MODEL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODEL_RUNS), default=MODEL, help=f"default {MODEL}")
    parser.add_argument("--only", choices=("emsqa", "medicationqa", "emrqa"))
    parser.add_argument("--model-dir", help="the model's folder (default: medeval make-real-model --model's)")
    parser.add_argument("--work-dir", help="keep lm-eval's output folders and logs here (default: a temporary folder)")
    parser.add_argument("--runs", nargs="+", help="EMSQA runs to record (default: all of the model's)")
    parser.add_argument("--reuse", action="store_true", help="read finished runs in --work-dir instead of running")
    args = parser.parse_args()
    REUSE, MODEL = args.reuse, args.model
    if args.runs and not set(args.runs) <= set(MODEL_RUNS[MODEL]):
        parser.error(f"--runs for {MODEL}: choose from {', '.join(MODEL_RUNS[MODEL])}")
    if MODEL != "smollm2-135m-instruct" and args.only not in (None, "emsqa"):
        parser.error(f"{MODEL} records EMSQA only (a base model: no MedicationQA answers or judge replies)")
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    sys.path.insert(0, str(REPO))
    from medeval_metrics.real_model import make_real_model

    model_dir = Path(args.model_dir) if args.model_dir else make_real_model(model=MODEL)
    with tempfile.TemporaryDirectory(prefix="medeval-real-outputs-") as tmp:
        work = Path(args.work_dir) if args.work_dir else Path(tmp)
        if args.only in (None, "emsqa"):
            emsqa_rows(model_dir, work, args.runs)
        if MODEL == "smollm2-135m-instruct" and args.only in (None, "medicationqa"):
            answers, replies = medicationqa_rows(model_dir, work)
            write(CORPORA["medicationqa"], answers)
            write(CORPORA["judge"], replies)
        if MODEL == "smollm2-135m-instruct" and args.only in (None, "emrqa"):
            write(CORPORA["emrqa"], emrqa_rows(model_dir, work))


if __name__ == "__main__":
    main()
