"""EMSQA answer reading, loading growth, start-up cost and the pack's share of an end-to-end run.

Prints, measured in this one run:
- the share of the realistic-output corpus (tests/emsqa/data/emsqa_model_outputs.jsonl) read correctly,
  by model style, the share of issue 20's corpora (tests/emsqa/data/: fresh outputs in a real small
  model's shapes, SmolLM2's own) with their silent changes of answer, and the extraction time per output;
- EMSQA loading (read, validate, build the datasets.Dataset) at 1x and 10x the public test set, with
  the ratio (linear growth reads 10x), and that a zero-shot load does not read the validation file;
- index + build of every pack task, alone (include_defaults=False);
- lm-eval's own index with and without the pack added: the pack's share of lm-eval's start-up;
- an emsqa_public run with the tiny model: wall time and the part spent in pack code
  (data loading, prompts, answer extraction, scoring), timed by wrapping the pack's entry points.
EMSQA data: ../shared/data/emsqa, or MEDEVAL_EMSQA_PUBLIC_PATH.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("MEDEVAL_EMSQA_PUBLIC_PATH", REPO.parent / "shared" / "data" / "emsqa"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the 1x/10x growth copies are named like the published file but are not it: no checksum notice for them
os.environ.setdefault("MEDEVAL_DATA_CHECKSUMS", "off")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

_INDEX_SNIPPET = """
import json, statistics, time
from lm_eval.tasks import TaskManager
import medeval_metrics
pack = medeval_metrics.tasks_path()
TaskManager()  # warm the file-system cache and lazy imports before timing
configs = {{"builtin": dict(), "builtin+pack": dict(include_path=pack), "pack": dict(include_defaults=False, include_path=pack)}}
times = {{name: [] for name in configs}}
for _ in range({repeats}):  # interleaved, so machine noise hits every configuration alike
    for name, kwargs in configs.items():
        t = time.perf_counter(); TaskManager(**kwargs); times[name].append(time.perf_counter() - t)
print(json.dumps({{name: statistics.median(v) for name, v in times.items()}}))
"""


def _index_seconds(repeats: int = 5) -> dict[str, float]:
    """Median seconds to build lm-eval's task index: built-ins, built-ins + pack, pack alone."""
    import json

    out = subprocess.run(
        [sys.executable, "-c", _INDEX_SNIPPET.format(repeats=repeats)], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _build_all_pack_tasks() -> float:
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    from medeval_metrics.manifest import build_manifest

    start = time.perf_counter()
    manager = TaskManager(
        include_defaults=False,
        include_path=medeval_metrics.tasks_path(),
        metadata={"emsqa_public_path": str(DATA), "emsqa_private_path": str(DATA / "test_open.json")},
    )
    # the eight tasks without retrieval (the RAG tasks are measured in bench_rag.py)
    names = [t["task"] for t in build_manifest()["tasks"] if t["benchmark"] == "emsqa" and not t.get("also_reads")]
    manager.load(names)
    return time.perf_counter() - start


def _pack_share_of_run(limit: int = 40) -> tuple[float, float]:
    """(wall seconds of simple_evaluate, seconds inside pack code)."""
    import functools

    import lm_eval
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    from medeval_metrics import emsqa
    from medeval_metrics.testing.tiny_model import build_tiny_model

    spent = [0.0]

    def timed(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t

        return wrapper

    for name in ("load_public", "doc_to_text", "doc_to_target", "process_results"):
        setattr(emsqa, name, timed(getattr(emsqa, name)))
    emsqa.ExtractAnswerFilter.apply = timed(emsqa.ExtractAnswerFilter.apply)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "tiny")
        start = time.perf_counter()
        manager = TaskManager(
            include_defaults=False, include_path=medeval_metrics.tasks_path(), metadata={"emsqa_public_path": str(DATA)}
        )
        lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={model_dir}",
            tasks=["emsqa_public"],
            task_manager=manager,
            limit=limit,
            device="cpu",
            batch_size=limit,
            gen_kwargs="max_gen_toks=16",
        )
        return time.perf_counter() - start, spent[0]


def _corpus_lines() -> list[str]:
    sys.path.insert(0, str(REPO))
    from tests.emsqa.test_emsqa_corpus import CASES, corpus_summary, read

    start = time.perf_counter()
    for case in CASES:
        read(case)
    per_output = (time.perf_counter() - start) / len(CASES)
    from tests.emsqa import test_emsqa_real_styles as real_styles

    # issue 20's corpora: fresh outputs in a real small model's shapes, and SmolLM2's own (once recorded)
    lines = [corpus_summary(CASES), real_styles.summary("fresh outputs (issue 20 classes)", real_styles.FRESH_CASES)]
    if real_styles.SMOLLM2_CASES:
        lines.append(real_styles.summary("SmolLM2-135M-Instruct outputs", real_styles.SMOLLM2_CASES))
    else:
        lines.append(f"EMSQA SmolLM2 outputs: none recorded at {real_styles.SMOLLM2}")
    return lines + [f"extraction: {per_output * 1e6:.0f} us per corpus output"]


def _loading_growth_lines(repeats: int = 3) -> list[str]:
    """load_public at 1x and 10x the public test set (each copy's questions made distinct), validating
    (data cache off) and from the data cache."""
    import gc
    import json
    import tracemalloc

    from medeval_metrics.emsqa import data as emsqa_data

    records = json.loads((DATA / "test_open.json").read_text(encoding="utf-8"))
    seconds: dict[int, float] = {}
    cached: dict[int, float] = {}
    peak: dict[int, float] = {}
    previous_cache = os.environ.get("MEDEVAL_DATASET_CACHE")
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (1, 10):
            folder = Path(tmp) / f"x{scale}"
            folder.mkdir()
            scaled = [
                dict(r, question=f"{r['question']} (copy {k})") if k else r for k in range(scale) for r in records
            ]
            (folder / "test_open.json").write_text(json.dumps(scaled), encoding="utf-8")
            (folder / "val_open.json").write_bytes((DATA / "val_open.json").read_bytes())
            emsqa_data.load_public(emsqa_public_path=str(folder))  # warm imports
            os.environ["MEDEVAL_DATASET_CACHE"] = "off"  # validation itself, as on a first run
            times = []
            for _ in range(max(repeats, 5)):
                gc.collect()
                start = time.perf_counter()
                emsqa_data.load_public(emsqa_public_path=str(folder))
                times.append(time.perf_counter() - start)
            seconds[scale] = statistics.median(times)
            tracemalloc.start()
            emsqa_data.load_public(emsqa_public_path=str(folder))
            peak[scale] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            os.environ["MEDEVAL_DATASET_CACHE"] = str(Path(tmp) / "cache")  # every later run
            emsqa_data.load_public(emsqa_public_path=str(folder))
            times = []
            for _ in range(max(repeats, 5)):
                start = time.perf_counter()
                emsqa_data.load_public(emsqa_public_path=str(folder))
                times.append(time.perf_counter() - start)
            cached[scale] = statistics.median(times)
    if previous_cache is None:
        os.environ.pop("MEDEVAL_DATASET_CACHE", None)
    else:
        os.environ["MEDEVAL_DATASET_CACHE"] = previous_cache
    pool_reads = emsqa_data._read_pool.cache_info().misses
    ratio = seconds[10] / seconds[1]
    return [
        f"EMSQA loading (zero-shot: test set only), {len(records):,} items: {seconds[1] * 1000:.0f} ms; "
        f"10x ({10 * len(records):,} items): {seconds[10] * 1000:.0f} ms; ratio {ratio:.2f} (linear: 10.0, "
        f"within 15%: {'yes' if 8.5 <= ratio <= 11.5 else 'no'}; below 10 means fixed costs dominate at 1x); peak Python memory {peak[1]:.0f} / {peak[10]:.0f} MiB",
        f"validation file reads during those zero-shot loads: {pool_reads} (read only when few-shot examples are drawn)",
        f"EMSQA loading from the validated-data cache (every run after the first): {cached[1] * 1000:.1f} ms at 1x, "
        f"{cached[10] * 1000:.1f} ms at 10x (the file's sha256 and a memory map)",
    ]


def run() -> list[str]:
    lines = _corpus_lines()
    if not (DATA / "test_open.json").exists():
        return lines + [f"skipped the rest: no EMSQA data at {DATA} (set MEDEVAL_EMSQA_PUBLIC_PATH)"]
    lines += _loading_growth_lines()
    build = _build_all_pack_tasks()
    lines.append(f"index + build all 8 EMSQA tasks (pack only): {build:.2f} s")
    index = _index_seconds()
    builtin, both, pack_only = index["builtin"], index["builtin+pack"], index["pack"]
    lines.append(f"task index, pack alone: {pack_only * 1000:.1f} ms (median of 5, interleaved)")
    lines.append(f"task index, lm-eval built-ins: {builtin:.2f} s; built-ins + pack: {both:.2f} s")
    lines.append(
        f"pack's addition to lm-eval's index: {pack_only / builtin:.2%} measured alone; "
        f"{(both - builtin) / builtin:+.2%} as the difference of the two medians (noisier) -- target: well under 5%"
    )
    wall, inside = _pack_share_of_run()
    lines.append(
        f"emsqa_public end to end, tiny model, 40 items: {wall:.2f} s wall, {inside:.3f} s in pack code "
        f"= {inside / wall:.1%} (the rest is lm-eval and the model)"
    )
    return lines


if __name__ == "__main__":
    for line in run():
        print(line)
