"""Credential redaction: what counts as a secret, and `medeval run`'s log wrapper (every logger's records, handlers
added during the run included), which is the only place it applies: no process-wide hook is installed."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import subprocess
import sys

import pytest

from medeval_metrics import lm_eval_compat, redact
from medeval_metrics.redact import REDACTED, redact_text

CANARY = "canary-Zq7-0123456789abcdef"


@pytest.fixture
def canary_env(monkeypatch):
    """The canary as the OpenAI key, nothing else key-like in the environment."""
    for name in list(__import__("os").environ):
        if name.upper().endswith(("_API_KEY", "_TOKEN", "_KEY", "_SECRET")) or name == redact.SECRET_ENV_VARS_LIST:
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    return CANARY


@pytest.fixture
def installed(canary_env):
    """`medeval run`'s log wrapper for one test (it puts logging's record factory back itself)."""
    factory = logging.getLogRecordFactory()
    with lm_eval_compat.private_run_logs():
        yield
    assert logging.getLogRecordFactory() is factory


# --- redact_text: table of real-looking leaks -> expected text ----------------------------------

LEAK_CASES = [
    # aiohttp's ClientResponseError repr as lm-eval 0.4.13 logs it (headers multidict)
    (
        "headers=<CIMultiDictProxy('Host': '127.0.0.1:1', 'Authorization': 'Bearer sk-live-abcdefghijklmnopqrstuvwx', 'Accept': '*/*')>",
        "headers=<CIMultiDictProxy('Host': '127.0.0.1:1', 'Authorization': 'Bearer [REDACTED]', 'Accept': '*/*')>",
    ),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"),
    ('{"authorization": "tok_123456789"}', '{"authorization": "[REDACTED]"}'),
    ("proxy-authorization=abc123", "proxy-authorization=[REDACTED]"),
    ("sent Bearer eyJhbGciOi.J9x-y", "sent Bearer [REDACTED]"),
    # prose with the word Bearer is not a token
    ("the stretcher Bearer carried the patient", "the stretcher Bearer carried the patient"),
    ("https://api.example/v1?api_key=abc123&model=x", "https://api.example/v1?api_key=[REDACTED]&model=x"),
    ("'x-api-key': 'AAAAbbbb1111'", "'x-api-key': '[REDACTED]'"),
    ("api-key: zzz999", "api-key: [REDACTED]"),
    (
        "model=gpt-4o,auth_token=hunter2hunter2,base_url=http://h",
        "model=gpt-4o,auth_token=[REDACTED],base_url=http://h",
    ),
    ("password = 'p@ss word'", "password = '[REDACTED] word'"),
    ("export ANTHROPIC_API_KEY=abcd1234efgh", "export ANTHROPIC_API_KEY=[REDACTED]"),
    ("MY_SERVICE_TOKEN: 'q1w2e3r4'", "MY_SERVICE_TOKEN: '[REDACTED]'"),
    # lower-case *_token fields of a results JSON are tokenizer settings, not secrets
    ('"tokenizer_pad_token": ["<|endoftext|>", "0"]', '"tokenizer_pad_token": ["<|endoftext|>", "0"]'),
    ('"eos_token": "</s>", "max_tokens": 256', '"eos_token": "</s>", "max_tokens": 256'),
    ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv end", "key [REDACTED] end"),
    ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 is my token", "[REDACTED] is my token"),
    ("no secrets here: dose 5 mg, key findings", "no secrets here: dose 5 mg, key findings"),
    ("", ""),
]


@pytest.mark.parametrize("text, expected", LEAK_CASES)
def test_redact_text_patterns(canary_env, text, expected):
    assert redact_text(text) == expected


def test_env_values_are_redacted_wherever_they_appear_and_named(canary_env, monkeypatch):
    monkeypatch.setenv("MY_GATEWAY_CREDENTIAL", "gw-secret-value-42")
    monkeypatch.setenv(redact.SECRET_ENV_VARS_LIST, "MY_GATEWAY_CREDENTIAL, OTHER_UNSET")
    monkeypatch.setenv("SOME_VENDOR_API_KEY", "vendorkey77")
    text = f"url=http://h/{CANARY}/x raw gw-secret-value-42 and vendorkey77."
    assert redact_text(text) == (
        "url=http://h/[REDACTED:OPENAI_API_KEY]/x raw [REDACTED:MY_GATEWAY_CREDENTIAL] and [REDACTED:SOME_VENDOR_API_KEY]."
    )
    # the value is found even without a key-like context, and the pattern-free mode still removes it
    assert redact_text(f"model said {CANARY}", patterns=False) == "model said [REDACTED:OPENAI_API_KEY]"
    assert redact_text("password: abc12345", patterns=False) == "password: abc12345"


def test_secret_env_var_names_rules(monkeypatch):
    env = {
        "PATH": "/usr/bin",
        "HF_TOKEN": "x",
        "FOO_API_KEY": "x",
        "BAR_KEY": "x",
        "BAZ_SECRET": "x",
        "TOKENIZERS_PARALLELISM": "false",
        "MEDEVAL_EMSQA_PUBLIC_PATH": "/d",
        "MEDEVAL_SECRET_ENV_VARS": "JUDGE_CREDS,  ,PLAIN",
    }
    names = redact.secret_env_var_names(env)
    for expected in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "HF_TOKEN",
        "FOO_API_KEY",
        "BAR_KEY",
        "BAZ_SECRET",
        "JUDGE_CREDS",
        "PLAIN",
    ):
        assert expected in names
    for not_secret in ("PATH", "TOKENIZERS_PARALLELISM", "MEDEVAL_EMSQA_PUBLIC_PATH", ""):
        assert not_secret not in names


def test_short_values_are_settings_not_secrets(canary_env, monkeypatch):
    monkeypatch.setenv("FEATURE_KEY", "on")  # would shred every "on" in the output
    monkeypatch.setenv("HF_TOKEN", "1234567")  # 7 chars: below MIN_SECRET_LENGTH
    assert redact_text("turn it on, 1234567") == "turn it on, 1234567"


def test_longer_secret_containing_a_shorter_one_is_removed_whole(canary_env, monkeypatch):
    monkeypatch.setenv("A_KEY", "abcdefgh")
    monkeypatch.setenv("B_KEY", "abcdefgh-and-more")
    assert redact_text("x abcdefgh-and-more y abcdefgh") == "x [REDACTED:B_KEY] y [REDACTED:A_KEY]"


def test_registered_secret_and_unprintable_object(canary_env):
    redact.register_secret("judge-key-from-file-99")
    redact.register_secret("short")  # ignored: too short to be a key
    assert redact_text("k=judge-key-from-file-99 short") == f"k={REDACTED} short"

    class Unprintable:
        def __str__(self):
            raise RuntimeError("boom")

    assert redact_text(Unprintable()) == "<unprintable Unprintable>"


# --- the log wrapper ------------------------------------------------------------------------------


def _stream_logger(name: str, propagate: bool = False) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.handlers = [handler]
    logger.propagate = propagate
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_log_records_redacted_on_handlers_added_during_the_run(installed):
    # lm-eval's layout: a handler on "lm_eval" (no propagation), records logged by a child logger
    parent, stream = _stream_logger("lm_eval")
    child = logging.getLogger("lm_eval.models.api_models")
    try:
        child.error(
            f"Exception:ClientResponseError(headers={{'Authorization': 'Bearer {CANARY}'}}), (no outputs), retrying."
        )
        child.warning("key is %s and %r", CANARY, {"api_key": "abc12345678"})
        try:
            raise RuntimeError(f"request failed with headers Authorization: Bearer {CANARY}")
        except RuntimeError:
            child.exception("call failed")
        child.info("stack", stack_info=True, extra={})
        child.info("nothing secret: %d docs", 5)
    finally:
        parent.handlers = []
    out = stream.getvalue()
    assert CANARY not in out
    assert "abc12345678" not in out
    assert "'Authorization': 'Bearer [REDACTED:OPENAI_API_KEY]'" in out
    assert "key is [REDACTED:OPENAI_API_KEY] and {'api_key': '[REDACTED]'}" in out
    assert "Traceback (most recent call last)" in out and "RuntimeError: request failed" in out
    assert "nothing secret: 5 docs" in out


def test_record_args_left_alone_when_nothing_to_redact(installed):
    record = logging.getLogger("x").makeRecord("x", logging.INFO, "f", 1, "%s docs", (5,), None)
    assert (record.msg, record.args) == ("%s docs", (5,))


def test_bad_format_arguments_do_not_leak_through_logging_error_report(installed, capsys):
    logger, stream = _stream_logger("medeval.test.badfmt")
    logging.raiseExceptions = True
    logger.error("%d items", CANARY)  # TypeError while formatting: logging prints msg and args
    captured = capsys.readouterr()
    assert "--- Logging error ---" in captured.err
    assert CANARY not in captured.err + stream.getvalue()


def test_root_logger_and_basic_config_redacted(installed, capsys):
    root = logging.getLogger()
    saved = root.handlers[:]
    handler = logging.StreamHandler(sys.stderr)
    root.handlers = [handler]
    try:
        logging.getLogger("some.thirdparty").warning("token in url http://h/?access_token=%s", CANARY)
    finally:
        root.handlers = saved
    err = capsys.readouterr().err
    assert CANARY not in err and "access_token=[REDACTED" in err


def test_lm_eval_s_failure_traceback_is_printed_without_the_key(canary_env, monkeypatch, capsys):
    """No excepthook: `medeval run` itself prints lm-eval's uncaught failure, cleaned, and exits 1."""
    import lm_eval.__main__
    from conftest import FIXTURES

    from medeval_metrics import cli

    def fails():
        raise ConnectionError(f"headers={{'Authorization': 'Bearer {CANARY}'}}")

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", fails)
    hook = sys.excepthook
    meta = json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")})
    assert cli.main(["run", "--model", "hf", "--tasks", "emsqa_private", "--metadata", meta]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "ConnectionError: headers={'Authorization': 'Bearer [REDACTED:OPENAI_API_KEY]'}" in err
    assert CANARY not in err and sys.excepthook is hook


@pytest.mark.e2e
def test_building_a_pack_task_installs_nothing_and_import_stays_cheap(tmp_path):
    """A pack task's loader (lm-eval's ``custom_dataset``) changes no process-wide hook and imports no lm-eval."""
    from conftest import FIXTURES

    code = (
        "import sys, logging, warnings, threading\n"
        "hooks = lambda: (logging.getLogRecordFactory(), warnings.showwarning, sys.excepthook, threading.excepthook)\n"
        "before = hooks()\n"
        "from medeval_metrics.emsqa.data import load_private\n"
        f"load_private(emsqa_private_path={str(FIXTURES / 'emsqa_synthetic.json')!r})\n"
        "assert hooks() == before\n"
        "assert 'lm_eval' not in sys.modules and 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# --- one pattern table for logs and reports --------------------------------------------------------

ONE_TABLE_CASES = [
    # (text, log mode, display mode): the report's redactor used to be the only one catching URLs
    (
        "base_url=https://user:hunter2@example.org/v1",
        "base_url=https://[REDACTED]@example.org/v1",
        "base_url=https://[redacted]@example.org/v1",
    ),
    (
        "proxy http://svc:pa55word@10.0.0.1:8080/",
        "proxy http://[REDACTED]@10.0.0.1:8080/",
        "proxy http://[redacted]@10.0.0.1:8080/",
    ),
    ("mailto-like user@example.org stays", "mailto-like user@example.org stays", "mailto-like user@example.org stays"),
    ("api_key=abc123", "api_key=[REDACTED]", "[redacted]"),
    ("aws AKIAABCDEFGHIJKLMNOP key", "aws [REDACTED] key", "aws [redacted] key"),
    # display mode also drops opaque shapes that would shred hashes in a log
    ("sha a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2", "sha a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2", "sha [redacted]"),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
]


@pytest.mark.parametrize("text, log_mode, display_mode", ONE_TABLE_CASES)
def test_log_and_display_modes_share_one_pattern_table(canary_env, text, log_mode, display_mode):
    from medeval_metrics.redact import redact_for_display
    from medeval_metrics.report.runs import redact as report_redact

    assert redact_text(text) == log_mode
    assert redact_for_display(text) == display_mode == report_redact(text)


def test_display_mode_removes_configured_secret_values(canary_env):
    from medeval_metrics.redact import redact_for_display

    assert redact_for_display(f"model served at /m/{CANARY}") == "model served at /m/[redacted]"


# --- error bodies that quote the request (emrQA notes) ----------------------------------------------

NOTE_BODY = json.dumps(
    {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "bogus"],
                "msg": "Extra inputs",
                "input": {"messages": [{"role": "user", "content": "Pt denies chest pain."}]},
            }
        ]
    }
)


def _sha12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def test_error_body_quoting_the_request_is_withheld_always():
    from medeval_metrics.redact import withhold_request_echoes

    line = f"API request failed! Status code: 422, Response text: {NOTE_BODY}. Retrying..."
    expected = (
        f"API request failed! Status code: 422, Response text: [response body withheld: {len(NOTE_BODY)} chars, "
        f"sha256 {_sha12(NOTE_BODY)}]. Retrying..."
    )
    assert withhold_request_echoes(line) == expected
    assert withhold_request_echoes(line, private_documents=True) == expected
    sync = f"API request failed with error message: {NOTE_BODY}. Retrying..."
    assert "Pt denies" not in withhold_request_echoes(sync)


def test_plain_error_body_is_kept_unless_documents_are_private():
    from medeval_metrics.redact import withhold_request_echoes

    body = '{"error": {"message": "model fake-gpt not found", "code": 404}}'
    line = f"API request failed! Status code: 404, Response text: {body}. Retrying..."
    assert withhold_request_echoes(line) == line
    assert withhold_request_echoes(line, private_documents=True) == (
        f"API request failed! Status code: 404, Response text: [response body withheld: {len(body)} chars, "
        f"sha256 {_sha12(body)}]. Retrying..."
    )
    outputs = "Exception:KeyError('choices'), {'echo': 'Pt denies chest pain.'}, retrying."
    assert withhold_request_echoes(outputs) == outputs
    assert withhold_request_echoes(outputs, private_documents=True) == (
        "Exception:KeyError [details withheld: 46 chars, sha256 "
        f"{_sha12(outputs[len('Exception:KeyError') : -len(', retrying.')])}], retrying."
    )
    nothing = "Exception:ClientResponseError(status=500), (no outputs), retrying."
    assert withhold_request_echoes(nothing, private_documents=True) == nothing
    assert withhold_request_echoes("Running generate_until requests") == "Running generate_until requests"


def test_the_run_withholds_every_error_body_lm_eval_logs_and_the_prompts_it_writes_out(installed):
    parent, stream = _stream_logger("lm_eval")
    child = logging.getLogger("lm_eval.models.api_models")
    writeout = logging.getLogger("lm_eval.evaluator_utils")
    task = logging.getLogger("lm_eval.api.task")
    body = '{"error": "bad request: Pt denies chest pain"}'
    try:
        child.warning(f"API request failed! Status code: 400, Response text: {body}. Retrying...")
        writeout.info(
            "Task: emrqa_smoking; document 0; context prompt (starting on next line):    \nPt denies chest pain.\n"
            "(end of prompt on previous line)\ntarget string or answer choice index (starting on next line):\n"
            "NON-SMOKER\n(end of target on previous line)"
        )
        writeout.info("Request: Instance(request_type='generate_until', doc={'context': 'Pt denies chest pain.'})")
        task.debug('Both target_delimiter " " and target choice: " Pt denies" have whitespace')
        logging.getLogger("medeval.probe").warning("judge a: 3 of 4 items scored")  # the pack's own: as it is
    finally:
        parent.handlers = []
    first, *rest = stream.getvalue().splitlines()
    assert first == (
        f"WARNING API request failed! Status code: 400, Response text: [response body withheld: "
        f"{len(body)} chars, sha256 {_sha12(body)}]. Retrying..."
    )
    assert "Pt denies" not in stream.getvalue() and "NON-SMOKER" not in stream.getvalue()
    assert "[prompt withheld: 21 chars, sha256 " in stream.getvalue() and "[target withheld: " in stream.getvalue()
    assert "Request: [request withheld: " in stream.getvalue() and "[choice withheld: " in stream.getvalue()
