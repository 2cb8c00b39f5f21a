"""The judges file: every setting's type and range checked before any generation, and a key pasted as a
variable name never echoed (issue 22, items 6 and 9)."""

from __future__ import annotations

import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.config import panel_from_obj

JUDGE = {
    "name": "j",
    "backend": "local-chat-completions",
    "model": "m",
    "base_url": "http://127.0.0.1:9/v1/chat/completions",
}


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("timeout", None, "'timeout' must be a number of seconds > 0, e.g. 120 (got None)"),
        ("timeout", "30", "'timeout' must be a number of seconds > 0, e.g. 120 (got '30')"),
        ("timeout", 0, "'timeout' must be a number of seconds > 0, e.g. 120 (got 0)"),
        ("timeout", -1, "'timeout' must be a number of seconds > 0, e.g. 120 (got -1)"),
        ("timeout", float("nan"), "'timeout' must be a number of seconds > 0, e.g. 120 (got nan)"),
        ("backoff_base", None, "'backoff_base' must be a number of seconds > 0, e.g. 1 (got None)"),
        ("backoff_max", "30s", "'backoff_max' must be a number of seconds > 0, e.g. 30 (got '30s')"),
        ("cache", 5, "'cache' must be a file path, or null for no cache (got 5)"),
        ("cache", "", "'cache' must be a file path, or null for no cache (got '')"),
        ("rubric", ["a.yaml"], "'rubric' must be a rubric YAML file path, or null (got ['a.yaml'])"),
        ("require_answer_id", "no", "'require_answer_id' must be true or false (got 'no')"),
        ("require_answer_id", 1, "'require_answer_id' must be true or false (got 1)"),
        ("concurrency", 0, "'concurrency' must be a whole number >= 1 (got 0)"),
        ("concurrency", 2.5, "'concurrency' must be a whole number >= 1 (got 2.5)"),
        ("concurrency", True, "'concurrency' must be a whole number >= 1 (got True)"),
        ("max_retries", "4", "'max_retries' must be a whole number >= 0 (got '4')"),
        ("max_reasks", -1, "'max_reasks' must be a whole number >= 0 (got -1)"),
        ("fail_fast", None, "'fail_fast' must be a whole number >= 0 (0: never stop a judge) (got None)"),
    ],
)
def test_a_setting_of_the_wrong_type_or_range_is_one_line_naming_it(setting, value, expected):
    with pytest.raises(MedevalDataError) as caught:
        panel_from_obj({"judges": [JUDGE], setting: value}, "judges.yaml")
    assert str(caught.value) == f"judges.yaml: panel setting {expected}."


def test_every_wrong_setting_and_judge_field_is_its_own_line():
    with pytest.raises(MedevalDataError) as caught:
        panel_from_obj(
            {
                "judges": [{**JUDGE, "temperature": "0.2", "max_tokens": 0}],
                "timeout": None,
                "backoff_base": None,
                "require_answer_id": "no",
            },
            "judges.yaml",
        )
    lines = str(caught.value).splitlines()
    assert lines[0] == "judges.yaml: "
    assert [line.strip() for line in lines[1:]] == [
        "judge j temperature must be a number >= 0 (got '0.2').",
        "judge j max_tokens must be a whole number >= 1 (got 0).",
        "panel setting 'timeout' must be a number of seconds > 0, e.g. 120 (got None).",
        "panel setting 'backoff_base' must be a number of seconds > 0, e.g. 1 (got None).",
        "panel setting 'require_answer_id' must be true or false (got 'no').",
    ]


def test_backoff_base_above_backoff_max_is_refused():
    with pytest.raises(MedevalDataError, match=r"'backoff_base' \(60\) must not exceed 'backoff_max' \(30\)"):
        panel_from_obj({"judges": [JUDGE], "backoff_base": 60, "backoff_max": 30}, "judges.yaml")


def test_sound_settings_still_pass():
    panel = panel_from_obj(
        {
            "judges": [{**JUDGE, "temperature": 0, "max_tokens": 64}],
            "timeout": 0.5,
            "backoff_base": 0.001,
            "backoff_max": 0.01,
            "cache": None,
            "require_answer_id": True,
            "concurrency": 2,
            "max_retries": 0,
            "fail_fast": 0,
        },
        "judges.yaml",
    )
    assert (panel.timeout, panel.require_answer_id, panel.cache, panel.judges[0].temperature) == (0.5, True, None, 0.0)


@pytest.mark.parametrize(
    "pasted",
    [
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",  # a Hugging Face token is a valid identifier
        "sk_live_51HxYzAbCdEf",  # a payment-style key
        "gsk_abcdefghijklmnop",
        "AbCdEf0123GhIjKl4567",  # mixed case with digits
        "A" * 41,  # longer than any variable name
    ],
)
def test_a_key_pasted_as_api_key_env_is_never_echoed(pasted, monkeypatch):
    from medeval_metrics.judge.config import validate_panel

    monkeypatch.delenv(pasted, raising=False)
    with pytest.raises(MedevalDataError) as caught:
        panel = panel_from_obj({"judges": [{**JUDGE, "api_key_env": pasted}]}, "judges.yaml")
        validate_panel(panel, check_backends=False)  # today's code got here and said "{pasted} is not set"
    assert pasted not in str(caught.value)
    assert "must be the NAME of an environment variable" in str(caught.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_JUDGE_KEY_2", "judge_key", "HF_TOKEN", "AZURE_OPENAI_KEY"])
def test_real_variable_names_are_accepted(name):
    assert panel_from_obj({"judges": [{**JUDGE, "api_key_env": name}]}, "t").judges[0].api_key_env == name
