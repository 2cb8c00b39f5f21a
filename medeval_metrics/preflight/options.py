"""lm-eval's own options, as ``RunSettings`` holds them: what lm-eval would refuse or lose only after building the
model (or after the whole run)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from medeval_metrics.files import unwritable_reason
from medeval_metrics.preflight.argv import RunSettings

_LM_EVAL_DEFAULT_DEVICE = "cuda:0"  # lm-eval 0.4.13's EvaluatorConfig.device, read below when lm-eval has one


def run_option_problems(settings: RunSettings) -> list[str]:
    """What lm-eval would refuse or lose only after building the model (or after the whole run): no --tasks,
    --log_samples without --output_path, --limit 0 or below, an unknown --model, --device given twice, an
    --output_path or --use_cache that cannot be written."""
    problems = []
    if settings.tasks is None:
        problems.append(
            "--tasks is missing: name what to run, e.g. --tasks emsqa_public (`medeval list` shows the pack's tasks, "
            "`lm-eval ls tasks` lm-eval's)."
        )
    if settings.writes_samples and not settings.output_path:
        problems.append(
            "--log_samples (and --predict_only) write the samples into the --output_path folder: add --output_path DIR."
        )
    if settings.limit is not None and settings.limit <= 0:
        problems.append(
            f"--limit {settings.limit:g} selects no items: give a count (--limit 20) or a fraction of each "
            "set (--limit 0.1), or leave --limit out to run everything."
        )
    problems += [p for p in [_model_problem(settings.model or "hf")] if p]
    if "device" in settings.model_args:
        # lm-eval 0.4.13 passes its --device (default cuda:0) next to model_args: the model gets device twice
        device = settings.device or _lm_eval_default_device()
        if device is not None:
            problems.append(
                f"--model_args device={settings.model_args['device']}: lm-eval also passes its own --device (now "
                f"{device}) to the model, which then stops with 'got multiple values for keyword argument "
                f"device'. Drop device from --model_args and give --device {settings.model_args['device']} instead."
            )
    if settings.output_path:
        folder = Path(settings.output_path).expanduser()
        reason = unwritable_reason(folder.parent if folder.suffix == ".json" else folder)
        if reason:
            problems.append(
                f"--output_path {settings.output_path}: {reason}. lm-eval would run everything and then "
                "fail to save the results: choose a folder you can write to."
            )
    if settings.use_cache:
        folder = Path(os.path.dirname(os.path.expanduser(settings.use_cache)) or ".")
        reason = unwritable_reason(folder)
        if reason:
            problems.append(
                f"--use_cache {settings.use_cache}: {reason} (lm-eval writes {settings.use_cache}_rank0.db "
                "there). Choose a path in a folder you can write to."
            )
    return problems


def _lm_eval_default_device() -> str | None:
    """The --device lm-eval passes when none is given (its run configuration's default)."""
    import dataclasses

    try:
        from lm_eval.config.evaluate_config import EvaluatorConfig
    except ImportError:
        return _LM_EVAL_DEFAULT_DEVICE
    field = next((f for f in dataclasses.fields(EvaluatorConfig) if f.name == "device"), None)
    return _LM_EVAL_DEFAULT_DEVICE if field is None else field.default


def _model_problem(name: str) -> str | None:
    """An --model lm-eval's model registry does not hold (``medeval run`` registers the pack's scripted model,
    through the demo, before the checks)."""
    import lm_eval.models  # noqa: F401  (fills the registry)
    from lm_eval.api.registry import MODEL_REGISTRY

    known = sorted(MODEL_REGISTRY.keys())
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    suggestion = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"--model {name!r} is not a model backend lm-eval knows.{suggestion} Known: {', '.join(known)}."


__all__ = ["run_option_problems", "unwritable_reason"]
