"""Cost of `medeval report` on a full-size run, and of the evaluate modules against the task scorer.

Prints, measured in this one run:
- `build_report` on one emsqa_public run of all 3,721 items read two ways (lm-eval's strict-match and
  flexible-extract filters; logged samples, breakdowns), against the same items read one way, without and with
  figures, with report.html, and on two such runs (comparison);
- the EMSQA evaluate modules on 3,721 items against calling the task's scorer directly.
The run is synthetic (per-item scores drawn with a fixed seed) on the real public test items:
../shared/data/emsqa, or MEDEVAL_EMSQA_PUBLIC_PATH.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("MEDEVAL_EMSQA_PUBLIC_PATH", REPO.parent / "shared" / "data" / "emsqa"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


READINGS = ("strict-match", "flexible-extract")  # the generative EMSQA tasks' two lm-eval filters


def _fake_run(folder: Path, docs: list[dict], model: str, seed: int, filters=READINGS) -> list[list[str]]:
    """A results JSON and samples JSONL shaped as lm-eval writes them (each doc once per filter: 70% of the replies
    in the requested format, read alike by both readings; the rest read by flexible-extract alone); returns the
    flexible reading's predictions."""
    from medeval_metrics.emsqa import score
    from medeval_metrics.stats import mean_and_stderr

    rng = random.Random(seed)
    date = f"2026-01-0{seed}T00-00-00.000000"
    folder.mkdir(parents=True)
    predictions, in_format = [], []
    for doc in docs:
        predictions.append(doc["gold"] if rng.random() < 0.6 else [rng.choice(doc["letters"])])
        in_format.append(rng.random() < 0.7)
    task = {"name": "emsqa_public", "alias": "emsqa_public", "sample_len": len(docs)}
    with (folder / f"samples_emsqa_public_{date}.jsonl").open("w") as out:
        for filter_name in filters:  # lm-eval writes every doc of one filter, then the next filter's
            metrics: dict[str, list[float]] = {"acc": [], "f1": [], "unparseable": [], "requested_format": []}
            for index, (doc, prediction, formatted) in enumerate(zip(docs, predictions, in_format)):
                read = prediction if formatted or filter_name != "strict-match" else None
                scores = {**score(read, doc["gold"]), "requested_format": float(formatted)}
                for name, value in scores.items():
                    metrics[name].append(value)
                reply = json.dumps(prediction) if formatted else f"The answer is {', '.join(prediction)}."
                record = {"doc_id": index, "doc": doc, "filter": filter_name, "resps": [[reply]]}
                out.write(json.dumps({**record, "filtered_resps": [read], **scores}) + "\n")
            for name, values in metrics.items():
                value, stderr = mean_and_stderr(values)
                task[f"{name},{filter_name}"], task[f"{name}_stderr,{filter_name}"] = value, stderr
    results = {
        "results": {"emsqa_public": task},
        "versions": {"emsqa_public": 7},
        "n-shot": {"emsqa_public": 0},
        "n-samples": {"emsqa_public": {"original": len(docs), "effective": len(docs)}},
        "config": {"model": "hf", "model_args": f"pretrained={model}", "limit": None, "gen_kwargs": {}},
        "configs": {"emsqa_public": {"generation_kwargs": {"max_gen_toks": 256, "do_sample": False}}},
        "lm_eval_version": "0.4.13",
        "chat_template": None,
        "system_instruction": None,
    }
    (folder / f"results_{date}.json").write_text(json.dumps(results))
    return predictions


def _timed(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run() -> list[str]:
    from medeval_metrics import evaluate_modules
    from medeval_metrics.emsqa import load_docs, score
    from medeval_metrics.report import build_report

    docs = load_docs(DATA / "test_open.json", "the EMSQA public test set")
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        predictions = _fake_run(root / "a", docs, "org/model-a", 1)
        _fake_run(root / "b", docs, "org/model-b", 2)
        _fake_run(root / "one", docs, "org/model-a", 3, filters=("flexible-extract",))
        build_report([root / "a"], root / "warm-up")  # imports matplotlib and fonts once, untimed
        plain = _timed(lambda: build_report([root / "a"], root / "r1", figures=False))
        one = _timed(lambda: build_report([root / "one"], root / "r0", figures=False))
        figures = _timed(lambda: build_report([root / "a"], root / "r2"), repeats=2)
        html = _timed(lambda: build_report([root / "a"], root / "r4", figures=False, html=True), repeats=2)
        two = _timed(lambda: build_report([root / "a", root / "b"], root / "r3"), repeats=2)
        lines.append(f"report, 1 run x {len(docs)} items read two ways, no figures: {plain:.2f} s")
        lines.append(f"report, the same items read one way (one filter), no figures: {one:.2f} s ({plain / one:.1f}x)")
        lines.append(f"report, 1 run, with figures: {figures:.2f} s ({figures / plain:.1f}x the tables alone)")
        lines.append(
            f"report, 1 run, with report.html, no figures: {html:.2f} s ({html / plain:.1f}x the tables alone)"
        )
        lines.append(f"report, 2 runs with comparison and figures: {two:.2f} s ({two / figures:.1f}x one run)")

        import evaluate

        references = [doc["gold"] for doc in docs]
        accuracy = evaluate.load(evaluate_modules.path("emsqa_set_accuracy"))
        module = _timed(lambda: accuracy.compute(predictions=predictions, references=references))
        direct = _timed(lambda: sum(score(p, g)["acc"] for p, g in zip(predictions, references)) / len(references))
        lines.append(
            f"evaluate module emsqa_set_accuracy on {len(docs)} items: {module * 1000:.0f} ms "
            f"({module / direct:.0f}x calling the scorer directly, {direct * 1000:.1f} ms: evaluate's Arrow round trip)"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
