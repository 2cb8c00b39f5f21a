"""Credential redaction: what counts as a secret, and every boundary hook (logging, warnings,
uncaught exceptions) with handlers and loggers that exist before and after install()."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import subprocess
import sys
import threading
import warnings

import pytest

from medeval_metrics import redact
from medeval_metrics.redact import REDACTED, redact_obj, redact_text

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
    """install() for one test, then every global hook put back as it was."""
    from medeval_metrics.redact import hooks

    saved = (logging.getLogRecordFactory(), warnings.showwarning, sys.excepthook, threading.excepthook)
    # an emrQA task built earlier in this process turns on request-echo withholding: start without it
    saved_private = set(hooks._private_documents)
    hooks._private_documents.clear()
    redact.install()
    yield
    logging.setLogRecordFactory(saved[0])
    warnings.showwarning, sys.excepthook, threading.excepthook = saved[1], saved[2], saved[3]
    hooks._private_documents.update(saved_private)


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


def test_redact_obj_results_json_shape(canary_env):
    results = {
        "config": {"model_args": "model=m,api_key=abc12345678,base_url=http://h", "batch_size": 1},
        "configs": {"t": {"metadata": {"auth_token": "zzz", "version": 1.0, "pretrained": "tiny"}}},
        "list": [CANARY, 3, None, ("x", CANARY)],
        "tokenizer_pad_token": ["<|endoftext|>", "0"],
    }
    clean = redact_obj(results)
    assert clean == {
        "config": {"model_args": "model=m,api_key=[REDACTED],base_url=http://h", "batch_size": 1},
        "configs": {"t": {"metadata": {"auth_token": REDACTED, "version": 1.0, "pretrained": "tiny"}}},
        "list": ["[REDACTED:OPENAI_API_KEY]", 3, None, ("x", "[REDACTED:OPENAI_API_KEY]")],
        "tokenizer_pad_token": ["<|endoftext|>", "0"],
    }
    assert results["list"][0] == CANARY  # a copy, the input is untouched


# --- the hooks ------------------------------------------------------------------------------------


def _stream_logger(name: str, propagate: bool = False) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.handlers = [handler]
    logger.propagate = propagate
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_log_records_redacted_on_handlers_added_after_install(installed):
    # lm-eval's layout: a handler on "lm_eval" (no propagation), records logged by a child logger
    parent, stream = _stream_logger("lm_eval")
    child = logging.getLogger("lm_eval.models.api_models")
    try:
        child.error(f"Exception:ClientResponseError(headers={{'Authorization': 'Bearer {CANARY}'}}), retrying.")
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


@pytest.mark.e2e
def test_warnings_redacted(canary_env):
    # a fresh interpreter: pytest records warnings itself, which would hide stderr
    code = (
        "import warnings\n"
        "from medeval_metrics import redact\n"
        "redact.install()\n"
        f"warnings.warn('retrying with api_key={CANARY}', UserWarning)\n"
    )
    result = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "UserWarning: retrying with api_key=[REDACTED" in result.stderr
    assert CANARY not in result.stderr


@pytest.mark.e2e
def test_uncaught_exception_in_fresh_process_is_redacted(canary_env):
    code = (
        "from medeval_metrics import redact\n"
        "redact.install()\n"
        f"raise ConnectionError(\"headers={{'Authorization': 'Bearer {CANARY}'}}\")\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "ConnectionError: headers={'Authorization': 'Bearer [REDACTED:OPENAI_API_KEY]'}" in result.stderr
    assert CANARY not in result.stderr


def test_excepthook_redacts_uncaught_exception(installed, capsys):
    try:
        raise ConnectionError(f"headers={{'Authorization': 'Bearer {CANARY}'}}")
    except ConnectionError:
        sys.excepthook(*sys.exc_info())
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "ConnectionError: headers={'Authorization': 'Bearer [REDACTED:OPENAI_API_KEY]'}" in err
    assert CANARY not in err


def test_thread_exception_redacted(installed, capsys):
    def boom():
        raise ValueError(f"x-api-key: {CANARY}")

    thread = threading.Thread(target=boom, name="judge-worker")
    thread.start()
    thread.join()
    err = capsys.readouterr().err
    assert "Exception in thread judge-worker" in err and "ValueError: x-api-key: [REDACTED" in err
    assert CANARY not in err


def test_install_is_idempotent_and_rewraps_a_replaced_factory(installed):
    factory = logging.getLogRecordFactory()
    redact.install()
    assert logging.getLogRecordFactory() is factory and redact.installed()
    logging.setLogRecordFactory(logging.LogRecord)  # another library replaces the factory
    assert not redact.installed()
    redact.install()
    assert redact.installed()
    record = logging.getLogger("x").makeRecord("x", logging.INFO, "f", 1, "key %s", (CANARY,), None)
    assert record.getMessage() == "key [REDACTED:OPENAI_API_KEY]"


def test_redacting_stream_passes_other_attributes():
    sink = io.StringIO()
    stream = redact.RedactingStream(sink)
    assert stream.write("Authorization: Bearer abc.def.123\n") == len("Authorization: Bearer abc.def.123\n")
    stream.writelines(["api_key=xyz12345\n"])
    assert sink.getvalue() == "Authorization: Bearer [REDACTED]\napi_key=[REDACTED]\n"
    assert stream.getvalue() == sink.getvalue()  # delegated


def test_secrets_in_model_args_are_found():
    from medeval_metrics.redact import secrets_in_model_args

    argv = [
        "--model",
        "x",
        "--model_args",
        "model=m,api_key=k-111111111, auth_token=t-22222222,base_url=u",
        "--model_args=password=p-33333333",
        "--tasks",
        "t",
    ]
    assert secrets_in_model_args(argv) == ["k-111111111", "t-22222222", "p-33333333"]


@pytest.mark.e2e
def test_loaders_turn_redaction_on_and_import_stays_cheap(tmp_path):
    """Building a pack task (its loader, lm-eval's ``custom_dataset``) installs the hooks, without
    importing lm-eval; a DataSource lookup alone no longer does (no hidden side effect)."""
    from conftest import FIXTURES

    code = (
        "import sys, logging, warnings\n"
        "from medeval_metrics import redact\n"
        "from medeval_metrics.data import DataSource\n"
        "from medeval_metrics.emsqa.data import load_private\n"
        "assert not redact.installed()\n"
        "DataSource(key='x_path', description='X', how_to_get='.').local_path({})\n"
        "assert not redact.installed()\n"
        "assert 'lm_eval' not in sys.modules and 'torch' not in sys.modules\n"
        f"load_private(emsqa_private_path={str(FIXTURES / 'emsqa_synthetic.json')!r})\n"
        "assert redact.installed()\n"
        "assert 'lm_eval' not in sys.modules\n"
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


def test_header_dicts_in_results_are_blanked_by_value_position(canary_env):
    model_args = {
        "model": "m",
        "header": {"X-Gateway-Auth": "opaque", "Content-Type": "application/json"},
        "headers": {"x-custom": "v"},
        "base_url": "http://h",
    }
    assert redact_obj({"model_args": model_args}) == {
        "model_args": {
            "model": "m",
            "header": {"X-Gateway-Auth": REDACTED, "Content-Type": "application/json"},
            "headers": {"x-custom": REDACTED},
            "base_url": "http://h",
        }
    }


MODEL_ARGS_CASES = [
    # JSON --model_args with a custom header: its value is a secret whatever the header's name
    (
        ["--model_args", '{"model": "m", "header": {"X-Gateway-Auth": "gw-0123456789", "Accept": "*/*"}}'],
        ["gw-0123456789"],
    ),
    # several values after one flag (lm-eval's nargs="+"), the short flag
    (["-a", "model=m", "api_key=k-0123456789", "--tasks", "t"], ["k-0123456789"]),
    # a header dict given as JSON inside k=v form, nested dicts
    (["--model_args", '{"model": "m", "extra": {"auth_token": "tok-0123456789"}}'], ["tok-0123456789"]),
    (["--model_args", "model=m,base_url=http://h", "--tasks", "api_key=not-model-args"], []),
]


@pytest.mark.parametrize("argv, expected", MODEL_ARGS_CASES)
def test_secrets_in_model_args_by_value(argv, expected):
    from medeval_metrics.redact import secrets_in_model_args

    assert secrets_in_model_args(argv) == expected


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


def test_private_documents_mode_applies_to_lm_eval_log_records(installed, monkeypatch):
    from medeval_metrics.redact import hooks

    monkeypatch.setattr(hooks, "_private_documents", set())
    parent, stream = _stream_logger("lm_eval")
    child = logging.getLogger("lm_eval.models.api_models")
    body = '{"error": "bad request: Pt denies chest pain"}'
    try:
        child.warning(f"API request failed! Status code: 400, Response text: {body}. Retrying...")
        redact.install(private_documents="emrQA clinical notes")
        child.warning(f"API request failed! Status code: 400, Response text: {body}. Retrying...")
    finally:
        parent.handlers = []
    first, second = stream.getvalue().splitlines()
    assert "Pt denies chest pain" in first  # not quoting the request, no private documents: kept
    assert second == (
        f"WARNING API request failed! Status code: 400, Response text: [response body withheld: "
        f"{len(body)} chars, sha256 {_sha12(body)}]. Retrying..."
    )
    assert redact.private_documents_in_use() == ("emrQA clinical notes",)


def test_install_in_the_lm_eval_command_registers_its_model_args_secrets(installed, monkeypatch):
    """Plain ``lm_eval --include_path <pack>``: the loader's install() reads the command's own
    --model_args, so a header value given there is redacted by value from then on."""
    import io as io_module

    monkeypatch.setattr(sys, "stdout", io_module.StringIO())
    monkeypatch.setattr(sys, "stderr", io_module.StringIO())
    header_value = "opaque-gateway-value-4242"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "/venv/bin/lm_eval",
            "--model",
            "local-chat-completions",
            "--model_args",
            json.dumps({"model": "m", "header": {"X-Gateway-Auth": header_value}}),
        ],
    )
    assert redact_text(f"headers={{'X-Gateway-Auth': '{header_value}'}}") != "headers={'X-Gateway-Auth': '[REDACTED]'}"
    redact.install()
    assert redact_text(f"headers={{'X-Gateway-Auth': '{header_value}'}}") == "headers={'X-Gateway-Auth': '[REDACTED]'}"
    assert isinstance(sys.stdout, redact.RedactingStream)  # the command's console is redacted too
