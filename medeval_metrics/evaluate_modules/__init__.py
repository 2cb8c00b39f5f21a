"""The pack's metrics as Hugging Face ``evaluate`` modules, shipped inside the package and loaded
offline by path (no Hub access):

    import evaluate
    from medeval_metrics import evaluate_modules

    accuracy = evaluate.load(evaluate_modules.path("emsqa_set_accuracy"))
    accuracy.compute(predictions=[["a", "c"]], references=[["a", "c"]])  # {"accuracy": 1.0, ...}

Each module lives in ``<name>/<name>.py`` (the layout ``evaluate.load`` expects for a folder) and
subclasses ``base.PerItemMeanMetric`` with the per-item scorer the lm-eval task uses, so the mean
it returns equals the task's reported score on the same inputs. Adding a metric is one folder with
a file of a few lines (copy ``emsqa_set_f1``), a README.md, and rows in
``tests/test_report_evaluate_modules.py`` (hand-computed cases, and equality with the task). A
metric with more inputs declares them as extra feature columns, e.g. ``emrqa_template_accuracy``
(predictions, references and the gold ``templates``) and the emrQA evidence modules (``notes``);
their shared pieces are in ``emrqa_inputs``::

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

__all__ = ["available", "load", "path"]


def available() -> list[str]:
    """Names of the modules shipped with the pack."""
    root = resources.files(__name__)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.joinpath(f"{p.name}.py").is_file())


def path(name: str) -> str:
    """The folder of module ``name``, for ``evaluate.load(path(name))``."""
    if name not in available():
        raise KeyError(f"no evaluate module {name!r} in medeval_metrics; available: {', '.join(available())}")
    return str(resources.files(__name__).joinpath(name))


def load(name: str, **kwargs):
    """``evaluate.load`` of a shipped module by name."""
    import evaluate

    return evaluate.load(path(name), **kwargs)
