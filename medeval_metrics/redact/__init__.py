"""Keep credentials (and private documents) out of what the pack and, under ``medeval run``, lm-eval print.

Two modules, one job each, and no process-wide hook:

* ``redact.text``: pure functions. What a credential looks like (one pattern table), redaction of text,
  secret values from the environment, withholding of error bodies that quote the request, and finding the keys
  a settings object holds (``credential_fields``: ``medeval run`` refuses keys where lm-eval would copy them).
* ``redact.logs``: one log record cleaned; what ``medeval run``'s log wrapper
  (``lm_eval_compat.private_run_logs``) applies to each record while the run lasts.

Reports and model cards print through ``redact_for_display``. Everything public is re-exported here:
``from medeval_metrics import redact; redact.redact_text(s)``.
"""

from __future__ import annotations

from medeval_metrics.redact.logs import clean_log_record, withhold_prompts
from medeval_metrics.redact.text import (
    DISPLAY_REDACTED,
    DOCUMENTED_SECRET_ENV_VARS,
    MIN_SECRET_LENGTH,
    REDACTED,
    SECRET_ENV_VARS_LIST,
    credential_fields,
    describe_withheld,
    is_secret_key_name,
    redact_for_display,
    redact_text,
    register_secret,
    secret_env_var_names,
    withhold_request_echoes,
)

__all__ = [
    "DISPLAY_REDACTED",
    "DOCUMENTED_SECRET_ENV_VARS",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_ENV_VARS_LIST",
    "clean_log_record",
    "credential_fields",
    "describe_withheld",
    "is_secret_key_name",
    "redact_for_display",
    "redact_text",
    "register_secret",
    "secret_env_var_names",
    "withhold_prompts",
    "withhold_request_echoes",
]
