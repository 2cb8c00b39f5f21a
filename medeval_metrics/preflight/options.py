"""lm-eval's own options, read with lm-eval's parser: what lm-eval would refuse or lose only after building the
model (or after the whole run)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.files import unwritable_reason
from medeval_metrics.preflight.argv import lm_eval_namespace, parse_metadata


def run_option_problems(argv: Sequence[str], config: Any = None) -> list[str]:
    """What lm-eval would refuse or lose only after building the model (or after the whole run): no --tasks,
    --log_samples without --output_path, --limit 0 or below, an unknown --model, an --output_path or --use_cache
    that cannot be written. Read with lm-eval's own parser and config, so its defaults and --config files count."""
    config, problem = (config, None) if config is not None else lm_eval_config(argv)
    if problem:
        return [problem]
    if config is None:  # lm-eval's parser refuses the command line: it says why itself when it runs
        return []
    problems = []
    if not config.tasks:
        problems.append(_LM_EVAL_REFUSALS["Need to specify task"])
    if config.limit is not None and config.limit <= 0:
        problems.append(
            f"--limit {config.limit:g} selects no items: give a count (--limit 20) or a fraction of each "
            "set (--limit 0.1), or leave --limit out to run everything."
        )
    problems += [p for p in [_model_problem(config.model or "hf")] if p]
    model_args = config.model_args if isinstance(config.model_args, dict) else {}
    if "device" in model_args and config.device is not None:
        # lm-eval 0.4.13 passes its --device (default cuda:0) next to model_args: the model gets device twice
        problems.append(
            f"--model_args device={model_args['device']}: lm-eval also passes its own --device (now "
            f"{config.device}) to the model, which then stops with 'got multiple values for keyword argument "
            f"device'. Drop device from --model_args and give --device {model_args['device']} instead."
        )
    if config.output_path:
        folder = Path(config.output_path).expanduser()
        reason = unwritable_reason(folder.parent if folder.suffix == ".json" else folder)
        if reason:
            problems.append(
                f"--output_path {config.output_path}: {reason}. lm-eval would run everything and then "
                "fail to save the results: choose a folder you can write to."
            )
    if config.use_cache:
        folder = Path(os.path.dirname(os.path.expanduser(config.use_cache)) or ".")
        reason = unwritable_reason(folder)
        if reason:
            problems.append(
                f"--use_cache {config.use_cache}: {reason} (lm-eval writes {config.use_cache}_rank0.db "
                "there). Choose a path in a folder you can write to."
            )
    return problems


_LM_EVAL_REFUSALS = {  # lm-eval's message -> the pack's, with the fix
    "Need to specify task": "--tasks is missing: name what to run, e.g. --tasks emsqa_public (`medeval list` shows "
    "the pack's tasks, `lm-eval ls tasks` lm-eval's).",
    "Specify --output_path": "--log_samples (and --predict_only) write the samples into the --output_path folder: "
    "add --output_path DIR.",
}


def lm_eval_config(argv: Sequence[str]) -> tuple[Any, str | None]:
    """lm-eval's EvaluatorConfig for ``lm-eval run ARGV`` (None if its parser refuses the line), or the problem it
    raises. Nothing is printed or logged: lm-eval parses the line again when it runs."""
    import contextlib
    import io
    import logging

    from lm_eval.config.evaluate_config import EvaluatorConfig

    namespace, error = lm_eval_namespace(argv)
    if error is not None:
        try:
            parse_metadata(argv)
        except MedevalDataError:
            return None, None  # the --metadata problem, reported by parse_metadata
        return None, f"lm-eval refuses the command line: {' '.join(str(error).split())}"
    if namespace is None:  # argparse's usage error: lm-eval prints it when it parses the line itself
        return None, None
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                return EvaluatorConfig.from_cli(namespace), None
            except (ValueError, TypeError, OSError) as exc:
                text = " ".join(str(exc).split())
                known = next((mine for theirs, mine in _LM_EVAL_REFUSALS.items() if text.startswith(theirs)), None)
                return None, known or f"lm-eval refuses the command line: {text}"
    finally:
        logging.disable(previous)


def _model_problem(name: str) -> str | None:
    import lm_eval.models  # noqa: F401  (fills the registry)
    from lm_eval.api.registry import MODEL_REGISTRY

    if name == "medeval-scripted":
        import medeval_metrics.testing.scripted  # noqa: F401  (registers it)
    known = sorted(MODEL_REGISTRY.keys())
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    suggestion = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"--model {name!r} is not a model backend lm-eval knows.{suggestion} Known: {', '.join(known)}."
