"""Settings reach the judge filter and process_results by a short key on each document, never as the
configuration itself: a document (and so the sample log) holds no URL, key variable or path."""

from __future__ import annotations

import json

import pytest

from medeval_metrics import medicationqa as mqa
from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.config import (
    PANEL_FIELD,
    panel_from_obj,
    panel_key,
    register_panel,
    registered_panel,
    url_without_userinfo,
)
from medeval_metrics.medicationqa import bertscore

ROWS = [{"question": f"can i take drug{i} with food", "answer": f"Drug{i} with food."} for i in range(3)]
SECRET_URL = "http://judge-user:pw-0000-not-in-docs@127.0.0.1:9/v1/chat/completions"


def _data(tmp_path):
    path = tmp_path / "mq.json"
    path.write_text(json.dumps(ROWS))
    return path


def _panel_config(tmp_path):
    return {
        "judges": [
            {
                "name": "a",
                "backend": "local-chat-completions",
                "model": "judge-a",
                "base_url": SECRET_URL,
                "api_key_env": "DOCS_JUDGE_KEY",
            }
        ],
        "cache": str(tmp_path / "judge-cache.sqlite"),
    }


def test_a_document_names_the_panel_by_key_and_holds_no_url_key_or_path(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    monkeypatch.setenv("DOCS_JUDGE_KEY", "sk-docs-0000-never-on-a-document")
    config = _panel_config(tmp_path)
    dataset = mqa.load_medicationqa(medicationqa_path=str(_data(tmp_path)), medeval_judges=config)
    docs = list(dataset["test"])
    key = docs[0][PANEL_FIELD]
    assert key.startswith("panel-") and len(key) == len("panel-") + 16
    assert {doc[PANEL_FIELD] for doc in docs} == {key}
    # the registry holds the panel as checked, URL and all; the documents only its key
    assert registered_panel(key).judges[0].base_url == SECRET_URL
    text = json.dumps(docs)
    for never in ("http", "127.0.0.1", "pw-0000", "judge-user", "DOCS_JUDGE_KEY", "sk-docs", str(tmp_path), "cache"):
        assert never not in text, never
    assert set(docs[0]) == {"question", "focus_drug", "question_type", "answer", "section_title", "url", PANEL_FIELD}


def test_the_key_is_the_same_for_the_same_panel_and_ignores_url_credentials(tmp_path):
    config = _panel_config(tmp_path)
    panel = panel_from_obj(config, "t")
    assert panel_key(panel) == panel_key(panel_from_obj(json.loads(json.dumps(config)), "t"))  # every process
    plain = {**config, "judges": [{**config["judges"][0], "base_url": url_without_userinfo(SECRET_URL)}]}
    assert panel_key(panel_from_obj(plain, "t")) == panel_key(panel)  # the digest is of the panel as recorded
    other = {**config, "max_retries": 1}
    assert panel_key(panel_from_obj(other, "t")) != panel_key(panel)
    assert register_panel(panel) == panel_key(panel)


def test_a_key_this_process_did_not_register_is_a_clear_error():
    from medeval_metrics.judge.filter import JudgeFilter

    docs = [{"question": "q", "answer": "a", PANEL_FIELD: "panel-0123456789abcdef"}]
    judge_filter = JudgeFilter(rubric="medeval_metrics.medicationqa.RUBRIC")
    with pytest.raises(MedevalDataError, match="panel-0123456789abcdef") as error:
        judge_filter.apply([["an answer"]], docs)
    assert "medeval judge" in str(error.value) and "sample log" in str(error.value)
    # an old sample log's panel JSON on a document is not read as a panel (nor shown)
    old = [{"question": "q", "answer": "a", PANEL_FIELD: json.dumps({"judges": [{"base_url": SECRET_URL}]})}]
    with pytest.raises(MedevalDataError) as error:
        judge_filter.apply([["an answer"]], old)
    assert "pw-0000" not in str(error.value)


def test_url_without_userinfo():
    assert url_without_userinfo(SECRET_URL) == "http://127.0.0.1:9/v1/chat/completions"
    assert url_without_userinfo("https://token@host.example/v1?x=1") == "https://host.example/v1?x=1"
    assert (
        url_without_userinfo("http://127.0.0.1:8000/v1/chat/completions") == "http://127.0.0.1:8000/v1/chat/completions"
    )
    assert url_without_userinfo("http://[::1:8000/v1@x") == "http://[::1:8000/v1@x"  # no userinfo: as given
    assert url_without_userinfo("http://u:p@[::1/v1") == "http://[::1/v1"  # unparseable: still stripped
    assert url_without_userinfo(None) is None


def test_bertscore_hub_names_stay_local_folders_become_keys(tmp_path, monkeypatch):
    monkeypatch.delenv(bertscore.ENV_VAR, raising=False)
    assert bertscore.doc_value("distilbert-base-uncased") == "distilbert-base-uncased"
    assert bertscore.doc_value("microsoft/deberta-large-mnli") == "microsoft/deberta-large-mnli"
    folder = tmp_path / "my-encoder"
    folder.mkdir()
    key = bertscore.doc_value(str(folder))
    assert key.startswith("local-model:") and str(tmp_path) not in key
    assert bertscore.doc_value("~/not/there/../x").startswith("local-model:")  # a path, existing or not
    assert bertscore.model_of_doc({"bertscore_model": key}) == str(folder)
    assert bertscore.model_of_doc({"bertscore_model": "distilbert-base-uncased"}) == "distilbert-base-uncased"
    dataset = mqa.load_medicationqa(medicationqa_path=str(_data(tmp_path)), medicationqa_bertscore_model=str(folder))
    assert {doc["bertscore_model"] for doc in dataset["test"]} == {key}


def test_bertscore_key_from_another_process(tmp_path, monkeypatch):
    """``medeval judge`` reads a run's documents in a process that did not load the task: the key resolves
    only to the model the environment names, if it is the one the key names."""
    folder = tmp_path / "enc"
    folder.mkdir()
    key = bertscore.doc_value(str(folder))
    monkeypatch.setattr(bertscore, "_LOCAL", {})
    monkeypatch.delenv(bertscore.ENV_VAR, raising=False)
    with pytest.raises(MedevalDataError, match=bertscore.ENV_VAR) as error:
        bertscore.model_of_doc({"bertscore_model": key})
    assert str(folder) not in str(error.value)
    monkeypatch.setenv(bertscore.ENV_VAR, str(tmp_path / "another"))
    with pytest.raises(MedevalDataError):
        bertscore.model_of_doc({"bertscore_model": key})
    monkeypatch.setenv(bertscore.ENV_VAR, str(folder))
    assert bertscore.model_of_doc({"bertscore_model": key}) == str(folder)
