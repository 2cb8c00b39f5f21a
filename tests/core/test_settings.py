"""One reader of settings, one true/false parser, and removed keys refused with what replaced them."""

from __future__ import annotations

import pathlib
import re

import pytest

import medeval_metrics
from medeval_metrics import registry, settings
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import env_var, flag_option, flag_setting, is_true, refuse_removed, setting


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        ("true", True),
        ("TRUE", True),
        (" Yes ", True),
        ("on", True),
        ("1", True),
        ("false", False),
        ("No", False),
        ("OFF", False),
        ("0", False),
        ("", False),
    ],
)
def test_flag_setting_reads_the_true_and_false_words(value, expected):
    assert flag_setting(value, "where") is expected


@pytest.mark.parametrize("value", ["ture", "2", 2, "y", "enabled", None, 0.5])
def test_flag_setting_refuses_anything_else_naming_where(value):
    with pytest.raises(
        MedevalDataError, match=r"--metadata x=.* is neither true nor false: give true/false, 1/0 or yes/no"
    ):
        flag_setting(value, "--metadata x")


@pytest.mark.parametrize(
    "value, expected",
    [("1", True), ("true", True), ("ON", True), ("0", False), ("", False), ("banana", False), (None, False)],
)
def test_is_true_is_lenient_for_other_tools_variables(value, expected):
    assert is_true(value) is expected


def test_metadata_wins_over_the_variable_and_empty_counts_as_unset(monkeypatch):
    monkeypatch.setenv("MEDEVAL_EMRQA_SEED", "7")
    assert setting({"emrqa_seed": "3"}, "emrqa_seed") == "3"
    assert setting({"emrqa_seed": ""}, "emrqa_seed") == "7"
    assert setting(None, "emrqa_seed") == "7"
    monkeypatch.setenv("MEDEVAL_EMRQA_SEED", "")
    assert setting({}, "emrqa_seed", 1234) == 1234
    assert env_var("emrqa_seed") == "MEDEVAL_EMRQA_SEED" and env_var("medeval_judges") == "MEDEVAL_JUDGES"


def test_flag_option_names_where_the_bad_value_came_from(monkeypatch):
    monkeypatch.setenv("MEDEVAL_EMSQA_ALLOW_DUPLICATES", "ture")
    with pytest.raises(MedevalDataError, match="MEDEVAL_EMSQA_ALLOW_DUPLICATES='ture'"):
        flag_option({}, "emsqa_allow_duplicates")
    assert flag_option({"emsqa_allow_duplicates": "yes"}, "emsqa_allow_duplicates") is True
    monkeypatch.delenv("MEDEVAL_EMSQA_ALLOW_DUPLICATES")
    assert flag_option({}, "emsqa_allow_duplicates") is False


def test_a_removed_key_is_an_error_saying_what_replaced_it(monkeypatch):
    removed = registry.removed_options()
    assert set(removed) == {
        "rag_batch_size",
        "rag_device",
        "rag_pool_factor",
        "rag_chunk_tokenizer",
        "rag_require_all_files",
    }
    assert not set(removed) & set(registry.metadata_keys())  # no longer read
    with pytest.raises(
        MedevalDataError,
        match=r"--metadata rag_pool_factor: the setting rag_pool_factor was removed; "
        r"retrieve-then-filter looks at the top 10 x rag_k chunks",
    ):
        refuse_removed({"rag_pool_factor": 5}, removed, environ={})
    with pytest.raises(
        MedevalDataError,
        match=r"MEDEVAL_RAG_DEVICE: the setting rag_device was removed; the dense "
        r"encoders run on the GPU when torch sees one",
    ):
        refuse_removed({}, removed, environ={"MEDEVAL_RAG_DEVICE": "cuda:1"})
    refuse_removed({"rag_k": 4}, removed, environ={"MEDEVAL_RAG_K": "4"})  # kept keys pass


def test_the_rag_loader_and_the_pre_run_check_refuse_a_removed_key(monkeypatch):
    from medeval_metrics.emsqa import rag, spec

    with pytest.raises(MedevalDataError, match="rag_batch_size was removed"):
        rag.retrieval_settings({"rag_batch_size": 64})
    with pytest.raises(MedevalDataError, match="rag_chunk_tokenizer was removed"):
        spec.check_knowledge({"rag_chunk_tokenizer": "basic"})


def test_the_true_words_are_listed_once():
    words = re.compile(r"""["']1["'],\s*["']true["'],\s*["']yes["']|["']true["'],\s*["']yes["']""")
    package = pathlib.Path(medeval_metrics.__file__).parent
    offenders = [
        str(p.relative_to(package))
        for p in sorted(package.rglob("*.py"))
        if p != package / "settings.py" and words.search(p.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"read on/off values with medeval_metrics.settings: {offenders}"
    assert settings.TRUE_WORDS == ("1", "true", "yes", "on")


def test_medeval_run_reports_a_removed_key_with_what_replaced_it():
    from medeval_metrics import preflight

    problems = preflight.metadata_key_problems({"rag_device": "cuda", "rag_k": 4})
    assert problems == [
        (
            "--metadata rag_device: the setting rag_device was removed; the dense encoders run on the GPU "
            "when torch sees one, else on the CPU. Drop it from your command."
        )
    ]
    problems = preflight.environment_problems({"MEDEVAL_RAG_BATCH_SIZE": "64", "MEDEVAL_RAG_K": "4"})
    assert problems == [
        (
            "MEDEVAL_RAG_BATCH_SIZE: the setting rag_batch_size was removed; the dense encoders embed 32 "
            "texts at a time (speed only: scores do not depend on it). Drop it from your command."
        )
    ]
