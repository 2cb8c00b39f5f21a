"""EMSQA's metrics as ``evaluate`` modules, one folder each; found and loaded by ``medeval_metrics.evaluate_modules``."""
