"""A plain lm-eval process that imports the pack and evaluates one task of every kind on a scripted model
(run by tests/core/test_guest.py in a fresh interpreter, so no earlier test's state hides a replacement).

Prints one JSON object: for each phase (``import``: importing the pack; ``during``: while the model answers;
``after``: when the evaluations returned) the lm-eval attributes and process-wide hooks found replaced since
before the pack was imported, and the tasks' results. Usage: ``python guest_scenario.py WORKDIR``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# lm-eval's modules a run uses, loaded before the first snapshot so that the comparison covers them.
import lm_eval
import lm_eval.api.metrics
import lm_eval.api.task
import lm_eval.evaluator
import lm_eval.evaluator_utils
import lm_eval.loggers
import lm_eval.models
import lm_eval.models.api_models
import lm_eval.models.huggingface
import lm_eval.models.openai_completions
import lm_eval.tasks
import sklearn.metrics  # noqa: F401  (sets KMP_* variables at import, in lm-eval's run too: not the pack's doing)
from host_snapshot import replaced, snapshot

BEFORE = snapshot()

import medeval_metrics

AFTER_IMPORT = snapshot()

# The test rigs (a scripted model, a fake judge server) are the test's, not the pack's.
from medeval_metrics.testing.fake_judge import FakeJudgeServer
from medeval_metrics.testing.scripted import ScriptedLM

TASKS = [
    "emsqa_public",  # generative
    "emsqa_public_mc",  # log-likelihood
    "emsqa_public_rag",  # retrieval
    "emrqa_medication",  # evidence
    "emrqa_smoking",  # class
    "emrqa_emrql_1",  # logical form
]


def _data(work: Path) -> dict[str, str]:
    from medeval_metrics.emrqa.synthetic import write_synthetic
    from medeval_metrics.emsqa.rag import KNOWLEDGE_FILES

    items = json.loads((HERE / "fixtures" / "emsqa_synthetic.json").read_text())
    (work / "public").mkdir()
    (work / "public" / "test_open.json").write_text(json.dumps(items))
    kb = work / "kb"
    kb.mkdir()
    for stem in KNOWLEDGE_FILES:  # enough chunks for the default k of 32
        sections = [{f"{stem} {j}": f"assess the scene and the patient, step {j} of {stem}"} for j in range(8)]
        (kb / f"{stem}.json").write_text(json.dumps(sections))
    emrqa = write_synthetic(work / "emrqa")
    rows = [
        {"question": f"can i take drug{i} with food", "focus_drug": f"drug{i}", "question_type": "Usage",
         "answer": f"Drug{i} can be taken with food.", "section_title": "How to use", "url": "https://example.org"}
        for i in range(3)
    ]  # fmt: skip
    (work / "medicationqa.json").write_text(json.dumps(rows))
    return {
        "emsqa_public_path": str(work / "public"),
        "emsqa_knowledge_path": str(kb),
        "rag_cache_dir": str(work / "rag-cache"),
        "emrqa_data_json": str(emrqa.data_json),
        "emrqa_data_ql_csv": str(emrqa.data_ql_csv),
        "emrqa_cache_dir": str(work / "emrqa-cache"),
        "medicationqa_path": str(work / "medicationqa.json"),
    }


def main(work: Path) -> dict:
    from lm_eval.tasks import TaskManager

    metadata = _data(work)
    during: list[list[str]] = []
    model = ScriptedLM(table={"default": '["a"]'})
    answer = model.generate_until

    def generate_until(requests, disable_tqdm=False):  # type: ignore[no-untyped-def]
        during.append(replaced(BEFORE, snapshot()))
        return answer(requests, disable_tqdm)

    model.generate_until = generate_until  # an attribute of the test's model object, not of lm-eval
    results: dict[str, dict] = {}
    with FakeJudgeServer() as server:
        panel = json.dumps(
            {"judges": [{"name": "a", "backend": "local-chat-completions", "model": "judge-a", "base_url": server.url}]}
        )
        runs = [
            (TASKS + ["medicationqa"], metadata),  # MedicationQA without judges
            (["medicationqa"], {**metadata, "medeval_judges": panel}),  # and with a panel
        ]
        for index, (tasks, meta) in enumerate(runs):
            manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path(), metadata=meta)
            out = lm_eval.simple_evaluate(model=model, tasks=tasks, task_manager=manager, limit=3)
            for task in tasks:
                results[f"{task}#{index}"] = {k: v for k, v in out["results"][task].items() if k != "alias"}
    return {
        "import": replaced(BEFORE, AFTER_IMPORT),
        "during": sorted({key for found in during for key in found}),
        "after": replaced(BEFORE, snapshot()),
        "results": results,
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), default=str))
