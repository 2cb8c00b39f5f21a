"""Task YAMLs of the medeval pack (installed as ``medeval_metrics.tasks``); no code lives here."""
