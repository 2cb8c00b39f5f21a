"""A well-known key format is redacted with nothing in front of it that names it a key."""

from __future__ import annotations

import pytest

from medeval_metrics.redact import REDACTED, credential_fields, redact_text

PROJECT_KEY = "sk-proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz1bC4eF7hI0kL3nO6qR"


@pytest.mark.parametrize(
    "text, expected",
    [
        (PROJECT_KEY, REDACTED),
        (f"the model echoed {PROJECT_KEY} back", f"the model echoed {REDACTED} back"),
        (f"({PROJECT_KEY})", f"({REDACTED})"),
        (f"line one\n{PROJECT_KEY}\nline three", f"line one\n{REDACTED}\nline three"),
        # a service-account key and an old-style key, also unlabelled
        ("x sk-svcacct-Qw3eRt6yUi9oPa2sDf5gHj8k y", f"x {REDACTED} y"),
        ("x sk-Qw3eRt6yUi9oPa2sDf5gHj8kLz y", f"x {REDACTED} y"),
        # too short to be a key, and a word that merely starts so, are left alone
        ("sk-proj-short", "sk-proj-short"),
        ("task-proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz", "task-proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz"),
    ],
)
def test_unlabelled_openai_style_key_is_redacted(text, expected):
    assert redact_text(text) == expected


def test_an_unlabelled_key_in_a_settings_value_is_found_wherever_it_is_given():
    assert credential_fields({"extra": {"note": f"Answer: B {PROJECT_KEY}"}, "model": "m"}) == ["extra.note"]
