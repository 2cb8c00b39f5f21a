"""Compatibility alias, kept for users' code: ``medeval_metrics.evaluate_modules.emrqa_inputs`` moved to
``medeval_metrics.emrqa.evaluate_modules.inputs`` (issue 19); this name is the same module object."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("medeval_metrics.emrqa.evaluate_modules.inputs")
