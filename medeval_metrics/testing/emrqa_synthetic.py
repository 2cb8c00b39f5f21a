"""Compatibility alias, kept for users' code: ``medeval_metrics.testing.emrqa_synthetic`` moved to
``medeval_metrics.emrqa.synthetic`` (issue 19); this name is the same module object."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("medeval_metrics.emrqa.synthetic")
