"""``medeval demo``: a first run on a fresh, offline machine, end to end, in about a minute.

What is real: lm-eval, the pack's tasks, prompts, answer parsing, metrics, the judge client (over
HTTP), breakdowns and the report. What is synthetic: the model (a tiny random-weight GPT-2 built
into the user cache, so its answers and scores are meaningless), the data (samples written for this
project, each shipped in its benchmark's package as ``demo_sample.json``: 12 EMSQA-style questions,
8 MedicationQA-style questions; the emrQA notes are generated on the spot by
``medeval_metrics.emrqa.synthetic``, no patient data) and the judges (``medeval_metrics.testing.fake_judge`` on loopback, scoring deterministically).
One task of each benchmark runs: ``emsqa_private`` (the sample stands in for a user's own file),
``medicationqa`` with a two-judge panel, and ``emrqa_risk``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

DEMO_TASKS = ("emsqa_private", "medicationqa", "emrqa_risk")


def user_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medeval"


def tiny_model(cache: Path, say) -> Path:
    """The demo model in the user cache, built on first use."""
    folder = cache / "demo-tiny-lm"
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        say(f"building the tiny random-weight model into {folder} (first run only)")
        from medeval_metrics.testing.tiny_model import build_tiny_model

        partial = folder.with_name(folder.name + ".partial")
        build_tiny_model(partial)
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        partial.rename(folder)
    return folder


def sample_path(benchmark: str) -> Path:
    """The demo sample a benchmark ships in its own package (``medeval_metrics/<benchmark>/demo_sample.json``)."""
    return Path(str(resources.files(f"medeval_metrics.{benchmark}").joinpath("demo_sample.json")))


def demo_metadata(work: Path, judge_url: str) -> dict[str, Any]:
    """--metadata for the three demo tasks: the shipped samples, fresh synthetic emrQA files, the fake panel."""
    from medeval_metrics.emrqa.synthetic import write_synthetic

    emrqa = write_synthetic(work / "emrqa-synthetic", notes_per_subset=6, questions_per_note=6, lines_per_note=20)
    judges = {
        "judges": [
            {"name": "demo-judge-a", "backend": "local-chat-completions", "model": "demo-judge-a", "base_url": judge_url},
            {"name": "demo-judge-b", "backend": "local-chat-completions", "model": "demo-judge-b", "base_url": judge_url},
        ],
        "cache": str(work / "judge_cache.sqlite"), "concurrency": 8,
    }
    return {
        "emsqa_private_path": str(sample_path("emsqa")),
        "medicationqa_path": str(sample_path("medicationqa")),
        "emrqa_data_json": str(emrqa.data_json), "emrqa_data_ql_csv": str(emrqa.data_ql_csv),
        "emrqa_cache_dir": str(work / "emrqa-cache"), "emrqa_sample_size": 12,
        "medeval_judges": judges,
    }


def run_demo(output: Path, cache: Path | None = None, say=print) -> dict[str, Any]:
    """Run the demo into ``output`` (``run/`` from lm-eval, ``report/`` from ``medeval report``)."""
    from medeval_metrics.cli import run_lm_eval
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.report import build_report
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    started = time.time()
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    model = tiny_model(Path(cache) if cache else user_cache(), say)
    run_dir, report_dir = output / "run", output / "report"
    with FakeJudgeServer() as server:
        metadata = demo_metadata(output, server.url)
        say(f"running {', '.join(DEMO_TASKS)} on the tiny model (synthetic data, fake judges at {server.url})")
        code = run_lm_eval([
            "--model", "hf", "--model_args", f"pretrained={model}", "--device", "cpu", "--batch_size", "8",
            "--tasks", ",".join(DEMO_TASKS), "--gen_kwargs", "max_gen_toks=24",
            "--metadata", json.dumps(metadata), "--output_path", str(run_dir), "--log_samples",
        ])
    if code != 0:
        raise MedevalDataError(f"the demo run failed (exit {code}); the messages above say why.")
    try:
        import matplotlib  # noqa: F401

        figures = True
    except ImportError:
        figures = False
        say("matplotlib is not installed: the report has no figures (`pip install 'medeval-metrics[report]'`)")
    report = build_report([run_dir], report_dir, figures=figures)
    report["elapsed_s"] = round(time.time() - started, 1)
    return report


def _cmd(args: argparse.Namespace) -> int:
    output = Path(args.output)
    report = run_demo(output, Path(args.cache) if args.cache else None,
                      say=lambda text: print(f"medeval demo: {text}", file=sys.stderr))
    report_dir = output / "report"
    for note in report["notes"]:  # e.g. an earlier demo run in the same folder, reported no more
        print(f"medeval demo: note: {note}", file=sys.stderr)
    print(f"\nmedeval demo: done in {report['elapsed_s']} s. The report is in {report_dir}:")
    print(f"  {report_dir / 'results.md'} (scores and settings), {report_dir / 'card_section.md'} (for a model card),")
    print(f"  {len(report['figures'])} figures under {report_dir / 'figures'}; lm-eval's own files in {output / 'run'}.")
    print("The model is a tiny random-weight one, the data and the judges are synthetic: the numbers mean nothing,")
    print("the pipeline is what ran. For a real model: medeval run --tasks emsqa_public --model hf "
          "--model_args pretrained=ORG/MODEL --output_path results --log_samples")
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="first run, offline: tiny model, synthetic samples, fake judges, then the report")
    p.add_argument("--output", default="medeval-demo", help="folder for the run and the report (default: ./medeval-demo)")
    p.add_argument("--cache", help="where the tiny model is kept (default: ~/.cache/medeval, or $XDG_CACHE_HOME/medeval)")
    p.set_defaults(func=_cmd)
