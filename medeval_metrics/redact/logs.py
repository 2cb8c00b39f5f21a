"""One log record, cleaned: what ``medeval run``'s log wrapper (``lm_eval_compat.private_run_logs``) does to each
record made while the run lasts.

Every record: credentials by shape and by value (``redact.text``), in its message, exception and stack text.
lm-eval's records also lose what quotes the prompt: the response body logged for a failed API request, the
outputs in its "Exception: ..., retrying." line, the prompt, target and request of a ``--write_out`` line, and
the answer choice of its DEBUG whitespace notes; each replaced by its length and hash.
"""

from __future__ import annotations

import logging
import re
import traceback

from medeval_metrics.redact.text import describe_withheld, redact_text, withhold_request_echoes

__all__ = ["clean_log_record", "withhold_prompts"]

# lm-eval 0.4.13's lines that quote a prompt or a document (evaluator_utils.print_writeout, api/task.py DEBUG)
_QUOTED = (
    (
        re.compile(
            r"(context prompt \(starting on next line\):[ \t]*\n)(.*?)(\n\(end of prompt on previous line\))", re.DOTALL
        ),
        "prompt withheld",
    ),
    (
        re.compile(r"(\(starting on next line\):\n)(.*?)(\n\(end of target on previous line\))", re.DOTALL),
        "target withheld",
    ),
    (re.compile(r"\A(Request: )(.+)()\Z", re.DOTALL), "request withheld"),
    (re.compile(r'(target choice: ")(.*?)(" (?:have|do not have) whitespace)', re.DOTALL), "choice withheld"),
)


def withhold_prompts(message: str) -> str:
    """lm-eval's ``--write_out`` and DEBUG lines with the prompt, target, request or choice they quote replaced by
    its length and hash; any other text as it is."""
    for regex, what in _QUOTED:
        message = regex.sub(lambda m, what=what: m.group(1) + describe_withheld(m.group(2), what) + m.group(3), message)
    return message


def _clean_lm_eval_message(text: str) -> str:
    return withhold_prompts(withhold_request_echoes(redact_text(text), private_documents=True))


def clean_log_record(record: logging.LogRecord) -> None:
    """Clean ``record`` in place (see the module's docstring)."""
    from_lm_eval = record.name == "lm_eval" or record.name.startswith("lm_eval.")
    clean = _clean_lm_eval_message if from_lm_eval else redact_text
    try:
        message = record.getMessage()
    except Exception:  # bad format arguments: logging would print msg and args raw in its error report
        record.msg = clean(str(record.msg))
        if isinstance(record.args, dict):
            record.args = {k: redact_text(v) for k, v in record.args.items()}
        elif record.args:
            record.args = tuple(redact_text(a) for a in record.args)
    else:
        cleaned = clean(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
    if record.exc_info and record.exc_info[0] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        cleaned = redact_text(text)
        if cleaned != text:
            # Formatter.format prints exc_text when set; dropping exc_info stops handlers that render the
            # exception object themselves from printing the original
            record.exc_text, record.exc_info = cleaned, None
    elif record.exc_text:
        record.exc_text = redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)
