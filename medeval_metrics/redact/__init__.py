"""Keep credentials (and private documents) out of everything the pack and lm-eval print or write.

Two modules, one job each:

* ``redact.text``: pure functions. What a credential looks like (one pattern table), redaction of
  text and JSON-like objects, secret values from the environment and the command line, and
  withholding of error bodies that quote the request.
* ``redact.hooks``: the process-wide hooks (log record factory, warnings, except hooks, console
  streams), installed once from the pack's entry points: the ``medeval`` command, the task loaders
  and the judge.

lm-eval's result writer is redacted by a patch in ``medeval_metrics.lm_eval_compat``.
Everything public is re-exported here: ``from medeval_metrics import redact; redact.redact_text(s)``.
"""

from __future__ import annotations

from medeval_metrics.redact.hooks import (
    RedactingStream,
    install,
    installed,
    private_documents_in_use,
    wrap_console_streams,
)
from medeval_metrics.redact.text import (
    DISPLAY_REDACTED,
    DOCUMENTED_SECRET_ENV_VARS,
    MIN_SECRET_LENGTH,
    REDACTED,
    SECRET_ENV_VARS_LIST,
    describe_withheld,
    is_secret_key_name,
    redact_for_display,
    redact_obj,
    redact_text,
    register_secret,
    secret_env_var_names,
    secrets_in_model_args,
    withhold_request_echoes,
)

__all__ = [
    "DISPLAY_REDACTED",
    "DOCUMENTED_SECRET_ENV_VARS",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_ENV_VARS_LIST",
    "RedactingStream",
    "describe_withheld",
    "install",
    "installed",
    "is_secret_key_name",
    "private_documents_in_use",
    "redact_for_display",
    "redact_obj",
    "redact_text",
    "register_secret",
    "secret_env_var_names",
    "secrets_in_model_args",
    "withhold_request_echoes",
    "wrap_console_streams",
]
