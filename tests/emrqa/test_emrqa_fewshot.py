"""emrQL few-shot pool smaller than the shot count: topped up from training, or a clear error (issue 10, defect 2)."""

from __future__ import annotations

import json

import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emrqa.fewshot import FEWSHOT_TOP_UP, FewshotPoolSampler


def _rows(count: int, role: str, first: int = 0) -> list[dict]:
    return [
        {"line": first + n, "question": f"q{first + n}", "fewshot_role": role, "emrql_variant": "emrql_2"}
        for n in range(count)
    ]


def test_lm_eval_default_sampler_still_fails_on_a_small_pool():
    """Notices when lm-eval's own sampler stops raising a bare ValueError (then the top-up may go)."""
    from lm_eval.api.samplers import ContextSampler

    with pytest.raises(ValueError, match="Sample larger than population"):
        ContextSampler(_rows(3, "pool"), rnd=1234).sample(5)


def test_a_large_enough_pool_draws_exactly_what_lm_eval_draws():
    from lm_eval.api.samplers import ContextSampler

    pool, extra = _rows(8, "pool"), _rows(4, "top_up", first=100)
    expected = ContextSampler(pool, rnd=1234).sample(5)
    ours = FewshotPoolSampler(pool + extra, rnd=1234).sample(5)
    assert ours == expected and all(row["fewshot_role"] == "pool" for row in ours)


@pytest.mark.parametrize(
    "pool, top_up, shots, outcome",
    [
        (3, 4, 5, "drawn from pool and top-up"),
        (3, 2, 5, "drawn from pool and top-up"),  # exactly enough
        (3, 1, 5, "error"),
        (0, 0, 1, "error"),
        (2, 0, 0, "none"),
    ],
)
def test_small_pool_is_topped_up_or_named_in_a_clear_error(pool, top_up, shots, outcome):
    sampler = FewshotPoolSampler(_rows(pool, "pool") + _rows(top_up, "top_up", first=100), rnd=1234)
    if outcome == "error":
        with pytest.raises(MedevalDataError) as caught:
            sampler.sample(shots)
        message = str(caught.value)
        name = "emrql_2" if pool + top_up else "emrQL"  # an empty split names no variant
        assert message.startswith(f"{name}: {shots}-shot prompts need {shots} few-shot examples")
        assert f"--num_fewshot {pool + top_up} or fewer" in message and f"gives {pool} (one training row" in message
    elif outcome == "none":
        assert sampler.sample(shots) == []
    else:
        drawn = sampler.sample(shots)
        assert len(drawn) == shots == len({row["line"] for row in drawn})


def _tiny_ql(tmp_path, rows: int):
    """A data-ql.csv with `rows` rows of two logical-form templates (a filtered file)."""
    lines = ["Question, Logical Form, QTemplate, LTemplate"]
    for n in range(rows):
        template = (
            ("What is the dose of |medication|", "MedicationEvent (|medication|) [dosage=x]")
            if n % 2
            else ("Has the patient had |test|", "LabEvent (|test|) OR ProcedureEvent (|test|)")
        )
        value = f"drug{n}"
        lf = template[1].replace("|medication|", value).replace("|test|", value)
        lines.append(
            f'"{template[0].replace("|medication|", value).replace("|test|", value)}","{lf}","{template[0]} {n % 7}","{template[1]}"'
        )
    path = tmp_path / "data-ql.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_loader_tops_up_a_small_pool_from_training(tmp_path):
    from medeval_metrics.emrqa.synthetic import write_synthetic
    from medeval_metrics.emrqa.tasks import load_logical_forms

    info = write_synthetic(tmp_path / "data", notes_per_subset=2, questions_per_note=3)
    meta = {
        "emrqa_data_json": str(info.data_json),
        "emrqa_data_ql_csv": str(_tiny_ql(tmp_path, 40)),
        "emrqa_cache_dir": str(tmp_path / "cache"),
    }
    train = list(load_logical_forms("emrql_2", **meta)["train"])
    roles = [row["fewshot_role"] for row in train]
    assert roles[:2] == ["pool", "pool"] and set(roles[2:]) == {"top_up"}  # two templates, then the top-up
    folder = next((tmp_path / "cache").iterdir())
    train_rows = [
        json.loads(line) for line in (folder / "emrql_2_train.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(train) == min(FEWSHOT_TOP_UP, len(train_rows)) and len({r["line"] for r in train}) == len(train)
    assert {r["line"] for r in train} <= {r["line"] for r in train_rows}
    assert list(load_logical_forms("emrql_2", **meta)["train"]["line"]) == [
        r["line"] for r in train
    ]  # seeded: the same every time
