"""``medeval demo``: a first run on a fresh, offline machine, end to end, in about a minute.

What is real: lm-eval, the pack's tasks, prompts, answer parsing, metrics, the judge client (over
HTTP), breakdowns and the report. What is synthetic: the model (a tiny random-weight GPT-2 built
into the user cache, so its answers and scores are meaningless), the data (samples written for this
project, each shipped in its benchmark's package as ``demo_sample.json``: 12 EMSQA-style questions,
8 MedicationQA-style questions; the emrQA notes are generated on the spot by
``medeval_metrics.emrqa.synthetic``, no patient data) and the judges (``medeval_metrics.testing.fake_judge`` on loopback, scoring deterministically).
One task of each benchmark runs: ``emsqa_private`` (the sample stands in for a user's own file),
``medicationqa`` with a two-judge panel, and ``emrqa_risk``. ``--real-model`` puts SmolLM2-135M-Instruct
(``medeval_metrics.real_model``) in the tiny model's place, ``--real-judge`` on the panel.
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


def real_model(cache: Path | None) -> Path:
    """SmolLM2-135M-Instruct (``medeval make-real-model``), under ``cache`` when one is given."""
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.real_model import RealModelError, make_real_model

    try:
        if cache is None:
            return make_real_model()
        return make_real_model(cache / "real-model" / "smollm2-135m-instruct", wheel_dir=cache / "real-model")
    except RealModelError as exc:
        raise MedevalDataError(f"demo --real-model: {exc}") from None


def demo_metadata(work: Path, judge_url: str, real_judge: Path | None = None) -> dict[str, Any]:
    """--metadata for the three demo tasks: the shipped samples, fresh synthetic emrQA files, the fake panel
    (plus ``real_judge``, a local model folder, as a third judge on the CPU)."""
    from medeval_metrics.emrqa.synthetic import write_synthetic

    emrqa = write_synthetic(work / "emrqa-synthetic", notes_per_subset=6, questions_per_note=6, lines_per_note=20)
    judges = {
        "judges": [
            {"name": "demo-judge-a", "backend": "local-chat-completions", "model": "demo-judge-a", "base_url": judge_url},
            {"name": "demo-judge-b", "backend": "local-chat-completions", "model": "demo-judge-b", "base_url": judge_url},
        ],
        "cache": str(work / "judge_cache.sqlite"), "concurrency": 8,
    }
    if real_judge is not None:
        judges["judges"].append({"name": "smollm2", "backend": "hf", "model": str(real_judge), "max_tokens": 128,
                                 "model_args": {"device": "cpu", "dtype": "float32"}})
    return {
        "emsqa_private_path": str(sample_path("emsqa")),
        "medicationqa_path": str(sample_path("medicationqa")),
        "emrqa_data_json": str(emrqa.data_json), "emrqa_data_ql_csv": str(emrqa.data_ql_csv),
        "emrqa_cache_dir": str(work / "emrqa-cache"), "emrqa_sample_size": 12,
        "medeval_judges": judges,
    }


def run_demo(output: Path, cache: Path | None = None, say=print, use_real_model: bool = False,
             real_judge: bool = False) -> dict[str, Any]:
    """Run the demo into ``output`` (``run/`` from lm-eval, ``report/`` from ``medeval report``).

    ``use_real_model``: SmolLM2-135M-Instruct answers instead of the tiny random model (real, weak answers);
    ``real_judge``: it also sits on the judge panel (its replies rarely hold a usable verdict: unscored)."""
    from medeval_metrics.cli import run_lm_eval
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.report import build_report
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    started = time.time()
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    if use_real_model or real_judge:
        say("SmolLM2-135M-Instruct (medeval make-real-model; built on first use, about a minute)")
        smollm2 = real_model(Path(cache) if cache else None)
    model = smollm2 if use_real_model else tiny_model(Path(cache) if cache else user_cache(), say)
    run_dir, report_dir = output / "run", output / "report"
    # a real model needs room for an answer; the tiny one only has to show the plumbing
    budget = "max_gen_toks=96" if use_real_model else "max_gen_toks=24"
    with FakeJudgeServer() as server:
        metadata = demo_metadata(output, server.url, real_judge=smollm2 if real_judge else None)
        which = "SmolLM2-135M-Instruct" if use_real_model else "the tiny model"
        say(f"running {', '.join(DEMO_TASKS)} on {which} (synthetic data, fake judges at {server.url}"
            + (", SmolLM2 as a third judge)" if real_judge else ")"))
        argv = [
            "--model", "hf", "--model_args", f"pretrained={model}", "--device", "cpu", "--batch_size", "8",
            "--tasks", ",".join(DEMO_TASKS), "--gen_kwargs", budget,
            "--metadata", json.dumps(metadata), "--output_path", str(run_dir), "--log_samples",
        ]
        if use_real_model:
            argv.append("--apply_chat_template")  # an instruction model, asked as it was trained
        if real_judge:
            argv.append("--allow-unscored")  # a 135M judge seldom writes a verdict: its items are unscored
        code = run_lm_eval(argv)
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
                      say=lambda text: print(f"medeval demo: {text}", file=sys.stderr),
                      use_real_model=args.real_model, real_judge=args.real_judge)
    report_dir = output / "report"
    for note in report["notes"]:  # e.g. an earlier demo run in the same folder, reported no more
        print(f"medeval demo: note: {note}", file=sys.stderr)
    print(f"\nmedeval demo: done in {report['elapsed_s']} s. The report is in {report_dir}:")
    print(f"  {report_dir / 'results.md'} (scores and settings), {report_dir / 'card_section.md'} (for a model card),")
    print(f"  {len(report['figures'])} figures under {report_dir / 'figures'}; lm-eval's own files in {output / 'run'}.")
    if args.real_model:
        print("The model is SmolLM2-135M-Instruct (real answers, weak: low scores); the data and the fake judges are")
        print("synthetic. Its outputs are in the report's samples. docs/real-model.md has reference results.")
    else:
        print("The model is a tiny random-weight one, the data and the judges are synthetic: the numbers mean nothing,")
        print("the pipeline is what ran. For a real model: medeval demo --real-model, or medeval run --tasks "
              "emsqa_public --model hf --model_args pretrained=ORG/MODEL --output_path results --log_samples")
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="first run, offline: tiny model, synthetic samples, fake judges, then the report")
    p.add_argument("--output", default="medeval-demo", help="folder for the run and the report (default: ./medeval-demo)")
    p.add_argument("--cache", help="where the tiny model is kept (default: ~/.cache/medeval, or $XDG_CACHE_HOME/medeval)")
    p.add_argument("--real-model", action="store_true",
                   help="evaluate SmolLM2-135M-Instruct (medeval make-real-model: 135M, Apache-2.0) instead of the "
                        "tiny random model: real answers, a few minutes on a CPU")
    p.add_argument("--real-judge", action="store_true",
                   help="add SmolLM2-135M-Instruct to the judge panel (hf backend, CPU)")
    p.set_defaults(func=_cmd)
