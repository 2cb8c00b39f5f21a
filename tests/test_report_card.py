"""The in-place model card update and the redaction of settings, without running lm-eval."""

import pytest
import yaml

from medeval_metrics.data import MedevalDataError
from medeval_metrics.report.model_card import CARD_END, CARD_START, update_card
from medeval_metrics.report.runs import parse_model_args, redact

FOREIGN_CARD = """---
license: apache-2.0
# the owner's comment stays
tags:
- medical
model-index:
- name: my-model
  results:
  - task:
      type: text-generation
    dataset:
      name: MMLU
      type: cais/mmlu
    metrics:
    - type: accuracy
      value: 0.61
language:
- en
---

# My model

Owner's introduction.

## Limitations

Owner's limitations.
"""


def emsqa_result(value, metric_type="accuracy"):
    from huggingface_hub import EvalResult

    return EvalResult(
        task_type="multiple-choice", task_name="emsqa_public", dataset_type="Xueren/EMS-MCQA",
        dataset_name="EMSQA (emsqa_public)", dataset_split="test", metric_type=metric_type, metric_value=value,
        metric_config="extract_answer", source_name="lm-evaluation-harness with medeval-metrics",
        source_url="https://github.com/EleutherAI/lm-evaluation-harness",
    )


def card_results(path):
    from huggingface_hub import ModelCard

    return ModelCard.load(path).data.eval_results


def test_foreign_content_is_kept_and_entries_merge(tmp_path):
    card = tmp_path / "README.md"
    card.write_text(FOREIGN_CARD)
    assert update_card(card, "my-model", [emsqa_result(0.4), emsqa_result(0.5, "f1")], "## medeval\n\nfirst") is True
    text = card.read_text()
    # header lines outside model-index are untouched, byte for byte, and in place
    assert text.startswith("---\nlicense: apache-2.0\n# the owner's comment stays\ntags:\n- medical\nmodel-index:\n")
    assert "language:\n- en\n---\n" in text
    assert text.split("---\n", 2)[2].startswith("\n# My model\n\nOwner's introduction.\n\n## Limitations\n\nOwner's limitations.\n")
    results = card_results(card)
    assert [(r.dataset_type, r.metric_type, r.metric_value) for r in results] == [
        ("cais/mmlu", "accuracy", 0.61), ("Xueren/EMS-MCQA", "accuracy", 0.4), ("Xueren/EMS-MCQA", "f1", 0.5)
    ]
    # a new value for the same metric replaces it; nothing is duplicated
    update_card(card, "my-model", [emsqa_result(0.45)], "## medeval\n\nsecond")
    results = card_results(card)
    assert [(r.metric_type, r.metric_value) for r in results if r.dataset_type == "Xueren/EMS-MCQA"] == [("accuracy", 0.45), ("f1", 0.5)]
    assert len(results) == 3
    text = card.read_text()
    assert text.count(CARD_START) == 1 and text.count(CARD_END) == 1
    assert "second" in text and "first" not in text


def test_running_twice_changes_nothing(tmp_path):
    card = tmp_path / "README.md"
    card.write_text(FOREIGN_CARD)
    update_card(card, "my-model", [emsqa_result(0.4)], "## medeval\n\ntable")
    once = card.read_text()
    assert update_card(card, "my-model", [emsqa_result(0.4)], "## medeval\n\ntable") is False
    assert card.read_text() == once


def test_section_is_replaced_where_the_owner_moved_it(tmp_path):
    card = tmp_path / "README.md"
    card.write_text(f"# Model\n\nintro\n\n{CARD_START}\nold numbers\n{CARD_END}\n\n## After\n\nkept\n")
    update_card(card, "m", [emsqa_result(0.4)], "new numbers")
    body = card.read_text().split("---\n", 2)[2]
    assert body == f"\n# Model\n\nintro\n\n{CARD_START}\nnew numbers\n{CARD_END}\n\n## After\n\nkept\n"


def test_a_card_without_header_or_file_gets_one(tmp_path):
    card = tmp_path / "README.md"
    update_card(card, "org/model", [emsqa_result(0.4)], "numbers")
    metadata = yaml.safe_load(card.read_text().split("---\n")[1])
    assert metadata["model-index"][0]["name"] == "org/model"
    assert card.read_text().endswith(f"{CARD_START}\nnumbers\n{CARD_END}\n")


def test_other_models_entries_are_kept(tmp_path):
    card = tmp_path / "README.md"
    two = FOREIGN_CARD.replace("language:", "- name: other-model\n  results: []\nlanguage:")
    card.write_text(two)
    update_card(card, "my-model", [emsqa_result(0.4)], "x")
    index = yaml.safe_load(card.read_text().split("---\n")[1])["model-index"]
    assert [entry["name"] for entry in index] == ["other-model", "my-model"]
    assert len(index[1]["results"]) == 2


@pytest.mark.parametrize(
    "header, message",
    [("model-index: [\n", "does not parse"), ("- a list\n", "not a mapping"), ("model-index:\n- results: []\n", "Hub's format")],
)
def test_bad_cards_are_refused_and_left_alone(tmp_path, header, message):
    card = tmp_path / "README.md"
    card.write_text(f"---\n{header}---\nbody\n")
    before = card.read_text()
    with pytest.raises(MedevalDataError, match=message):
        update_card(card, "m", [emsqa_result(0.4)], "x")
    assert card.read_text() == before


@pytest.mark.parametrize(
    "text, expected",
    [
        ("sk-proj-abcdefgh12345678", "[redacted]"),
        ("hf_AbCdEfGhIjKlMnOpQrStUv", "[redacted]"),
        ("https://user:hunter2@example.org/v1", "https://[redacted]@example.org/v1"),
        ("api_key=abc", "[redacted]"),
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("/models/llama-3.1-8b", "/models/llama-3.1-8b"),
        ("a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2", "[redacted]"),  # 40 opaque characters
        ("bfloat16", "bfloat16"),
    ],
)
def test_redact(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize(
    "model_args, expected",
    [
        ("pretrained=gpt2,dtype=float16", {"pretrained": "gpt2", "dtype": "float16"}),
        ({"model": "gpt-4o", "api_key": "x"}, {"model": "gpt-4o", "api_key": "x"}),
        ("", {}),
        (None, {}),
    ],
)
def test_parse_model_args(model_args, expected):
    assert parse_model_args(model_args) == expected


def test_settings_print_only_whitelisted_model_args(tmp_path):
    from medeval_metrics.report.runs import Run

    run = Run(tmp_path / "results_2026-01-01T00-00-00.json", {
        "results": {}, "config": {"model": "local-chat-completions", "limit": 0.1, "gen_kwargs": {"temperature": 0.7},
                                  "model_args": {"model": "gpt-4o", "base_url": "https://u:p@host/v1", "api_key": "secret-value"}},
        "chat_template": "{{ x }}", "chat_template_sha": "abcdef0123456789", "system_instruction": "Be brief.",
        "system_instruction_sha": "0123",
    })
    settings = run.settings()
    text = repr(settings)
    assert "secret-value" not in text and "host" not in text and "base_url" not in text
    assert settings["model"] == "local-chat-completions (model=gpt-4o)"
    assert settings["chat template"] == "applied (sha256 abcdef012345)"
    assert settings["system instruction"] == "Be brief. (sha256 0123)"
    assert settings["generation settings (command line)"] == "temperature=0.7"
    assert settings["limit"] == "0.1 (partial run: not comparable with full runs)"


def test_missing_matplotlib_gives_a_clear_error(monkeypatch, tmp_path):
    import sys

    from medeval_metrics.report import figures

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(figures.MissingReportExtra, match=r"medeval-metrics\[report\]"):
        figures.category_scores_figure(tmp_path / "x.png", "t", "acc", {"a": {"value": 0.5, "stderr": 0.1, "n": 3}})


def test_figures_clip_confidence_intervals_to_the_scale():
    from medeval_metrics.report.figures import _clipped_ci

    # 0.9 +- 1.96*0.1 would pass 1.0: the upper arm stops at 1.0
    below, above = _clipped_ci(0.9, 0.1, 0.0, 1.0)
    assert below == pytest.approx(0.196, abs=1e-3) and above == pytest.approx(0.1)


@pytest.mark.parametrize(
    "sample, expected",
    [
        ({"judge_scores": {"j1": {"accuracy": 4, "clarity": None}}}, {"j1": {"accuracy": 4.0, "clarity": None}}),
        ({"judge_scores": '{"j1": {"accuracy": 5}}'}, {"j1": {"accuracy": 5.0}}),
        ({"judge_scores": "not json"}, None),
        ({"judge_scores": {"j1": {"accuracy": True}}}, {"j1": {"accuracy": None}}),  # a bool is not a score
        # the judge filter's record as lm-eval logs it (str() of a dict); an unscored judge gets None per dimension
        ({"filtered_resps": [str({"answer": "Take it with food.", "judges": ["j1", "j2"], "verdicts": {
            "j1": {"judge": "j1", "scores": {"accuracy": 4, "clarity": 5}, "reasons": "it's fine"},
            "j2": {"judge": "j2", "scores": None, "error": "timeout"}}})]},
         {"j1": {"accuracy": 4.0, "clarity": 5.0}, "j2": {"accuracy": None, "clarity": None}}),
        ({"filtered_resps": [str({"answer": "x", "verdicts": None, "judges": None})]}, None),
        ({"filtered_resps": ["['a', 'c']"]}, None),
    ],
)
def test_judge_scores_of_a_logged_sample(sample, expected):
    from medeval_metrics.report.judges import judge_scores_of

    assert judge_scores_of(sample) == expected


def test_judge_summary_counts_unscored_apart():
    from medeval_metrics.report.judges import collect_judge_scores, summarise

    samples = [{"judge_scores": {"j": {"accuracy": s}}} for s in (5, 3, None, 4)]
    summary = summarise(collect_judge_scores(samples))
    assert summary == {"j": {"accuracy": {"value": 4.0, "stderr": pytest.approx(1 / 3**0.5), "n": 3, "missing": 1}}}


def test_run_labels_are_unique(tmp_path):
    from medeval_metrics.report.runs import Run, _label_runs

    def run(name, date):
        return Run(tmp_path / f"results_{date}.json", {"results": {}, "config": {"model_args": f"pretrained={name}"}})

    runs = [run("/models/a", "2026-01-01T00-00-00.1"), run("org/b", "2026-01-02T00-00-00.1"),
            run("org/b", "2026-01-03T00-00-00.1"), run("org/b", "2026-01-03T00-00-00.1")]
    _label_runs(runs)
    assert [r.label for r in runs] == ["a", "org/b (2026-01-02T00-00-00)", "org/b (2026-01-03T00-00-00)",
                                       "org/b (2026-01-03T00-00-00) #2"]


def test_figures_show_at_most_the_largest_categories():
    from medeval_metrics.report.build import MAX_FIGURE_CATEGORIES, _figure_categories

    few = {f"c{i}": {"value": 0.5, "stderr": 0.1, "n": i + 1} for i in range(3)}
    assert _figure_categories(few) == (few, "")
    many = {f"t{i:03d}": {"value": 0.5, "stderr": 0.1, "n": i} for i in range(100)}
    shown, note = _figure_categories(many)
    assert len(shown) == MAX_FIGURE_CATEGORIES == 40
    assert set(shown) == {f"t{i:03d}" for i in range(60, 100)}
    assert note == " (40 largest of 100)"


def test_versions_shown_are_the_task_versions_and_the_report_pack_version(tmp_path):
    """Runs are compared by task version (bumped whenever a task's scores change); the pack version
    shown is the report's. (No run records a pack version: the earlier "version (run)" row read a
    field nothing wrote, and is gone.)"""
    from medeval_metrics.report.runs import Run
    from medeval_metrics.report.tables import run_section

    results = {"results": {"emsqa_public": {"acc,extract_answer": 0.5, "acc_stderr,extract_answer": 0.1}},
               "versions": {"emsqa_public": 2}, "n-shot": {"emsqa_public": 0},
               "configs": {"emsqa_public": {"metadata": {"version": 2, "pack_version": "0.1.0"}}}, "config": {}}
    text = run_section(Run(tmp_path / "results_2026-01-01T00-00-00.json", results, label="m"), "0.2.0")
    assert "| `emsqa_public` | 2 | extract_answer | 0 | Exact set-match accuracy (`acc`) | 0.5000 | 0.1000 |" in text
    assert "| medeval-metrics version (report) | 0.2.0 |" in text
    assert "version (run)" not in text and "0.1.0" not in text