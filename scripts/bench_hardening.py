"""Hardening costs, measured in one run:

- each model-output parser on 1 MB outputs (random unicode and the repeated patterns that once
  made emsqa's regexes exponential or quadratic): worst and median seconds, as a share of the
  0.5-second budget (issue 15);
- ``redact_text`` on 1 MB of log-like text;
- the LogRecord-factory redaction: cost per log record with and without it (ratio).
"""

from __future__ import annotations

import io
import logging
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's tests/ for PARSERS

ONE_MB = 1_000_000
SEEDS = [
    "**A, ",
    '["a", "b"] ',
    "answers are a, ",
    "A and ",
    "(a) ",
    '"answer": [',
    "<think>",
    "\\boxed{",
    "é中😀\x00",
    "The answer is (B). ",
    "{",
    '{"',
    '{"a": ',
    '{"":',
    '{"a": 1, "b": ',
    '{"a": [[1]], "b": ',
    '[{"a": [',
    '{"\\"',
    '{"a": 1} ',
]


def _one_mb(seed: str) -> str:
    return (seed * (ONE_MB // len(seed) + 1))[:ONE_MB]


def _random_unicode(rng: random.Random) -> str:
    return "".join(chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x80, 0x3000)))) for _ in range(ONE_MB))


def _time(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _parser_lines() -> list[str]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tests.core.test_hardening_parsers import PARSERS

    rng = random.Random(0)
    inputs = {seed: _one_mb(seed) for seed in SEEDS}
    inputs["random unicode"] = _random_unicode(rng)
    lines = []
    for parser in PARSERS:
        times = {name: _time(parser.parse, text) for name, text in inputs.items()}
        worst = max(times, key=times.get)
        lines.append(
            f"{parser.name:30s} 1 MB: worst {times[worst]:.3f} s ({times[worst] / 0.5:.0%} of the 0.5 s budget, "
            f"input {worst!r}), median {statistics.median(times.values()):.3f} s"
        )
    return lines


def _redaction_lines() -> list[str]:
    from medeval_metrics import redact

    os.environ["BENCH_FAKE_API_KEY"] = "bench-canary-0123456789"
    line = (
        "2026-11-30 WARNING [models.api_models:521] Exception:ClientResponseError(headers=<'Authorization': "
        "'Bearer bench-canary-0123456789', 'Accept': '*/*'>) retrying. "
    )
    text = _one_mb(line)
    seconds = _time(redact.redact_text, text)
    out = [f"redact_text 1 MB of leaking log lines: {seconds:.3f} s"]

    def log_many(n: int = 20_000) -> float:
        logger = logging.getLogger("bench.hardening")
        logger.handlers = [logging.StreamHandler(io.StringIO())]
        logger.propagate = False
        logger.setLevel(logging.INFO)
        start = time.perf_counter()
        for i in range(n):
            logger.info("Running request %d of %s", i, "generate_until")
        return (time.perf_counter() - start) / n

    from medeval_metrics.lm_eval_compat import private_run_logs

    plain = statistics.median(log_many() for _ in range(3))
    with private_run_logs():  # medeval run's log wrapper, as it runs
        redacted = statistics.median(log_many() for _ in range(3))
    out.append(
        f"log record without / with redaction: {plain * 1e6:.1f} / {redacted * 1e6:.1f} us "
        f"(x{redacted / plain:.2f}; {len(redact.secret_env_var_names())} secret env vars watched)"
    )
    return out


def run() -> list[str]:
    return _parser_lines() + _redaction_lines()


if __name__ == "__main__":
    for result_line in run():
        print(result_line)
