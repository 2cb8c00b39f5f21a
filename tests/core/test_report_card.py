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
        task_type="multiple-choice",
        task_name="emsqa_public",
        dataset_type="Xueren/EMS-MCQA",
        dataset_name="EMSQA (emsqa_public)",
        dataset_split="test",
        metric_type=metric_type,
        metric_value=value,
        metric_config="flexible-extract",
        source_name="lm-evaluation-harness with medeval-metrics",
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
    assert text.split("---\n", 2)[2].startswith(
        "\n# My model\n\nOwner's introduction.\n\n## Limitations\n\nOwner's limitations.\n"
    )
    results = card_results(card)
    assert [(r.dataset_type, r.metric_type, r.metric_value) for r in results] == [
        ("cais/mmlu", "accuracy", 0.61),
        ("Xueren/EMS-MCQA", "accuracy", 0.4),
        ("Xueren/EMS-MCQA", "f1", 0.5),
    ]
    # a new value for the same metric replaces it; nothing is duplicated
    update_card(card, "my-model", [emsqa_result(0.45)], "## medeval\n\nsecond")
    results = card_results(card)
    assert [(r.metric_type, r.metric_value) for r in results if r.dataset_type == "Xueren/EMS-MCQA"] == [
        ("accuracy", 0.45),
        ("f1", 0.5),
    ]
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
    # our entry is merged where it stands (moving it would rewrite the card whenever two models alternate)
    assert [entry["name"] for entry in index] == ["my-model", "other-model"]
    assert len(index[0]["results"]) == 2 and index[1] == {"name": "other-model", "results": []}


@pytest.mark.parametrize(
    "header, message",
    [
        ("model-index: [\n", "does not parse"),
        ("- a list\n", "not a mapping"),
        ("model-index:\n- results: []\n", "Hub's format"),
    ],
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

    run = Run(
        tmp_path / "results_2026-01-01T00-00-00.json",
        {
            "results": {},
            "config": {
                "model": "local-chat-completions",
                "limit": 0.1,
                "gen_kwargs": {"temperature": 0.7},
                "model_args": {"model": "gpt-4o", "base_url": "https://u:p@host/v1", "api_key": "secret-value"},
            },
            "chat_template": "{{ x }}",
            "chat_template_sha": "abcdef0123456789",
            "system_instruction": "Be brief.",
            "system_instruction_sha": "0123",
        },
    )
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
    from medeval_metrics.report.figures import _interval

    # 0.9 +- 1.96*0.1 would pass 1.0: the upper arm stops at 1.0
    below, above = _interval(0.9, 0.1, 0.0, 1.0)
    assert below == pytest.approx(0.196, abs=1e-3) and above == pytest.approx(0.1)
    assert _interval(0.5, None, 0.0, 1.0) is None  # no stderr: no interval drawn


@pytest.mark.parametrize(
    "sample, expected",
    [
        ({"judge_scores": {"j1": {"accuracy": 4, "clarity": None}}}, {"j1": {"accuracy": 4.0, "clarity": None}}),
        ({"judge_scores": '{"j1": {"accuracy": 5}}'}, {"j1": {"accuracy": 5.0}}),
        ({"judge_scores": "not json"}, None),
        ({"judge_scores": {"j1": {"accuracy": True}}}, {"j1": {"accuracy": None}}),  # a bool is not a score
        # the judge filter's record as lm-eval logs it (str() of a dict); an unscored judge gets None per dimension
        (
            {
                "filtered_resps": [
                    str(
                        {
                            "answer": "Take it with food.",
                            "judges": ["j1", "j2"],
                            "verdicts": {
                                "j1": {"judge": "j1", "scores": {"accuracy": 4, "clarity": 5}, "reasons": "it's fine"},
                                "j2": {"judge": "j2", "scores": None, "error": "timeout"},
                            },
                        }
                    )
                ]
            },
            {"j1": {"accuracy": 4.0, "clarity": 5.0}, "j2": {"accuracy": None, "clarity": None}},
        ),
        ({"filtered_resps": [str({"answer": "x", "verdicts": None, "judges": None})]}, None),
        ({"filtered_resps": ["['a', 'c']"]}, None),
    ],
)
def test_judge_scores_of_a_logged_sample(sample, expected):
    from medeval_metrics.report.judges import judge_scores_of

    assert judge_scores_of(sample) == expected


def test_judge_summary_counts_unscored_apart():
    from medeval_metrics.report.judges import collect_judge_scores, scores_by_judge_and_dimension

    samples = [{"judge_scores": {"j": {"accuracy": s}}} for s in (5, 3, None, 4)]
    summary = scores_by_judge_and_dimension(collect_judge_scores(samples))
    assert summary == {"j": {"accuracy": {"value": 4.0, "stderr": pytest.approx(1 / 3**0.5), "n": 3, "missing": 1}}}


def test_run_labels_are_unique(tmp_path):
    from medeval_metrics.report.runs import Run, _label_runs

    def run(name, date):
        return Run(tmp_path / f"results_{date}.json", {"results": {}, "config": {"model_args": f"pretrained={name}"}})

    runs = [
        run("/models/a", "2026-01-01T00-00-00.1"),
        run("org/b", "2026-01-02T00-00-00.1"),
        run("org/b", "2026-01-03T00-00-00.1"),
        run("org/b", "2026-01-03T00-00-00.1"),
    ]
    _label_runs(runs)
    assert [r.label for r in runs] == [
        "a",
        "org/b (2026-01-02T00-00-00)",
        "org/b (2026-01-03T00-00-00)",
        "org/b (2026-01-03T00-00-00) #2",
    ]


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

    results = {
        "results": {"emsqa_public": {"acc,flexible-extract": 0.5, "acc_stderr,flexible-extract": 0.1}},
        "versions": {"emsqa_public": 2},
        "n-shot": {"emsqa_public": 0},
        "configs": {"emsqa_public": {"metadata": {"version": 2, "pack_version": "0.1.0"}}},
        "config": {},
    }
    text = run_section(Run(tmp_path / "results_2026-01-01T00-00-00.json", results, label="m"), "0.2.0")
    assert "| `emsqa_public` | 2 | flexible-extract | 0 | Exact set-match accuracy (`acc`) | 0.5000 | 0.1000 |" in text
    assert "| medeval-metrics version (report) | 0.2.0 |" in text
    assert "version (run)" not in text and "0.1.0" not in text


# --------------------------------------------------------------------------- round trips (issues 12.6, 13.1)


def variant_result(task, value, metric_type="accuracy", name="Exact set-match accuracy", config="flexible-extract"):
    from huggingface_hub import EvalResult

    return EvalResult(
        task_type="multiple-choice",
        task_name=task,
        dataset_type="Xueren/EMS-MCQA",
        dataset_name=f"EMSQA ({task})",
        dataset_split="test",
        metric_type=metric_type,
        metric_value=value,
        metric_name=name,
        metric_config=config,
        source_name="lm-evaluation-harness with medeval-metrics",
        source_url="https://github.com/EleutherAI/lm-evaluation-harness",
    )


VARIANTS = ["emsqa_public_cot", "emsqa_public_expert_cot", "emsqa_public_mc"]

# A card as people write them: a foreign entry in a layout PyYAML would not produce (quotes, key
# order, indented sequences, an inline comment), and a comment after the model-index block.
HEADER_BEFORE = "license: apache-2.0\nmodel-index:\n"
FOREIGN_ENTRY = (
    "  - name: 'their-model'   # the owner's layout\n"
    "    results:\n"
    "      - task: {type: text-generation}\n"
    "        dataset: {name: MMLU, type: cais/mmlu}\n"
    "        metrics:\n"
    "          - {type: accuracy, value: 0.610}\n"
)
HEADER_AFTER = "# keep this comment after the block\nlanguage:\n  - en\n"
BODY = "\n# Their model\n\nOwner's text.\n"


def _card(newline="\n", bom=""):
    text = f"---\n{HEADER_BEFORE}{FOREIGN_ENTRY}{HEADER_AFTER}---\n{BODY}"
    return (bom + text.replace("\n", newline)).encode("utf-8")


def _index(path):
    text = path.read_bytes().decode("utf-8").lstrip("\ufeff").replace("\r\n", "\n")
    return yaml.safe_load(text.split("---\n")[1])["model-index"]


@pytest.mark.parametrize("newline, bom", [("\n", ""), ("\r\n", ""), ("\n", "\ufeff"), ("\r\n", "\ufeff")])
def test_update_keeps_every_byte_outside_the_packs_entries(tmp_path, newline, bom):
    card = tmp_path / "README.md"
    card.write_bytes(_card(newline, bom))
    results = [variant_result(t, 0.3 + i / 10) for i, t in enumerate(VARIANTS)]
    assert update_card(card, "org/tiny", results, "## medeval\n\nnumbers") is True
    after = card.read_bytes()
    # a BOM stays the first thing (one header, not a second one), and line endings stay as they were
    assert after.startswith(
        (bom + "---" + newline + HEADER_BEFORE.replace("\n", newline) + FOREIGN_ENTRY.replace("\n", newline)).encode()
    )
    assert after.count("\ufeff".encode()) == (1 if bom else 0)
    assert (HEADER_AFTER.replace("\n", newline) + "---" + newline + BODY.replace("\n", newline)).encode() in after
    if newline == "\r\n":
        assert after.count(b"\n") == after.count(b"\r\n")
    else:
        assert b"\r" not in after
    assert after.endswith(
        f"{CARD_START}{newline}## medeval{newline}{newline}numbers{newline}{CARD_END}{newline}".encode()
    )
    index = _index(card)
    assert index[0]["name"] == "their-model" and index[0]["results"][0]["metrics"] == [
        {"type": "accuracy", "value": 0.61}
    ]
    assert index[1]["name"] == "org/tiny"
    # each variant is its own named result, with one metric each
    assert [(r["task"]["name"], len(r["metrics"])) for r in index[1]["results"]] == [(t, 1) for t in VARIANTS]
    # and the huggingface_hub parser reads the card
    assert [r.task_name for r in card_results(card)] == [None, *VARIANTS]


def test_same_report_any_number_of_times_is_byte_identical(tmp_path):
    card = tmp_path / "README.md"
    card.write_bytes(_card("\r\n", "\ufeff"))
    results = [variant_result(t, 0.5) for t in VARIANTS] + [variant_result("emsqa_public_mc", 0.4, "f1", "Set F1")]
    for model in ("org/tiny", "other/model"):
        update_card(card, model, results, "numbers")
    once = card.read_bytes()
    for _ in range(3):
        for model in ("org/tiny", "other/model"):
            assert update_card(card, model, results, "numbers") is False
    assert card.read_bytes() == once
    index = _index(card)
    assert [e["name"] for e in index] == ["their-model", "org/tiny", "other/model"]
    assert sum(len(r["metrics"]) for e in index[1:] for r in e["results"]) == 8


def test_a_new_value_replaces_only_its_own_metric(tmp_path):
    card = tmp_path / "README.md"
    card.write_bytes(_card())
    update_card(card, "m", [variant_result(t, 0.5) for t in VARIANTS], "x")
    update_card(card, "m", [variant_result("emsqa_public_mc", 0.9)], "x")
    ours = _index(card)[1]["results"]
    assert [(r["task"]["name"], r["metrics"][0]["value"]) for r in ours] == [
        ("emsqa_public_cot", 0.5),
        ("emsqa_public_expert_cot", 0.5),
        ("emsqa_public_mc", 0.9),
    ]


def test_variants_merged_by_an_older_version_are_split_again(tmp_path):
    """Before, three variants were written as one result named after the first, with three unlabelled copies."""
    card = tmp_path / "README.md"
    merged = "".join(
        f"    - type: accuracy\n      value: 0.{i}\n      name: Exact set-match accuracy\n      config: flexible-extract\n"
        for i in (3, 4, 5)
    )
    card.write_text(
        "---\nmodel-index:\n- name: m\n  results:\n  - task:\n      type: multiple-choice\n"
        "      name: emsqa_public_cot\n    dataset:\n      name: EMSQA (emsqa_public_cot)\n"
        "      type: Xueren/EMS-MCQA\n      split: test\n    metrics:\n" + merged + "---\n"
    )
    results = [variant_result(t, 0.5) for t in VARIANTS]
    update_card(card, "m", results, "x")
    ours = _index(card)[0]["results"]
    assert [(r["task"]["name"], [m["value"] for m in r["metrics"]]) for r in ours] == [(t, [0.5]) for t in VARIANTS]
    once = card.read_bytes()
    assert update_card(card, "m", results, "x") is False and card.read_bytes() == once


def test_foreign_results_in_our_models_entry_are_kept_verbatim(tmp_path):
    card = tmp_path / "README.md"
    theirs = "  - task: {type: text-generation, name: mmlu}   # by hand\n    dataset: {name: MMLU, type: cais/mmlu}\n    metrics: [{type: acc, value: 1}]\n"
    card.write_text("---\nmodel-index:\n- name: m\n  results:\n" + theirs + "---\n")
    update_card(card, "m", [variant_result("emsqa_public_cot", 0.5)], "x")
    assert theirs in card.read_text()
    assert [r["task"]["name"] for r in _index(card)[0]["results"]] == ["mmlu", "emsqa_public_cot"]


def test_flow_style_model_index_is_rewritten_but_stays_correct(tmp_path):
    card = tmp_path / "README.md"
    card.write_text("---\nlicense: mit\nmodel-index: [{name: m, results: []}]\n# after\n---\nbody\n")
    update_card(card, "m", [variant_result("emsqa_public_cot", 0.5)], "x")
    text = card.read_text()
    assert text.startswith("---\nlicense: mit\nmodel-index:\n") and "# after\n---\nbody\n" in text
    assert _index(card)[0]["results"][0]["task"]["name"] == "emsqa_public_cot"
    once = card.read_bytes()
    assert update_card(card, "m", [variant_result("emsqa_public_cot", 0.5)], "x") is False and card.read_bytes() == once


@pytest.mark.parametrize(
    "model_arg, expected",
    [
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("gpt2", "gpt2"),
        ("/home/ann/models/llama-7b-sft/", "llama-7b-sft"),
        ("./checkpoints/step-400", "step-400"),
        ("~/models/tiny", "tiny"),
        ("/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B/snapshots/0a1b2c", "Qwen/Qwen2.5-0.5B"),
        ("C:\\models\\phi-2", "phi-2"),
        ("runs/exp 1/model", "model"),
    ],
)
def test_a_local_path_never_becomes_the_card_name(model_arg, expected):
    from medeval_metrics.report.runs import card_model_name

    assert card_model_name(model_arg) == expected


def test_a_saved_model_folder_is_named_after_the_repo_it_came_from(tmp_path):
    from medeval_metrics.report.runs import card_model_name

    saved = tmp_path / "finetuned"
    saved.mkdir()
    (saved / "config.json").write_text('{"_name_or_path": "meta-llama/Llama-3.1-8B"}')
    assert card_model_name(str(saved)) == "meta-llama/Llama-3.1-8B"
    (saved / "config.json").write_text(f'{{"_name_or_path": "{tmp_path}/base"}}')  # saved from another local folder
    assert card_model_name(str(saved)) == "finetuned"


def _results_json(folder, date, model_args, values, limit=None, use_cache=None):
    """A results file as lm-eval writes it, for the EMSQA variants (``values``: task -> acc)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    results = {
        t: {"alias": t, "acc,flexible-extract": v, "acc_stderr,flexible-extract": 0.01} for t, v in values.items()
    }
    (folder / f"results_{date}.json").write_text(
        json.dumps(
            {
                "results": results,
                "versions": {t: 1 for t in values},
                "n-shot": {t: 0 for t in values},
                "n-samples": {t: {"original": 3721, "effective": 3721} for t in values},
                "config": {"model": "hf", "model_args": model_args, "limit": limit, "use_cache": use_cache},
            }
        )
    )


def test_report_of_variants_into_a_card_is_idempotent_and_names_the_folder(tmp_path):
    from medeval_metrics.report import build_report

    values = {"emsqa_public_cot": 0.41, "emsqa_public_expert_cot": 0.43, "emsqa_public_mc": 0.47}
    _results_json(tmp_path / "out" / "model", "2026-01-01T10-00-00.000001", "pretrained=/data/ckpt/my-sft", values)
    card = tmp_path / "README.md"
    card.write_bytes(_card("\r\n", "\ufeff"))
    build_report([tmp_path / "out"], tmp_path / "r", figures=False, update_card=card)
    once = card.read_bytes()
    for _ in range(2):
        report = build_report([tmp_path / "out"], tmp_path / "r", figures=False, update_card=card)
        assert report["card_updated"] is False
    assert card.read_bytes() == once
    index = _index(card)
    assert index[1]["name"] == "my-sft" and b"/data/ckpt" not in once
    assert [(r["task"]["name"], [m["value"] for m in r["metrics"]]) for r in index[1]["results"]] == [
        (t, [v]) for t, v in values.items()
    ]
    assert "/data/ckpt" not in (tmp_path / "r" / "model_index.yaml").read_text()
    # --model-name overrides (and is a new entry: the card's entries are keyed by model)
    build_report([tmp_path / "out"], tmp_path / "r", figures=False, update_card=card, model_name="ann/my-sft-v2")
    assert [e["name"] for e in _index(card)] == ["their-model", "my-sft", "ann/my-sft-v2"]
    assert (
        yaml.safe_load((tmp_path / "r" / "model_index.yaml").read_text())["model-index"][0]["name"] == "ann/my-sft-v2"
    )


def test_reruns_with_the_same_settings_in_one_folder_collapse_to_the_newest(tmp_path):
    from medeval_metrics.report.runs import load_runs

    args = "pretrained=org/m"
    _results_json(tmp_path / "o", "2026-01-01T10-00-00.000001", args, {"emsqa_public_cot": 0.1})
    _results_json(
        tmp_path / "o", "2026-01-02T10-00-00.000001", args, {"emsqa_public_cot": 0.2}, use_cache="/c"
    )  # a resume
    _results_json(tmp_path / "o", "2026-01-03T10-00-00.000001", args, {"emsqa_public_mc": 0.3})  # other tasks: kept
    _results_json(
        tmp_path / "o", "2026-01-04T10-00-00.000001", args, {"emsqa_public_cot": 0.4}, limit=5
    )  # other settings
    _results_json(tmp_path / "p", "2026-01-05T10-00-00.000001", args, {"emsqa_public_cot": 0.5})  # other folder
    notes: list[str] = []
    runs = load_runs([tmp_path], notes)
    assert [r.results["results"][next(iter(r.results["results"]))]["acc,flexible-extract"] for r in runs] == [
        0.2,
        0.3,
        0.4,
        0.5,
    ]
    assert len(notes) == 1 and "2 runs with the same settings; reporting the newest (results_2026-01-02" in notes[0]


# --------------------------------------------------------------------------- numbers and figures (issue 13.6, 13.7)


def _captured_figure(monkeypatch, draw):
    """Draw a figure and return it (before it is closed), rendered."""
    from medeval_metrics.report import figures

    captured = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: captured.setdefault("fig", fig) and path)
    draw(figures)
    fig = captured["fig"]
    fig.canvas.draw()
    return fig


LONG_TITLE = (
    "Qwen/Qwen2.5-7B-Instruct (2026-01-01T10-00-00): emsqa_private_expert_cot by level x subject_area "
    "(40 largest of 112) with a run label that goes on and on and on for much longer than any figure"
)


@pytest.mark.parametrize("kind", ["category", "comparison", "judge"])
def test_titles_fit_the_figure_width(monkeypatch, kind):
    def draw(figures):
        cell = {"value": 0.5, "stderr": 0.1, "n": 3}
        if kind == "category":
            figures.category_scores_figure(None, LONG_TITLE, "acc", {"a": cell})
        elif kind == "comparison":
            figures.comparison_figure(None, LONG_TITLE, "acc", {"t": {"run": cell}})
        else:
            figures.judge_distribution_figure(None, LONG_TITLE, {"j": {"accuracy": [1, 5, None]}})

    fig = _captured_figure(monkeypatch, draw)
    renderer = fig.canvas.get_renderer()
    box, width = fig._suptitle.get_window_extent(renderer), fig.get_figwidth() * fig.dpi
    assert 0 <= box.x0 and box.x1 <= width and box.y1 <= fig.get_figheight() * fig.dpi
    assert fig._suptitle.get_text().count("\n") <= 1  # two lines at most: the rest is shortened
    assert fig._suptitle.get_text().startswith("Qwen/Qwen2.5-7B-Instruct")


def test_every_bar_has_a_value_label_and_a_single_item_no_interval(monkeypatch):
    cats = {
        "zero": {"value": 0.0, "stderr": 0.0, "n": 12},
        "one item": {"value": 1.0, "stderr": None, "n": 1},
        "some": {"value": 0.35, "stderr": 0.05, "n": 40},
    }
    fig = _captured_figure(monkeypatch, lambda f: f.category_scores_figure(None, "t", "acc", cats))
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["0.00", "0.35", "1.00 (no CI)"]
    # intervals: one error bar per category with a stderr (two), none for the single item
    segments = [c for c in ax.collections if c.__class__.__name__ == "LineCollection"]
    assert sum(len(c.get_segments()) for c in segments) == 2


def test_breakdown_stderr_is_na_for_a_single_item():
    from medeval_metrics.breakdown import BreakdownSpec, breakdown_markdown, compute_breakdown, doc_field

    samples = [
        {"doc": {"level": "emt"}, "acc": 1.0},
        {"doc": {"level": "emt"}, "acc": 0.0},
        {"doc": {"level": "emr"}, "acc": 1.0},
    ]
    out = compute_breakdown(samples, BreakdownSpec(metrics=("acc",), dimensions={"level": doc_field("level")}))
    assert out["none"]["level"]["emr"]["acc"] == {"value": 1.0, "stderr": None, "n": 1}
    assert out["none"]["level"]["emt"]["acc"] == {"value": 0.5, "stderr": pytest.approx(0.5), "n": 2}
    text = breakdown_markdown("t", out)
    assert "| emr | 1 | 1.0000 ± N/A |" in text and "| emt | 2 | 0.5000 ± 0.5000 |" in text


def test_helper_fields_are_a_note_not_a_metric_row():
    from medeval_metrics.report.runs import Run
    from medeval_metrics.report.tables import run_section

    run = Run(
        results_path=__import__("pathlib").Path("/x/results_2026-01-01T00-00-00.json"),
        results={
            "results": {
                "medicationqa": {
                    "rougeL,none": 0.2,
                    "rougeL_stderr,none": 0.01,
                    "judge_computed,none": 1.0,
                    "judge_computed_stderr,none": 0.0,
                }
            },
            "n-samples": {"medicationqa": {"original": 690, "effective": 690}},
            "config": {"model": "hf"},
        },
    )
    run.label = "m"
    section = run_section(run, "0")
    assert "(`judge_computed`)" not in section and "Items judged" not in section
    assert "`medicationqa` judge_computed = 1.0000 (share of items the judge panel was asked about" in section
    assert "ROUGE-L (`rougeL`) | 0.2000 | 0.0100 | 0.180–0.220 (normal) | 690 |" in section
    assert "No medeval task" not in section  # a run with diagnostics alone: its diagnostics table


def test_the_report_says_when_reruns_were_collapsed(tmp_path, capsys):
    import argparse

    from medeval_metrics.report.cli import _cmd

    args = "pretrained=org/m"
    _results_json(tmp_path / "o", "2026-01-01T10-00-00.000001", args, {"emsqa_public_cot": 0.1})
    _results_json(tmp_path / "o", "2026-01-02T10-00-00.000001", args, {"emsqa_public_cot": 0.2})
    namespace = argparse.Namespace(
        folders=[tmp_path / "o"],
        output=str(tmp_path / "r"),
        no_figures=True,
        update_card=None,
        model=None,
        model_name=None,
        source_name=None,
        source_url=None,
        include_partial_runs=False,
    )
    assert _cmd(namespace) == 0
    out = capsys.readouterr()
    assert "medeval report: note:" in out.err and "reporting the newest (results_2026-01-02" in out.err
    results = (tmp_path / "r" / "results.md").read_text()
    assert "| 0.2000 |" in results and "| 0.1000 |" not in results and "## Comparison" not in results
