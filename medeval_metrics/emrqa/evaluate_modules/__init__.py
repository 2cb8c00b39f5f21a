"""emrQA's metrics as ``evaluate`` modules, one folder each (their shared inputs in ``inputs``); found and loaded
by ``medeval_metrics.evaluate_modules``."""
