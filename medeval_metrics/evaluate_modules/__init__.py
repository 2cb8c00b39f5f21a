"""The pack's metrics as Hugging Face ``evaluate`` modules, shipped inside the package and loaded
offline by path (no Hub access):

    import evaluate
    from medeval_metrics import evaluate_modules

    accuracy = evaluate.load(evaluate_modules.path("emsqa_set_accuracy"))
    accuracy.compute(predictions=[["a", "c"]], references=[["a", "c"]])  # {"accuracy": 1.0, ...}

Each module lives in its benchmark's package as
``medeval_metrics/<benchmark>/evaluate_modules/<name>/<name>.py`` (the layout ``evaluate.load`` expects
for a folder; names carry the benchmark's prefix, so they are unique across the pack); this package
holds what they share (``base``) and finds them. Each subclasses ``base.PerItemMeanMetric`` with the
per-item scorer the lm-eval task uses, so the mean it returns equals the task's reported score on the
same inputs. Adding a metric is one folder with a file of a few lines (copy
``emsqa/evaluate_modules/emsqa_set_f1``), a README.md, and hand-computed cases (and equality with the
task) in ``tests/core/test_report_evaluate_modules.py``. A metric with more inputs declares them as extra feature columns, e.g. ``emrqa_template_accuracy``
(predictions, references and the gold ``templates``) and the emrQA evidence modules (``notes``);
their shared pieces are in ``medeval_metrics.emrqa.evaluate_modules.inputs``::

    class EmrqaTemplateAccuracy(base.PerItemMeanMetric):
        result_key = "template_acc"
        features = datasets.Features({"predictions": datasets.Value("string"),
                                      "references": datasets.Value("string"),
                                      "templates": datasets.Value("string")})
        per_item = staticmethod(lambda output, gold_lf, templates:
                                emrqa_metrics.score_logical_form(output, gold_lf, templates)["template_acc"])

(module files import ``base`` as a module, never its class by name: ``evaluate.load`` takes the
first metric class it finds in the file.)
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["available", "load", "path"]

FOLDER = "evaluate_modules"  # medeval_metrics/<benchmark>/evaluate_modules/<name>/<name>.py


def _modules() -> dict[str, Traversable]:
    """Every shipped module by name, found in the benchmarks' packages (this package names none)."""
    found: dict[str, Traversable] = {}
    for package in resources.files("medeval_metrics").iterdir():
        folder = package.joinpath(FOLDER)
        if not (package.is_dir() and folder.is_dir()):
            continue
        for module in folder.iterdir():
            if module.is_dir() and module.joinpath(f"{module.name}.py").is_file():
                if module.name in found:
                    raise ValueError(
                        f"evaluate module {module.name!r} is in both {found[module.name]} and {module}; "
                        "rename one (names carry their benchmark's prefix)."
                    )
                found[module.name] = module
    return found


def available() -> list[str]:
    """Names of the modules shipped with the pack."""
    return sorted(_modules())


def path(name: str) -> str:
    """The folder of module ``name``, for ``evaluate.load(path(name))``."""
    modules = _modules()
    if name not in modules:
        raise KeyError(f"no evaluate module {name!r} in medeval_metrics; available: {', '.join(sorted(modules))}")
    return str(modules[name])


def load(name: str, **kwargs):
    """``evaluate.load`` of a shipped module by name."""
    import evaluate

    return evaluate.load(path(name), **kwargs)
