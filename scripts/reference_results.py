"""Reference results of two real models on fixed, documented EMSQA samples (docs/real-model.md, "Reference results").

Runs (or, with --reuse, reads) these ``medeval run`` commands, greedy on the CPU, and writes the per-item
texts, log-likelihoods and scores to tests/core/data/real_model_reference.json; a test reruns a slice of each:

- ``smollm2_mc``: SmolLM2-135M-Instruct, ``emsqa_public_mc`` (log-likelihood), the first 400 public test items;
- ``smollm2_zero_shot_chat``: SmolLM2, ``emsqa_public`` zero-shot, the first 100, chat template,
  ``max_gen_toks=128``; both readings (``strict-match``, ``flexible-extract``);
- ``gemma3_zero_shot``: Gemma-3-270M (a base model), ``emsqa_public`` zero-shot, the first 100, no chat
  template, ``max_gen_toks=64`` (a base model stops at a stop sequence or its budget: the budget is its run time).

MedicationQA's row (``medicationqa``) is kept as recorded earlier. ``--rescore`` runs no model: it reads every
stored EMSQA text (and log-likelihood) again with the task's current filters and ``process_results`` and
rewrites the per-item scores and the aggregates; run it after any change to the readers. ``--check`` does the
same and only says what would change (exit 1 if anything would).

    python scripts/reference_results.py --work-dir DIR [--reuse] [--only RUN,...]
    python scripts/reference_results.py --rescore | --check
"""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import math
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "core" / "data" / "real_model_reference.json"
SHARED = REPO.parent / "shared" / "data"
# name: (model, task, first N public test items, chat template, --gen_kwargs)
RUNS = {
    "smollm2_mc": ("smollm2", "emsqa_public_mc", 400, False, None),
    "smollm2_zero_shot_chat": ("smollm2", "emsqa_public", 100, True, "max_gen_toks=128"),
    "gemma3_zero_shot": ("gemma3-270m", "emsqa_public", 100, False, "max_gen_toks=64"),
}
DOC_FIELDS = {  # what the readers and process_results read of a doc: kept so a re-score needs no data files
    "generate_until": ("question", "options", "letters", "gold"),
    "multiple_choice": ("letters", "gold"),
}
AGGREGATE_TOLERANCE = 1e-9  # lm-eval sums in its own order; the means agree to the last few bits


# --- re-scoring stored texts with the current code -------------------------------------------------------------


def _resolve(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def task_scorer(task: str) -> tuple[str, list[tuple[str, list]], Any]:
    """The task's output type, its filters [(name, [(function, kwargs)])] and process_results, as its YAML says."""
    sys.path.insert(0, str(REPO))
    from medeval_metrics.task_yaml import own_task_config, pack_task_yamls

    config = own_task_config(pack_task_yamls()[task])
    filters = [
        (f["name"], [(step["function"], {k: v for k, v in step.items() if k != "function"}) for step in f["filter"]])
        for f in config.get("filter_list") or [{"name": "none", "filter": [{"function": "take_first"}]}]
    ]
    return config["output_type"], filters, _resolve(config["process_results"])


def _filtered(name: str, steps: list, text: str, doc: dict) -> Any:
    """One response through one filter pipeline, built and run as lm-eval's FilterEnsemble does."""
    from lm_eval.filters import build_filter_ensemble  # importing it registers lm-eval's own filters (take_first)

    ensemble = build_filter_ensemble(name, [(_resolve(f) if "." in f else f, kwargs) for f, kwargs in steps])
    resps: Any = [[text]]
    for make in ensemble.filters:
        resps = list(make().apply(resps, [doc]))  # take_first hands back a map
    return resps[0]


def score_item(task_scoring: tuple, item: dict) -> dict[str, dict[str, float]]:
    """{filter: {metric: value}} for one stored item, with the current code."""
    output_type, filters, process_results = task_scoring
    if output_type == "multiple_choice":
        return {"none": process_results(item["doc"], [(ll, False) for ll in item["logliks"]])}
    return {
        name: process_results(item["doc"], [_filtered(name, steps, item["output"], item["doc"])])
        for name, steps in filters
    }


def aggregates(per_item: list[dict]) -> dict[str, float]:
    """lm-eval's results keys: the mean of each per-item metric and its standard error (sample sd / sqrt n)."""
    values: dict[str, list[float]] = {}
    for item in per_item:
        for filter_name, metrics in item["scores"].items():
            for metric, value in metrics.items():
                values.setdefault(f"{metric},{filter_name}", []).append(float(value))
    out = {}
    for key, column in values.items():
        metric, filter_name = key.split(",")
        mean = sum(column) / len(column)
        out[key] = mean
        spread = sum((x - mean) ** 2 for x in column) / (len(column) - 1) if len(column) > 1 else 0.0
        out[f"{metric}_stderr,{filter_name}"] = math.sqrt(spread) / math.sqrt(len(column))
    return out


def rescore_run(name: str, run: dict) -> tuple[dict, list[str]]:
    """The run with per-item scores and aggregates from its stored texts; and what changed, one line each."""
    scoring = task_scorer(run["task"])
    changes, items = [], []
    for item in run["per_item"]:
        try:
            scores = score_item(scoring, item)
        except (KeyError, TypeError) as exc:  # a hand-edited or truncated entry
            raise ValueError(
                f"{OUT.name}: run {name}, doc {item.get('doc_id')}: no usable {exc} field to re-score; "
                f"record the run again (--only {name})"
            ) from None
        if scores != item["scores"]:
            changes.append(f"{name} doc {item['doc_id']}: {json.dumps(item['scores'])} -> {json.dumps(scores)}")
        items.append({**item, "scores": scores})
    metrics = aggregates(items)
    if set(metrics) != set(run["metrics"]) or any(
        not math.isclose(metrics[k], run["metrics"][k], abs_tol=AGGREGATE_TOLERANCE) for k in metrics
    ):
        changes.append(f"{name} aggregates: {json.dumps(run['metrics'])} -> {json.dumps(metrics)}")
    return {**run, "metrics": metrics, "per_item": items}, changes


def rescore(reference: dict) -> tuple[dict, list[str]]:
    """Every EMSQA run re-scored (MedicationQA's row is kept as recorded)."""
    runs, changes = {}, []
    for name, run in reference["runs"].items():
        if run["task"].startswith("emsqa_"):
            run, changed = rescore_run(name, run)
            changes += changed
        runs[name] = run
    return {**reference, "runs": runs}, changes


# --- recording ------------------------------------------------------------------------------------------------


def model_folder(model: str, given: str | None) -> Path:
    """``medeval make-real-model`` builds (once) and prints the folder; its marker file describes the model."""
    if given:
        return Path(given)
    cmd = [str(Path(sys.executable).parent / "medeval"), "make-real-model"]
    if model != "smollm2":
        cmd += ["--model", model]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def describe(folder: Path) -> str:
    marker = json.loads((folder / "medeval-real-model.json").read_text(encoding="utf-8"))
    source = marker.get("wheel") or (marker.get("wheels") or ["?"])[0]  # Gemma's first wheel assembles the parts
    return f"{marker['model']} ({source}, {marker.get('gguf', 'GGUF')} dequantized to {marker.get('dtype', 'fp32')})"


def _run_folder(out: Path, task: str) -> tuple[dict, list[dict]]:
    results_files = glob.glob(str(out / "**" / "results_*.json"), recursive=True)
    sample_files = sorted(glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True))
    if not results_files or not sample_files:
        sys.exit(f"{out}: no results or no samples of {task}; run without --reuse")
    results = json.loads(Path(max(results_files)).read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in Path(sample_files[-1]).read_text(encoding="utf-8").splitlines()]
    return results, rows


def record(name: str, work: Path, model_dir: Path, seconds: float) -> dict:
    """One run's reference entry from lm-eval's own output folder; the re-scorer must agree with lm-eval on it."""
    model, task, limit, chat, gen = RUNS[name]
    results, rows = _run_folder(work / name, task)
    config = results["configs"][task]
    scoring = task_scorer(task)
    items: dict[int, dict] = {}
    for row in sorted(rows, key=lambda r: r["doc_id"]):
        item = items.setdefault(
            row["doc_id"],
            {
                "doc_id": row["doc_id"],
                "doc": {k: row["doc"][k] for k in DOC_FIELDS[scoring[0]]},
                **(
                    {"logliks": [float(r[0][0]) for r in row["resps"]]}
                    if scoring[0] == "multiple_choice"
                    else {"output": row["resps"][0][0]}
                ),
                "scores": {},
            },
        )
        item["scores"][row["filter"]] = {m: row[m] for m in row["metrics"]}
    run = {
        "model": describe(model_dir),
        "task": task,
        "task_version": results["versions"][task],
        "items": len(items),
        "command": _command(task, limit, chat, gen, model),
        "chat_template": chat,
        "generation_kwargs": config.get("generation_kwargs"),
        "seconds_for_run": round(seconds),
        "versions": {p: version(p) for p in ("lm_eval", "transformers", "torch")},
        "device": "cpu",
        "metrics": {k: v for k, v in results["results"][task].items() if "," in k},
        "per_item": list(items.values()),
    }
    rescored, changes = rescore_run(name, run)
    if changes:  # a reader changed since the run started, or the re-scorer does not read as lm-eval does
        print(f"{name}: the current code scores {len(changes)} entries otherwise than lm-eval did in the run:")
        print("\n".join(f"  {line[:400]}" for line in changes))
        print("  (the current code's scores are stored; the end-to-end test compares them with lm-eval's again)")
    return rescored


def _command(task: str, limit: int, chat: bool, gen: str | None, model: str) -> str:
    make = "medeval make-real-model" + ("" if model == "smollm2" else f" --model {model}")
    return (
        f"M=$({make}); medeval run --tasks {task} --model hf --model_args pretrained=$M,dtype=float32"
        f" --device cpu --batch_size 8 --limit {limit}"
        + (" --apply_chat_template" if chat else "")
        + (f" --gen_kwargs {gen}" if gen else "")
        + """ --output_path out --log_samples --metadata '{"emsqa_public_path": "SHARED/emsqa"}'"""
    )


def dump(reference: dict) -> str:
    """JSON with one line per setting and per item, so a re-score shows in a diff as the items it changed."""

    def line(key: str, value: Any, indent: str) -> str:
        return f"{indent}{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},"

    lines = ["{", *(line(k, v, " ") for k, v in reference.items() if k != "runs"), ' "runs": {']
    for position, (name, run) in enumerate(reference["runs"].items()):
        lines += [f"  {json.dumps(name)}: {{", *(line(k, v, "   ") for k, v in run.items() if k != "per_item")]
        items = ",\n".join("    " + json.dumps(item, ensure_ascii=False) for item in run["per_item"])
        lines += ['   "per_item": [', items, "   ]", "  }" + ("," if position < len(reference["runs"]) - 1 else "")]
    return "\n".join([*lines, " }", "}", ""])


MODEL_NAMES = {"smollm2": "SmolLM2-135M-Instruct", "gemma3-270m": "Gemma-3-270M (base)"}
TABLE_HEADER = (
    "| run | model | task, sample | settings | strict-match | flexible-extract | in the requested format | run time |\n"
    "|---|---|---|---|---|---|---|---|"
)


def table_rows(reference: dict) -> list[str]:
    """The EMSQA rows of docs/real-model.md's table, from the stored aggregates (a test checks the page has them)."""
    rows = []
    for name, (model, task, _, chat, _) in RUNS.items():
        run = reference["runs"][name]
        m = run["metrics"]
        budget = (run["generation_kwargs"] or {}).get("max_gen_toks")
        settings = ("chat template" if chat else "no chat template") + (f", `max_gen_toks={budget}`" if budget else "")

        def reading(f: str, m: dict = m) -> str:
            text = f"acc {m[f'acc,{f}']:.3f} ± {m[f'acc_stderr,{f}']:.3f}, F1 {m[f'f1,{f}']:.3f}"
            return text + (f", unparseable {m[f'unparseable,{f}']:.3f}" if f"unparseable,{f}" in m else "")

        if "acc,none" in m:  # log-likelihood: the most likely option, one reading
            cells = [f"{reading('none')} (one reading: the most likely option)", "", ""]
        else:
            cells = [reading("strict-match"), reading("flexible-extract"), f"{m['requested_format,strict-match']:.3f}"]
        kind = "log-likelihood" if "acc,none" in m else "zero-shot"
        sample = f"`{task}` ({kind}), first {run['items']}"
        rows.append(
            " | ".join(
                ["", f"`{name}`", MODEL_NAMES[model], sample, settings, *cells, f"{run['seconds_for_run']} s", ""]
            ).strip()
        )
    return rows


def load() -> dict:
    try:
        return json.loads(OUT.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        sys.exit(f"{OUT}: cannot be read ({exc}); restore it from git or record the runs again (--work-dir DIR)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", help="where the runs write (or, with --reuse, have written) their output")
    parser.add_argument("--reuse", action="store_true", help="read a finished run in --work-dir instead of rerunning")
    parser.add_argument("--only", help=f"comma-separated runs to record (of {', '.join(RUNS)}); the rest are kept")
    parser.add_argument("--smollm2-dir", help="SmolLM2 folder (default: medeval make-real-model)")
    parser.add_argument("--gemma3-270m-dir", help="Gemma-3-270M folder (default: medeval make-real-model --model ...)")
    parser.add_argument("--rescore", action="store_true", help="re-score the stored texts with the current code")
    parser.add_argument("--check", action="store_true", help="as --rescore, but only say what would change")
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.rescore or args.check:
        try:
            reference, changes = rescore(load())
        except ValueError as exc:
            sys.exit(str(exc))
        print("\n".join(changes) or "every stored score and aggregate is what the current code gives")
        print("\ndocs/real-model.md's table, EMSQA rows:\n" + "\n".join([TABLE_HEADER, *table_rows(reference)]))
        if args.check:
            sys.exit(1 if changes else 0)
        OUT.write_text(dump(reference), encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)} ({len(changes)} changes)")
        return
    if not args.work_dir:
        parser.error("--work-dir is needed to record runs (or give --rescore / --check)")
    sys.path.insert(0, str(REPO / "scripts"))
    import record_real_outputs as recorder  # the same medeval run invocation and settings

    recorder.REUSE = args.reuse
    work = Path(args.work_dir)
    names = args.only.split(",") if args.only else list(RUNS)
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        parser.error(f"--only: unknown run {', '.join(unknown)} (known: {', '.join(RUNS)})")
    reference = load() if OUT.exists() else {"runs": {}}
    for name in names:
        model, task, limit, chat, gen = RUNS[name]
        folder = model_folder(model, getattr(args, f"{model.replace('-', '_')}_dir"))
        meta = {"emsqa_public_path": str(SHARED / "emsqa")}
        _, seconds = recorder.medeval_run(folder, [task], work / name, limit, chat, meta, gen)
        reference["runs"][name] = record(name, work, folder, seconds)
        shown = {k: round(v, 4) for k, v in reference["runs"][name]["metrics"].items() if "stderr" not in k}
        print(f"{name}: {shown}", flush=True)
    OUT.write_text(dump(reference), encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
